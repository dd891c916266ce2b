"""Wall time and peak memory of whole `simulon simulate` runs, plus where the time goes in-process.

    uv run python benchmarks/bench_scenarios.py [--runs 3] [--only seed,moe96,gpt3-1024]

Each run is a fresh process (imports included, trace written for the seed example), timed with
wait4 for its peak RSS. Medians over --runs; the machine is shared, so compare within one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = {
    "seed": (ROOT / "examples/scenario.yaml", True),
    "moe96": (ROOT / "examples/moe_96gpu.yaml", False),
    "gpt3-1024": (ROOT / "examples/gpt3_175b_1024gpu.yaml", False),
    "llama405b-8192": (ROOT / "examples/llama3_405b_8192gpu.yaml", False),
    "llama405b-16384": (ROOT / "examples/llama3_405b_16384gpu.yaml", False),
}
CLI = "from simulon.cli.app import main; main()"


def run_process(args: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CLI, *args], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"simulon {' '.join(args)} failed")
    return wall, usage.ru_maxrss / 1024


def stages(path: Path) -> dict[str, float]:
    """Seconds per pipeline stage, in this process."""
    from simulon.analysis.result import summarize
    from simulon.compute.calibration import Calibrations
    from simulon.compute.populate import populate
    from simulon.config.loading import load_scenario
    from simulon.engine.replay import replay
    from simulon.pipeline import TRAINING_RESHARE_WINDOW_S, build_dag

    times = {}
    t = time.perf_counter()
    sc = load_scenario(path)
    times["load"] = time.perf_counter() - t
    t = time.perf_counter()
    dag, topology, fold = build_dag(sc)
    times["build_dag"] = time.perf_counter() - t
    t = time.perf_counter()
    populate(dag, sc.datacenter.node.gpu, sc.workload.training.dtype)
    times["populate"] = time.perf_counter() - t
    t = time.perf_counter()
    timeline = replay(dag, topology, fold, Calibrations.shipped().sm_count(sc.datacenter.node.gpu),
                      TRAINING_RESHARE_WINDOW_S)
    times["replay"] = time.perf_counter() - t
    t = time.perf_counter()
    train = sc.workload.training
    summarize(dag, timeline, train.global_batch_size * train.sequence_length,
              sc.datacenter.node.gpu.peak_flops(train.dtype))
    times["summarize"] = time.perf_counter() - t
    times["nodes"] = dag.num_nodes
    times["simulated_gpus"] = len(dag.simulated_gpus)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default=",".join(SCENARIOS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only.split(","):
            path, with_trace = SCENARIOS[name]
            cmd = ["simulate", str(path)] + (["-o", str(Path(tmp) / "trace.json")] if with_trace else [])
            walls, rss = zip(*(run_process(cmd) for _ in range(args.runs)), strict=True)
            imports, _ = run_process(["--help"])
            print(f"{name}: end-to-end median {statistics.median(walls):.2f} s "
                  f"(min {min(walls):.2f}, max {max(walls):.2f}, {args.runs} runs), peak RSS "
                  f"{max(rss):.0f} MiB; a bare `simulon --help` process: {imports:.2f} s")
            detail = stages(path)
            print("    in-process: " + ", ".join(f"{k} {v:.3f} s" if isinstance(v, float) else f"{k} {v}"
                                            for k, v in detail.items()))


if __name__ == "__main__":
    main()
