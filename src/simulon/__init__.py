"""simulon: simulate one LLM training iteration on an AI cluster without owning the GPUs."""

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def _version() -> str:
    """pyproject.toml's version, as installed (one place to bump it); from a source tree run without installing
    (PYTHONPATH=src, as on a GPU machine that cannot install), read from that tree's pyproject.toml."""
    try:
        return version("simulon")
    except PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


__version__ = _version()
