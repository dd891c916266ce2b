"""Input files are read as UTF-8 and output files written as UTF-8 whatever the locale's encoding: under an ASCII
locale (LC_ALL=C, without Python's UTF-8 mode) a UTF-8 scenario naming 'café' was refused as 'not UTF-8 text', the
message telling the user to save as UTF-8 the file that already was; Windows' cp1252 would misread it silently."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from helpers import SEED_SCENARIO

ASCII_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
"""An environment whose locale encoding is ASCII (Python's C-locale coercion and UTF-8 mode both off)."""


def cli_in_ascii_locale(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, **ASCII_LOCALE}
    return subprocess.run([sys.executable, "-c", "from simulon.cli.app import main; main()", *args],
                          capture_output=True, cwd=cwd, env=env, timeout=120)


def test_a_utf8_scenario_and_template_are_read_as_utf8_under_an_ascii_locale(tmp_path):
    seed = yaml.safe_load(SEED_SCENARIO.read_text(encoding="utf-8"))
    seed["datacenter"]["datacenter"]["name"] = "café-cluster"
    seed["datacenter"]["node"]["gpu"] = {"from": "gpu.yaml"}
    (tmp_path / "gpu.yaml").write_text("# the H100 of the café\nfrom: H100\nmemory_capacity_gb: 80.0\n",
                                       encoding="utf-8")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(seed, allow_unicode=True), encoding="utf-8")
    done = cli_in_ascii_locale("collective", "s.yaml", "--sizes", "1MiB", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")


def test_a_sweep_keeps_its_csvs_utf8_rows_when_rerun_under_an_ascii_locale(tmp_path):
    (tmp_path / "s.yaml").write_text(SEED_SCENARIO.read_text(encoding="utf-8"), encoding="utf-8")
    first = subprocess.run([sys.executable, "-c", "from simulon.cli.app import main; main()", "sweep", "s.yaml",
                            "--set", "workload.model.name=café", "-o", "sweep.csv"],
                           capture_output=True, cwd=tmp_path, timeout=120, env={**os.environ, "PYTHONUTF8": "1"})
    assert first.returncode == 0, first.stderr.decode("utf-8", "replace")
    again = cli_in_ascii_locale("sweep", "s.yaml", "--set", "workload.model.name=plain", "-o", "sweep.csv",
                                cwd=tmp_path)
    assert again.returncode == 0, again.stderr.decode("utf-8", "replace")
    names = [line.split(",")[1] for line in (tmp_path / "sweep.csv").read_bytes().decode("utf-8").splitlines()[1:]]
    assert sorted(names) == ["café", "plain"]
