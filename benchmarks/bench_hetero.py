"""Wall time and peak memory of a heterogeneous 1,024-GPU run: Llama 3 70B on 512 H100s (DGX H100) beside 512
A100s (DGX A100) on a two-tier rail-optimized fabric (examples/hetero_llama3_70b_1024gpu.yaml); target < 30 s.

    uv run python benchmarks/bench_hetero.py [--runs 3] [--splits]

Each run is a fresh `simulon simulate --json` process, timed with wait4 for its peak RSS; medians over --runs
(the machine is shared: compare within one run). `--splits` also simulates, in this process, the layer splits
between the H100 and the A100 stages without interleaving (even, and 12 to 17 layers per H100 stage) and prints
each step time, to show what the uneven split gains.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "examples" / "hetero_llama3_70b_1024gpu.yaml"
TARGET_S = 30.0
CLI = "from simulon.cli.app import main; main()"


def run_once() -> tuple[float, float, dict]:
    """(wall seconds, peak RSS MiB, the --json result) of one fresh process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CLI, "simulate", str(SCENARIO), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"simulon simulate {SCENARIO} failed")
    return wall, usage.ru_maxrss / 1024, json.loads(out)


def splits() -> None:
    """Step time of each split of the 80 layers between 4 H100 and 4 A100 stages."""
    import yaml

    from simulon.config import ScenarioConfig
    from simulon.pipeline import simulate

    data = yaml.safe_load(SCENARIO.read_text())
    for h100 in (10, 12, 14, 15, 16, 17):
        data["workload"]["parallelism"].update(vpp=1, layers_per_stage=[h100] * 4 + [20 - h100] * 4)
        result = simulate(ScenarioConfig.model_validate(data)).result
        print(f"  {h100:2d} layers per H100 stage, {20 - h100:2d} per A100 stage: "
              f"{result.iteration_time_ms:9.1f} ms, MFU {result.mfu:.3f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--splits", action="store_true")
    args = parser.parse_args()
    runs = [run_once() for _ in range(args.runs)]
    wall = statistics.median(r[0] for r in runs)
    rss = statistics.median(r[1] for r in runs)
    result = runs[0][2]
    print(f"{SCENARIO.name}: {result['num_gpus']} GPUs, step {result['iteration_time_ms']:.1f} ms, "
          f"MFU {result['mfu']:.3f}, {result['tokens_per_s']:,.0f} tokens/s")
    print(f"wall {wall:.1f} s (median of {args.runs}: {', '.join(f'{r[0]:.1f}' for r in runs)}), "
          f"peak RSS {rss:.0f} MiB; target < {TARGET_S:.0f} s: {'met' if wall < TARGET_S else 'MISSED'}")
    if args.splits:
        splits()


if __name__ == "__main__":
    main()
