"""Input files are read as UTF-8 and output files written as UTF-8 whatever the locale's encoding: under an ASCII
locale (LC_ALL=C, without Python's UTF-8 mode) a UTF-8 scenario naming 'café' was refused as 'not UTF-8 text', the
message telling the user to save as UTF-8 the file that already was; Windows' cp1252 would misread it silently."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import SEED_SCENARIO, cli
from simulon.config.errors import not_utf8, read_input_text
from simulon.config.hf import model_from_hf

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


BOM = "\ufeff".encode()
"""UTF-8's byte-order mark, which Notepad and Excel's 'CSV UTF-8' put at the start of a file they save."""


def test_a_result_json_saved_with_a_byte_order_mark_is_read_by_diff(tmp_path):
    run = cli("simulate", str(SEED_SCENARIO), "--json", cwd=tmp_path)
    (tmp_path / "a.json").write_text(run.stdout, encoding="utf-8")
    (tmp_path / "b.json").write_bytes(BOM + run.stdout.encode())
    done = cli("diff", "a.json", "b.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "unchanged" in done.stdout


def test_a_huggingface_config_saved_with_a_byte_order_mark_is_read(tmp_path):
    (tmp_path / "config.json").write_bytes(BOM + json.dumps(
        {"model_type": "llama", "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 11008,
         "num_attention_heads": 32, "num_hidden_layers": 32, "vocab_size": 32000}).encode())
    assert model_from_hf(tmp_path / "config.json")["num_layers"] == 32


def test_a_sweeps_csv_saved_again_with_a_byte_order_mark_keeps_its_points(tmp_path):
    (tmp_path / "s.yaml").write_text(SEED_SCENARIO.read_text(encoding="utf-8"), encoding="utf-8")
    sweep = ("sweep", "s.yaml", "--set", "collective.num_channels=2", "-o", "sweep.csv")
    assert cli(*sweep, cwd=tmp_path).returncode == 0
    csv = tmp_path / "sweep.csv"
    csv.write_bytes(BOM + csv.read_bytes())
    again = cli(*sweep, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "1 already in sweep.csv" in again.stdout


def test_a_report_of_a_scenario_whose_file_name_is_not_utf8_is_written_as_utf8(tmp_path):
    latin1 = os.fsdecode(b"caf\xe9.yaml")  # a Latin-1 name on a UTF-8 file system: Python holds it escaped
    (tmp_path / latin1).write_text(SEED_SCENARIO.read_text(encoding="utf-8"), encoding="utf-8")
    done = cli("report", latin1, "-o", "report.html", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "simulon report: caf\ufffd.yaml" in (tmp_path / "report.html").read_bytes().decode("utf-8")


def test_a_byte_that_is_not_utf8_is_placed_at_its_offset_in_the_file_after_a_byte_order_mark(tmp_path):
    """utf-8-sig counted offsets past the mark it dropped: a validation table saved with one was told 3 bytes early."""
    (tmp_path / "table.csv").write_bytes(BOM + "hardware\ncafé\n".encode("latin-1"))
    with pytest.raises(UnicodeDecodeError) as caught:
        read_input_text(tmp_path / "table.csv", 1000, "a measurement table")
    assert not_utf8(caught.value) == "not UTF-8 text (byte 0xe9 at offset 15); save it as UTF-8"
