"""The MIT node templates' scale-up (PCIe ports, host paths, NVLink bridges) against Sailor's microbenchmarks.

Two hardware characterisations of the MIT nodes ship with eth-easl/sailor, both measured by Sailor's authors:
- the send/recv test (sailor/profiling/networking/test_sendrecv.py, results in sailor/providers/
  intra_node_bandwidths.json): on one node of each type, world sizes w = 2, 4, 8, local GPU i sends to GPU
  i + w/2 for every i < w/2, all at once, messages of 64 KiB to 1 GiB; the file keeps, per world size, the best
  aggregate (bytes/s over all pairs). Here the same pairs send at once through the template's links (max-min
  fair shares at the link capacities: line rate x the link model's efficiency, host paths at their stated
  figure). The templates' host paths are fitted to Sailor's tp-8 layer profile instead
  (scripts/sailor_host_path_fit.py), so no row matches by construction.
- the all-reduce profile taken for the Aceso baseline (sailor/Planner/baselines/Aceso/profiler/GPU/
  profiled-data-fp32/prim_OPT-350_all_reduce_Ngpus.csv: milliseconds per size in MB, read as MiB): here
  `collective_sweep` on the template's first N GPUs, NCCL's algorithm choice as simulon models it.
Nothing is read from the iteration times the validator predicts.

    uv run python scripts/sailor_host_paths.py PATH/TO/sailor
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

from simulon.collective.types import CollType
from simulon.config.dc import DatacenterConfig
from simulon.engine.fair_share import max_min_rates
from simulon.network.topology import Topology
from simulon.pipeline import collective_sweep
from simulon.validate.hetero import NODE_TEMPLATES

SAILOR_NAMES = {"rtx-3090": "RTX-3090", "titan-rtx": "Titan-RTX", "rtx-2080-ti": "RTX-2080"}
"""Sailor's name of each GPU template the MIT nodes hold."""
SEND_RECV = Path("sailor/providers/intra_node_bandwidths.json")
ALL_REDUCE = "sailor/Planner/baselines/Aceso/profiler/{gpu}/profiled-data-fp32/prim_OPT-350_all_reduce_{n}gpus.csv"
SIZES_MB = (16, 256)   # an OPT-350M activation in fp32 at micro-batch 2 (16 MiB), and a large message
MiB = 2**20


def node(template: str, gpus: int = 8) -> DatacenterConfig:
    """One node of the template, with its first `gpus` GPUs."""
    return DatacenterConfig.model_validate({"from": template, "cluster": {"num_nodes": 1},
                                            "node": {"gpus_per_node": gpus, "gpus_per_nic": gpus}})


def send_recv_GBps(template: str, world: int) -> float:
    """Aggregate GB/s of Sailor's pairs i -> i + world/2 (i < world/2), all sending at once, on one node."""
    topology = Topology.from_datacenter(node(template))
    senders = np.arange(world // 2)
    links, _, _ = topology.routes(senders, senders + world // 2)
    return float(max_min_rates(links, topology.capacity, np.full(len(senders), np.inf)).sum()) / 1e9


def all_reduce_ms(template: str, gpus: int) -> list[float]:
    timings = collective_sweep(node(template, gpus), CollType.AllReduce, tuple(range(gpus)),
                               [mb * MiB for mb in SIZES_MB], algorithm="auto")
    return [t.time_us / 1e3 for t in timings]


def measured_all_reduce_ms(path: Path) -> dict[float, float]:
    with path.open() as f:
        return {float(row["data_size(MB)"]): float(row["time(ms)"]) for row in csv.DictReader(f)}


def error(simulated: float, measured: float) -> str:
    return f"{100 * (simulated - measured) / measured:>+6.1f}%"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sailor", type=Path, help="a checkout of eth-easl/sailor")
    root = parser.parse_args().sailor
    measured = json.loads((root / SEND_RECV).read_text())
    print(f"send/recv  {'node template':<22} {'pairs':>5} {'Sailor GB/s':>12} {'simulon GB/s':>13} {'error':>7}")
    for gpu, template in NODE_TEMPLATES.items():
        for world, (_, best) in sorted(measured[SAILOR_NAMES[gpu]].items(), key=lambda item: int(item[0])):
            sailor, simulon = best / 1e9, send_recv_GBps(template, int(world))
            print(f"send/recv  {template:<22} {int(world) // 2:>5} {sailor:>12.2f} {simulon:>13.2f} "
                  f"{error(simulon, sailor)}")
    print(f"\nall-reduce {'node template':<22} {'GPUs':>5} {'MiB':>5} {'Sailor ms':>10} {'simulon ms':>11} "
          f"{'error':>7}")
    for gpu, template in NODE_TEMPLATES.items():
        for gpus in (2, 4, 8):
            profile = measured_all_reduce_ms(root / ALL_REDUCE.format(gpu=SAILOR_NAMES[gpu], n=gpus))
            for mb, simulon in zip(SIZES_MB, all_reduce_ms(template, gpus), strict=True):
                print(f"all-reduce {template:<22} {gpus:>5} {mb:>5} {profile[mb]:>10.2f} {simulon:>11.2f} "
                      f"{error(simulon, profile[mb])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
