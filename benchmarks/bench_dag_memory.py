"""Peak memory of whole simulations against their DAG's size: the measurements behind the memory guard.

    uv run python benchmarks/bench_dag_memory.py [--runs 3] [--write] [--refit]

Each scenario runs in a fresh process: simulon is imported, then one training step is built, timed, replayed
and (for the rows marked so) written as a Perfetto trace at the row's detail, as `simulate -o` writes it (after
the analysis its link counters come from, gzip-compressed). The process's peak resident memory over what the
import alone held is fitted, by least squares, as bytes per DAG node and per flow, plus bytes per node for a
trace and per flow for one that draws every flow (--trace-detail flows); the fitted line is then scaled up until
it covers every measured row (the guard must not let through
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
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

from simulon.dag.size import DagSize

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src/simulon/dag/data/memory_cost.yaml"

RUN = r"""
import json, resource, sys, yaml
from pathlib import Path
from simulon.cli.report import run_scenario
from simulon.config.loading import parse_scenario
from simulon.export.chrome_trace import chrome_trace_json
from simulon.export.files import compressed_as_named
from simulon.pipeline import simulate
data, expand, detail = yaml.safe_load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
sc = parse_scenario(data, sys.argv[1])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if detail:  # what `simulate -o trace.json.gz --trace-detail DETAIL` does
    sim, analysis = run_scenario(Path(sys.argv[1]), quiet=True, expand=expand, trace=detail, micro_batches="all")
    text = compressed_as_named("trace.json.gz", chrome_trace_json(sim.dag, sim.timeline, detail, sim.memory,
                                                                  sim.fold.rep, analysis.busiest))
    del text
else:
    sim = simulate(sc, expand)
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


def scenarios() -> list[tuple[str, dict, str, str]]:
    """(name, scenario, --expand, the detail of the trace written: "" for none)."""
    seed, moe, gpt3 = _example("scenario.yaml"), _example("moe_96gpu.yaml"), _example("gpt3_175b_1024gpu.yaml")
    dense_128 = {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 16},
                                "network": {"scale_out": {"topology": "rail-optimized-fat-tree"}}},
                 "workload": {"framework": "megatron", "model": "gpt3-13b",
                              "parallelism": {"tp": 8, "pp": 2},
                              "training": {"global_batch_size": 64, "micro_batch_size": 1,
                                           "sequence_length": 2048}}}
    return [
        ("seed", seed, "auto", ""),
        ("seed, trace", seed, "auto", "collectives"),
        ("seed, 64 micro-batches", _with(seed, workload__training__global_batch_size=64,
                                         workload__parallelism__num_microbatches=64), "auto", ""),
        ("moe96 full", moe, "full", ""),
        ("moe96 full, trace", moe, "full", "collectives"),
        ("moe96 full, flows trace", moe, "full", "flows"),
        ("moe96 rail-optimized fat-tree", _with(moe, datacenter__network__scale_out__topology=
                                                "rail-optimized-fat-tree"), "full", ""),
        ("moe96 spine-leaf", _with(moe, datacenter__network__scale_out__topology="spine-leaf"), "full", ""),
        ("gpt3-13b 128 GPUs rail-optimized", dense_128, "auto", ""),
        ("gpt3-1024", gpt3, "auto", ""),
        ("gpt3-1024, trace", gpt3, "auto", "collectives"),
        ("gpt3-1024, flows trace", gpt3, "auto", "flows"),
    ]


def measure(data: dict, expand: str, trace: str) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(data, f)
    try:
        with tempfile.TemporaryDirectory() as cache:  # numba compiles the replay's loop afresh, as on a new install
            out = subprocess.run([sys.executable, "-c", RUN, f.name, expand, trace],
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
    flow (non-negative least squares over the rows without a trace, then scaled to cover them all), per node of
    a trace (the largest excess a row with a trace of collectives shows over that line) and per flow of a trace
    of every flow (the largest excess of a row with one over that, per flow)."""
    plain = [r for r in rows if not r["trace"]]
    a = np.array([[1.0, r["nodes"], r["flows"]] for r in plain], dtype=float)
    y = np.array([r["added_bytes"] for r in plain], dtype=float)
    coef = nonnegative_least_squares(a, y)
    cover = max(1.0, float((y / (a @ coef)).max()))
    fixed, per_node, per_flow = coef * cover

    def excess(r: dict) -> float:
        return r["added_bytes"] - fixed - per_node * r["nodes"] - per_flow * r["flows"]

    per_trace = max([excess(r) / r["nodes"] for r in rows if r["trace"] == "collectives"] + [0.0])
    per_trace_flow = max([(excess(r) - per_trace * r["nodes"]) / r["flows"] for r in rows if r["trace"] == "flows"]
                         + [0.0])
    return {"fixed_bytes": math.ceil(fixed), "per_node_bytes": _up(per_node), "per_flow_bytes": _up(per_flow),
            "per_trace_node_bytes": _up(per_trace), "per_trace_flow_bytes": _up(per_trace_flow),
            "cover_factor": round(cover, 3)}


def _up(value: float) -> float:
    """Bytes to a tenth, rounded up: a coefficient rounded down would let the line dip under the row it meets."""
    return math.ceil(float(value) * 10) / 10


def stored_rows() -> tuple[list[dict], int]:
    """The rows OUT was fitted to, from its header (each scenario's trace detail from `scenarios`), and how many
    runs each row is the largest of."""
    header = next(line for line in OUT.read_text().splitlines() if line.startswith("# Rows"))
    runs = int(re.search(r"of (\d+) runs", header).group(1))
    details = {name: trace for name, _, _, trace in scenarios()}
    rows = []
    for item in header.split("runs): ", 1)[1].split("; "):
        name, numbers = item.rsplit(": ", 1)
        nodes, flows, added = map(int, numbers.split(", "))
        rows.append({"name": name, "trace": details[name], "nodes": nodes, "flows": flows, "added_bytes": added})
    return rows, runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes a scenario runs in (its largest peak)")
    parser.add_argument("--write", action="store_true", help=f"store the fit in {OUT.relative_to(ROOT)}")
    parser.add_argument("--refit", action="store_true", help=f"fit the rows stored in {OUT.relative_to(ROOT)} "
                        "again, measuring nothing (a change to the fit, not to what is measured)")
    args = parser.parse_args()
    rows = []
    if args.refit:
        rows, args.runs = stored_rows()
    else:
        print(f"{'scenario':36} {'nodes':>11} {'flows':>11} {'added MB':>9} {'least MB':>9}")
    for name, data, expand, trace in [] if args.refit else scenarios():
        runs = [measure(data, expand, trace) for _ in range(max(1, args.runs))]
        row = {"name": name, "trace": trace, **max(runs, key=lambda r: r["added_bytes"])}
        rows.append(row)
        least = min(r["added_bytes"] for r in runs)
        print(f"{name:36} {row['nodes']:>11,} {row['flows']:>11,} {row['added_bytes'] / 2**20:>9,.0f}"
              f" {least / 2**20:>9,.0f}")
    cost = fit(rows)
    print(f"fit: {cost}")
    for r in rows:
        predicted = DagSize(r["nodes"], r["flows"], 0).memory_bytes(r["trace"] or False, cost)
        print(f"  {r['name']:36} measured {r['added_bytes'] / 2**20:8,.0f} MB, guard's estimate "
              f"{predicted / 2**20:8,.0f} MB ({predicted / r['added_bytes']:.2f}x)")
    if args.write:
        header = ("# Memory a training step's DAG takes, per node and per flow (and per node of a Perfetto trace,\n"
                  "# and per flow of one drawing every flow):\n"
                  "# a least-squares line over measured runs, scaled by cover_factor to lie above every one.\n"
                  "# Regenerate: uv run python benchmarks/bench_dag_memory.py --write\n"
                  f"# Rows (nodes, flows, largest added bytes of {max(1, args.runs)} runs): "
                  + "; ".join(f"{r['name']}: {r['nodes']}, {r['flows']}, {r['added_bytes']}" for r in rows) + "\n")
        OUT.write_text(header + yaml.safe_dump(cost, sort_keys=False))
        print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
