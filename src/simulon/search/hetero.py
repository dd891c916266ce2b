"""Planning a pipeline over a heterogeneous cluster: which node group runs each stage, and how many layers.

Metis (ATC'24), Sailor (SOSP'25), Cephalo and FlashFlex all balance a pipeline over mixed GPUs the same way
at heart: a stage on a slower GPU gets fewer layers, so that no stage holds the others up. This planner does
that for a scenario whose datacenter has `node_groups`, keeping its strategy (tp, pp, dp, micro-batches):

1. Unit costs. For each node group's GPU, the seconds per micro-batch of a dense layer, an MoE layer, the
   embedding and the head on one rank (kernels, recompute, exposed TP/CP/EP communication), from the
   search's fast estimate (search.estimate.Estimator) on that group's own nodes. Under full recomputation of a block
   of layers (recompute_num_layers: Megatron's block method re-runs the forward of each stage's first N layers only),
   a layer's cost leaves its re-run forward out, and a stage adds it for its first N layers.
2. Placements. Every assignment of stages to groups that uses no group for more stages than its GPUs hold
   (where the groups hold more than pp stages, every sharing of them: a fast group may take every stage): all
   orders when there are at most MAX_ORDERS in all, else the groups in contiguous blocks (every order of the
   groups).
3. The layer split of a placement minimises its slowest stage (then, among splits as slow, the sum of the
   stages, the fill and drain of 1F1B): the smallest time T at which the stages' layer counts that fit
   under T reach the model's layers, each stage holding at least one layer, found by bisection over the
   candidate times (a stage's time rises by a layer's cost and, for its first recompute_num_layers layers, its
   re-run forward). A stage the memory model says does not fit on its GPU gets a layer fewer and the split
   is solved again.
4. Estimated step of a placement: M x slowest + the other stages once (Narayanan et al., SC'21, section 2.2,
   with uneven stages as search.estimate counts them), for the slowest data-parallel replica: 1F1B's step, which
   zb_h1's is estimated as too (its deferred weight gradients, filling part of the drain, are not credited; the
   full simulation, which runs zb_h1 itself, ranks the plans). The best
   `simulate` placements, and the scenario's own placement with its own split (the even split unless it gives
   layers_per_stage), are simulated in full; the plan is the fastest simulated that fits in memory, so it is
   never slower than the scenario as written where that fits (where nothing fits, there is no plan).
5. Data-parallel shares (`dp_shares`, optional): where replicas run on different GPUs (the scenario's own
   per-replica stage_groups, or every replica's pipeline whole on one group, `replica_placement`), replica d
   takes m_d of the step's micro-batches so that all reach the gradient reduction together, as Whale, HetPipe
   and Cephalo share the global batch by speed: m_d minimises the latest fill_d + m_d x period_d (period: the
   replica's slowest stage per micro-batch; `share_microbatches`), in the counts the schedule accepts; and
   again with each replica's line scaled by its replayed over its estimated end under the placement's own
   shares (`calibration`: the estimate leaves out what the replay adds on the slower GPUs' links). Each such
   plan is simulated beside the same placement with even shares, so the plan is never slower than those.

What it leaves out, refusing such scenarios with a message naming the setting: interleaved schedules (vpp 1
only) and those that run two stages on a rank (dualpipe's mirrored pairs, zb_v's and dualpipev's V; 1f1b and zb_h1
are planned); clusters where a stage's GPUs (all its data-parallel replicas) cannot lie in one node group (the
scenario as written is simulated first, its step named in the refusal: `Planner.straddling`; with --dp-shares, where
each replica lies whole on a group, that placement alone is planned); and --dp-shares with
expert parallelism or FSDP, whose collectives join the replicas every micro-batch. Also left out: tensor-parallel
groups spanning GPU types, and placements that mix stage-by-stage and replica-by-replica placing beyond the
scenario's own.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..config.dc import DatacenterConfig, Group
from ..config.loading import parse_scenario
from ..config.pipeline_layout import AUTOMATIC_SPLIT
from ..config.scenario import ScenarioConfig
from ..config.units import GiB
from ..config.workload import microbatch_steps
from ..dag.nodes import NodeKind
from ..memory import estimate_memory
from ..pipeline import Simulation
from ..pipeline import simulate as simulate_scenario
from ..workload.layer_kernels import LayerKernels
from ..workload.parameters import PipelineLayers
from ..workload.program import EMBEDDING_LAYER, HEAD_LAYER
from ..workload.schedule import INTERLEAVED, SCHEDULERS, one_stage_per_rank
from .estimate import Estimator, LayerUnit, unit_kind
from .space import Strategy

MAX_ORDERS = 2_000
"""Placements enumerated in every order up to this many; beyond, each group's stages stay contiguous. A cost
bound, not a fit: each placement costs one split (microseconds) but one memory check (milliseconds) if it ranks
among the best, and 2,000 covers two groups of up to 12 stages together (C(12, 6) = 924)."""


@dataclass(frozen=True)
class UnitCosts:
    """Seconds per micro-batch on one rank of a group's GPU."""

    layers: Mapping[LayerUnit, float]  # a layer of each kind the model has (config/hybrid.py), in bf16 or windowed
    embedding: float
    head: float
    recomputed: Mapping[LayerUnit, float] | None = None  # under recompute_num_layers: what a layer of each kind
    # adds where its stage re-runs its forward (`layers` then leave it out); None: `layers` hold every recompute


StageGroups = tuple[int | tuple[int, ...], ...]
"""Each stage's node group, or its data-parallel replicas' groups (as training.stage_groups)."""


@dataclass(frozen=True)
class Plan:
    """A placement of stages on node groups, the layers of each stage and the micro-batches of each replica."""

    stage_groups: StageGroups
    layers_per_stage: tuple[int, ...]
    stage_ms: tuple[float, ...]   # each stage's estimated time per micro-batch (on its slowest replica's GPU)
    estimated_ms: float           # the step, estimated
    fits: bool
    simulated_ms: float | None = None
    label: str = ""
    dp_shares: tuple[int, ...] | None = None  # micro-batches per data-parallel replica (None: the even split)
    replica_ends: tuple[float, ...] | None = None  # replayed: each replica's last micro-batch's end, seconds

    @property
    def stage_groups_config(self) -> list[int | list[int]]:
        """stage_groups as a scenario writes them."""
        return [list(g) if isinstance(g, tuple) else g for g in self.stage_groups]

    def to_json(self) -> dict:
        return {"label": self.label, "stage_groups": self.stage_groups_config,
                "layers_per_stage": list(self.layers_per_stage), "stage_ms": list(self.stage_ms),
                "estimated_ms": self.estimated_ms, "simulated_ms": self.simulated_ms, "fits": self.fits,
                "dp_shares": None if self.dp_shares is None else list(self.dp_shares)}


@dataclass(frozen=True)
class PlanResult:
    groups: tuple[str, ...]        # each node group's name and GPU
    baseline: Plan                 # the scenario as written
    best: Plan
    considered: int                # placements whose split was solved
    simulated: tuple[Plan, ...]    # every plan simulated, fastest first

    @property
    def gain(self) -> float:
        """The plan's speed-up over the scenario as written: baseline step / planned step - 1."""
        return self.baseline.simulated_ms / self.best.simulated_ms - 1.0

    def to_json(self) -> dict:
        return {"groups": list(self.groups), "considered": self.considered, "gain": self.gain,
                "baseline": self.baseline.to_json(), "best": self.best.to_json(),
                "simulated": [p.to_json() for p in self.simulated]}


def group_datacenter(dc: DatacenterConfig, group: Group) -> DatacenterConfig:
    """The datacenter of one node group alone (its nodes, scale-up and NIC on the datacenter's fabric)."""
    data = dc.model_dump(exclude_none=True)
    data.pop("node_groups", None)
    network = data.setdefault("network", {})
    network["scale_up"] = group.scale_up.model_dump(exclude_none=True)
    if group.nic is not None:
        network.setdefault("scale_out", {})["nic"] = group.nic.model_dump(exclude_none=True)
    data["cluster"] = {"num_nodes": group.num_nodes}
    data["node"] = group.node.model_dump(exclude_none=True)
    return DatacenterConfig.model_validate(data)


def unit_costs(sc: ScenarioConfig) -> list[UnitCosts]:
    """Each node group's unit costs for the scenario's strategy (see the module docstring, step 1): under
    recompute_num_layers, the layers' costs without recomputation and what a recomputed layer adds to them."""
    strategy = replace(Strategy.of(sc), first_layers=0, last_layers=0)
    workload = sc.workload
    parallelism = workload.parallelism.model_copy(update=AUTOMATIC_SPLIT)
    training = workload.training.model_copy(update={"stage_groups": None, "dp_shares": None})
    workload = workload.model_copy(update={"parallelism": parallelism, "training": training})
    block = recomputed_block(sc) is not None
    costs, units = [], _layer_units(sc) + _layer_units(sc, mtp=True)
    kinds = sorted(set(units), key=repr)
    for group in sc.datacenter.groups:
        if not group.gpu.has_peak(workload.training.dtype):  # it runs no stage (whole_stages)
            costs.append(UnitCosts(dict.fromkeys(units, math.inf), math.inf, math.inf,
                                   dict.fromkeys(units, 0.0) if block else None))
            continue
        dc = group_datacenter(sc.datacenter, group)
        estimator = Estimator.on(workload, dc, sc.collective)
        layers = {unit: estimator.unit_seconds(strategy, workload, unit) for unit in kinds}
        recomputed = None
        if block:  # the strategy's full recompute re-runs every layer: a layer's cost without it, and the difference
            bare = replace(strategy, recompute="none")
            plain = {unit: estimator.unit_seconds(bare, workload, unit) for unit in kinds}
            layers, recomputed = plain, {unit: layers[unit] - plain[unit] for unit in kinds}
        costs.append(UnitCosts(layers, *(estimator.unit_seconds(strategy, workload, unit)
                                         for unit in (EMBEDDING_LAYER, HEAD_LAYER)), recomputed))
    return costs


def recomputed_block(sc: ScenarioConfig) -> int | None:
    """The layers at the start of each stage whose forward full recomputation re-runs (recompute_num_layers,
    Megatron's block method), or None where it re-runs every layer's or none."""
    par = sc.workload.parallelism
    return par.recompute_num_layers if par.recompute == "full" else None


def whole_stages(sc: ScenarioConfig) -> tuple[int, list[int]]:
    """(a pipeline stage's GPUs, all its data-parallel replicas; how many such stages each node group holds whole,
    none where its GPU has no peak in the training dtype: A100s in fp8); ValueError where a stage is not whole
    nodes."""
    num_gpus = sc.workload.training.num_gpus or sc.datacenter.num_gpus
    per_stage = num_gpus // sc.workload.parallelism.pp
    if per_stage % sc.datacenter.gpus_per_node:
        raise ValueError(f"workload.parallelism: a pipeline stage holds {stage_gpus(sc, per_stage)}, not whole nodes "
                         f"of {sc.datacenter.gpus_per_node}: the heterogeneous planner places stages on node groups "
                         "only when each fills whole nodes (a smaller pp gives each stage more GPUs)")
    dtype = sc.workload.training.dtype
    return per_stage, [g.num_gpus // per_stage if g.gpu.has_peak(dtype) else 0 for g in sc.datacenter.groups]


def held(sc: ScenarioConfig, room: list[int]) -> str:
    """Each node group's name and the stages it holds (whole_stages), for a message: "dgx-h100 1, dgx-a100 0 (no
    fp8 peak)"."""
    dtype = sc.workload.training.dtype
    return ", ".join(f"{g.name} {r}" + ("" if g.gpu.has_peak(dtype) else f" (no {dtype.value} peak)")
                     for g, r in zip(sc.datacenter.groups, room, strict=True))


def stage_gpus(sc: ScenarioConfig, per_stage: int) -> str:
    """A pipeline stage's `per_stage` GPUs in words, with the parallel sizes that make them: "16 GPUs (tp 8 x dp
    2)"."""
    par = sc.workload.parallelism
    dp = par.data_parallel(sc.workload.training.num_gpus or sc.datacenter.num_gpus)
    parts = " x ".join(f"{name} {n}" for name, n in (("tp", par.tp), ("cp", par.cp), ("dp", dp)) if n > 1)
    return f"{per_stage} GPU{'s' if per_stage != 1 else ''}" + (f" ({parts})" if parts else "")


def stage_counts(sc: ScenarioConfig) -> list[tuple[int, ...]]:
    """Every way of sharing the pp stages out over the node groups: stages per group, each at most what the
    group's GPUs hold (whole_stages), adding up to pp (ValueError if the groups cannot hold pp stages). Where the
    groups hold more than pp stages, a faster group may take them all and a slower none."""
    par = sc.workload.parallelism
    per_stage, room = whole_stages(sc)
    if sum(room) < par.pp:
        raise ValueError(f"workload.parallelism.pp: {par.pp} stages of {per_stage} GPUs each, but the node groups "
                         f"hold {sum(room)} whole stage{'s' if sum(room) != 1 else ''} ({held(sc, room)}): a stage's "
                         "GPUs must lie in one group")
    return list(_shares(tuple(room), par.pp))


def _shares(room: tuple[int, ...], stages: int) -> Iterator[tuple[int, ...]]:
    """Every tuple of counts, each at most its room, adding up to `stages`, the first group's counts descending."""
    if not room:
        if stages == 0:
            yield ()
        return
    for first in range(min(room[0], stages), -1, -1):
        if sum(room[1:]) >= stages - first:
            yield from ((first, *rest) for rest in _shares(room[1:], stages - first))


def _orders(counts: Sequence[int]) -> int:
    """Distinct orders of a placement using group g for counts[g] stages."""
    return math.factorial(sum(counts)) // math.prod(math.factorial(c) for c in counts)


def placements(counts: Sequence[int], every_order: bool | None = None) -> list[tuple[int, ...]]:
    """Stage-to-group assignments using group g for counts[g] stages (module docstring, step 2), sorted: in every
    order (by default where there are at most MAX_ORDERS), else each group's stages contiguous."""
    stages = [g for g, n in enumerate(counts) for _ in range(n)]
    if every_order is None:
        every_order = _orders(counts) <= MAX_ORDERS
    if every_order:
        return sorted(set(itertools.permutations(stages)))
    used = [g for g, n in enumerate(counts) if n]
    return sorted({tuple(g for g in order for _ in range(counts[g])) for order in itertools.permutations(used)})


def every_placement(choices: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
    """The placements of every sharing of the stages (stage_counts), sorted: in every order where all of them
    together make at most MAX_ORDERS, else each group's stages contiguous."""
    every_order = sum(_orders(counts) for counts in choices) <= MAX_ORDERS
    return sorted({order for counts in choices for order in placements(counts, every_order)})


def split_layers(per_layer: list[float], extra: list[float], num_layers: int,
                 caps: list[int] | None = None, recomputed: list[float] | None = None,
                 recompute_layers: int = 0) -> list[int] | None:
    """Layers per stage minimising the slowest stage (stage s takes extra[s] + layers x per_layer[s], and
    recomputed[s] more for each of its first `recompute_layers` layers), at least one each and at most caps[s];
    None if the caps leave too few layers."""
    pp = len(per_layer)
    caps = caps or [num_layers] * pp
    recomputed = recomputed or [0.0] * pp
    if any(c < 1 for c in caps) or sum(caps) < num_layers or num_layers < pp:
        return None

    def seconds(s: int, n: int) -> float:
        return extra[s] + n * per_layer[s] + min(n, recompute_layers) * recomputed[s]

    def fitting(s: int, t: float) -> int:
        """The most layers stage s runs within t."""
        if per_layer[s] <= 0:
            return caps[s]
        first = (t - extra[s]) / (per_layer[s] + recomputed[s])  # as if every layer were recomputed
        if first <= recompute_layers:
            return min(caps[s], int(first + 1e-9))
        return min(caps[s], recompute_layers + int((t - seconds(s, recompute_layers)) / per_layer[s] + 1e-9))

    def most(t: float) -> list[int]:
        return [fitting(s, t) for s in range(pp)]

    candidates = sorted({seconds(s, n) for s in range(pp) for n in range(1, caps[s] + 1)})
    low, high = 0, len(candidates) - 1
    while low < high:  # the smallest candidate time at which every stage fits its one layer and all layers fit
        mid = (low + high) // 2
        counts = most(candidates[mid])
        if min(counts) >= 1 and sum(counts) >= num_layers:
            high = mid
        else:
            low = mid + 1
    counts = most(candidates[low])
    while sum(counts) > num_layers:  # give back layers from the slowest stages first
        s = max((s for s in range(pp) if counts[s] > 1), key=lambda s: (seconds(s, counts[s]), s))
        counts[s] -= 1
    return counts


def share_microbatches(period: list[float], fill: list[float], total: int, step: int = 1, least: int = 1) -> list[int]:
    """Micro-batches per replica, `total` in all, each `least` plus a multiple of `step`, minimising the latest
    replica's estimated end fill[d] + m_d x period[d]: each `step` goes in turn to the replica that would end it
    first (greedy is optimal for the largest of increasing lines; ties to the lower replica). ValueError where
    `total` cannot be so shared."""
    left = total - least * len(period)
    if left < 0 or left % step:
        raise ValueError(f"{total} micro-batches cannot be shared among {len(period)} replicas in counts of "
                         f"{least} plus multiples of {step}")
    counts = [least] * len(period)
    for _ in range(left // step):
        d = min(range(len(period)), key=lambda d: (fill[d] + (counts[d] + step) * period[d], d))
        counts[d] += step
    return counts


def estimated_ms(stage_s: list[float], microbatches: int) -> float:
    """A 1F1B step from per-micro-batch stage times: M x slowest + every other stage once."""
    slowest = max(stage_s)
    return 1e3 * (microbatches * slowest + sum(stage_s) - slowest)


_TWO_STAGES = {"mirrored": "stage i and its mirror, stage pp-1-i", "v": "stages i and 2pp-1-i, as a V"}
"""What each rank runs under the schedules that place two stages on a rank (workload.schedule.Placement)."""


class Planner:
    """Plans one heterogeneous scenario (see the module docstring)."""

    def __init__(self, sc: ScenarioConfig):
        if sc.workload is None:
            raise ValueError("workload: required to plan a pipeline placement")
        par = sc.workload.parallelism
        scheduler = SCHEDULERS.get(par.pipeline_schedule)
        if scheduler is not None and scheduler.placement is not INTERLEAVED:
            raise ValueError(f"workload.parallelism.pipeline_schedule: {par.pipeline_schedule} runs two model stages "
                             f"on each rank ({_TWO_STAGES[scheduler.placement.kind]}), which the heterogeneous "
                             "planner does not model: it places and splits one stage per rank, so it plans 1f1b and "
                             "zb_h1 pipelines only")
        if not one_stage_per_rank(par):
            raise ValueError(f"workload.parallelism.{par.vpp_named_by}: vpp = {par.vpp}; the heterogeneous planner "
                             "splits plain 1F1B pipelines (vpp 1)")
        if par.pp < 2:
            raise ValueError("workload.parallelism.pp: 1: there is no pipeline to place on node groups")
        self.sc = sc
        self.costs = unit_costs(sc)
        self.kinds = _layer_units(sc)
        self.mtp_kinds = _layer_units(sc, mtp=True)  # they follow the decoder on the last stage
        self.block = recomputed_block(sc)  # the first layers of each stage that recompute (None: all or none)
        train = sc.workload.training
        self.num_gpus = train.num_gpus or sc.datacenter.num_gpus
        self.dp = par.data_parallel(self.num_gpus)
        self.microbatches = train.global_batch_size // (train.micro_batch_size * self.dp)
        groups = sc.datacenter.groups
        self.twin = [next(h.index for h in groups if (h.node, h.scale_up, h.nic) == (g.node, g.scale_up, g.nic))
                     for g in groups]  # each group's first of the same nodes, scale-up and NIC: interchangeable

    def plan_of(self, stage_groups: StageGroups, caps: list[int] | None = None) -> Plan | None:
        """A placement's best split by estimate (memory not checked), or None if it cannot hold the layers. A stage
        whose replicas sit on several groups is split for the slowest of them."""
        num_layers = len(self.kinds)
        pp = len(stage_groups)
        costs = [self._slowest(g) for g in stage_groups]
        per_layer = [self._per_layer(c) for c in costs]
        extra = [0.0] * pp
        extra[0] += costs[0].embedding
        extra[-1] += self._after_decoder(costs[-1])
        recomputed = [self._per_layer(c, recomputed=True) for c in costs] if self.block else None
        layers = split_layers(per_layer, extra, num_layers, caps, recomputed, self.block or 0)
        if layers is None:
            return None
        return self._estimated(stage_groups, tuple(layers))

    def _slowest(self, groups: int | tuple[int, ...]) -> UnitCosts:
        """The unit costs of the slowest of a stage's groups (by a layer's mean cost; the first of equals)."""
        if isinstance(groups, int):
            return self.costs[groups]
        return self.costs[max(sorted(set(groups)), key=lambda g: self._per_layer(self.costs[g]))]

    def replica_groups(self, stage_groups: StageGroups) -> list[tuple[int, ...]]:
        """Each data-parallel replica's node group at every stage."""
        rows = [g if isinstance(g, tuple) else (g,) * self.dp for g in stage_groups]
        return [tuple(row[d] for row in rows) for d in range(self.dp)]

    def _after_decoder(self, costs: UnitCosts) -> float:
        """What the last stage runs after its decoder layers: the multi-token-prediction layers and the LM head."""
        return costs.head + sum(costs.layers[kind] for kind in self.mtp_kinds)

    def _per_layer(self, costs: UnitCosts, recomputed: bool = False) -> float:
        """A layer's mean cost (each kind of layer as many as the model has), or with `recomputed` what its
        recomputation adds under recompute_num_layers."""
        table = costs.recomputed if recomputed else costs.layers
        return sum(table[kind] * n for kind, n in Counter(self.kinds).items()) / len(self.kinds)

    def _stage_seconds(self, groups: tuple[int, ...], layers: tuple[int, ...]) -> list[float]:
        """Each stage's seconds per micro-batch on the given group per stage, with its exact layer kinds."""
        stage_s, first = [], 0
        for s, (g, n) in enumerate(zip(groups, layers, strict=True)):
            kinds = Counter(self.kinds[first:first + n])
            first += n
            c = self.costs[g]
            t = sum(c.layers[kind] * count for kind, count in kinds.items())
            t += c.embedding if s == 0 else 0.0
            last = s == len(layers) - 1
            t += self._after_decoder(c) if last else 0.0
            if self.block:  # the stage's first layers' forwards again (its multi-token-prediction layers follow)
                held = self.kinds[first - n:first] + (self.mtp_kinds if last else [])
                t += sum(c.recomputed[kind] for kind in held[:self.block])
            stage_s.append(t)
        return stage_s

    def _estimated(self, stage_groups: StageGroups, layers: tuple[int, ...], label: str = "",
                   shares: tuple[int, ...] | None = None) -> Plan:
        """A placement, split and shares' estimate: the slowest replica's step."""
        replicas = self.replica_groups(stage_groups)
        seconds = {groups: self._stage_seconds(groups, layers) for groups in set(replicas)}
        counts = shares or (self.microbatches,) * self.dp
        stage_s = [max(seconds[r][s] for r in replicas) for s in range(len(layers))]
        step = max(estimated_ms(seconds[r], m) for r, m in zip(replicas, counts, strict=True))
        return Plan(stage_groups, layers, tuple(1e3 * t for t in stage_s), step, fits=True, label=label,
                    dp_shares=shares)

    def replica_lines(self, plan: Plan) -> tuple[list[float], list[float]]:
        """(period, fill) of each replica, in seconds: its estimated step is fill + micro-batches x period (1F1B:
        its slowest stage per micro-batch, and every other stage once)."""
        seconds = [self._stage_seconds(r, plan.layers_per_stage) for r in self.replica_groups(plan.stage_groups)]
        return [max(t) for t in seconds], [sum(t) - max(t) for t in seconds]

    def with_shares(self, plan: Plan, scale: list[float] | None = None) -> Plan | None:
        """The plan with each replica's micro-batches shared by its speed (module docstring, step 5), its memory
        checked; None where every replica runs on the same GPUs, or the shares come out even. `scale`: each
        replica's estimate multiplied by it (calibrated on a replay, `calibration`)."""
        if len(set(self.replica_groups(plan.stage_groups))) == 1:
            return None
        period, fill = self.replica_lines(plan)
        if scale is not None:
            period, fill = [p * k for p, k in zip(period, scale, strict=True)], [f * k for f, k in zip(fill, scale,
                                                                                                     strict=True)]
        step, least = microbatch_steps(self.sc.workload.parallelism)
        shares = share_microbatches(period, fill, self.microbatches * self.dp, step, least)
        if len(set(shares)) == 1:
            return None
        label = plan.label.removesuffix(", even shares") + (", dp shares" if scale is None else
                                                            ", dp shares by replay")
        shared = self._estimated(plan.stage_groups, plan.layers_per_stage, label, tuple(shares))
        return replace(shared, fits=estimate_memory(self.scenario(shared)).fits)

    def calibration(self, plan: Plan, ends: list[float]) -> list[float]:
        """Each replica's replayed end of its last micro-batch (`ends`, seconds) over its estimated end under the
        plan's shares: what with_shares scales the estimate by."""
        period, fill = self.replica_lines(plan)
        counts = plan.dp_shares or (self.microbatches,) * self.dp
        return [end / (f + m * p) for end, p, f, m in zip(ends, period, fill, counts, strict=True)]

    def replica_placement(self) -> StageGroups | None:
        """Every replica's whole pipeline on one node group: the groups take as many replicas as their GPUs hold,
        the fastest GPU first (a layer's mean cost; the first written of equals), so that the order the groups are
        written in does not choose which run, spread so that the pattern repeats as often as it can (a fold then
        stands a replica for one of its own group a period away); None with one replica, with replicas that are
        not whole nodes, or where one group takes them all."""
        par, dc = self.sc.workload.parallelism, self.sc.datacenter
        per_replica = self.num_gpus // self.dp
        if self.dp < 2 or (per_replica // par.pp) % dc.gpus_per_node:
            return None
        dtype = self.sc.workload.training.dtype
        fastest = sorted(range(len(dc.groups)), key=lambda g: (self._per_layer(self.costs[g]), g))
        counts, left = dict.fromkeys(fastest, 0), self.dp
        for g in fastest:
            counts[g] = min(dc.groups[g].num_gpus // per_replica, left) if dc.groups[g].gpu.has_peak(dtype) else 0
            left -= counts[g]
        used = [c for c in counts.values() if c]
        if left or len(used) < 2:
            return None
        repeats = math.gcd(*used)
        row = tuple(g for g, c in counts.items() for _ in range(c // repeats)) * repeats
        return (row,) * par.pp

    def scenario(self, plan: Plan) -> ScenarioConfig:
        """The scenario running a plan."""
        data = self.sc.as_data()
        data["workload"]["parallelism"].update(AUTOMATIC_SPLIT, layers_per_stage=list(plan.layers_per_stage))
        data["workload"]["training"]["stage_groups"] = plan.stage_groups_config
        data["workload"]["training"].pop("dp_shares", None)
        if plan.dp_shares is not None:
            data["workload"]["training"]["dp_shares"] = list(plan.dp_shares)
        return parse_scenario(data, "plan")

    def fitted(self, stage_groups: StageGroups) -> Plan | None:
        """A placement's best split that the memory model says fits on every stage's GPU, or None."""
        caps = [len(self.kinds)] * len(stage_groups)
        while True:
            plan = self.plan_of(stage_groups, caps)
            if plan is None:
                return None
            report = estimate_memory(self.scenario(plan))
            over = [s.stage for s in report.stages if not s.fits]
            if not over:
                return plan
            for s in over:
                caps[s] = plan.layers_per_stage[s] - 1

    def baseline(self) -> Plan:
        """The scenario as written: its placement and its split."""
        sc = self.sc
        placement = sc.placement().group.reshape(sc.workload.parallelism.pp, self.dp, -1)[:, :, 0]
        stage_groups = tuple(int(row[0]) if len(set(row.tolist())) == 1 else tuple(map(int, row))
                             for row in placement)
        layers = tuple(len(range_) for range_ in _stage_layers(sc))
        shares = sc.workload.training.dp_shares
        plan = self._estimated(stage_groups, layers, "as written", None if shares is None else tuple(shares))
        return replace(plan, fits=estimate_memory(sc).fits)

    def run(self, simulate_best: int = 2, simulate: Callable[[ScenarioConfig], Simulation] = simulate_scenario,
            shares: bool = False) -> PlanResult:
        """Solve every placement, simulate the best `simulate_best` that fit (0: none) and the scenario as written,
        and return the fastest simulated that fits in memory (a ValueError saying what it needs where none does).
        `simulate`: a scenario's simulation (default: the replay).
        `shares`: also place every replica whole on a group, and give each replica of a placement that runs
        replicas on different GPUs its share of micro-batches (module docstring, step 5; a ValueError naming the
        setting where the scenario's sharding cannot take shares). A cluster whose groups cannot each hold whole
        stages is refused after the scenario as written is simulated, its step in the message (`straddling`), but
        with `shares` where every replica lies whole on a group: that placement is planned, without stage-by-stage
        ones."""
        par = self.sc.workload.parallelism
        if shares and (par.ep > 1 or par.fsdp != "none"):
            setting, what = (f"ep: {par.ep}", "expert parallelism") if par.ep > 1 else (f"fsdp: {par.fsdp}", "FSDP")
            raise ValueError(f"workload.parallelism.{setting}: --dp-shares gives the data-parallel replicas uneven "
                             f"micro-batch counts (training.dp_shares), which {what} does not allow (its collectives "
                             "join the replicas every micro-batch); leave out --dp-shares")
        per_stage, room = whole_stages(self.sc)
        whole = self.replica_placement() if shares else None
        if sum(room) < par.pp and whole is None:
            raise ValueError(self.straddling(per_stage, room, self._replayed(self.baseline(), self.sc, simulate)))
        orders = every_placement(stage_counts(self.sc)) if sum(room) >= par.pp else []
        plans = [p for p in (self.plan_of(order) for order in orders) if p is not None]
        plans.sort(key=lambda p: (p.estimated_ms, p.stage_groups, p.layers_per_stage))
        baseline = self.baseline()
        chosen = [replace(p, label=f"plan {i + 1}")
                  for i, p in enumerate(self.best_fitted(plans, simulate_best, baseline))]
        if whole is not None and (fitted := self.fitted(whole)) is not None and self.same_as(fitted) not in {
                self.same_as(p) for p in (baseline, *chosen)}:
            chosen.append(replace(fitted, label="replicas by group, even shares"))
        replayed = {self.same_as(baseline): self._replayed(baseline, self.sc, simulate)}
        for plan in chosen:
            replayed.setdefault(self.same_as(plan), self._replayed(plan, self.scenario(plan), simulate))
        if shares:
            self._replay_shares(replayed, simulate)
        simulated = sorted(replayed.values(), key=lambda p: (p.simulated_ms, p.label != "as written", p.label))
        best = next((p for p in simulated if p.fits), None)
        if best is None:
            raise ValueError(self.none_fits(simulated[0], len(plans)))
        groups = tuple(f"{g.name} ({g.gpu.name})" for g in self.sc.datacenter.groups)
        return PlanResult(groups, replayed[self.same_as(baseline)], best, len(plans), tuple(simulated))

    def best_fitted(self, plans: list[Plan], count: int, baseline: Plan) -> list[Plan]:
        """The `count` best placements by estimate once each is split to fit in memory (`fitted`), from `plans`
        sorted by their unconstrained estimate: a placement first unconstrained may lose layers to memory and fall
        behind one that fits as it is. Memory caps only slow a split's slowest stage, the step's M x slowest term,
        so the walk stops at the first placement whose unconstrained estimate is no better than the count-th
        fitted one. Plans the same but for twin groups (`same_as`) count once, and none the same as the scenario
        as written (`baseline`, simulated anyway)."""
        chosen: list[Plan] = []
        for plan in plans:
            if count == 0 or (len(chosen) >= count and plan.estimated_ms >= chosen[count - 1].estimated_ms):
                break
            fitted = self.fitted(plan.stage_groups)
            if fitted is not None and self.same_as(fitted) not in {self.same_as(c) for c in (baseline, *chosen)}:
                chosen.append(fitted)
                chosen.sort(key=lambda p: (p.estimated_ms, p.stage_groups, p.layers_per_stage))
        return chosen[:count]

    def same_as(self, plan: Plan) -> tuple:
        """What a plan runs, each group named by its first twin (`twin`): two plans differing only in which of two
        groups of the same nodes runs a stage are one (DGX H100, DGX H100, HGX H200: H200, H100, H100 twice)."""
        def twin(groups: int | tuple[int, ...]) -> int | tuple[int, ...]:
            return self.twin[groups] if isinstance(groups, int) else tuple(self.twin[g] for g in groups)

        return tuple(map(twin, plan.stage_groups)), plan.layers_per_stage, plan.dp_shares

    def straddling(self, per_stage: int, room: list[int], baseline: Plan) -> str:
        """Why a cluster whose stages must straddle node groups has no plan: the planner places every stage's GPUs
        (all its replicas) in one group, which the simulator does not need; what the scenario as written takes, and
        what would make it plannable."""
        par, dc = self.sc.workload.parallelism, self.sc.datacenter
        nodes = per_stage // dc.gpus_per_node
        return (f"workload.parallelism.pp: the heterogeneous planner places each pipeline stage's "
                f"{stage_gpus(self.sc, per_stage)} within one "
                f"node group, and these groups hold {sum(room)} of the {par.pp} stages whole "
                f"({held(self.sc, room)}), so it cannot plan this cluster, where a stage's GPUs span groups; the "
                f"simulator runs it as written ({baseline.simulated_ms:,.1f} ms per step simulated; "
                f"training.stage_groups may place each replica by hand). To plan, give each node group a multiple "
                f"of {nodes} node{'s' if nodes != 1 else ''} or use fewer GPUs per stage (a smaller tp or dp)"
                + (", or give --dp-shares to place each data-parallel replica whole on a group"
                   if self.replica_placement() is not None and par.ep == 1 and par.fsdp == "none" else ""))

    def none_fits(self, fastest: Plan, considered: int) -> str:
        """Why there is no plan: no placement simulated fits in memory; what the fastest of them needs on its
        fullest stage against that stage's GPU memory."""
        sc = self.sc if fastest.label == "as written" else self.scenario(fastest)
        peak = estimate_memory(sc).peak
        return (f"no placement fits in memory ({considered} solved, none with every stage under its GPU's memory); "
                f"the fastest simulated, {fastest.label} (stage_groups {fastest.stage_groups_config}, "
                f"layers_per_stage {list(fastest.layers_per_stage)}), needs {peak.device / GiB:,.1f} GiB on stage "
                f"{peak.stage} against its GPU's {peak.capacity / GiB:,.1f} GiB (the scenario's parallelism or "
                "recomputation must change for it to fit)")

    def _replay_shares(self, replayed: dict[tuple, Plan], simulate: Callable[[ScenarioConfig], Simulation]) -> None:
        """Step 5: each replayed placement that runs replicas on different GPUs again with shares by speed, from the
        estimate and from the estimate calibrated on its own replay (`calibration`), each simulated once."""
        for plan in list(replayed.values()):
            if plan.replica_ends is None:
                continue
            for shared in (self.with_shares(plan), self.with_shares(plan, self.calibration(plan, plan.replica_ends))):
                if shared is not None and self.same_as(shared) not in replayed:
                    replayed[self.same_as(shared)] = self._replayed(shared, self.scenario(shared), simulate)

    def _replayed(self, plan: Plan, sc: ScenarioConfig, simulate: Callable[[ScenarioConfig], Simulation]) -> Plan:
        """The plan with its simulated step, and, where its replicas run on different GPUs, when each replica's
        last micro-batch ended (the latest kernel of any micro-batch on its simulated ranks)."""
        sim = simulate(sc)
        if len(set(self.replica_groups(plan.stage_groups))) == 1:
            return replace(plan, simulated_ms=sim.result.iteration_time_ms)
        dag, par = sim.dag, sc.workload.parallelism
        work = (dag.kind == NodeKind.compute) & (dag.microbatch >= 0)
        end = np.zeros(dag.num_gpus)
        np.maximum.at(end, dag.gpu[work], sim.timeline.finish[work])
        per_replica = par.tp * par.cp
        ends = tuple(max(float(end[sim.fold.rep[per_replica * (d + self.dp * s)]]) for s in range(par.pp))
                     for d in range(self.dp))
        return replace(plan, simulated_ms=sim.result.iteration_time_ms, replica_ends=ends)


def _layer_units(sc: ScenarioConfig, mtp: bool = False) -> list[LayerUnit]:
    """Each decoder layer of the model as the estimate costs it (its kind, bf16 or not, window), in order; or, with
    `mtp`, each multi-token-prediction layer."""
    kernels, model = LayerKernels.weights_of(sc.workload), sc.workload.model
    layers = range(model.num_layers, model.all_layers) if mtp else range(model.num_layers)
    return [unit_kind(kernels, layer) for layer in layers]  # type: ignore[misc]


def _stage_layers(sc: ScenarioConfig) -> list[range]:
    """Each stage's decoder layers, as parallelism.layers_per_stage counts them: the multi-token-prediction layers
    that PipelineLayers ends the last stage with left out (they run after the decoder, `_after_decoder`)."""
    layers, decoder = PipelineLayers.of(sc.workload), sc.workload.model.num_layers
    return [range(r.start, min(r.stop, decoder)) for r in map(layers.layers_of, range(layers.pp))]
