"""How far `algorithm: auto` (NCCL's tuning model) lands from the fastest choice the replay finds: for each
shipped datacenter and node count, each collective over every GPU is replayed at a few sizes as auto picks it
and with every (algorithm, protocol) NCCL would consider there, and the cases where auto's replay takes more
than --over times the fastest are printed. NCCL's model and simulon's replay disagree there: either may be
wrong, and only measurements of the same group and size tell which.

With --table, the measurements tell: every row of a collectives table (validation/collectives.csv's format) that
`simulon validate collectives` compares under auto is replayed as auto picks it and with every (algorithm,
protocol) auto weighs, and for each hardware family and size class the script prints the rows where the replay's
fastest choice is not auto's, the busbw MAPE of either choice against the measurement there, and in how many of
those rows the measurement is nearer auto's.

With --sizes (a list like 1KiB,64MiB or `pow4`: 1 KiB to 4 GiB by powers of 4), --ops (adds alltoall, NCCL's
grouped send/receive, whose only choice is p2p) and --one-per-node (also the group of each node's first GPU, where
NCCL enables PAT), the sweep covers the issue's grid; each case prints with auto's pick and the fastest replayed one.

    uv run python benchmarks/bench_tuner_choice.py [--templates dgx-h100,dgx-b200] [--nodes 1,2,4] [--over 1.1]
    uv run python benchmarks/bench_tuner_choice.py --templates dgx-a100,dgx-h100,hgx-h200,dgx-b200,mi300x-platform \
        --nodes 1,2,4,8,16 --sizes pow4 --ops allreduce,allgather,reducescatter,alltoall --one-per-node --over 1.05
    uv run python benchmarks/bench_tuner_choice.py --table ../shared/validation/collectives.csv
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from simulon.collective.tuner import CollectivePlan
from simulon.collective.types import POINT_TO_POINT, CollType, collective_named
from simulon.config import DatacenterConfig
from simulon.config.units import parse_size
from simulon.network.topology import Topology
from simulon.pipeline import collective_sweep
from simulon.validate.collectives import Case, collective_cases, size_class
from simulon.validate.report import read_table

SIZES = [2.0**k for k in (16, 20, 24, 25, 26, 27, 30)]


def choices(dc: DatacenterConfig, ctype: CollType, group: tuple[int, ...]) -> list[tuple[str, str]]:
    """Every (algorithm, protocol) NCCL's tuner weighs for this collective on this group."""
    return CollectivePlan(Topology.from_datacenter(dc), "auto").candidates(ctype, group)


def fastest_by_replay(case: Case) -> tuple[dict[float, float], dict[float, float], dict[float, bool]]:
    """(auto's busbw, the fastest replayed choice's busbw, whether the two choices differ) by message size."""
    sizes = sorted({size for _, _, size, _ in case.rows})
    dc, group, others = case.datacenter(), case.groups[0], case.groups[1:]
    auto = {t.size_bytes: t for t in collective_sweep(dc, case.ctype, group, sizes, "auto", others=others)}
    best = {size: (t.busbw_GBps, (t.algorithm, t.protocol)) for size, t in auto.items()}
    for algorithm, protocol in choices(dc, case.ctype, group):
        for t in collective_sweep(dc, case.ctype, group, sizes, algorithm, protocol=protocol, others=others):
            if t.busbw_GBps > best[t.size_bytes][0]:
                best[t.size_bytes] = (t.busbw_GBps, (algorithm, protocol))
    return ({s: t.busbw_GBps for s, t in auto.items()}, {s: b for s, (b, _) in best.items()},
            {s: best[s][1] != (auto[s].algorithm, auto[s].protocol) for s in sizes})


def against_table(path: str) -> None:
    """Where auto's choice and the replay's fastest differ on a measured row, which the measurement is nearer."""
    cases, _ = collective_cases(read_table(path), path)
    errors: dict[str, list[tuple[float, float]]] = defaultdict(list)
    compared = defaultdict(int)
    for case in cases:
        if case.algorithm != "auto" or case.ctype in POINT_TO_POINT or not case.rows:
            continue
        auto, best, differ = fastest_by_replay(case)
        for _, _, size, measured in case.rows:
            label = f"{case.system.family} {size_class(size)}"
            compared[label] += 1
            if differ[size]:
                errors[label].append((abs(auto[size] / measured - 1), abs(best[size] / measured - 1)))
    print(f"{'family and size':18s} {'rows':>5} {'differ':>6} {'auto MAPE':>9} {'fastest MAPE':>12} "
          f"{'nearer auto':>11}")
    for label in sorted(compared):
        rows = errors.get(label, [])
        if not rows:
            print(f"{label:18s} {compared[label]:5d} {0:6d}")
            continue
        auto_mape = 100 * sum(a for a, _ in rows) / len(rows)
        best_mape = 100 * sum(b for _, b in rows) / len(rows)
        nearer = sum(a < b for a, b in rows)
        print(f"{label:18s} {compared[label]:5d} {len(rows):6d} {auto_mape:8.1f}% {best_mape:11.1f}% "
              f"{nearer:5d} of {len(rows)}")
    rows = [r for found in errors.values() for r in found]
    print(f"all: {sum(compared.values())} rows, {len(rows)} where the replay's fastest is not auto's; there auto "
          f"{100 * sum(a for a, _ in rows) / max(len(rows), 1):.1f}%, the fastest "
          f"{100 * sum(b for _, b in rows) / max(len(rows), 1):.1f}%, the measurement nearer auto in "
          f"{sum(a < b for a, b in rows)}")


def sweep_sizes(text: str | None) -> list[float]:
    """--sizes: the default few, `pow4` (1 KiB to 4 GiB by powers of 4), or a list like 1KiB,64MiB."""
    if text is None:
        return SIZES
    if text == "pow4":
        return [1024.0 * 4**k for k in range(12)]
    return [parse_size(part) for part in text.split(",")]


def groups(dc: DatacenterConfig, nodes: int, one_per_node: bool) -> list[tuple[str, tuple[int, ...]]]:
    """Every GPU, and with one_per_node each node's first GPU (on more than one node)."""
    every = tuple(range(dc.num_gpus))
    firsts = every[::dc.node.gpus_per_node]
    return [("all", every)] + ([("1/node", firsts)] if one_per_node and len(firsts) > 1 else [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--templates", default="dgx-h100,dgx-b200,dgx-a100")
    parser.add_argument("--nodes", default="1,2,4")
    parser.add_argument("--over", type=float, default=1.1)
    parser.add_argument("--sizes", help="sizes like 1KiB,64MiB, or pow4 (default: 64 KiB to 1 GiB, seven)")
    parser.add_argument("--ops", default="allreduce,allgather,reducescatter")
    parser.add_argument("--one-per-node", action="store_true", help="also each node's first GPU")
    parser.add_argument("--table", help="compare against the measurements of this collectives table instead")
    args = parser.parse_args()
    if args.table:
        against_table(args.table)
        return
    sizes, ops = sweep_sizes(args.sizes), [collective_named(op) for op in args.ops.split(",")]
    print(f"{'datacenter':15s} {'nodes':>5} {'group':6s} {'GPUs':>4} {'collective':13s} {'bytes':>10}  "
          f"auto (us)  fastest (us)  ratio")
    for template in args.templates.split(","):
        for nodes in map(int, args.nodes.split(",")):
            dc = DatacenterConfig.model_validate({"from": template, "cluster": {"num_nodes": nodes}})
            for label, group in groups(dc, nodes, args.one_per_node):
                for ctype in ops:
                    auto = collective_sweep(dc, ctype, group, sizes, "auto")
                    each = {c: collective_sweep(dc, ctype, group, sizes, c[0], protocol=c[1])
                            for c in choices(dc, ctype, group)}
                    for i, size in enumerate(sizes):
                        best = min(each, key=lambda c: each[c][i].time_us)
                        ratio = auto[i].time_us / each[best][i].time_us
                        if ratio > args.over:
                            print(f"{template:15s} {nodes:5d} {label:6s} {len(group):4d} {ctype.name:13s} "
                                  f"{size:10.0f}  {auto[i].algorithm}/{auto[i].protocol} {auto[i].time_us:.1f}  "
                                  f"{best[0]}/{best[1]} {each[best][i].time_us:.1f}  {ratio:.2f}", flush=True)


if __name__ == "__main__":
    main()
