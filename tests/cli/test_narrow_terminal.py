"""CLI tables on a terminal narrower than the table: a header wraps at its spaces, no cell is cut."""

from __future__ import annotations

import json

import pytest

from helpers import SEED_SCENARIO, cli


@pytest.mark.parametrize("columns", ["40", "60"])
def test_a_narrow_terminal_wraps_headers_and_never_cuts_a_number(monkeypatch, columns):
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich treats stdout as a terminal of COLUMNS columns
    monkeypatch.setenv("TTY_INTERACTIVE", "0")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", columns)
    args = ("collective", str(SEED_SCENARIO), "--sizes", "1KiB,1GiB")
    run = cli(*args)
    assert run.returncode == 0, run.stderr
    assert "…" not in run.stdout
    cells = [line.replace("│", " ").split() for line in run.stdout.splitlines() if line.startswith("│")]
    rows = json.loads(cli(*args, "--json").stdout)
    assert cells == [[size, f"{r['time_us']:.2f}", f"{r['algbw_GBps']:.2f}", f"{r['busbw_GBps']:.2f}", r["algorithm"],
                      r["protocol"], str(r["channels"])] for size, r in zip(("1KiB", "1GiB"), rows, strict=True)]
