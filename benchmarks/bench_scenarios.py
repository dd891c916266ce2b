"""Wall time and peak memory of whole `simulon simulate` runs, plus where the time goes in-process.

    uv run python benchmarks/bench_scenarios.py [--runs 3] [--only seed,moe96,gpt3-1024] [--baseline DIR]

Each run is a fresh process (imports included, trace written for the seed example), timed with
wait4 for its peak RSS (the in-process stages run in a process of their own too, so that this one stays small: a
child's peak RSS includes its parent's at the fork). Medians over --runs; the machine is shared, so compare within
one run.

`--baseline DIR`: another checkout with its own environment (DIR/.venv, e.g. a `git worktree` of the commit
before a change, set up with `uv sync`). Its runs alternate with this checkout's, whole processes and the
in-process stages alike (the stages are timed by this script run under DIR's Python, so on DIR's simulon),
and each figure is printed for both with the ratio this / baseline.
"""

from __future__ import annotations

import argparse
import json
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
    "nemotron-h-1024": (ROOT / "examples/nemotron_h_56b_1024gpu.yaml", False),
    "dp-16384": (ROOT / "benchmarks/scenarios/llama3_8b_dp2048_16384gpu.yaml", False),
    "qwen3-moe-256": (ROOT / "benchmarks/scenarios/qwen3_235b_a22b_256gpu.yaml", False),
}
CLI = "from simulon.cli.app import main; main()"


def run_process(args: list[str], python: str = sys.executable) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([python, "-c", CLI, *args], stdout=subprocess.DEVNULL)
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


def stages_in(python: str, path: Path) -> dict[str, float]:
    """`stages` of a scenario timed in a fresh process of `python` (its own simulon)."""
    out = subprocess.run([python, __file__, "--stages-json", str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def median_stages(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) if isinstance(runs[0][k], float) else runs[0][k]
            for k in runs[0]}


def describe(detail: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.3f} s" if isinstance(v, float) else f"{k} {v}" for k, v in detail.items())


def compare(name: str, cmd: list[str], path: Path, runs: int, baseline: Path) -> None:
    """This checkout against `baseline`, run by run in turn."""
    pythons = {"this": sys.executable, "baseline": str(baseline / ".venv" / "bin" / "python")}
    walls: dict[str, list[float]] = {k: [] for k in pythons}
    detail: dict[str, list[dict[str, float]]] = {k: [] for k in pythons}
    for _ in range(runs):
        for tree, python in pythons.items():
            walls[tree].append(run_process(cmd, python)[0])
            detail[tree].append(stages_in(python, path))
    medians = {tree: statistics.median(w) for tree, w in walls.items()}
    stage = {tree: median_stages(d) for tree, d in detail.items()}
    print(f"{name}: end-to-end median this {medians['this']:.2f} s, baseline {medians['baseline']:.2f} s "
          f"(ratio {medians['this'] / medians['baseline']:.3f}, {runs} runs each, alternating)")
    for tree in pythons:
        print(f"    in-process {tree}: {describe(stage[tree])}")
    print(f"    replay ratio this / baseline: {stage['this']['replay'] / stage['baseline']['replay']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default=",".join(SCENARIOS))
    parser.add_argument("--baseline", type=Path, help="a checkout to compare with, run by run in turn")
    parser.add_argument("--stages-json", type=Path, help=argparse.SUPPRESS)  # one scenario's stages, as JSON
    args = parser.parse_args()
    if args.stages_json:
        print(json.dumps(stages(args.stages_json)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only.split(","):
            path, with_trace = SCENARIOS[name]
            cmd = ["simulate", str(path)] + (["-o", str(Path(tmp) / "trace.json")] if with_trace else [])
            if args.baseline:
                compare(name, cmd, path, args.runs, args.baseline)
                continue
            walls, rss = zip(*(run_process(cmd) for _ in range(args.runs)), strict=True)
            imports, _ = run_process(["--help"])
            print(f"{name}: end-to-end median {statistics.median(walls):.2f} s "
                  f"(min {min(walls):.2f}, max {max(walls):.2f}, {args.runs} runs), peak RSS "
                  f"{max(rss):.0f} MiB; a bare `simulon --help` process: {imports:.2f} s")
            # in a process of its own: a child's peak RSS counts what its parent held when it started (Linux keeps
            # the larger of the forked copy's and the new program's across execve), so this process stays small
            print("    in-process: " + describe(stages_in(sys.executable, path)))


if __name__ == "__main__":
    main()
