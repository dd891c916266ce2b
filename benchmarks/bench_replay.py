"""Replay speed, DAG nodes per second, of the Python event loop and the compiled one on the same DAGs, and what
the compiled loop costs a process before it runs.

    uv run python benchmarks/bench_replay.py [--runs 3] [--only seed,moe96,gpt3-1024]

Per scenario (its DAG built and timed once, folded as `simulon simulate` folds it, SM sharing and the training
reshare window on): the median over --runs of a whole `replay` call (its flows' routes and terms included, the
same work for both loops) and of the event loop alone, the two loops in turn; their times are checked to be
the same to the bit. Then, each in a fresh process: importing numba, and the first compiled replay of a small
DAG with an empty numba cache (compiling) and again with the cache it left (loading). The machine may be shared:
compare figures taken in one run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from simulon.compute.calibration import Calibrations
from simulon.compute.populate import populate
from simulon.config.loading import load_scenario
from simulon.engine import compiled
from simulon.engine.flows import flow_properties
from simulon.engine.footprint import flow_loads
from simulon.engine.rate_log import busiest_links, carried_bytes, watched_flows
from simulon.engine.replay_input import node_arrays
from simulon.pipeline import TRAINING_RESHARE_WINDOW_S, build_dag
from simulon.progress import REPORT_EVERY

replay_module = importlib.import_module("simulon.engine.replay")  # the package exports a function of that name
ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = {
    "seed": ROOT / "examples/scenario.yaml",
    "moe96": ROOT / "examples/moe_96gpu.yaml",
    "gpt3-1024": ROOT / "examples/gpt3_175b_1024gpu.yaml",
}
ENGINES = ("python", "compiled")


def timed(call) -> tuple[float, object]:
    t = time.perf_counter()
    out = call()
    return time.perf_counter() - t, out


def loop_inputs(dag, topology, fold, sm_count: int) -> tuple:
    """The event loop's arguments, as `replay` makes them."""
    props = flow_properties(dag, topology, fold)
    loads = flow_loads(dag, topology, fold, props)
    watched = watched_flows(loads, busiest_links(carried_bytes(props.wire, loads, topology.num_links),
                                                 topology.capacity))
    return (node_arrays(dag, props.nodes, sm_count), props, topology.capacity, loads, dag.num_gpus, sm_count,
            TRAINING_RESHARE_WINDOW_S, lambda done: None, REPORT_EVERY, watched)


def warm_up() -> None:
    """Compile the loop, or load it from numba's cache, before anything is timed."""
    sc = load_scenario(SCENARIOS["seed"])
    dag, topology, fold = build_dag(sc)
    populate(dag, sc.datacenter.node.gpu, sc.workload.training.dtype)
    replay_module.replay(dag, topology, fold, engine="compiled")


def bench_scenario(name: str, path: Path, runs: int) -> None:
    sc = load_scenario(path)
    dag, topology, fold = build_dag(sc)
    populate(dag, sc.datacenter.node.gpu, sc.workload.training.dtype)
    sm_count = Calibrations.shipped().sm_count(sc.datacenter.node.gpu)
    loops = {"python": replay_module.event_loop, "compiled": compiled.event_loop}
    whole: dict[str, list[float]] = {e: [] for e in ENGINES}
    alone: dict[str, list[float]] = {e: [] for e in ENGINES}
    finish = {}
    for _ in range(runs):
        for engine in ENGINES:
            seconds, timeline = timed(lambda e=engine: replay_module.replay(
                dag, topology, fold, sm_count, TRAINING_RESHARE_WINDOW_S, engine=e))
            whole[engine].append(seconds)
            finish[engine] = timeline
            args = loop_inputs(dag, topology, fold, sm_count)
            alone[engine].append(timed(lambda e=engine, a=args: loops[e](*a))[0])
    same = np.array_equal(finish["python"].start, finish["compiled"].start) and \
        np.array_equal(finish["python"].finish, finish["compiled"].finish)
    n = dag.num_nodes
    print(f"{name}: {n:,} nodes, {len(finish['python'].flow_nodes):,} flows, {len(dag.simulated_gpus)} simulated "
          f"GPUs; times the same to the bit: {same}")
    for label, seconds in (("replay()", whole), ("event loop alone", alone)):
        py, fast = statistics.median(seconds["python"]), statistics.median(seconds["compiled"])
        print(f"    {label:>16}: python {n / py:>12,.0f} nodes/s ({py:.3f} s), compiled {n / fast:>12,.0f} nodes/s "
              f"({fast:.3f} s), x{py / fast:.1f}")


PROBE = """
import json, time
t = time.perf_counter(); import numba; imported = time.perf_counter() - t
from simulon.compute.populate import populate
from simulon.config.loading import load_scenario
from simulon.engine.replay import replay
from simulon.pipeline import build_dag
sc = load_scenario({path!r})
dag, topology, fold = build_dag(sc)
populate(dag, sc.datacenter.node.gpu, sc.workload.training.dtype)
calls = []
for _ in range(2):
    t = time.perf_counter()
    replay(dag, topology, fold, 132, 1e-6, engine="compiled")
    calls.append(time.perf_counter() - t)
print(json.dumps({{"import": imported, "first": calls[0], "second": calls[1]}}))
"""


def probe(cache: str) -> dict[str, float]:
    """A fresh process's import of numba and its first two compiled replays of the seed scenario, with numba's
    cache in `cache`."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    out = subprocess.run([sys.executable, "-c", PROBE.format(path=str(SCENARIOS["seed"]))], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def bench_compile() -> None:
    with tempfile.TemporaryDirectory() as cache:
        cold = probe(cache)
        warm = probe(cache)
    print(f"compiled loop, in a fresh process: import numba {warm['import']:.2f} s; first replay "
          f"{cold['first']:.2f} s compiling (empty cache), {warm['first']:.2f} s loading the cache; "
          f"a second replay of the same small DAG {warm['second'] * 1e3:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default=",".join(SCENARIOS))
    args = parser.parse_args()
    warm_up()
    for name in args.only.split(","):
        bench_scenario(name, SCENARIOS[name], args.runs)
    bench_compile()


if __name__ == "__main__":
    main()
