"""Symmetry folding on fabrics of several tiers: folded (`--expand symmetric`) against full expansion.

    uv run python benchmarks/bench_fold_accuracy.py [--cases dense128,moe96] [--fabrics spine-leaf]
        [--method footprint|naive] [--large]

Every run is a fresh process (simulon imported, one training step built, timed and replayed), so that its wall
time and peak resident memory are its own. The table gives per case and fabric the iteration time of the full
expansion and of the folded run, their ratio, and the wall time and peak RSS of each.

The three-tier fabrics: pods of 8 leaves (one per rail of 4 or 8 nodes) under 4 spines, 4 or 8 cores;
`3-tier-2:1` is not rail-optimized (pods of 2 leaves of 16 NICs), where Topology.fold_axes folds tensor
parallelism only: with data parallelism folded too, a folded pipeline send moves at its slowest counterpart's pace
over every data-parallel replica the representative stands for, which the full expansion's replicas, out of step,
beat by 1.1-1.3% (tp2pp2dp16 1.0114, moe96 1.0121); folding tp only gives 1.0000 and 0.9994.

`ds128` and `ds128-pxn` have DeepSeek-V3's structure on 16 HGX H800 nodes (tp1 pp2 dp64 ep32): data-parallel rings
over 8 nodes, bent to the rails (they repeat every two nodes, so the fold's period doubles to 16 GPUs), and expert
all-to-alls over 4 nodes, across rails (or relayed by PXN). Folded / full: 0.9977 on rail-optimized (32 nodes per
leaf; 1.0000 while a leaf's two cables to each spine were one link, before ECMP hashed across them as across
spines, network/fabric.py), 0.9973 on rail-8/leaf; at 2:1 (rail-8/leaf-2:1, rail-optimized-2:1) such steps are no
longer folded along data parallelism (1.0000: folded they ran 1.0667 and 0.9893, dag.fold.collective_shifts); with
PXN on rails the all-to-alls keep data parallelism whole (folded, ds128-pxn on rail-8/leaf ran 0.9777; cause not
found). dp64 and tp2pp2dp16 (rings bent to the rails, folded since) 1.0000 on rail-optimized and rail-8/leaf.

`--method folded` expands no collective (Fold.folded_throughout, what a step whose expansions would not fit
takes): folded / full on rail-8/leaf, 3-tier-rail and spine-leaf: dense128 1.0011, 0.9926, 1.0198; tp2pp2dp16
1.0000, 0.9989, 0.9972; moe96 1.0000, 0.9969, 0.9952; ds128 1.0033, 0.9969, 0.9973; but fsdp64 1.0000, 0.9317,
0.9373 (ZeRO-3's all-gathers). The 3-tier-rail and spine-leaf figures are those of ECMP over single cables
(network/fabric.py: each leaf's and spine's parallel cables to one switch hashed across like any other, where
they were one merged link): the footprint method's ratios there moved within 0.993-1.012 (dense128 0.9926 and
1.0000, moe96 0.9969 and 0.9951, tp2pp4dp32 1.0025 and 1.0119), and the steps themselves took 10-35% longer
(dense128 on spine-leaf 448.3 to 573.6 ms, ds128 405.2 to 545.2), since a flow now moves at most one cable's
rate and ECMP collides some flows on one cable.

With each connection hashed apart under ECMP (a flow's channels and queue pairs, network/fabric.py; 002af85
against 0653a3d, this script's default cases and fabrics, both run in one session) every step on a fabric of several
tiers ran faster (dense128 on spine-leaf 573.6 to 321.3 ms, ds128 545.2 to 329.1, fsdp64 74.1 to 57.3), and the
footprint method's folded / full moved within 0.980-1.011 (before 0.972-1.024): fsdp64 on spine-leaf 0.9744 to
1.0000, tp2pp4dp32 at 2:1 1.0244 to 1.0106, dense128 on 3-tier-rail-2:1 1.0093 to 1.0021, but ds128 on spine-leaf
0.9986 to 0.9863 and ds128-pxn 0.9902 to 0.9802 (their folded pipeline sends' footprints; cause not found).

A pipelined step on a fabric not rail-optimized under ECMP or static routing folds tensor parallelism only
(Topology.fold_axes, 59124e4): folded along data parallelism, a pipeline send moved at its slowest replica's pace,
send after send, where each replica waits only for its own (a sum of maxima against the maximum of sums). On
`spine-leaf` and `spine-leaf-2:1`, this script's default cases, both run in one session (f41823a against 59124e4):
ds128 0.9863 and 0.9932 to 1.0000 and 1.0000, ds128-pxn 0.9802 and 0.9832 to 1.0000 and 1.0000 (the cause not
found before), tp2pp4dp32 0.9973 and 1.0106 to 0.9972 and 0.9980, tp2pp2dp16 0.9960 and 0.9965 to 1.0012 and
0.9986, moe96 0.9995 and 0.9988 to 1.0040 and 0.9981, dense128 1.0012 and 0.9994 to 1.0000 and 0.9999; dp64 and
fsdp64 (one stage) unchanged; folded RSS 106-213 MB to 143-249 MB where data parallelism no longer folds. Rail-
optimized fabrics are unaffected: ds128, ds128-pxn and tp2pp4dp32 on rail-4/leaf-2:1, 3-tier-rail and
3-tier-rail-2:1 run 0.9963-1.0000; but since all-to-alls run in NCCL's p2pSchedule order (90c484a), ds128 on
3-tier-rail ran 0.9843 (full 325.58 ms, folded 320.47), the others unchanged. The cause was the training replay's
1 us reshare window, measured from each event: a run of events under 1 us apart put the rates' computation off
for up to 300 us, longer with every GPU simulated than folded. From the first change it gathers (the window's
rate computation at most 1 us late): ds128 on 3-tier-rail 0.9985 (317.44 and 316.96; 1.0003 with no window), and
ds128, ds128-pxn, moe96, tp2pp4dp32 and tp2pp2dp16 on 3-tier-rail, rail-4/leaf-2:1 and spine-leaf 0.9985-1.0017
(0.9843-1.0015 before).

`--method naive` replays the folded run as before engine/footprint.py and Fold.expands: a simulated flow loads
its own route's inner links only, so it misses the ECMP collisions of the flows it stands for (the "before"
column). Both
methods force `Topology.foldable` true, to measure fabrics where it is still false: on dual-ToR fabrics (`dual-tor`,
`dual-plane`, `dual-tor-spine-leaf-2:1`, whose NICs hash connections over their two ports, 002af85) folded / full
runs 0.984-1.013 (dp64 on one rail 0.9841, moe96 1.0125; dense128, tp2pp2dp16 and ds128 within 0.7%), outside the 1%
the fold keeps elsewhere, so such fabrics are still simulated GPU by GPU. `--large` adds GPT-3 175B
on 512 and 1,024 GPUs on a rail-optimized fat-tree.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

RUN = r"""
import importlib, json, resource, sys, time
from simulon.config.loading import parse_scenario
from simulon.network.topology import Topology
from simulon.dag.fold import Fold
from simulon.engine import footprint
replay_module = importlib.import_module("simulon.engine.replay")
from simulon.pipeline import simulate
path, expand, method = sys.argv[1:4]
MEMORY_LIMIT = 12 * 2**30  # the memory guard refuses what would not fit (dag/size.py)
Topology.foldable = property(lambda self: True)
if method == "folded":  # no collective expanded, as pipeline.simulate does when expanding would not fit
    Fold.expands = lambda self, group, topology: False
if method == "naive":
    Fold.expands = lambda self, group, topology: False
    replay_module.flow_loads = lambda dag, topology, fold, props: footprint.LinkLoads.of_routes(
        props.links, topology.fold_weights(fold.rep))
sc = parse_scenario(json.load(open(path)), path)
t = time.perf_counter()
sim = simulate(sc, expand, memory_limit=MEMORY_LIMIT)
wall = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"ms": sim.result.iteration_time_ms, "wall_s": wall, "rss_mb": peak / 2**20,
                  "nodes": sim.dag.num_nodes, "folded": bool(sim.fold.axes)}))
"""


def _example(name: str) -> dict:
    return yaml.safe_load((ROOT / "examples" / name).read_text())


def _gpt(model: str, nodes: int, tp: int, pp: int, gbs: int, template: str = "dgx-h100") -> dict:
    return {"datacenter": {"from": template, "cluster": {"num_nodes": nodes}},
            "workload": {"framework": "megatron", "model": model, "parallelism": {"tp": tp, "pp": pp},
                         "training": {"global_batch_size": gbs, "micro_batch_size": 1, "sequence_length": 2048}}}


def _deepseek_like(nodes: int, pp: int, ep: int, gbs: int) -> dict:
    """DeepSeek-V3's structure on HGX H800 nodes: no tensor parallelism, so data-parallel rings run over the
    nodes of a stage (bent to the rails) and expert all-to-alls over several nodes, across rails; a Llama-7B-shaped
    MoE of `ep` experts, top-2, 8 layers."""
    model = {**_example("moe_96gpu.yaml")["workload"]["model"], "num_layers": 8,
             "moe": {"num_experts": ep, "top_k": 2}}
    return {"datacenter": {"from": "hgx-h800", "cluster": {"num_nodes": nodes}},
            "workload": {"framework": "megatron", "model": model, "parallelism": {"tp": 1, "pp": pp, "ep": ep},
                         "training": {"global_batch_size": gbs, "micro_batch_size": 1, "sequence_length": 2048}}}


def _pxn(case: dict) -> dict:
    return {**case, "collective": {"algorithm": "pxn"}}


def _fsdp(case: dict) -> dict:
    case["workload"]["parallelism"]["fsdp"] = "full_shard"
    return case


CASES = {
    "dense128": _gpt("gpt3-13b", 16, 8, 2, 32),     # tp8 pp2 dp8 on 128 H100
    "dp64": _gpt("gpt3-1.3b", 8, 1, 1, 64),         # dp64 on 64 H100
    "tp2pp2dp16": _gpt("gpt3-1.3b", 8, 2, 2, 64),   # dp over nodes with two tp groups per node
    "moe96": _example("moe_96gpu.yaml"),            # tp4 pp6 dp4 ep2 on 96 H100
    "dense512": _gpt("gpt3-13b", 64, 8, 2, 128),    # tp8 pp2 dp32 on 512 H100
    "fsdp64": _fsdp(_gpt("gpt3-1.3b", 8, 1, 1, 64)),  # dp64 ZeRO-3 on 64 H100
    "tp2pp4dp32": _gpt("gpt3-1.3b", 32, 2, 4, 128),  # 256 H100: pipeline sends across pods, dp rings over nodes
    "ds128": _deepseek_like(16, 2, 32, 256),        # tp1 pp2 dp64 ep32 on 128 H800: rings bent to the rails
    "ds128-pxn": _pxn(_deepseek_like(16, 2, 32, 256)),  # the same, all-to-alls relayed through PXN
}
LARGE = {
    "gpt3-175b-512": {**_example("gpt3_175b_1024gpu.yaml")},
    "gpt3-175b-1024": _example("gpt3_175b_1024gpu.yaml"),
}
FABRICS = {
    "spine-leaf": "spine-leaf",
    "spine-leaf-2:1": {"from": "spine-leaf", "oversubscription": 2.0},
    "rail-4/leaf-2:1": {"tiers": 2, "rail_optimized": True, "nics_per_leaf": 4, "spines": 4,
                        "oversubscription": 2.0},
    "rail-optimized": "rail-optimized-fat-tree",
    "rail-optimized-2:1": {"from": "rail-optimized-fat-tree", "oversubscription": 2.0},
    "rail-8/leaf": {"tiers": 2, "rail_optimized": True, "nics_per_leaf": 8, "spines": 8},
    "rail-8/leaf-2:1": {"tiers": 2, "rail_optimized": True, "nics_per_leaf": 8, "spines": 8,
                        "oversubscription": 2.0},
    "single-switch": "single-switch",
    "3-tier-rail-2:1": {"tiers": 3, "rail_optimized": True, "nics_per_leaf": 4, "spines": 4, "leaves_per_pod": 8,
                        "cores": 4, "oversubscription": 2.0, "pod_oversubscription": 2.0},
    "3-tier-rail": {"tiers": 3, "rail_optimized": True, "nics_per_leaf": 4, "spines": 4, "leaves_per_pod": 8,
                    "cores": 4},
    "3-tier-rail-8/leaf-2:1": {"tiers": 3, "rail_optimized": True, "nics_per_leaf": 8, "spines": 4,
                               "leaves_per_pod": 8, "cores": 8, "oversubscription": 2.0, "pod_oversubscription": 2.0},
    "3-tier-2:1": {"tiers": 3, "nics_per_leaf": 16, "spines": 4, "leaves_per_pod": 2, "cores": 4,
                   "oversubscription": 2.0, "pod_oversubscription": 2.0},
    "dual-tor": {"tiers": 2, "rail_optimized": True, "dual_tor": True, "nics_per_leaf": 8, "spines": 8},
    "dual-plane": {"tiers": 2, "rail_optimized": True, "dual_tor": True, "planes": 2, "nics_per_leaf": 8,
                   "spines": 8},
    "dual-tor-spine-leaf-2:1": {"tiers": 2, "dual_tor": True, "nics_per_leaf": 8, "spines": 4,
                                "oversubscription": 2.0},
}


def _on(case: dict, fabric) -> dict:
    data = json.loads(json.dumps(case))
    data["datacenter"].setdefault("network", {}).setdefault("scale_out", {})["topology"] = fabric
    return data


def _half(case: dict) -> dict:
    """GPT-3 175B on 512 GPUs: the 1,024-GPU example with half the data parallelism."""
    data = json.loads(json.dumps(case))
    data["datacenter"]["cluster"]["num_nodes"] //= 2
    data["workload"]["parallelism"]["dp"] //= 2
    data["workload"]["training"]["global_batch_size"] //= 2
    return data


def run(data: dict, expand: str, method: str) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(data, f)
    done = subprocess.run([sys.executable, "-c", RUN, f.name, expand, method], capture_output=True, text=True,
                          cwd=ROOT)
    Path(f.name).unlink()
    if done.returncode:
        message = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
        return {"error": message[:160]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(c for c in CASES if c != "dense512"))
    parser.add_argument("--fabrics", default="spine-leaf,spine-leaf-2:1,rail-4/leaf-2:1,3-tier-rail,3-tier-rail-2:1")
    parser.add_argument("--method", default="footprint", choices=["footprint", "naive", "folded"])
    parser.add_argument("--large", action="store_true")
    parser.add_argument("--no-full", action="store_true", help="only the folded runs (sizes too large to expand)")
    args = parser.parse_args()
    cases = {name: CASES[name] for name in args.cases.split(",") if name}
    rows = [(name, fabric, _on(case, FABRICS[fabric])) for name, case in cases.items()
            for fabric in args.fabrics.split(",") if fabric]
    if args.large:
        large = _example("gpt3_175b_1024gpu.yaml")
        rows += [("gpt3-175b-512", "rail-optimized", _on(_half(large), FABRICS["rail-optimized"])),
                 ("gpt3-175b-1024", "rail-optimized", _on(large, FABRICS["rail-optimized"]))]
    print(f"method: {args.method}")
    print(f"{'case':16} {'fabric':16} {'GPUs':>5} {'full ms':>10} {'folded ms':>10} {'ratio':>7} "
          f"{'full wall':>9} {'fold wall':>9} {'full RSS':>9} {'fold RSS':>9}")
    for name, fabric, data in rows:
        gpus = data["workload"]["training"].get("num_gpus") or _gpus(data)
        folded = run(data, "symmetric", args.method)
        full = {"ms": float("nan"), "wall_s": float("nan"), "rss_mb": float("nan")} if args.no_full else \
            run(data, "full", args.method)
        if "error" in folded:
            print(f"{name:16} {fabric:16} {gpus:>5} error: {folded['error']}")
            continue
        if "error" in full:  # refused by the memory guard: the folded run alone
            print(f"{name:16} {fabric:16} {gpus:>5} {'-':>10} {folded['ms']:>10.2f} {'-':>7} {'-':>9} "
                  f"{folded['wall_s']:>8.1f}s {'-':>9} {folded['rss_mb']:>7.0f}MB  full: {full['error'][:60]}",
                  flush=True)
            continue
        print(f"{name:16} {fabric:16} {gpus:>5} {full['ms']:>10.2f} {folded['ms']:>10.2f} "
              f"{folded['ms'] / full['ms']:>7.4f} {full['wall_s']:>8.1f}s {folded['wall_s']:>8.1f}s "
              f"{full['rss_mb']:>7.0f}MB {folded['rss_mb']:>7.0f}MB", flush=True)


def _gpus(data: dict) -> int:
    gpn = {"dgx-h100": 8, "dgx-a100": 8, "hgx-h800": 8}.get(data["datacenter"].get("from"))
    node = data["datacenter"].get("node", {})
    return data["datacenter"]["cluster"]["num_nodes"] * (node.get("gpus_per_node") or gpn or 8)


if __name__ == "__main__":
    main()
