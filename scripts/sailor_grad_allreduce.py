"""The MIT node templates' network against the gradient all-reduce times Sailor measured in its heterogeneous runs.

Sailor's plan files (eth-easl/sailor sailor/Planner/simulations/validation/mit/N*/plan_config_N*_D*.json) carry,
beside the measured iteration time, "red_grads": rank 0's DeepSpeed ReduceGrads, the data-parallel all-reduce of
the first stage's gradients after the whole pipeline schedule. Every run's first stage has a replica on the RTX
3090 node ("k1"), so its data-parallel groups cross that node's NIC. This simulates that all-reduce on the
sailor-mit-rtx3090 node template (one NIC per node shared by the tp GPUs of each node, every local rank's group
running at once), for the first stage's parameters per GPU (workload/parameters.py) in fp32 and fp16 gradients,
and prints it beside the measured figure. Nothing is fitted.

    uv run python scripts/sailor_grad_allreduce.py PATH/TO/sailor/sailor/Planner/simulations/validation/mit
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from simulon.collective.types import CollType
from simulon.config.dc import DatacenterConfig
from simulon.config.hybrid import DENSE_LAYER
from simulon.config.loading import parse_scenario
from simulon.pipeline import collective_sweep
from simulon.validate.hetero_rows import SailorRun, sailor_runs
from simulon.validate.report import read_table, shipped_table
from simulon.workload.layer_kernels import LayerKernels

SLOW_NODE = "sailor-mit-rtx3090"


def first_stage_params_per_gpu(run: SailorRun) -> float:
    """Parameters one GPU of the first stage holds: its tensor-parallel shard of the embedding and its layers."""
    sc = parse_scenario({"datacenter": {"from": SLOW_NODE, "cluster": {"num_nodes": 1},
                                        "node": {"gpus_per_node": run.tp, "gpus_per_nic": run.tp}},
                         "workload": {"model": {"from": run.model}, "parallelism": {"tp": run.tp},
                                      "training": {"num_gpus": run.tp, "global_batch_size": run.micro_batch_size,
                                                   "micro_batch_size": run.micro_batch_size,
                                                   "sequence_length": run.sequence_length, "dtype": "fp32"}}},
                        "params")
    kernels = LayerKernels.of(sc.workload)
    return kernels.vocab_params + run.stages[0].transformer_layers * kernels.layer_params(DENSE_LAYER)[0]


def allreduce_seconds(run: SailorRun, bytes_per_param: int) -> float:
    dc = DatacenterConfig.model_validate({"from": SLOW_NODE, "cluster": {"num_nodes": run.dp},
                                          "node": {"gpus_per_node": run.tp, "gpus_per_nic": run.tp}})
    groups = [tuple(local + node * run.tp for node in range(run.dp)) for local in range(run.tp)]
    size = first_stage_params_per_gpu(run) * bytes_per_param
    return collective_sweep(dc, CollType.AllReduce, groups[0], [size], others=groups[1:])[0].time_us / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plans", type=Path, help="Sailor's validation/mit folder (N2/, N3/, ... plan files)")
    args = parser.parse_args(argv)
    print("plan         tp pp dp | measured red_grads s | fp32 s  fp16 s")
    for run in sailor_runs(read_table(shipped_table("memory"))):
        plan = json.loads((args.plans / run.locator.split("/mit/", 1)[1]).read_text())
        name = run.locator.rsplit("/", 1)[-1].removeprefix("plan_config_").removesuffix(".json")
        if run.dp == 1:
            print(f"{name:12s} {run.tp:2d} {run.pp:2d} {run.dp:2d} | {plan['red_grads']:20.3f} | (no data parallelism)")
            continue
        fp32, fp16 = (allreduce_seconds(run, b) for b in (4, 2))
        print(f"{name:12s} {run.tp:2d} {run.pp:2d} {run.dp:2d} | {plan['red_grads']:20.3f} | {fp32:6.2f} {fp16:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
