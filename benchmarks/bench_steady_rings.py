"""Rings in steady state (dag.fold.Fold.with_steady_rings) against their stepwise replay: each case's DAG nodes, step
time and replay seconds both ways, and the ratio of the step times. The cases are the training table's rows whose
rings are long (DGX Cloud's FSDP runs) and a data-parallel Llama 3 70B on 1,024 GPUs of a fabric that is
oversubscribed and not rail-optimized (its rings are expanded over every GPU).

    uv run python benchmarks/bench_steady_rings.py [--rows 115 116 117 118 119]

The stepwise replay of row 119 takes about 5 GB; rows 120 and 121 are refused stepwise (39 and 117 GB).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from simulon.config.loading import parse_scenario
from simulon.pipeline import plan_dag, simulate_planned
from simulon.validate.report import read_table, shipped_table
from simulon.validate.training import scenario_from_row, with_source_layouts

DATA_PARALLEL_70B = {
    "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 128}, "network": {"scale_out": {"topology": {
        "tiers": 2, "rail_optimized": False, "nics_per_leaf": 32, "spines": 8, "oversubscription": 4.0}}}},
    "workload": {"framework": "megatron", "model": "llama-3-70b",
                 "parallelism": {"tp": 8, "dp": 128, "sequence_parallel": True, "distributed_optimizer": True,
                                 "recompute": "full"},
                 "training": {"global_batch_size": 256, "micro_batch_size": 1, "sequence_length": 4096}}}


def compare(name: str, sc) -> None:
    planned = plan_dag(sc, "symmetric")
    steady = replace(planned, fold=planned.fold.with_steady_rings())
    times = []
    for each in (planned, steady):
        start = time.perf_counter()
        times.append((simulate_planned(sc, each).result.iteration_time_ms, time.perf_counter() - start))
    (stepwise, t1), (steady_ms, t2) = times
    print(f"{name:48s} nodes {planned.size().nodes:>11,} -> {steady.size().nodes:>9,}  step {stepwise:10,.1f} -> "
          f"{steady_ms:10,.1f} ms (x{steady_ms / stepwise:.4f})  replay {t1:6.1f} -> {t2:5.1f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="*", default=[115, 116, 117, 118, 119])
    args = parser.parse_args()
    rows = with_source_layouts(read_table(shipped_table("training")))
    for index in args.rows:
        row = rows[index]
        compare(f"row {index} {row['model'][:26]} {row['num_gpus']} GPUs", scenario_from_row(row))
    compare("Llama 3 70B dp128, 4:1, not rail-optimized", parse_scenario(DATA_PARALLEL_70B, "inline"))


if __name__ == "__main__":
    main()
