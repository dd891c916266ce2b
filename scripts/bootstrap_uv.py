"""Run a uv command on a machine that has nothing but Python 3.11+: `python3 scripts/bootstrap_uv.py ARGS` is `uv ARGS`.

The usual first step, `pip install uv`, fails on a stock Debian 12 or Ubuntu 24.04: there is no `python`, the system
`python3` refuses to install into itself (PEP 668, "externally-managed-environment"), and pip and venv may not even be
there (python3-pip and python3-venv are separate packages). uv needs none of them, so this script gets uv with the
standard library alone, in this order:

1. `uv` on PATH;
2. the uv an earlier run put in this checkout's `.uv/` folder (ignored by git);
3. uv's wheel for this platform from PyPI (https://pypi.org/pypi/uv/json), checked against the sha256 PyPI lists
   for it; a wheel is a zip, and the `uv` executable in its `uv-<version>.data/scripts/` is all that is kept, in
   `.uv/`. Nothing is installed into any Python.

Then it runs uv with the arguments given, in place of this process. Unless UV_PYTHON says otherwise, uv builds the
project's environment (.venv) with the Python that runs this script.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

PYPI_JSON = "https://pypi.org/pypi/uv/json"
HOME = Path(__file__).resolve().parents[1] / ".uv"
EXE = "uv.exe" if os.name == "nt" else "uv"


class BootstrapError(Exception):
    """Why uv could not be had; printed as one line."""


def platform_tags(system: str, machine: str, libc: tuple[str, str], mac_version: str) -> list[str]:
    """The wheel platform tags this machine runs, best first (what `packaging.tags` would say, for uv's wheels)."""
    machine = machine.lower()
    if system == "Windows":
        return [{"amd64": "win_amd64", "x86_64": "win_amd64", "arm64": "win_arm64"}.get(machine, "win32")]
    if system == "Darwin":
        return mac_tags("arm64" if machine in ("arm64", "aarch64") else "x86_64", mac_version)
    if system == "Linux":
        return linux_tags({"arm64": "aarch64", "amd64": "x86_64"}.get(machine, machine), libc)
    raise BootstrapError(f"no uv wheel for {system} {machine}; install uv by hand (https://docs.astral.sh/uv)")


def mac_tags(arch: str, mac_version: str) -> list[str]:
    """macOS 14 runs wheels for 14.0, 13.0, ... 11.0 and 10.16 ... 10.0; 10.15 those for 10.15 ... 10.0."""
    major, minor = (int(part) for part in [*mac_version.split("."), "0"][:2])
    versions = [(v, 0) for v in range(major, 10, -1)]
    versions += [(10, m) for m in range(minor if major == 10 else 16, -1, -1)]
    return [f"macosx_{x}_{y}_{a}" for x, y in versions for a in (arch, "universal2")]


def linux_tags(arch: str, libc: tuple[str, str]) -> list[str]:
    """glibc 2.N runs manylinux wheels for 2.N and older (manylinux2014 is 2.17); without glibc, musl (Alpine)."""
    if libc[0] != "glibc":
        return [f"musllinux_1_{m}_{arch}" for m in range(2, -1, -1)]
    major, minor = (int(part) for part in libc[1].split(".")[:2])
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"} if major == 2 else {}
    tags = []
    for m in range(minor, -1, -1):
        tags += [f"manylinux_{major}_{m}_{arch}"] + ([f"{legacy[m]}_{arch}"] if m in legacy else [])
    return tags


def this_platform() -> list[str]:
    return platform_tags(platform.system(), platform.machine(), platform.libc_ver(), platform.mac_ver()[0])


def wheel_platforms(filename: str) -> list[str]:
    """`uv-0.9.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl` -> its platform tags."""
    return filename.removesuffix(".whl").split("-")[-1].split(".")


def choose_wheel(release: dict, tags: list[str]) -> dict:
    """The release file (an entry of the PyPI JSON's `urls`) whose platform tag comes first in `tags`."""
    rank = {tag: i for i, tag in enumerate(tags)}
    wheels = [(min(rank.get(t, len(rank)) for t in wheel_platforms(f["filename"])), f) for f in release["urls"]
              if f["filename"].endswith(".whl") and not f.get("yanked")]
    fits = [(r, f) for r, f in wheels if r < len(rank)]
    if not fits:
        raise BootstrapError(f"PyPI has no uv {release['info']['version']} wheel for this platform "
                             f"({', '.join(tags[:3])}, ...); install uv by hand (https://docs.astral.sh/uv)")
    return min(fits, key=lambda fit: fit[0])[1]


def check_sha256(path: Path, expected: str, name: str) -> None:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != expected.lower():
        raise BootstrapError(f"{name}: sha256 mismatch (PyPI lists {expected}, the download is {digest}); "
                             "not using it")


def is_uv_script(name: str) -> bool:
    folder, *rest = name.split("/")
    return folder.endswith(".data") and rest == ["scripts", EXE]


def extract_uv(wheel: Path, into: Path) -> Path:
    """Copy the uv executable out of the wheel (`uv-<version>.data/scripts/uv`) into `into`, executable."""
    with zipfile.ZipFile(wheel) as whl:
        names = [n for n in whl.namelist() if is_uv_script(n)]
        if not names:
            raise BootstrapError(f"{wheel.name}: no .data/scripts/{EXE} in the wheel")
        into.mkdir(parents=True, exist_ok=True)
        partial = into / f"{EXE}.partial"
        with whl.open(names[0]) as src, partial.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    partial.chmod(0o755)
    return partial.replace(into / EXE)


def download(url: str, to: Path) -> None:
    with urllib.request.urlopen(url, timeout=60) as response, to.open("wb") as out:
        shutil.copyfileobj(response, out)


def fetch_uv(into: Path) -> Path:
    """uv from its PyPI wheel for this platform, checked and unpacked into `into`."""
    with urllib.request.urlopen(PYPI_JSON, timeout=60) as response:
        release = json.load(response)
    wheel = choose_wheel(release, this_platform())
    print(f"bootstrap_uv: uv is not installed; fetching {wheel['filename']} from PyPI into {into}/", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / wheel["filename"]
        download(urllib.parse.urljoin(PYPI_JSON, wheel["url"]), path)  # a mirror may list URLs relative to it
        check_sha256(path, wheel["digests"]["sha256"], wheel["filename"])
        return extract_uv(path, into)


def find_uv() -> Path:
    on_path = shutil.which("uv")
    if on_path:
        return Path(on_path)
    local = HOME / EXE
    return local if local.is_file() else fetch_uv(HOME)


def main(args: list[str]) -> int:
    try:
        uv = find_uv()
    except (BootstrapError, OSError, ValueError) as exc:  # ValueError: PyPI's answer is not what it should be
        print(f"bootstrap_uv: {exc}", file=sys.stderr)
        return 1
    os.environ.setdefault("UV_PYTHON", sys.executable)
    if os.name == "nt":  # Windows has no exec: run uv and pass its exit status on
        return subprocess.call([str(uv), *args])
    os.execv(uv, [str(uv), *args])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
