"""scripts/bootstrap_uv.py gets uv with the standard library alone: the right wheel, checked, its binary unpacked.

No test touches the network: PyPI's JSON document is faked, and wheels are small zips made here.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import stat
import sys
import zipfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import ROOT

spec = importlib.util.spec_from_file_location("bootstrap_uv", ROOT / "scripts/bootstrap_uv.py")
bootstrap = importlib.util.module_from_spec(spec)
sys.modules["bootstrap_uv"] = bootstrap
spec.loader.exec_module(bootstrap)

PLATFORMS = [  # uv 0.9's wheels, as PyPI lists them
    "linux_armv6l", "macosx_10_12_x86_64", "macosx_11_0_arm64",
    "manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64",
    "manylinux_2_17_armv7l.manylinux2014_armv7l.musllinux_1_1_armv7l", "manylinux_2_17_armv7l.manylinux2014_armv7l",
    "manylinux_2_17_i686.manylinux2014_i686", "manylinux_2_17_ppc64le.manylinux2014_ppc64le",
    "manylinux_2_17_s390x.manylinux2014_s390x", "manylinux_2_17_x86_64.manylinux2014_x86_64",
    "manylinux_2_28_aarch64", "manylinux_2_31_riscv64.musllinux_1_1_riscv64", "manylinux_2_31_riscv64",
    "musllinux_1_1_i686", "musllinux_1_1_x86_64", "win32", "win_amd64", "win_arm64",
]


def fake_release(platforms=PLATFORMS, version="0.9.0") -> dict:
    files = [{"filename": f"uv-{version}-py3-none-{p}.whl", "url": f"https://files.example/{p}.whl",
              "packagetype": "bdist_wheel", "digests": {"sha256": "0" * 64}, "yanked": False} for p in platforms]
    files.append({"filename": f"uv-{version}.tar.gz", "url": "https://files.example/sdist", "packagetype": "sdist",
                  "digests": {"sha256": "0" * 64}, "yanked": False})
    return {"info": {"name": "uv", "version": version}, "urls": files}


def chosen(system, machine, libc=("", ""), mac="") -> str:
    tags = bootstrap.platform_tags(system, machine, libc, mac)
    return bootstrap.wheel_platforms(bootstrap.choose_wheel(fake_release(), tags)["filename"])[0]


@pytest.mark.parametrize(("system", "machine", "libc", "mac", "wheel"), [
    ("Linux", "x86_64", ("glibc", "2.36"), "", "manylinux_2_17_x86_64"),        # Debian 12
    ("Linux", "x86_64", ("glibc", "2.39"), "", "manylinux_2_17_x86_64"),        # Ubuntu 24.04
    ("Linux", "aarch64", ("glibc", "2.36"), "", "manylinux_2_28_aarch64"),      # the newest glibc that fits
    ("Linux", "aarch64", ("glibc", "2.26"), "", "manylinux_2_17_aarch64"),      # too old for 2.28
    ("Linux", "x86_64", ("", ""), "", "musllinux_1_1_x86_64"),                  # Alpine: musl, no glibc
    ("Linux", "aarch64", ("", ""), "", "manylinux_2_17_aarch64"),               # its tags include musllinux_1_1
    ("Darwin", "arm64", ("", ""), "14.5", "macosx_11_0_arm64"),
    ("Darwin", "x86_64", ("", ""), "13.1", "macosx_10_12_x86_64"),
    ("Darwin", "x86_64", ("", ""), "10.15.7", "macosx_10_12_x86_64"),
    ("Windows", "AMD64", ("", ""), "", "win_amd64"),
    ("Windows", "ARM64", ("", ""), "", "win_arm64"),
])
def test_the_wheel_chosen_is_the_one_for_the_running_platform(system, machine, libc, mac, wheel):
    assert chosen(system, machine, libc, mac) == wheel


@pytest.mark.parametrize(("system", "machine", "libc", "mac"), [
    ("Linux", "x86_64", ("glibc", "2.12"), ""),   # older than manylinux2014
    ("Darwin", "x86_64", ("", ""), "10.9"),       # older than macOS 10.12
    ("Linux", "mips", ("glibc", "2.36"), ""),
])
def test_a_platform_without_a_wheel_is_refused_with_a_pointer_to_installing_uv_by_hand(system, machine, libc, mac):
    tags = bootstrap.platform_tags(system, machine, libc, mac)
    with pytest.raises(bootstrap.BootstrapError, match=r"no uv 0\.9\.0 wheel for this platform.*docs\.astral\.sh"):
        bootstrap.choose_wheel(fake_release(), tags)


def test_an_unknown_operating_system_is_refused():
    with pytest.raises(bootstrap.BootstrapError, match="no uv wheel for Plan9"):
        bootstrap.platform_tags("Plan9", "x86_64", ("", ""), "")


def test_yanked_wheels_and_the_sdist_are_never_chosen():
    release = fake_release(["manylinux_2_28_x86_64", "manylinux_2_17_x86_64"])
    release["urls"][0]["yanked"] = True
    tags = bootstrap.platform_tags("Linux", "x86_64", ("glibc", "2.36"), "")
    assert bootstrap.choose_wheel(release, tags)["filename"] == "uv-0.9.0-py3-none-manylinux_2_17_x86_64.whl"


@given(minor=st.integers(17, 60))
def test_every_glibc_from_2_17_takes_the_manylinux2014_wheel_on_x86_64(minor):
    assert chosen("Linux", "x86_64", ("glibc", f"2.{minor}")) == "manylinux_2_17_x86_64"


def test_a_download_whose_sha256_differs_from_pypis_is_refused(tmp_path):
    wheel = tmp_path / "uv.whl"
    wheel.write_bytes(b"not what PyPI published")
    with pytest.raises(bootstrap.BootstrapError, match=r"uv\.whl: sha256 mismatch .*not using it"):
        bootstrap.check_sha256(wheel, "ab" * 32, "uv.whl")


def test_a_download_whose_sha256_matches_is_accepted(tmp_path):
    wheel = tmp_path / "uv.whl"
    wheel.write_bytes(b"what PyPI published")
    bootstrap.check_sha256(wheel, hashlib.sha256(b"what PyPI published").hexdigest().upper(), "uv.whl")


def make_wheel(path, members: dict[str, bytes]):
    with zipfile.ZipFile(path, "w") as whl:
        for name, data in members.items():
            whl.writestr(name, data)
    return path


def test_the_uv_executable_is_extracted_from_the_wheels_data_scripts(tmp_path):
    exe = bootstrap.EXE
    wheel = make_wheel(tmp_path / "uv.whl", {
        "uv/__init__.py": b"", f"uv-0.9.0.data/scripts/{exe}": b"\x7fELF uv", "uv-0.9.0.data/scripts/uvx": b"uvx",
        f"uv-0.9.0.dist-info/scripts/{exe}": b"decoy"})
    uv = bootstrap.extract_uv(wheel, tmp_path / ".uv")
    assert uv == tmp_path / ".uv" / exe
    assert uv.read_bytes() == b"\x7fELF uv"
    assert uv.stat().st_mode & stat.S_IXUSR
    assert sorted(p.name for p in (tmp_path / ".uv").iterdir()) == [exe]


def test_a_wheel_without_the_executable_is_refused(tmp_path):
    wheel = make_wheel(tmp_path / "uv.whl", {"uv/__init__.py": b""})
    with pytest.raises(bootstrap.BootstrapError, match=r"uv.whl: no \.data/scripts/uv"):
        bootstrap.extract_uv(wheel, tmp_path / ".uv")


def serve(monkeypatch, pages: dict[str, bytes]):
    """urlopen answers from `pages` instead of the network."""
    monkeypatch.setattr(bootstrap.urllib.request, "urlopen", lambda url, timeout: io.BytesIO(pages[url]))


def fake_pypi(monkeypatch, wheel_bytes: bytes, listed_sha256: str):
    release = fake_release(["manylinux_2_17_x86_64.manylinux2014_x86_64", "win_amd64", "macosx_11_0_arm64"])
    for entry in release["urls"]:
        entry["digests"]["sha256"] = listed_sha256
    serve(monkeypatch, {bootstrap.PYPI_JSON: json.dumps(release).encode(),
                        **{entry["url"]: wheel_bytes for entry in release["urls"]}})
    monkeypatch.setattr(bootstrap, "this_platform", lambda: ["manylinux_2_17_x86_64", "win_amd64", "macosx_11_0_arm64"])


def test_fetching_from_pypi_checks_the_wheel_and_leaves_only_uv_in_the_folder(tmp_path, monkeypatch):
    wheel = make_wheel(tmp_path / "w.whl", {f"uv-0.9.0.data/scripts/{bootstrap.EXE}": b"uv binary"}).read_bytes()
    fake_pypi(monkeypatch, wheel, hashlib.sha256(wheel).hexdigest())
    uv = bootstrap.fetch_uv(tmp_path / ".uv")
    assert uv.read_bytes() == b"uv binary"
    assert [p.name for p in (tmp_path / ".uv").iterdir()] == [bootstrap.EXE]


def test_a_wheel_url_relative_to_the_json_document_is_fetched_from_the_same_host(tmp_path, monkeypatch):
    wheel = make_wheel(tmp_path / "w.whl", {f"uv-0.9.0.data/scripts/{bootstrap.EXE}": b"uv binary"}).read_bytes()
    release = fake_release(["manylinux_2_17_x86_64"])
    release["urls"][0].update(url="../../packages/ab/uv.whl", digests={"sha256": hashlib.sha256(wheel).hexdigest()})
    serve(monkeypatch, {bootstrap.PYPI_JSON: json.dumps(release).encode(),
                        "https://pypi.org/packages/ab/uv.whl": wheel})
    monkeypatch.setattr(bootstrap, "this_platform", lambda: ["manylinux_2_17_x86_64"])
    assert bootstrap.fetch_uv(tmp_path / ".uv").read_bytes() == b"uv binary"


def test_fetching_a_wheel_that_does_not_match_pypis_sha256_leaves_no_uv_behind(tmp_path, monkeypatch):
    wheel = make_wheel(tmp_path / "w.whl", {f"uv-0.9.0.data/scripts/{bootstrap.EXE}": b"tampered"}).read_bytes()
    fake_pypi(monkeypatch, wheel, "12" * 32)
    with pytest.raises(bootstrap.BootstrapError, match=r"sha256 mismatch \(PyPI lists 1212"):
        bootstrap.fetch_uv(tmp_path / ".uv")
    assert not (tmp_path / ".uv").exists()


def test_uv_on_path_comes_first_then_the_bootstrapped_copy_and_only_then_pypi(tmp_path, monkeypatch):
    def no_network(into):
        raise AssertionError("fetched from PyPI")

    monkeypatch.setattr(bootstrap, "fetch_uv", no_network)
    monkeypatch.setattr(bootstrap, "HOME", tmp_path / ".uv")
    monkeypatch.setattr(bootstrap.shutil, "which", lambda name: "/opt/bin/uv")
    assert str(bootstrap.find_uv()) == "/opt/bin/uv"

    monkeypatch.setattr(bootstrap.shutil, "which", lambda name: None)
    (tmp_path / ".uv").mkdir()
    (tmp_path / ".uv" / bootstrap.EXE).write_bytes(b"uv")
    assert bootstrap.find_uv() == tmp_path / ".uv" / bootstrap.EXE

    (tmp_path / ".uv" / bootstrap.EXE).unlink()
    monkeypatch.setattr(bootstrap, "fetch_uv", lambda into: into / "fetched")
    assert bootstrap.find_uv() == tmp_path / ".uv" / "fetched"


def test_a_failure_to_get_uv_is_one_line_on_stderr_and_exit_status_1(monkeypatch, capsys):
    def refuse():
        raise bootstrap.BootstrapError("uv-0.9.0.whl: sha256 mismatch")

    monkeypatch.setattr(bootstrap, "find_uv", refuse)
    assert bootstrap.main(["run", "simulon"]) == 1
    assert capsys.readouterr().err == "bootstrap_uv: uv-0.9.0.whl: sha256 mismatch\n"


def test_the_bootstrap_needs_only_the_standard_library():
    imported = {line.split()[1].split(".")[0] for line in (ROOT / "scripts/bootstrap_uv.py").read_text().splitlines()
                if line.startswith(("import ", "from "))}
    assert imported - {"__future__"} <= sys.stdlib_module_names
