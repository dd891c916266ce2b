"""How long the memory model takes: `estimate_memory` in process, and `simulon memory` as a user runs it.

    uv run python benchmarks/bench_memory.py [--repeat 7]

Prints, per example scenario, the median of `--repeat` in-process estimates (the scenario already loaded), for one
that does not fit also of working out what would make it fit as the CLI does (memory.remedies.advise: each change
parsed and its memory estimated, those that fit timed by the search's step estimate, search.estimate.step_timer),
and the median wall time of `simulon memory` on the largest example in fresh processes (interpreter start-up and
imports included).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from simulon.config.loading import load_scenario
from simulon.memory import estimate_memory
from simulon.memory.remedies import advise
from simulon.search.estimate import step_timer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
LARGEST = ROOT / "examples" / "llama3_405b_16384gpu.yaml"


def median_seconds(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    for path in EXAMPLES:
        sc = load_scenario(path)
        if sc.workload is None:
            continue
        seconds = median_seconds(lambda sc=sc: estimate_memory(sc), args.repeat)
        stages = len(estimate_memory(sc).stages)
        print(f"{path.name:28s} {stages:3d} stages  estimate_memory {seconds * 1e3:8.1f} ms (median of {args.repeat})")
        if not estimate_memory(sc).fits:
            seconds = median_seconds(lambda sc=sc: advise(sc, step_time=step_timer(sc)), args.repeat)
            found = len(advise(sc, step_time=step_timer(sc)).remedies)
            print(f"{'':28s} {found:3d} to fit  remedies        {seconds * 1e3:8.1f} ms")
    command = [sys.executable, "-c", "from simulon.cli.app import main; main()", "memory", str(LARGEST)]
    wall = median_seconds(lambda: subprocess.run(command, check=True, capture_output=True), args.repeat)
    print(f"simulon memory {LARGEST.name}: {wall:.3f} s wall (median of {args.repeat} fresh processes)")


if __name__ == "__main__":
    main()
