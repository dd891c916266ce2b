"""Which event loop replays one wide collective faster: the Python loop against the compiled one, each in a fresh
process (the compiled loop's numba import and cache load included, as a process pays them once), on one
collective over the first n GPUs of 32 DGX B200 nodes, 32 MiB. It prints each DAG's nodes and flows_at_once (what
replay's "auto" weighs against COMPILED_FROM_FLOWS_AT_ONCE) and checks that both loops give the same step.

    uv run python benchmarks/bench_replay_concurrency.py [--runs 3]

The Python loop reshares every flow still connected to one that ends, so an all-to-all's cost grows with the
square of its flows under way; a ring's flows go a step at a time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = [("AllToAll", n) for n in (16, 24, 32, 40, 48, 64, 128)] + [("AllGather", n) for n in (16, 32, 64)]
SYSTEM = "datacenter: {from: \"32x DGX B200\"}\n"


def one(engine: str, ctype: str, n: int, path: str) -> dict:
    """Replay the collective with `engine` in this process."""
    import numpy as np

    from simulon.collective.tuner import CollectivePlan
    from simulon.collective.types import CollType
    from simulon.config.loading import load_scenario
    from simulon.dag.fold import Fold
    from simulon.engine.replay import flows_at_once, replay
    from simulon.network.topology import Topology
    from simulon.pipeline import collective_dag

    sc = load_scenario(path)
    dc = sc.datacenter
    topology = Topology.from_datacenter(dc, dc.num_gpus, placement=sc.placement())
    plan = CollectivePlan.from_config(topology, sc.collective)
    dag = collective_dag(CollType[ctype], [tuple(range(n))], 2**25, dc.num_gpus, plan)
    dag.duration = np.zeros(dag.num_nodes)
    t = time.perf_counter()
    timeline = replay(dag, topology, Fold.identity(dc.num_gpus), engine=engine)
    return {"seconds": time.perf_counter() - t, "nodes": dag.num_nodes, "at_once": flows_at_once(dag),
            "makespan": timeline.makespan}


def in_process(engine: str, ctype: str, n: int, path: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--one", engine, ctype, str(n), path], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)  # engine, collective, ranks, scenario
    args = parser.parse_args()
    if args.one:
        engine, ctype, n, path = args.one
        print(json.dumps(one(engine, ctype, int(n), path)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "system.yaml"
        path.write_text(SYSTEM)
        print(f"{'collective':>10} {'ranks':>5} {'nodes':>7} {'at once':>7} {'python s':>9} {'compiled s':>10}")
        for ctype, n in CASES:
            runs = {engine: [in_process(engine, ctype, n, str(path)) for _ in range(args.runs)]
                    for engine in ("python", "compiled")}
            if len({r["makespan"] for rs in runs.values() for r in rs}) != 1:
                raise SystemExit(f"{ctype} over {n}: the two loops disagree")
            first = runs["python"][0]
            seconds = {e: statistics.median(r["seconds"] for r in rs) for e, rs in runs.items()}
            print(f"{ctype:>10} {n:>5} {first['nodes']:>7} {first['at_once']:>7} {seconds['python']:>9.3f} "
                  f"{seconds['compiled']:>10.3f}")


if __name__ == "__main__":
    main()
