"""Sanity check of the MIT-cluster templates on Sailor's heterogeneous runs, with the homogeneous simulator.

Each Sailor row (shared/validation/memory.csv, read by simulon.validate.hetero_rows) is simulated as if all of
its GPUs were of one type, on that type's node template (templates/datacenter/sailor-mit-*.yaml), with the row's
tp, pp, dp, layer split, batch and sequence, at two corners: everything fast (RTX 3090 GPUs on their PCIe Gen4
node, every node on the 25 Gb/s NIC of the TITAN RTX and RTX 2080 Ti nodes) and everything slow (RTX 2080 Ti GPUs
on their PCIe Gen3 node, every node on the RTX 3090 node's 1 Gb/s NIC). Every run has the RTX 3090 node and its
1 Gb/s link in it, and RTX 2080 Ti stages, so it should lie between the two corners. Nothing is tuned to the
measured times: this only tells whether templates and network are plausible.

DeepSpeed's pipeline engine is expressed in the homogeneous config as: 1F1B, no sequence parallelism, no
distributed optimizer, the data-parallel gradient all-reduce after the whole schedule (overlap_grad_reduce
false), Megatron's unfused attention (Megatron-DeepSpeed without --use-flash-attn). Every node uses tp of its
GPUs, as in Sailor's plans (the N2 runs use 2 of each node's 8).

    uv run python scripts/sailor_homogeneous_bounds.py [--csv ../shared/validation/memory.csv] [--dtype fp16 fp32]
        [--measured-links]

--measured-links replaces the templates' spec-sheet PCIe and NIC rates by what Sailor's own send/recv profile
measured (sailor/providers/*.json: per GPU pair with all 8 GPUs of a node busy, 6.1 GB/s on the TITAN RTX and
RTX 2080 Ti nodes, 1.3 GB/s on the RTX 3090 node, whose GeForce cards have no PCIe peer-to-peer; 22.9 Gb/s
between TITAN RTX and RTX 2080 Ti nodes, 0.92 Gb/s to the RTX 3090 node); both links of a corner then come from
one node type (fast: TITAN RTX's; slow: the RTX 3090 node's). Those figures are written below, not fitted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from simulon.config.dc import DatacenterConfig
from simulon.config.loading import parse_scenario
from simulon.pipeline import simulate
from simulon.validate.hetero import NODE_TEMPLATES
from simulon.validate.hetero_rows import SailorRun, read_sailor_runs

BOUNDS = (("fast", "rtx-3090", "titan-rtx"), ("slow", "rtx-2080-ti", "rtx-3090"))
"""(corner, GPU type, whose node's NIC every node gets): the fastest GPU (dense fp16 and fp32 peak) on the fast
NIC, the slowest GPU on the slow NIC."""
MEASURED_LINKS = {  # Sailor's send/recv profile (eth-easl/sailor sailor/providers/network_coeffs_all_homo.json)
    "rtx-3090": {"pcie": "1.3GBps", "nic": "0.92Gbps"},    # 4 pairs at once: 5.3 GB/s in total; k1's 1 GbE
    "titan-rtx": {"pcie": "6.1GBps", "nic": "22.9Gbps"},   # 4 pairs: 24.3 GB/s in total; 2.86 GB/s between nodes
    "rtx-2080-ti": {"pcie": "6.1GBps", "nic": "22.9Gbps"},  # 4 pairs: 24.6 GB/s in total; 2.86 GB/s
}


def scenario(run: SailorRun, gpu: str, nic_of: str, dtype: str, measured_links: bool) -> dict:
    """The homogeneous scenario of `run` with every GPU of type `gpu` on its node template, every node with the
    NIC of node type `nic_of`."""
    datacenter: dict = {"from": NODE_TEMPLATES[gpu], "cluster": {"num_nodes": run.num_nodes},
                        "node": {"gpus_per_node": run.tp, "gpus_per_nic": run.tp, "gpu": {"from": gpu}}}
    nic = DatacenterConfig.model_validate({"from": NODE_TEMPLATES[nic_of], "cluster": {"num_nodes": 1}}
                                          ).network.scale_out.nic
    datacenter["network"] = {"scale_out": {"nic": {"name": nic.name, "speed": f"{nic.speed}Bps"},
                                           "topology": {"from": "single-switch"}}}
    if measured_links:
        datacenter["network"] = {
            "scale_up": {"kind": "pcie", "switch": {"name": "pcie", "port_speed": MEASURED_LINKS[nic_of]["pcie"]}},
            "scale_out": {"nic": {"name": "nic", "speed": MEASURED_LINKS[nic_of]["nic"]},
                          "topology": {"from": "single-switch"}}}
    parallelism = {"tp": run.tp, "pp": run.pp, "dp": run.dp, "sequence_parallel": False,
                   "distributed_optimizer": False, "overlap_grad_reduce": False}
    if run.pp > 1:
        parallelism["layers_per_stage"] = [s.transformer_layers for s in run.stages]
    return {"datacenter": datacenter,
            "workload": {"framework": "megatron", "model": {"from": run.model}, "parallelism": parallelism,
                         "training": {"num_gpus": run.num_gpus, "global_batch_size": run.global_batch_size,
                                      "micro_batch_size": run.micro_batch_size,
                                      "sequence_length": run.sequence_length, "dtype": dtype,
                                      "attention": "unfused"}}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=Path(__file__).parents[2] / "shared/validation/memory.csv")
    parser.add_argument("--dtype", nargs="+", default=["fp16", "fp32"])
    parser.add_argument("--measured-links", action="store_true")
    args = parser.parse_args(argv)
    runs = read_sailor_runs(args.csv)
    print("row  locator              tp pp dp  mb | measured s | " +
          " | ".join(f"{corner} {dtype}" for dtype in args.dtype for corner, _, _ in BOUNDS) + " | inside")
    inside: dict[str, list[bool]] = {d: [] for d in args.dtype}
    for run in runs:
        cells, where = [], []
        for dtype in args.dtype:
            fast, slow = (simulate(parse_scenario(scenario(run, gpu, nic_of, dtype, args.measured_links), "sailor"))
                          .result.iteration_time_ms / 1e3 for _, gpu, nic_of in BOUNDS)
            cells += [f"{fast:9.2f}", f"{slow:9.2f}"]
            ok = min(fast, slow) <= run.iteration_s <= max(fast, slow)
            inside[dtype].append(ok)
            where.append(f"{dtype}:{'yes' if ok else ('below' if run.iteration_s < min(fast, slow) else 'above')}")
        name = run.locator.rsplit("/", 1)[-1].removeprefix("plan_config_").removesuffix(".json")
        print(f"{run.index:3d}  {name:20s} {run.tp:2d} {run.pp:2d} {run.dp:2d} {run.num_microbatches:3d} | "
              f"{run.iteration_s:10.2f} | " + " | ".join(cells) + " | " + " ".join(where))
    for dtype, flags in inside.items():
        print(f"{dtype}: measured time between the fast and the slow corner in {sum(flags)} of "
              f"{len(flags)} rows")
    print(f"median measured: {statistics.median(r.iteration_s for r in runs):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
