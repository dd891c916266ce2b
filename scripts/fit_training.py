"""Fit the compute slowdown under overlapped communication to the published training runs.

    uv run python scripts/fit_training.py ../shared/validation/training.csv [--max-gpus 512] [--per-subset 6]

The one constant of the simulator fitted on end-to-end runs (compute/data/architecture.yaml,
`overlap_slowdown`): each sampled row is built and timed once, then replayed at every candidate slowdown;
the script prints MAPE and mean signed error per candidate, overall and by subset. Rows are sampled
deterministically (the first rows of each subset up to --max-gpus GPUs) so that the fit runs in minutes.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

from simulon.compute.populate import populate
from simulon.pipeline import build_dag, run_populated
from simulon.validate.report import read_table
from simulon.validate.training import Unsupported, measured_iteration, sample_rows, scenario_from_row

CANDIDATES = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("csv", nargs="?", default="../shared/validation/training.csv")
    parser.add_argument("--max-gpus", type=int, default=512)
    parser.add_argument("--per-subset", type=int, default=6)
    args = parser.parse_args()
    rows = read_table(args.csv)
    errors: dict[float, dict[str, list[float]]] = {c: defaultdict(list) for c in CANDIDATES}
    for i in sample_rows(rows, args.max_gpus, args.per_subset):
        row = rows[i]
        try:
            sc = scenario_from_row(row)
        except Unsupported:
            continue
        dag, topology, fold = build_dag(sc, "symmetric")
        populate(dag, sc.datacenter.node.gpu, sc.workload.training.dtype)
        for slowdown in CANDIDATES:
            sim = run_populated(sc, dag, topology, fold, slowdown)
            _, measured = measured_iteration(row, sim, sc)
            errors[slowdown][row["subset"]].append(100 * (sim.result.iteration_time_ms / 1e3 - measured) / measured)
    for slowdown, by_subset in errors.items():
        every = [e for errs in by_subset.values() for e in errs]
        print(f"overlap_slowdown {slowdown:4.2f}: MAPE {statistics.fmean(map(abs, every)):5.1f}%  "
              f"mean {statistics.fmean(every):+5.1f}%  ({len(every)} rows)")
        for subset, errs in sorted(by_subset.items()):
            mape = statistics.fmean(map(abs, errs))
            print(f"    {subset:45s} MAPE {mape:5.1f}%  mean {statistics.fmean(errs):+6.1f}%  ({len(errs)})")


if __name__ == "__main__":
    main()
