"""Benchmark tables say what they ran: the GPUs column of bench_ns3_spectrum_x.py counts the GPUs in the ring it
simulates (one per node), not the GPUs of the nodes the ring spans."""

from __future__ import annotations

import subprocess
import sys

from helpers import ROOT


def test_ns3_spectrum_x_gpus_column_counts_the_ranks_of_the_all_reduce():
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks/bench_ns3_spectrum_x.py"), "--runs", "1"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    header, *rows = run.stdout.strip().splitlines()
    assert header.split()[:2] == ["nodes", "GPUs"]
    assert [row.split()[:2] for row in rows] == [["2", "2"], ["4", "4"], ["8", "8"], ["16", "16"]]
