"""A table row whose model name reads as two shipped templates ("gpt3_1_3b": GPT-3 1.3B or 13B) is skipped saying so;
the memory and hetero validators stopped the whole table with an internal error (exit 1), the training validator
called it a failed simulation."""

from __future__ import annotations

import csv

from helpers import cli
from simulon.validate.report import read_table, shipped_table
from simulon.validate.training import validate_training

AMBIGUOUS = "model name 'gpt3_1_3b' is ambiguous"


def _table(tmp_path, rows: list[dict[str, str]]):
    path = tmp_path / "mine.csv"
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_a_memory_row_with_an_ambiguous_model_name_is_skipped_not_the_table(tmp_path):
    row = read_table(shipped_table("memory"))[0]
    run = cli("validate", "memory", "--csv", str(_table(tmp_path, [{**row, "model": "gpt3_1_3b"}, row])))
    assert run.returncode == 0, run.stderr
    assert f"skipped 1 (row 2): {AMBIGUOUS}" in run.stdout


def test_a_hetero_row_with_an_ambiguous_model_name_is_skipped_not_the_table(tmp_path):
    sailor = next(r for r in read_table(shipped_table("memory")) if "sailor" in r["source"].lower())
    run = cli("validate", "hetero", "--csv", str(_table(tmp_path, [{**sailor, "model": "gpt3_1_3b"}, sailor])))
    assert run.returncode == 0, run.stderr
    assert f"skipped 1 (row 2): model: {AMBIGUOUS}" in run.stdout


def test_a_training_row_with_an_ambiguous_model_name_is_skipped_as_unsupported_not_as_a_failed_simulation():
    header = read_table(shipped_table("training"))[0]
    row = {**dict.fromkeys(header, ""), "hardware": "DGX H100", "num_gpus": "8", "model": "gpt3_1_3b",
           "framework": "Megatron-Core", "tp": "1", "pp": "1", "mbs": "1", "gbs": "8", "seq_len": "2048",
           "iter_time_s": "1"}
    (skipped,) = validate_training([row]).skipped
    assert skipped.reason.startswith(AMBIGUOUS)
