"""The one-way pipeline: scenario -> programs -> DAG -> durations -> replay -> result."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .analysis.result import SimulationResult, summarize
from .collective.decompose import flow_set
from .collective.metrics import bus_bandwidth_factor
from .collective.tuner import CollectivePlan
from .collective.types import CollType
from .compute.calibration import Calibrations
from .compute.populate import populate
from .config.dc import DatacenterConfig, Placement
from .config.scenario import ScenarioConfig
from .dag.builder import DAGBuilder, collective_dag
from .dag.fold import (
    Fold,
    FoldMode,
    Shifts,
    choose_fold,
    collective_shifts,
    fold_group,
    nics_consistent,
    symmetric_axes,
)
from .dag.nodes import ExecutionDAG
from .dag.size import check_fits, estimate_size
from .engine.replay import Timeline, replay
from .engine.steady_state import SteadyState
from .memory import MemoryReport, estimate_memory
from .network.calibration import LinkModel
from .network.topology import Topology
from .progress import SILENT, Progress
from .workload.layout import RankLayout
from .workload.megatron import MegatronTracer

TRAINING_RESHARE_WINDOW_S = 1e-6
"""A training step's flows that start or finish within 1 us share one rate computation: under a hop's
latency, and on the 32-GPU FSDP rows of training.csv half the computations for a 0.01% change in step time
(benchmarks/bench_scenarios.py times whole runs)."""


@dataclass(frozen=True)
class Simulation:
    dag: ExecutionDAG
    timeline: Timeline
    result: SimulationResult
    topology: Topology
    fold: Fold
    memory: MemoryReport


def build_dag(sc: ScenarioConfig, fold_mode: FoldMode = "auto", memory_limit: float | None = None,
              trace: bool = False) -> tuple[ExecutionDAG, Topology, Fold]:
    """The GPU-agnostic DAG of one iteration, and the network and fold it is meant for. With `memory_limit`
    (bytes), a DAG estimated to need more (with its trace, if `trace`) is refused before it is built
    (dag.size.TooLarge)."""
    if sc.workload is None:
        raise ValueError("the scenario has no workload block to simulate")
    dc, wl = sc.datacenter, sc.workload
    num_gpus = wl.training.num_gpus or dc.num_gpus
    tracer = MegatronTracer(wl, num_gpus)
    placement = sc.placement()
    topology = Topology.from_datacenter(dc, num_gpus, placement=placement)
    plan = CollectivePlan.from_config(topology, sc.collective)
    programs = tracer.stage_programs()
    axes = symmetric_axes(programs, tracer.layout, plan.foldable) & topology.fold_axes if topology.foldable else set()
    fold = fold_within_groups(tracer.layout, dc, placement, fold_mode, axes,
                              collective_shifts(programs, tracer.layout, plan.symmetry, topology) if axes else ())
    if memory_limit is not None:
        check_fits(estimate_size(programs, tracer.layout, fold, plan), memory_limit, trace,
                   _why_unfolded(fold, topology, fold_mode))
    dag = DAGBuilder(programs, tracer.layout, fold, plan).build()
    return dag, topology, fold


def fold_within_groups(layout: RankLayout, dc: DatacenterConfig, placement: Placement, fold_mode: FoldMode,
                       axes: set[str], shifts: Shifts = ()) -> Fold:
    """The fold choose_fold makes of `axes`, or of fewer of them where it would stand one GPU for a GPU of
    another node group (another GPU type, NVLink or NIC): on a heterogeneous datacenter data-parallel replicas
    fold where their stages sit on the same groups (pipeline outermost, Megatron order), tensor-parallel peers
    within their node."""
    for trial in (axes, *({axis} for axis in sorted(axes, reverse=True)), set()):
        fold = choose_fold(layout, dc.gpus_per_node, dc.gpus_per_nic, fold_mode, trial, shifts)
        if placement.uniform or np.array_equal(placement.group[fold.rep], placement.group):
            return fold
    raise AssertionError("an empty set of axes folds nothing")


def _why_unfolded(fold: Fold, topology: Topology, fold_mode: FoldMode) -> str:
    """Why every GPU is simulated, for a refusal's message ("" when some are folded)."""
    if fold.axes:
        return ""
    if fold_mode == "full":
        return " (--expand full simulates every GPU; auto or symmetric stand one GPU for its identical peers)"
    if not topology.foldable:
        return " (every GPU is simulated: this fabric is not folded, see Topology.foldable)"
    return ""


def simulate(sc: ScenarioConfig, fold_mode: FoldMode = "auto", progress: Progress = SILENT,
             memory_limit: float | None = None, trace: bool = False) -> Simulation:
    """Simulate one training iteration, telling `progress` each stage and how far the replay has got; a run
    estimated to need more than `memory_limit` bytes is refused before it is built (see build_dag)."""
    progress.stage("tracing the workload and building the DAG")
    dag, topology, fold = build_dag(sc, fold_mode, memory_limit, trace)
    progress.stage(f"timing {dag.num_nodes:,} nodes' kernels")
    placement = sc.placement()
    populate(dag, [g.gpu for g in placement.groups], sc.workload.training.dtype, placement.group)
    return run_populated(sc, dag, topology, fold, progress=progress)


def run_populated(sc: ScenarioConfig, dag: ExecutionDAG, topology: Topology, fold: Fold,
                  share_sms: bool = True, progress: Progress = SILENT) -> Simulation:
    """Replay a scenario's populated DAG and summarise it; `share_sms`: compute kernels lose the SMs of the
    collectives running beside them (engine/replay.py)."""
    placement, train = sc.placement(), sc.workload.training
    progress.stage("replaying", total=dag.num_nodes, unit="nodes")
    timeline = replay(dag, topology, fold, sm_counts(placement) if share_sms else 0,
                      TRAINING_RESHARE_WINDOW_S, progress.advance)
    tokens = train.global_batch_size * train.sequence_length
    result = summarize(dag, timeline, tokens, placement.peak_flops(train.dtype))
    return Simulation(dag, timeline, result, topology, fold, estimate_memory(sc))


def sm_counts(placement: Placement) -> int | np.ndarray:
    """The SM count of the job's GPU, or on GPUs of several SM counts each rank's (engine.replay)."""
    sms = np.array([Calibrations.shipped().sm_count(g.gpu) for g in placement.groups], dtype=np.int64)
    per_rank = sms[placement.group]
    return int(per_rank[0]) if len(np.unique(per_rank)) == 1 else per_rank


@dataclass(frozen=True)
class CollectiveTiming:
    """One collective of one size, reported the nccl-tests way, and how it ran."""

    size_bytes: float
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    algorithm: str
    protocol: str
    channels: int
    model: str   # replay (flow by flow) or estimate (steady state, for collectives too large to replay)


REPLAY_MAX_FLOWS = 20_000
"""A lone collective with more flows than this is estimated in steady state rather than replayed (a cost
bound: replay takes about 10 us per flow)."""


def collective_sweep(dc: DatacenterConfig, ctype: CollType, group: tuple[int, ...], sizes: Sequence[float],
                     algorithm: str = "ring", channels: int | None = None, protocol: str = "auto",
                     others: Sequence[tuple[int, ...]] = (), model: LinkModel | None = None,
                     progress: Progress = SILENT) -> list[CollectiveTiming]:
    """Simulate one collective alone on the datacenter at each size, from every member joining to the last
    finishing (replayed flow by flow, or estimated in steady state when too large); `progress` is told each
    size as it is done.

    `others`: more groups running the same collective at the same time. Identical groups of a symmetric
    algorithm, on a fabric where every member sees the same links, are simulated through one member.
    """
    topology = Topology.from_datacenter(dc, model=model)
    plan = CollectivePlan(topology, algorithm, protocol, channels)
    groups = [tuple(group), *(tuple(g) for g in others)]
    same_hardware = len(set(dc.placement().group[[m for g in groups for m in g]].tolist())) == 1
    folds = topology.foldable and len({plan.shape(g) for g in groups}) == 1 and same_hardware
    steady = SteadyState(topology)
    rows = []
    progress.stage(f"simulating {ctype.name} over {len(group)} GPUs", total=len(sizes), unit="sizes")
    for size in sizes:
        progress.advance(len(rows))
        choice = plan.choose(ctype, group, size)
        fold = Fold.identity(dc.num_gpus)
        if folds and plan.symmetry(ctype, group, size) == 1:
            candidate = fold_group(dc.num_gpus, groups)
            if nics_consistent(candidate.rep, dc.gpus_per_nic):
                fold = candidate
        sets = [] if fold.axes else [flow_set(ctype, g, size, choice.channels, choice.algorithm, choice.protocol,
                                              plan.shape(g), one_period=True) for g in groups]
        if sum(len(fs) * fs.periods for fs in sets) > REPLAY_MAX_FLOWS:
            seconds, how = steady.estimate(sets, choice.protocol), "estimate"
        else:
            dag = collective_dag(ctype, groups, size, dc.num_gpus, plan, fold)
            dag.duration = np.zeros(dag.num_nodes)  # a lone collective has no kernels
            seconds, how = replay(dag, topology, fold).makespan, "replay"
        algbw = size / seconds / 1e9 if seconds > 0 else 0.0
        rows.append(CollectiveTiming(size, seconds * 1e6, algbw, algbw * bus_bandwidth_factor(ctype, len(group)),
                                     choice.algorithm, choice.protocol, choice.channels, how))
    return rows


def time_collective(dc: DatacenterConfig, ctype: CollType, group: tuple[int, ...], size: float,
                    algorithm: str = "ring", channels: int | None = None, protocol: str = "auto",
                    others: Sequence[tuple[int, ...]] = (), model: LinkModel | None = None) -> CollectiveTiming:
    """One size of collective_sweep."""
    return collective_sweep(dc, ctype, group, [size], algorithm, channels, protocol, others, model)[0]
