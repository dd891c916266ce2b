"""Wall time of `simulon collective` for an all-reduce over 1,024 GPUs on a three-tier fat-tree, 20 sizes.

    uv run python benchmarks/bench_collective_1024.py [--runs 3]
    uv run python benchmarks/bench_collective_1024.py --scenario benchmarks/scenarios/allreduce_32768_dgx_h100.yaml
        --sizes 1MiB,1GiB

The second times a ring over 32,768 GPUs, estimated in steady state (engine.steady_state).

Each run is a fresh process (imports included). The budget is 10 s on a 2-core machine; the machine may be
shared, so compare medians taken together.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "benchmarks/scenarios/allreduce_1024_three_tier.yaml"
SIZES = ",".join(f"{2**p}B" for p in range(10, 30))  # 1 KiB to 512 MiB, doubling: 20 sizes
CLI = "from simulon.cli.app import main; main()"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scenario", type=Path, default=SCENARIO)
    parser.add_argument("--sizes", default=SIZES)
    args = parser.parse_args()
    walls = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        command = [sys.executable, "-c", CLI, "collective", str(args.scenario), "--sizes", args.sizes, "--json"]
        run = subprocess.run(command, capture_output=True, text=True, check=True)
        walls.append(time.perf_counter() - t0)
    print(f"all-reduce, {args.scenario.name}, {run.stdout.count('size_bytes')} sizes: "
          f"median {statistics.median(walls):.2f} s "
          f"(min {min(walls):.2f}, max {max(walls):.2f}, {args.runs} runs)")


if __name__ == "__main__":
    main()
