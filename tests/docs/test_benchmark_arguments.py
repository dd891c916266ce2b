"""Benchmark and fitting scripts that take files as arguments: `--help` prints their usage, and a file that is not
there is refused in one line naming it, exit status 2 (argparse's), before any fit or profile is read."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import ROOT

SCRIPTS = ["benchmarks/profile_attention_holdout.py", "benchmarks/profile_interpolation_holdout.py",
           "scripts/fit_compute.py"]


def script(path: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / path), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


@pytest.mark.parametrize("path", SCRIPTS)
def test_help_prints_the_usage_and_a_missing_file_is_refused_naming_it(tmp_path, path):
    name = path.rsplit("/", 1)[-1]
    shown = script(path, "--help")
    assert shown.returncode == 0 and shown.stdout.startswith(f"usage: {name}"), shown.stderr
    missing = tmp_path / "missing.csv"
    run = script(path, str(missing))
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip().splitlines()[-1] == f"{name}: error: {missing}: no such file"
