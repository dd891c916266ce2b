"""The one-way pipeline: scenario -> programs -> DAG -> durations -> replay -> result."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from numbers import Real
from typing import get_args

import numpy as np

from .analysis.result import SimulationResult, summarize
from .collective.algorithms import asked_algorithm, find_algorithm
from .collective.common import check_message_size
from .collective.decompose import flow_count, flow_set
from .collective.metrics import bus_bandwidth_factor
from .collective.tuner import CollectivePlan
from .collective.types import CollType, coll_type
from .compute.calibration import Calibrations
from .compute.populate import ProfileUse, populate
from .config.dc import DatacenterConfig, Placement
from .config.scenario import ScenarioConfig, datacenter_argument, scenario_argument
from .config.units import check_size, format_size, memory_amounts
from .dag.builder import DAGBuilder, collective_dag
from .dag.fold import (
    Fold,
    FoldMode,
    Shifts,
    choose_fold,
    collective_shifts,
    fold_group,
    nics_consistent,
    placement_periods,
    symmetric_axes,
)
from .dag.nodes import ExecutionDAG
from .dag.size import FOOTPRINT_ENTRY_BYTES, DagSize, TooLarge, Trace, check_fits, estimate_size
from .engine.replay import Timeline, replay
from .engine.steady_state import SteadyState
from .executors import Needs, beyond_share
from .memory import MemoryReport, estimate_memory
from .network.calibration import LinkModel
from .network.topology import Topology
from .progress import SILENT, Progress
from .sampling import (
    SAMPLE_ABOVE_NODES,
    MicroBatches,
    check_mode,
    chosen_counts,
    extrapolate,
    line,
    microbatch_count,
    steady_counts,
    with_microbatches,
)
from .workload.layout import RankLayout
from .workload.megatron import MegatronTracer

SIZE_FROM_SAMPLES_ABOVE = 8
"""`auto` counts a step of at least this many times its larger sampled count's micro-batches from its two sampled
counts (size_from_samples) before tracing the whole step, which it then traces only if it runs whole. DeepSeek-V3
on 2,048 H800 at dp 32 runs 480 micro-batches per replica: its whole trace took 29 s of a strategy search's 33 s
sizing of it, its traces at 16 and 32 micro-batches 3 s. Below this ratio the whole step is traced first, as a step
run whole would be (the sampled traces would add up to (m1 + m2) / m of it: GPT-3 175B on 1,024 GPUs, 96
micro-batches sampled at 8 and 16, is run whole). The ratio is a choice, not a fit."""

TRAINING_RESHARE_WINDOW_S = 1e-6
"""A training step's flows that start or finish within 1 us of the first change since the last rate computation
share the next one (engine.replay): under a hop's latency, and on the 32-GPU FSDP rows of training.csv half the
computations for a 0.01% change in step time, measured while the window ran from each event instead, which put
computations off for up to 300 us on 128 H800 (benchmarks/bench_scenarios.py times whole runs)."""


@dataclass(frozen=True)
class Simulation:
    dag: ExecutionDAG
    timeline: Timeline
    result: SimulationResult
    topology: Topology
    fold: Fold
    memory: MemoryReport
    summary: dict[str, float] = field(default_factory=dict)  # the caller's figures of the replay (`Summary`),
    # extrapolated as the step's are where it was sampled
    profiled: dict[str, ProfileUse] = field(default_factory=dict)  # how each profiled GPU's profile served the step


Summary = Callable[[Simulation], dict[str, float]]
"""Figures a caller reads off a replay's DAG and timeline (the sweep's exposed communication by kind): a sampled step
keeps only its larger count's DAG, so simulate_step takes them from each replay and extrapolates them to the step as
its own figures are (sampling.line), each kept non-negative (sampling.extrapolate_gpu)."""


@dataclass(frozen=True)
class PlannedDag:
    """What a training step's DAG is built from (the stage programs, rank layout, network, collective plan and
    fold), before it is built: its size can be counted first (dag.size.estimate_size)."""

    programs: list
    layout: RankLayout
    topology: Topology
    plan: CollectivePlan
    fold: Fold
    fold_mode: FoldMode

    def size(self) -> DagSize:
        return estimate_size(self.programs, self.layout, self.fold, self.plan)

    def build(self) -> ExecutionDAG:
        return DAGBuilder(self.programs, self.layout, self.fold, self.plan).build()

    def why_unfolded(self) -> str:
        return _why_unfolded(self.fold, self.topology, self.fold_mode)


def plan_dag(sc: ScenarioConfig, fold_mode: FoldMode = "auto") -> PlannedDag:
    """The programs, network and fold of one iteration's DAG, not yet built."""
    check_fold_mode(fold_mode)
    wl = scenario_argument(sc, need_workload=True).workload
    dc = sc.datacenter
    num_gpus = wl.training.num_gpus or dc.num_gpus
    tracer = MegatronTracer(wl, num_gpus)
    placement = sc.placement()
    topology = Topology.from_datacenter(dc, num_gpus, placement=placement)
    plan = CollectivePlan.from_config(topology, sc.collective)
    programs = tracer.stage_programs()
    axes = symmetric_axes(programs, tracer.layout, plan.foldable) & topology.fold_axes(tracer.layout.pp > 1) \
        if topology.foldable else set()
    fold = fold_within_groups(tracer.layout, dc, placement, fold_mode, axes,
                              collective_shifts(programs, tracer.layout, plan.symmetry, topology) if axes else ())
    return PlannedDag(programs, tracer.layout, topology, plan, fold, fold_mode)


def check_collectives(sc: ScenarioConfig) -> None:
    """Unrunnable (collective.algorithms) where the scenario's fixed collective algorithm cannot run one of its
    training step's collectives on that collective's group (a type it has no decomposition of, PAT on a group with
    several GPUs a node, NVLS across NVLink domains): what the collective plan refuses when the step's DAG is built,
    found by planning the step, at the fewer micro-batches it would be sampled at (sampling.chosen_counts), and
    choosing every stage program's collectives as its size is counted (dag.size.estimate_size), without building
    it. `auto`, and an algorithm that runs every collective anywhere (Algorithm.never_refused: ring), are not
    planned."""
    algorithm = sc.collective.algorithm
    if algorithm == "auto" or find_algorithm(algorithm).never_refused:
        return
    counts = chosen_counts(sc, "auto")
    plan_dag(sc if counts is None else with_microbatches(sc, counts[0])).size()


def build_dag(sc: ScenarioConfig, fold_mode: FoldMode = "auto", memory_limit: float | None = None,
              trace: Trace = False) -> tuple[ExecutionDAG, Topology, Fold]:
    """The GPU-agnostic DAG of one iteration, and the network and fold it is meant for. With `memory_limit`
    (bytes), a DAG estimated to need more (with its trace, if `trace`) is refused before it is built
    (dag.size.TooLarge)."""
    check_memory_limit(memory_limit)
    planned = plan_dag(sc, fold_mode)
    if memory_limit is not None:
        check_fits(planned.size(), memory_limit, trace, planned.why_unfolded())
    return planned.build(), planned.topology, planned.fold


FOLD_MODES: tuple[str, ...] = get_args(FoldMode)
"""The fold modes simulate takes (`simulon simulate --expand`)."""


def check_fold_mode(mode: object, name: str = "fold_mode") -> FoldMode:
    """`mode` if it is one of FOLD_MODES, else ValueError naming them (`name`: the parameter or option given)."""
    if not isinstance(mode, str) or mode not in FOLD_MODES:
        raise ValueError(f"{name}: expected {', '.join(FOLD_MODES[:-1])} or {FOLD_MODES[-1]}, got {mode!r}")
    return mode  # type: ignore[return-value]


def check_memory_limit(limit: object, name: str = "memory_limit") -> float | None:
    """`limit` in bytes (None: no limit) if it is a positive number, at most an exabyte (as `--max-memory` is
    checked: config.units.check_size), or 0 (what dag.size.available_memory reads on a full machine: every run is
    then refused up front, saying what it needs), else ValueError."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, Real):
        raise ValueError(f"{name}: expected a number of bytes or None, got {limit!r}")
    if limit == 0:
        return 0.0
    try:
        return check_size(float(limit))
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def fold_within_groups(layout: RankLayout, dc: DatacenterConfig, placement: Placement, fold_mode: FoldMode,
                       axes: set[str], shifts: Shifts = ()) -> Fold:
    """The fold choose_fold makes of `axes`, or of fewer of them where it would stand one GPU for a GPU of
    another node group (another GPU type, NVLink or NIC): on a heterogeneous datacenter data-parallel replicas
    fold where their stages sit on the same groups (pipeline outermost, Megatron order), tensor-parallel peers
    within their node, replicas alternating groups a period of the groups apart (dag.fold.placement_periods)."""
    if not placement.uniform:
        shifts = (*shifts, *placement_periods(layout, placement.group))
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
             memory_limit: float | None = None, trace: Trace = False, micro_batches: MicroBatches = "all",
             samples_first_above: float | None = None) -> Simulation:
    """Simulate one training iteration, telling `progress` each stage and how far the replay has got; a run
    estimated to need more than `memory_limit` bytes (with a trace at `trace`'s detail, dag.size.Trace) is refused
    before it is built (see build_dag).

    `micro_batches` (sampling.MicroBatches): "all" replays every micro-batch; "sample" or a pair of counts replays
    two smaller counts and extrapolates (sampling.py: the result says so, the DAG and timeline are the larger
    count's); "auto" replays every one unless the full DAG would not fit `memory_limit` or has more than
    sampling.SAMPLE_ABOVE_NODES nodes, and then samples. `sc` is a ScenarioConfig with a workload block
    (config.scenario.scenario_argument: TypeError, ValueError)."""
    scenario_argument(sc, need_workload=True)
    progress.stage("tracing the workload and building the DAG")
    step = plan_step(sc, fold_mode, memory_limit, trace, micro_batches, samples_first_above)
    return simulate_step(sc, step, fold_mode, progress, memory_limit, trace, micro_batches)


def simulate_step(sc: ScenarioConfig, step: StepPlan, fold_mode: FoldMode = "auto", progress: Progress = SILENT,
                  memory_limit: float | None = None, trace: Trace = False, micro_batches: MicroBatches = "all",
                  figures: Summary | None = None) -> Simulation:
    """simulate's run of the step plan_step planned with the same arguments (a caller that sized the plan first,
    planned_size, runs it without planning it again), with the caller's `figures` of the step."""
    if step.counts is not None:
        return simulate_sampled(sc, step.counts, fold_mode, progress, memory_limit, trace, step.throughout,
                                step.samples, figures)
    if not fits(step.size, memory_limit, trace):  # refused: say whether sampling would fit
        check_fits(step.size, memory_limit, trace, step.planned.why_unfolded(),
                   sampling_advice(sc, fold_mode, memory_limit, trace) if micro_batches == "all" else "",
                   samples=chosen_counts(sc, "auto") is not None)
    sim = simulate_planned(sc, step.planned, progress)
    return replace(sim, summary=figures(sim)) if figures is not None else sim


@dataclass(frozen=True)
class StepPlan:
    """How simulate runs a step: whole, as `planned` (of `size`, where it was counted), or sampled at `counts`
    micro-batches, each folded throughout or not (`throughout`; None: decided on the larger count's size)."""

    planned: PlannedDag | None
    size: DagSize | None
    counts: tuple[int, int] | None = None
    throughout: bool | None = None
    samples: tuple[tuple[PlannedDag, DagSize], ...] = ()  # the counts' planned DAGs and sizes (not yet folded
    # throughout), where plan_step made them


def plan_step(sc: ScenarioConfig, fold_mode: FoldMode = "auto", memory_limit: float | None = None,
              trace: Trace = False, micro_batches: MicroBatches = "all",
              samples_first_above: float | None = None) -> StepPlan:
    """What simulate(sc, fold_mode, memory_limit=..., trace=..., micro_batches=...) builds: the decisions of
    `auto` (fold the expanded collectives, sample the micro-batches) taken on the counted sizes. `samples_first_above`:
    from how many times its larger sampled count a step is counted from its sampled counts first (None:
    SIZE_FROM_SAMPLES_ABOVE), lower where most steps planned are sampled (a strategy search's candidates); the
    decisions are the same either way, only what is traced differs. A mode, fold mode or limit simulate does not
    take is refused (ValueError: check_mode, check_fold_mode, check_memory_limit)."""
    check_fold_mode(fold_mode)
    check_memory_limit(memory_limit)
    micro_batches = check_mode(micro_batches)
    counts = chosen_counts(sc, micro_batches)
    if counts is not None and micro_batches != "auto":
        return StepPlan(None, None, counts)
    ratio = SIZE_FROM_SAMPLES_ABOVE if samples_first_above is None else samples_first_above
    if counts is not None and microbatch_count(sc) >= ratio * counts[1]:
        sampled = sampled_from_samples(sc, counts, fold_mode, memory_limit, trace)
        if sampled is not None:
            return sampled
    planned = plan_dag(sc, fold_mode)
    size = planned.size() if counts is not None or memory_limit is not None else None
    if size is not None and too_large(size, memory_limit, trace, counts is not None):
        planned, size = folded_throughout(planned, size)
    if counts is not None and too_large(size, memory_limit, trace, sampling=True):
        return StepPlan(None, None, counts, not planned.fold.expand_spread)
    if size is not None and too_large(size, memory_limit, trace, sampling=micro_batches == "auto"):
        planned, size = in_steady_state(planned, size)
    return StepPlan(planned, size)


def sampled_from_samples(sc: ScenarioConfig, counts: tuple[int, int], fold_mode: FoldMode,
                         memory_limit: float | None, trace: Trace) -> StepPlan | None:
    """plan_step's sampled plan, decided on the whole step's sizes counted from the sampled counts
    (size_from_samples) without tracing it; None where the step runs whole (plan_step then plans it whole)."""
    real = microbatch_count(sc)
    samples = tuple(sampled_plan(sc, count, fold_mode, throughout=False) for count in counts)
    size = size_from_samples([size for _, size in samples], counts, real)
    if not too_large(size, memory_limit, trace, sampling=True):
        return None
    fold = samples[0][0].fold
    if folds_further(fold):  # as folded_throughout, on the counted sizes
        trials = [replace(planned, fold=planned.fold.folded_throughout()).size() for planned, _ in samples]
        trial_size = size_from_samples(trials, counts, real)
        if trial_size.nodes < size.nodes:
            fold, size = fold.folded_throughout(), trial_size
    if not too_large(size, memory_limit, trace, sampling=True):
        return None
    return StepPlan(None, None, counts, not fold.expand_spread, samples)


def size_from_samples(sizes: Sequence[DagSize], counts: tuple[int, int], real: int) -> DagSize:
    """The size of a step of `real` micro-batches from its sizes at counts[0] and counts[1]: every micro-batch adds
    the same nodes, flows and footprint entries (its kernels, collectives and pipeline sends), so each is a line in
    the count, exactly (tests/sampling/test_size_from_samples.py counts every schedule both ways); the simulated
    GPUs and the largest expansion template do not change."""
    first, second = sizes

    def at(field: str) -> int:
        return round(line(getattr(first, field), getattr(second, field), counts, real))

    return DagSize(at("nodes"), at("flows"), second.simulated_gpus, at("footprint_entries"),
                   max(first.template_flows, second.template_flows))


def step_size(sc: ScenarioConfig, fold_mode: FoldMode = "auto", micro_batches: MicroBatches = "all",
              samples_first_above: float | None = None, memory_limit: float | None = None) -> DagSize:
    """The largest DAG simulate(sc, fold_mode, memory_limit=memory_limit, micro_batches=micro_batches) builds,
    counted without building it: what a strategy search's replays are admitted by (search/run.py)."""
    step = plan_step(sc, fold_mode, memory_limit, micro_batches=micro_batches, samples_first_above=samples_first_above)
    return planned_size(sc, step, fold_mode, memory_limit)


def planned_size(sc: ScenarioConfig, step: StepPlan, fold_mode: FoldMode = "auto",
                 memory_limit: float | None = None) -> DagSize:
    """The largest DAG simulate_step builds of `step` (planned by plan_step with the same arguments): the whole
    step's, or a sampled step's larger count's, in steady state where simulate_sampled runs it so."""
    if step.counts is None:
        return step.size if step.size is not None else step.planned.size()
    throughout = sampled_throughout(sc, step.counts, fold_mode, memory_limit, False) if step.throughout is None \
        else step.throughout
    larger = sampled_plan(sc, step.counts[1], fold_mode, throughout, step.samples[1] if step.samples else None)
    return larger[1] if fits(larger[1], memory_limit, False) else in_steady_state(*larger)[1]


def over_share(sc: ScenarioConfig, step: StepPlan, fold_mode: FoldMode, memory_limit: float | None,
               share: float | None) -> Needs | None:
    """Needs (executors.in_shares) where `step`, planned within `memory_limit`, needs more than `share`, the bytes it
    may take beside the simulations running with it (None: the whole limit); else None, and it runs now."""
    return beyond_share(lambda: planned_size(sc, step, fold_mode, memory_limit).memory_bytes(), memory_limit, share)


def folded_throughout(planned: PlannedDag, size: DagSize) -> tuple[PlannedDag, DagSize]:
    """The planned DAG with no collective expanded over every GPU (dag.fold.Fold.folded_throughout), where that
    makes it smaller: what a step takes when its expanded collectives would not fit, or would push it past the node
    budget of sampling, before its micro-batches are sampled."""
    if not folds_further(planned.fold):
        return planned, size
    trial = replace(planned, fold=planned.fold.folded_throughout())
    trial_size = trial.size()
    return (trial, trial_size) if trial_size.nodes < size.nodes else (planned, size)


def folds_further(fold: Fold) -> bool:
    """Whether folding throughout changes `fold`: it folds something and still expands the collectives that spread."""
    return bool(fold.axes) and fold.expand_spread


def in_steady_state(planned: PlannedDag, size: DagSize) -> tuple[PlannedDag, DagSize]:
    """The planned DAG with its rings of dag.fold.STEADY_RING_MEMBERS members or more in steady state
    (dag.fold.Fold.with_steady_rings), where that makes it smaller: what a step still too large once folded
    throughout and sampled where it can be takes (a ZeRO-3 step over hundreds of GPUs, few micro-batches)."""
    if planned.fold.steady_rings:
        return planned, size
    trial = replace(planned, fold=planned.fold.with_steady_rings())
    trial_size = trial.size()
    return (trial, trial_size) if trial_size.nodes < size.nodes else (planned, size)


def simulate_planned(sc: ScenarioConfig, planned: PlannedDag, progress: Progress = SILENT) -> Simulation:
    """Build, time and replay a planned DAG."""
    dag = planned.build()
    progress.stage(f"timing {dag.num_nodes:,} nodes' kernels")
    placement = sc.placement()
    profiled = populate(dag, [g.gpu for g in placement.groups], sc.workload.training.dtype, placement.group)
    return replace(run_populated(sc, dag, planned.topology, planned.fold, progress=progress), profiled=profiled)


def simulate_sampled(sc: ScenarioConfig, counts: tuple[int, int], fold_mode: FoldMode = "auto",
                     progress: Progress = SILENT, memory_limit: float | None = None,
                     trace: Trace = False, throughout: bool | None = None,
                     samples: Sequence[tuple[PlannedDag, DagSize]] = (),
                     figures: Summary | None = None) -> Simulation:
    """Replay the step at counts[0] and counts[1] micro-batches, one after the other (only the first's summary
    kept), and extrapolate to its real count (sampling.extrapolate). The Simulation's DAG, timeline and trace are
    the larger count's; its memory report is the real step's. `throughout`: both counts fold every collective
    (folded_throughout); None decides it on the larger count's size. `samples`: the counts' planned DAGs and sizes
    where plan_step made them (else they are made here). Where the larger count's DAG still would not fit
    `memory_limit`, both counts run their rings of dag.fold.STEADY_RING_MEMBERS members or more in steady state
    (in_steady_state), as a whole step too large does: the same approximation in both keeps the per-micro-batch
    difference the extrapolation reads (a data-parallel ring of 128 GPUs over two NVLink domains, which does not
    fold, is most of such a DAG: DeepSeek-V3 on 256 GB300s goes from 38.7 to 5.2 GB at 6 micro-batches)."""
    real = microbatch_count(sc)
    if throughout is None:
        throughout = sampled_throughout(sc, counts, fold_mode, memory_limit, trace)
    made = list(samples) if samples else [None, None]
    larger = sampled_plan(sc, counts[1], fold_mode, throughout, made[1])
    steady = not fits(larger[1], memory_limit, trace)  # both counts' long rings in steady state, or neither
    results, summaries, sim = [], [], None
    for index, count in enumerate(counts):
        sim = None  # the previous count's DAG goes before the next is built
        progress.stage(f"sampling {count} of {real} micro-batches: tracing and building the DAG")
        planned, size = larger if index == 1 else sampled_plan(sc, count, fold_mode, throughout, made[0])
        if steady:
            planned, size = in_steady_state(planned, size)
        if memory_limit is not None:
            check_fits(size, memory_limit, trace,
                       f"{planned.why_unfolded()} (sampling {count} of the step's {real} micro-batches)",
                       samples=counts != steady_counts(sc.workload.parallelism))  # sample's own counts: no fewer
        sim = simulate_planned(with_microbatches(sc, count), planned, progress)
        results.append(sim.result)
        summaries.append(figures(sim) if figures is not None else {})
    train = sc.workload.training
    result = extrapolate(results[0], results[1], counts, real, train.global_batch_size * train.sequence_length,
                         sc.placement().peak_flops(train.dtype))
    summary = {name: max(line(summaries[0][name], value, counts, real), 0.0) for name, value in summaries[1].items()}
    return replace(sim, result=result, memory=estimate_memory(sc), summary=summary)


def sampled_throughout(sc: ScenarioConfig, counts: tuple[int, int], fold_mode: FoldMode,
                       memory_limit: float | None, trace: Trace) -> bool:
    """Whether both sampled counts fold every collective: decided on the larger count, for both."""
    larger = plan_dag(with_microbatches(sc, counts[1]), fold_mode).size()
    return too_large(larger, memory_limit, trace, sampling=True)


def sampled_plan(sc: ScenarioConfig, count: int, fold_mode: FoldMode, throughout: bool,
                 made: tuple[PlannedDag, DagSize] | None = None) -> tuple[PlannedDag, DagSize]:
    """The planned DAG of the step at `count` micro-batches, and its size (from `made`, that count's planned DAG
    and size before folding throughout, where plan_step made them)."""
    if made is None:
        planned = plan_dag(with_microbatches(sc, count), fold_mode)
        made = planned, planned.size()
    return folded_throughout(*made) if throughout else made


def too_large(size: DagSize, memory_limit: float | None, trace: Trace, sampling: bool) -> bool:
    """Whether `auto` shrinks a step of `size` (folds its expanded collectives, samples its micro-batches): it
    would not fit `memory_limit`, or, where its micro-batches may be sampled, it has more than SAMPLE_ABOVE_NODES
    nodes."""
    return not fits(size, memory_limit, trace) or (sampling and size.nodes > SAMPLE_ABOVE_NODES)


def fits(size: DagSize | None, memory_limit: float | None, trace: Trace) -> bool:
    """Whether a DAG of `size` fits `memory_limit` bytes (None: no limit)."""
    return memory_limit is None or size is None or size.memory_bytes(trace) <= memory_limit


def sampling_advice(sc: ScenarioConfig, fold_mode: FoldMode, memory_limit: float, trace: Trace) -> str:
    """For a refusal of the whole step: that sampling its micro-batches would fit, and what it needs ("" if it
    would not, or cannot sample)."""
    counts = chosen_counts(sc, "auto")  # None where the step cannot be sampled smaller
    if counts is None:
        return ""
    need = plan_dag(with_microbatches(sc, counts[1]), fold_mode).size().memory_bytes(trace)
    if need > memory_limit:
        return ""
    return (f"--micro-batches auto replays {counts[0]} and {counts[1]} of its {microbatch_count(sc)} micro-batches "
            f"and extrapolates, in about {need / 1e9:,.1f} GB; ")


def run_populated(sc: ScenarioConfig, dag: ExecutionDAG, topology: Topology, fold: Fold,
                  share_sms: bool = True, progress: Progress = SILENT) -> Simulation:
    """Replay a scenario's populated DAG and summarise it; `share_sms`: compute kernels lose the SMs of the
    collectives running beside them (engine/replay.py)."""
    placement, train = sc.placement(), sc.workload.training
    progress.stage("replaying", total=dag.num_nodes, unit="nodes")
    timeline = replay(dag, topology, fold, sm_counts(placement) if share_sms else 0,
                      TRAINING_RESHARE_WINDOW_S, progress.advance)
    tokens = train.global_batch_size * train.sequence_length
    result = summarize(dag, timeline, tokens, placement.peak_flops(train.dtype),
                       placement.per_rank(lambda group: group.gpu.name))
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
    tuner_rule: int | None = None  # the platform's tuner rule that chose it (1 for the first; None: none did)


REPLAY_MAX_FLOWS = 20_000
"""A lone collective with more flows than this is estimated in steady state rather than replayed (a cost
bound: replay takes about 10 us per flow)."""


COLLECTIVE_FLOW_BYTES = 560.0
"""Peak resident bytes per flow of a lone collective's flow set, as collective_sweep builds it (its expansion
template, the DAG or steady-state estimate made from it), over an import of simulon: measured on `simulon
collective` all-to-alls of 1 MiB over DGX H100 clusters, 1,024 GPUs (1.05 million flows, 565 MB) and 2,048 GPUs
(4.19 million flows, 1.96 GB): 540 and 467 bytes a flow, rounded up."""


COLLECTIVE_FIXED_BYTES = 125e6
"""Bytes a lone collective's simulation takes whatever its flows, over an import of simulon: the peak RSS of
`/usr/bin/time -f %M simulon collective` on an all-to-all of 1 MiB over 8 DGX H100 nodes (4,032 flows, replayed by
the compiled engine, whose compilation is most of it), 177.0 MB, less `python -c "import simulon.cli.app"`'s 55.4
MB, rounded up. Smaller runs (4 nodes: 68.6 MB in all) take less; the 560 bytes a flow come on top."""


def check_sweep_fits(ctype: CollType, groups: Sequence[tuple[int, ...]], sizes: Sequence[float],
                     plan: CollectivePlan, memory_limit: float | None) -> None:
    """Refuse (dag.size.TooLarge), before anything is built, a sweep whose largest collective's flows would need
    more than `memory_limit` bytes (None: no limit), its flows counted as collective_sweep builds them
    (decompose.flow_count): an all-to-all's grow with the square of its group (32,768 GPUs: a billion flows a
    channel), a tree's with the group times its chunks (131,072 GPUs at 1 GiB: 67 million), a ring's period with
    the group."""
    if memory_limit is None:
        return
    need, flows, size = sweep_need(ctype, groups, sizes, plan)
    if need <= memory_limit:
        return
    need_text, limit_text = memory_amounts(need, memory_limit)
    raise TooLarge(f"{ctype.name} of {format_size(size)} over {len(groups[0]):,} GPUs"
                   f"{f' ({len(groups)} groups)' if len(groups) > 1 else ''} makes {flows:,} flows, which need about "
                   f"{need_text}, and {limit_text} are available",
                   "simulate a smaller group (--group) or raise the limit with --max-memory")


def sweep_need(ctype: CollType, groups: Sequence[tuple[int, ...]], sizes: Sequence[float],
               plan: CollectivePlan) -> tuple[float, int, float]:
    """(bytes, flows, message size) of a sweep's largest collective, its flows counted as collective_sweep builds
    them (decompose.flow_count)."""
    worst = (0.0, 0, 0.0)
    spread = plan.topology.connection_entries(1, True)  # a part's connections, hashed apart above the leaves
    for size in sizes:
        choice = plan.choose(ctype, groups[0], size)
        flows = sum(flow_count(ctype, plan.shape(g), size, choice.channels, choice.algorithm, choice.protocol,
                               one_period=True, chunk_bytes=choice.chunk_bytes) for g in groups)
        worst = max(worst, (COLLECTIVE_FLOW_BYTES * flows + FOOTPRINT_ENTRY_BYTES * spread * flows, flows, size))
    bytes_needed, flows, size = worst
    return COLLECTIVE_FIXED_BYTES + bytes_needed, flows, size


def check_rank(rank: object, num_gpus: int) -> int:
    """`rank` as an int if it names one of the datacenter's `num_gpus` GPUs, else ValueError."""
    try:
        if isinstance(rank, bool):
            raise TypeError
        number = operator.index(rank)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"rank {rank!r} is not a whole number") from None
    if not 0 <= number < num_gpus:
        raise ValueError(f"rank {number} is outside the datacenter's {num_gpus} GPUs (0-{num_gpus - 1})")
    return number


def check_group(group: object, num_gpus: int, written: str | None = None) -> tuple[int, ...]:
    """The ranks of a collective's `group` (as `written`, where the user wrote it as text), each a GPU of the
    datacenter's `num_gpus` (check_rank), none twice, at least two; ValueError otherwise."""
    try:
        ranks = tuple(check_rank(r, num_gpus) for r in group)  # type: ignore[attr-defined]
    except TypeError:
        raise ValueError(f"a group is a sequence of ranks, got {group!r}") from None
    if len(set(ranks)) != len(ranks):
        twice = min(r for r in ranks if ranks.count(r) > 1)
        raise ValueError(f"rank {twice} appears twice in {f'the group {ranks}' if written is None else repr(written)}")
    if len(ranks) < 2:
        raise ValueError("a collective needs at least two ranks")
    return ranks


def sweep_plan(dc: DatacenterConfig, ctype: CollType | str, group: Sequence[int], sizes: Sequence[float],
               algorithm: str | None = None, channels: int | None = None, protocol: str = "auto",
               others: Sequence[tuple[int, ...]] = (), model: LinkModel | None = None
               ) -> tuple[CollType, list[tuple[int, ...]], list[float], CollectivePlan]:
    """What collective_sweep simulates, checked (its collective, its groups, the first its own, its sizes) and the
    plan that chooses each size's algorithm on the datacenter's topology."""
    ctype = coll_type(ctype)
    group = check_group(group, datacenter_argument(dc).num_gpus)
    others = [check_group(g, dc.num_gpus) for g in others]
    sizes = [check_message_size(size) for size in sizes]
    algorithm = asked_algorithm(ctype, algorithm)
    plan = CollectivePlan(Topology.from_datacenter(dc, model=model), algorithm, protocol, channels)
    return ctype, [tuple(group), *(tuple(g) for g in others)], sizes, plan


def collective_sweep(dc: DatacenterConfig, ctype: CollType | str, group: Sequence[int], sizes: Sequence[float],
                     algorithm: str | None = None, channels: int | None = None, protocol: str = "auto",
                     others: Sequence[tuple[int, ...]] = (), model: LinkModel | None = None,
                     progress: Progress = SILENT, memory_limit: float | None = None) -> list[CollectiveTiming]:
    """Simulate one collective alone on the datacenter at each size, from every member joining to the last
    finishing (replayed flow by flow, or estimated in steady state when too large); `progress` is told each
    size as it is done.

    `others`: more groups running the same collective at the same time. Identical, disjoint groups of a
    symmetric algorithm, on a fabric where every member sees the same links, are simulated through one member;
    groups that share a GPU are simulated in full, each group's traffic meeting the others' on it (fold_group).

    `dc` is a DatacenterConfig (a scenario's `.datacenter`; config.scenario.datacenter_argument: TypeError).
    `ctype` is a CollType or its name (collective.types.coll_type); the groups, sizes and collective are checked
    first (check_group, check_message_size: ValueError), and `channels` where given (collective.nccl.channel_argument:
    a whole number from 1 to NCCL's 64). `algorithm` is the one asked of this collective (None: ring, which runs an
    all-to-all or a send/receive as p2p); one NCCL_ALGO cannot steer onto an all-to-all or a
    send/receive is refused as the CLI refuses it (collective.algorithms.asked_algorithm: Unrunnable). A sweep
    whose flows would need more than `memory_limit` bytes (None: no limit) is refused before anything is built
    (check_sweep_fits: dag.size.TooLarge).
    """
    ctype, groups, sizes, plan = sweep_plan(dc, ctype, group, sizes, algorithm, channels, protocol, others, model)
    group, topology = groups[0], plan.topology
    check_sweep_fits(ctype, groups, sizes, plan, check_memory_limit(memory_limit))
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
                                              plan.shape(g), one_period=True, chunk_bytes=choice.chunk_bytes)
                                     for g in groups]
        if sum(len(fs) * fs.periods for fs in sets) > REPLAY_MAX_FLOWS:
            seconds, how = steady.estimate(sets, ctype, choice.algorithm, choice.protocol), "estimate"
        else:
            dag = collective_dag(ctype, groups, size, dc.num_gpus, plan, fold)
            dag.duration = np.zeros(dag.num_nodes)  # a lone collective has no kernels
            seconds, how = replay(dag, topology, fold).makespan, "replay"
        algbw = size / seconds / 1e9 if seconds > 0 else 0.0
        rows.append(CollectiveTiming(size, seconds * 1e6, algbw, algbw * bus_bandwidth_factor(ctype, len(group)),
                                     choice.algorithm, choice.protocol, choice.channels, how, choice.rule))
    return rows


def time_collective(dc: DatacenterConfig, ctype: CollType | str, group: Sequence[int], size: float,
                    algorithm: str | None = None, channels: int | None = None, protocol: str = "auto",
                    others: Sequence[tuple[int, ...]] = (), model: LinkModel | None = None) -> CollectiveTiming:
    """One size of collective_sweep."""
    return collective_sweep(dc, ctype, group, [size], algorithm, channels, protocol, others, model)[0]
