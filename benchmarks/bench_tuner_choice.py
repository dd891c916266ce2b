"""How far `algorithm: auto` (NCCL's tuning model) lands from the fastest choice the replay finds: for each
shipped datacenter and node count, each collective over every GPU is replayed at a few sizes as auto picks it
and with every (algorithm, protocol) NCCL would consider there, and the cases where auto's replay takes more
than --over times the fastest are printed. NCCL's model and simulon's replay disagree there: either may be
wrong, and only measurements of the same group and size tell which (validation/collectives.csv).

    uv run python benchmarks/bench_tuner_choice.py [--templates dgx-h100,dgx-b200] [--nodes 1,2,4] [--over 1.1]
"""

from __future__ import annotations

import argparse

from simulon.collective.tuner import CollectivePlan
from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.network.topology import Topology
from simulon.pipeline import collective_sweep

COLLECTIVES = (CollType.AllReduce, CollType.AllGather, CollType.ReduceScatter)
SIZES = [2.0**k for k in (16, 20, 24, 25, 26, 27, 30)]


def choices(dc: DatacenterConfig, ctype: CollType, group: tuple[int, ...]) -> list[tuple[str, str]]:
    """Every (algorithm, protocol) NCCL's tuner weighs for this collective on this group."""
    return CollectivePlan(Topology.from_datacenter(dc), "auto").candidates(ctype, group)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--templates", default="dgx-h100,dgx-b200,dgx-a100")
    parser.add_argument("--nodes", default="1,2,4")
    parser.add_argument("--over", type=float, default=1.1)
    args = parser.parse_args()
    print(f"{'datacenter':14s} {'nodes':>5} {'collective':13s} {'MiB':>9}  auto (us)  fastest (us)  ratio")
    for template in args.templates.split(","):
        for nodes in map(int, args.nodes.split(",")):
            dc = DatacenterConfig.model_validate({"from": template, "cluster": {"num_nodes": nodes}})
            group = tuple(range(dc.num_gpus))
            for ctype in COLLECTIVES:
                auto = collective_sweep(dc, ctype, group, SIZES, "auto")
                each = {c: collective_sweep(dc, ctype, group, SIZES, c[0], protocol=c[1])
                        for c in choices(dc, ctype, group)}
                for i, size in enumerate(SIZES):
                    best = min(each, key=lambda c: each[c][i].time_us)
                    ratio = auto[i].time_us / each[best][i].time_us
                    if ratio > args.over:
                        print(f"{template:14s} {nodes:5d} {ctype.name:13s} {size / 2**20:9.3f}  "
                              f"{auto[i].algorithm}/{auto[i].protocol} {auto[i].time_us:.1f}  "
                              f"{best[0]}/{best[1]} {each[best][i].time_us:.1f}  {ratio:.2f}")


if __name__ == "__main__":
    main()
