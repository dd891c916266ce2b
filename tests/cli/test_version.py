"""`simulon --version` prints the installed package's version (pyproject.toml's, via importlib.metadata), and a source
tree run without installing reads the same from its pyproject.toml."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import simulon
from helpers import cli


def test_version_prints_the_package_metadata_version_and_exits_0():
    run = cli("--version")
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"simulon {version('simulon')}\n"


def test_the_package_version_is_the_metadata_version():
    assert simulon.__version__ == version("simulon")


def test_a_source_tree_run_without_installing_reads_its_pyproject_version():
    """On a machine that cannot install (a lent GPU: PYTHONPATH=src), importing simulon still works and reports the
    tree's pyproject.toml version."""
    src = Path(simulon.__file__).resolve().parents[1]
    code = ("import importlib.metadata as m\n"
            "def missing(name):\n    raise m.PackageNotFoundError(name)\n"
            "m.version = missing\nimport simulon\nprint(simulon.__version__)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                         env={**os.environ, "PYTHONPATH": str(src)})
    assert run.returncode == 0, run.stderr
    pyproject = tomllib.loads((src.parent / "pyproject.toml").read_text())
    assert run.stdout.strip() == pyproject["project"]["version"] == version("simulon")
