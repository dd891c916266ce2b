"""`simulon --version` prints the installed package's version (pyproject.toml's, via importlib.metadata)."""

from __future__ import annotations

from importlib.metadata import version

import simulon
from helpers import cli


def test_version_prints_the_package_metadata_version_and_exits_0():
    run = cli("--version")
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"simulon {version('simulon')}\n"


def test_the_package_version_is_the_metadata_version():
    assert simulon.__version__ == version("simulon")
