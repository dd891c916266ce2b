"""`simulon validate`'s tables count the table rows compared under "rows", as their title does; where a row gives
more than one measurement (a memory row's allocated peak and, in its notes, its reserved one) the measurements the
MAPE averages over are a column of their own, never counted as rows."""

from __future__ import annotations

import re

from helpers import cli
from simulon.validate.report import shipped_table

TABLE = shipped_table("memory").read_text().splitlines()
SIMUMAX = [line for line in TABLE if line.startswith("SimuMax,") and "reserved=" in line][:2]
BRIDGE = [line for line in TABLE if line.startswith("Megatron-Bridge,") and "reserved=" not in line][:1]


def count_columns(output: str) -> dict[str, tuple[str, ...]]:
    """Per subset of the first table: its cells after the MAPE."""
    cells = {}
    for line in output.split("MAPE by")[0].splitlines():
        parts = [p.strip() for p in re.split(r"[│┃]", line) if p.strip()]
        if len(parts) >= 3 and parts[0] in ("Megatron", "subset"):
            cells[parts[0]] = tuple(parts[2:])
    return cells


def test_a_memory_row_with_two_measurements_counts_as_one_row(tmp_path):
    path = tmp_path / "memory.csv"
    path.write_text("\n".join([TABLE[0], *SIMUMAX, *BRIDGE]) + "\n")
    run = cli("validate", "memory", "--csv", str(path))
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("3 rows compared (5 measurements), 0 skipped")
    assert count_columns(run.stdout) == {"subset": ("rows", "measurements"), "Megatron": ("3", "5")}
    assert re.search(r"SimuMax\s*│\s*[\d.]+\s*│\s*2\s*│\s*4\s*│", run.stdout)  # by source: 2 rows, 4 measurements


def test_a_table_of_one_measurement_a_row_counts_rows_alone(tmp_path):
    path = tmp_path / "memory.csv"
    path.write_text("\n".join([TABLE[0], *BRIDGE]) + "\n")
    run = cli("validate", "memory", "--csv", str(path))
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("1 row compared, 0 skipped")
    assert count_columns(run.stdout) == {"subset": ("rows",), "Megatron": ("1",)}
