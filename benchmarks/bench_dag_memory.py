"""Peak memory of whole simulations against their DAG's size: the measurements behind the memory guard.

    uv run python benchmarks/bench_dag_memory.py [--runs 3] [--write]

Each scenario runs in a fresh process: simulon is imported, then one training step is built, timed, replayed
and (for the rows marked so) written as a Perfetto trace. The process's peak resident memory over what the
import alone held is fitted, by least squares, as bytes per DAG node and per flow, plus bytes per node for a
trace; the fitted line is then scaled up until it covers every measured row (the guard must not let through
a run that later fails for memory). Each run starts with an empty numba cache (NUMBA_CACHE_DIR a fresh folder),
as the first run of a fresh install does: compiling the replay's loop takes more memory than loading it compiled
(the moe96 step peaked at 313-325 MB compiling, 188-190 MB loading the cache). Each scenario runs --runs times and
its largest peak is the row. `--write` stores the result in src/simulon/dag/data/memory_cost.yaml, which
dag/size.py reads.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src/simulon/dag/data/memory_cost.yaml"

RUN = r"""
import json, resource, sys, yaml
from simulon.config.loading import parse_scenario
from simulon.pipeline import simulate
from simulon.export.chrome_trace import chrome_trace_json
data, expand, trace = yaml.safe_load(open(sys.argv[1])), sys.argv[2], sys.argv[3] == "trace"
sc = parse_scenario(data, sys.argv[1])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
sim = simulate(sc, expand)
if trace:
    text = chrome_trace_json(sim.dag, sim.timeline, "flows")
    del text
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"nodes": sim.dag.num_nodes, "flows": int((sim.dag.kind == 1).sum()),
                  "added_bytes": (peak - base) * 1024}))
"""


def _example(name: str) -> dict:
    return yaml.safe_load((ROOT / "examples" / name).read_text())


def _with(data: dict, **changes) -> dict:
    data = json.loads(json.dumps(data))
    for path, value in changes.items():
        node = data
        keys = path.split("__")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    return data


def scenarios() -> list[tuple[str, dict, str, bool]]:
    """(name, scenario, --expand, write a trace)."""
    seed, moe, gpt3 = _example("scenario.yaml"), _example("moe_96gpu.yaml"), _example("gpt3_175b_1024gpu.yaml")
    dense_128 = {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 16},
                                "network": {"scale_out": {"topology": "rail-optimized-fat-tree"}}},
                 "workload": {"framework": "megatron", "model": "gpt3-13b",
                              "parallelism": {"tp": 8, "pp": 2},
                              "training": {"global_batch_size": 64, "micro_batch_size": 1,
                                           "sequence_length": 2048}}}
    return [
        ("seed", seed, "auto", False),
        ("seed, trace", seed, "auto", True),
        ("seed, 64 micro-batches", _with(seed, workload__training__global_batch_size=64,
                                         workload__parallelism__num_microbatches=64), "auto", False),
        ("moe96 full", moe, "full", False),
        ("moe96 full, trace", moe, "full", True),
        ("moe96 rail-optimized fat-tree", _with(moe, datacenter__network__scale_out__topology=
                                                "rail-optimized-fat-tree"), "full", False),
        ("moe96 spine-leaf", _with(moe, datacenter__network__scale_out__topology="spine-leaf"), "full", False),
        ("gpt3-13b 128 GPUs rail-optimized", dense_128, "auto", False),
        ("gpt3-1024", gpt3, "auto", False),
    ]


def measure(data: dict, expand: str, trace: bool) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(data, f)
    try:
        with tempfile.TemporaryDirectory() as cache:  # numba compiles the replay's loop afresh, as on a new install
            out = subprocess.run([sys.executable, "-c", RUN, f.name, expand, "trace" if trace else "none"],
                                 capture_output=True, text=True, check=True, cwd=ROOT,
                                 env={**os.environ, "NUMBA_CACHE_DIR": cache})
    finally:
        Path(f.name).unlink()
    return json.loads(out.stdout)


def nonnegative_least_squares(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """min |a x - y| over x >= 0, for a handful of columns: the best non-negative least-squares solution on
    every subset of the columns (exact, 2^columns small solves)."""
    best, best_residual = np.zeros(a.shape[1]), float(np.sum(y**2))
    for size in range(1, a.shape[1] + 1):
        for columns in itertools.combinations(range(a.shape[1]), size):
            x = np.zeros(a.shape[1])
            x[list(columns)] = np.linalg.lstsq(a[:, columns], y, rcond=None)[0]
            residual = float(np.sum((a @ x - y) ** 2))
            if (x >= 0).all() and residual < best_residual:
                best, best_residual = x, residual
    return best


def fit(rows: list[dict]) -> dict[str, float]:
    """Fixed bytes (the compiled replay's numba and LLVM, loaded from 200k nodes on), bytes per node and per
    flow (non-negative least squares over the rows without a trace, then scaled to cover them all), and per node
    of a trace (the largest excess a trace row shows over that line)."""
    plain = [r for r in rows if not r["trace"]]
    a = np.array([[1.0, r["nodes"], r["flows"]] for r in plain], dtype=float)
    y = np.array([r["added_bytes"] for r in plain], dtype=float)
    coef = nonnegative_least_squares(a, y)
    cover = max(1.0, float((y / (a @ coef)).max()))
    fixed, per_node, per_flow = coef * cover
    traced = [r for r in rows if r["trace"]]
    per_trace = max([(r["added_bytes"] - fixed - per_node * r["nodes"] - per_flow * r["flows"]) / r["nodes"]
                     for r in traced] + [0.0])
    return {"fixed_bytes": round(float(fixed)), "per_node_bytes": round(float(per_node), 1),
            "per_flow_bytes": round(float(per_flow), 1), "per_trace_node_bytes": round(float(per_trace), 1),
            "cover_factor": round(cover, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes a scenario runs in (its largest peak)")
    parser.add_argument("--write", action="store_true", help=f"store the fit in {OUT.relative_to(ROOT)}")
    args = parser.parse_args()
    rows = []
    print(f"{'scenario':36} {'nodes':>11} {'flows':>11} {'added MB':>9} {'least MB':>9}")
    for name, data, expand, trace in scenarios():
        runs = [measure(data, expand, trace) for _ in range(max(1, args.runs))]
        row = {"name": name, "trace": trace, **max(runs, key=lambda r: r["added_bytes"])}
        rows.append(row)
        least = min(r["added_bytes"] for r in runs)
        print(f"{name:36} {row['nodes']:>11,} {row['flows']:>11,} {row['added_bytes'] / 2**20:>9,.0f}"
              f" {least / 2**20:>9,.0f}")
    cost = fit(rows)
    print(f"fit: {cost}")
    for r in rows:
        predicted = cost["fixed_bytes"] + cost["per_node_bytes"] * r["nodes"] + cost["per_flow_bytes"] * r["flows"] \
            + (cost["per_trace_node_bytes"] * r["nodes"] if r["trace"] else 0.0)
        print(f"  {r['name']:36} measured {r['added_bytes'] / 2**20:8,.0f} MB, guard's estimate "
              f"{predicted / 2**20:8,.0f} MB ({predicted / r['added_bytes']:.2f}x)")
    if args.write:
        header = ("# Memory a training step's DAG takes, per node and per flow (and per node of a Perfetto trace):\n"
                  "# a least-squares line over measured runs, scaled by cover_factor to lie above every one.\n"
                  "# Regenerate: uv run python benchmarks/bench_dag_memory.py --write\n"
                  f"# Rows (nodes, flows, largest added bytes of {max(1, args.runs)} runs): "
                  + "; ".join(f"{r['name']}: {r['nodes']}, {r['flows']}, {r['added_bytes']}" for r in rows) + "\n")
        OUT.write_text(header + yaml.safe_dump(cost, sort_keys=False))
        print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
