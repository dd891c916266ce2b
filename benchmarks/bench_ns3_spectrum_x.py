"""simulon against SimAI's packet-level ns-3 backend on its Spectrum-X template: one 64 MiB ring all-reduce
across a data-parallel group of 2, 4, 8 and 16 nodes (one GPU per node, so as many GPUs as nodes in the ring),
busbw and wall time.

    uv run python benchmarks/bench_ns3_spectrum_x.py [--runs 3]

The reference numbers are the issue's (SimAI ns-3: busbw and the simulator's wall time per run); simulon's
wall time is one `collective_sweep` call in this process, median of --runs. SimAI simulates NCCL's Simple
protocol, so simulon runs Simple too; the last column is what NCCL's own choice of protocol would give.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from simulon.collective.types import CollType
from simulon.config.loading import load_scenario
from simulon.pipeline import collective_sweep

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "benchmarks/scenarios/spectrum_x_simai.yaml"
NS3 = {2: (45.70, 28), 4: (45.36, 53), 8: (44.68, 90), 16: (43.39, 177)}
"""Nodes -> (ns-3 busbw GB/s, ns-3 wall time s), from the issue."""
SIZE = 64 * 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    dc = load_scenario(SCENARIO).datacenter
    print(f"{'nodes':>5} {'GPUs':>5} {'ns-3 busbw':>11} {'simulon':>8} {'error':>7} {'ns-3 wall':>10} "
          f"{'simulon wall':>13}  {'how':<28} NCCL's protocol")
    for nodes, (busbw, wall) in NS3.items():
        group = tuple(range(0, dc.node.gpus_per_node * nodes, dc.node.gpus_per_node))  # GPU 0 of each node
        walls = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            (timing,) = collective_sweep(dc, CollType.AllReduce, group, [SIZE], "ring", protocol="simple")
            walls.append(time.perf_counter() - t0)
        (auto,) = collective_sweep(dc, CollType.AllReduce, group, [SIZE], "ring")
        error = 100 * (timing.busbw_GBps - busbw) / busbw
        how = f"{timing.algorithm}/{timing.protocol}/{timing.channels} {timing.model}"
        print(f"{nodes:>5} {len(group):>5} {busbw:>11.2f} {timing.busbw_GBps:>8.2f} {error:>+6.1f}% {wall:>9} s "
              f"{statistics.median(walls):>11.3f} s  {how:<28} {auto.protocol}: {auto.busbw_GBps:.2f}")


if __name__ == "__main__":
    main()
