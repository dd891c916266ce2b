"""A fast estimate of one strategy's step time, to rank every strategy before the best few are replayed.

Per micro-batch and pipeline stage: the kernels of every layer from the calibrated compute model (the same
model `populate` uses), plus the communication a layer cannot hide, each collective at the time simulon
gives it alone on the scenario's datacenter (`pipeline.time_collective`: replayed flow by flow, or in steady
state when large; calibrated against nccl-tests measurements), on the links of the node groups its ranks lie in
(the slowest of a stage's groups: Estimator.placed), worked out once per collective, group shape, placement
and size: tensor-parallel all-reduces (or all-gathers and reduce-scatters), those the next kernel waits for in
full, those the backward runs beside its GEMMs (the input re-gathered for the wgrads, the dgrads' reduction, as
Megatron and Transformer Engine overlap them) as far as they outlast them, those `tp_comm_overlap` pipelines with
the GEMM reading or writing them beyond that GEMM slowed whole (pipelined_exposed), and the one-float amax
all-reduces current scaling and NVFP4 run before each narrow sequence-parallel gather, and delayed scaling's amax
reductions at the end of each model chunk's forward and backward (Estimator._delayed_amax_reduction);
context-parallel key/value all-gathers, expert-parallel all-to-alls, and the pipeline send of each micro-batch's
activations.

The step: the slowest stage's m micro-batches, m x t_slowest, and the bubble of the schedule played out over every
rank's chunk times (played_pipeline: 1F1B, interleaved 1F1B, ZB-H1 and ZB-V each in the step order
workload/schedule.py gives the replay), what Narayanan et al. (SC'21, section 2.2) write (pp - 1) / vpp x t for
equal stages and Qi et al. (ICLR 2024, section 3.1) (p - 1)(T_F + T_B - T_W) for ZB-H1, played so that a stage's
heavier chunk (the embedding's, the head's) counts as the fill and drain wait for it, and so that more work never
makes the step shorter. Under 1F1B and interleaved 1F1B with Megatron's gradient buffers, the data-parallel syncs
are played out with the schedule (synced_end: each chunk's parameter all-gather before its first forward, its gradient
reduction from its last backward, the kernels beside either slowed, a send beside them sharing the NICs), and the step
counts what they add to it, and the syncs the workload does not overlap whole; elsewhere it adds the
data-parallel synchronisation the last micro-batch's backward (gradient reduce) and the first forward
(parameter all-gather) cannot hide (all of it where the workload does not overlap them) and, where the reduction
overlaps the last backward, what it adds to each other stage's last backward, which the drain runs through one after
another (Estimator._drain_syncs); plus the all-reduce
of the gradients of the word-embedding copies two stages hold (Estimator.embedding_sync) and of the weights every
tensor-parallel rank holds whole (Estimator.tp_duplicated_sync), and DualPipe's of each stage's
across the mirror pair of ranks holding it (Estimator.mirror_syncs), plus the optimizer
step and the passes over Megatron's gradient buffers (workload/data_parallel.py). ZeRO-2 and FSDP gather each unit's
weights before its forward (FSDP: and its backward) and reduce-scatter its gradients every micro-batch: the gathers
no prefetch hides are waited for (Estimator.sharded_waits; a forward's on links the reduce-scatters of the backward
before it still load), what outlasts the micro-batch is exposed, its kernels slowed beside the rest (the more where two
collectives run at once), and the last backward's reduce-scatters go on after it. DualPipe's bubble is its schedule
played out (schedule_idle).

Kernels that run beside communication lose the SMs NCCL holds (one per channel), as in the replay
(engine/replay.py): the compute a collective overlaps is stretched by sm / (sm - channels).

A layer is costed as what it runs (LayerUnit): its blocks, and the twin LayerKernels.at gives it where the number
format keeps it in bf16 or its attention looks through a sliding window.

What it leaves out (the replay has it): flows sharing links across concurrent collectives and the exact schedule's
dependencies (among them the clipping norm's all-reduce, which holds every stage's optimizer step
until the slowest stage has reduced its gradients).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from itertools import pairwise
from typing import NamedTuple

import numpy as np
from numba import njit

from ..collective.algorithms import algorithm_for
from ..collective.tuner import CollectivePlan
from ..collective.types import CollType
from ..compute.analytical import AnalyticalModel
from ..compute.calibration import Calibrations
from ..compute.profile import PROFILE_REPEATS, KernelProfile
from ..config.common import DType
from ..config.dc import DatacenterConfig
from ..config.hybrid import MIXERS, LayerKind
from ..config.number_formats import TrainingFormat
from ..config.scenario import CollectiveConfig, ScenarioConfig, scenario_argument
from ..config.workload import MegatronWorkload
from ..engine.replay import MAX_HELD_SHARE
from ..engine.replay_input import SM_BOUND
from ..network.topology import Topology
from ..pipeline import time_collective
from ..workload.data_parallel import (
    bucket_kernel,
    bucket_params,
    bucket_shares,
    grad_zero_kernel,
    optimizer_kernel,
    scales_gradients,
)
from ..workload.kernels import KernelClass, KernelSpec, Phase, chunked
from ..workload.layer_kernels import (
    LAYOUT_COPY,
    RING_BLOCK,
    UNDEFERRED_WEIGHT_GRADIENTS,
    ColumnGroup,
    LayerKernels,
    ShardShape,
)
from ..workload.layout import RankLayout
from ..workload.megatron import AMAX_BYTES, DELAYED_SCALING_QUANTIZERS, dispatch_algorithm, pairs_experts
from ..workload.parameters import Counts, ModelParameters, PipelineLayers
from ..workload.program import EMBEDDING_LAYER, HEAD_LAYER
from ..workload.schedule import PipelineScheduler, make_scheduler
from .space import SHARDING_SETTINGS, Strategy


@dataclass(frozen=True)
class LayerUnit:
    """A layer as the estimate costs it: its blocks, whether its number format keeps it in bf16, its attention's
    sliding window (0: none) and whether it is a rotary model's NoPE layer, which rotates nothing, which pick its
    kernels (LayerKernels.variant)."""

    kind: LayerKind
    bf16: bool = False
    window: int = 0
    nope: bool = False

    def table(self, kernels: LayerKernels) -> LayerKernels:
        return kernels.variant(self.bf16, self.window, self.nope)


Unit = int | LayerUnit
"""What the estimate costs once and multiplies: the embedding or the head (their unit numbers), or a layer unit."""


def unit_kind(kernels: LayerKernels, unit: int) -> Unit:
    """A stage's unit as the estimate costs it: the embedding and the head as themselves, a layer as its LayerUnit."""
    return unit if unit < 0 else LayerUnit(kernels.blocks(unit), *kernels.variant_of(unit))


@lru_cache(maxsize=4096)
def combined_share(schedule: str, chunks: int, stage: int, stages: int, microbatches: int) -> float:
    """Of a stage's backwards, the share its schedule runs combined with a forward (Step.combined; Megatron's
    steady state, DualPipe's overlapped pairs), under overlap_moe_expert_parallel_comm (cached: searches ask again
    and again)."""
    steps = make_scheduler(schedule, chunks, combined=True).steps(stage, stages, microbatches)
    backwards = [step for step in steps if step.kind == "B"]
    return sum(step.combined for step in backwards) / len(backwards)


@lru_cache(maxsize=4096)
def chunks_by_completion(schedule: str, vpp: int, stage: int, stages: int, microbatches: int) -> tuple[int, ...]:
    """A stage's model chunks in the order its schedule (of `vpp`, as the workload gives it) completes their
    gradients (their last backward or weight step: workload.megatron runs DualPipe's mirror all-reduce of each then);
    cached: searches ask again and again."""
    steps = make_scheduler(schedule, vpp).steps(stage, stages, microbatches)
    done = {step.chunk: i for i, step in enumerate(steps) if step.kind != "F"}
    return tuple(sorted(done, key=done.__getitem__))


@lru_cache(maxsize=4096)
def forwards_after_backward(schedule: str, vpp: int, stage: int, stages: int,
                            microbatches: int) -> tuple[tuple[tuple[int, float], ...], ...]:
    """Per model chunk of a stage, the chunks of the backwards its forwards follow on the rank (-1: none, a
    forward after a forward or the step's first), each with its share of the chunk's forwards, in the stage's
    schedule as the tracer runs it (make_scheduler(...).steps): the reduce-scatters such a backward launches
    (workload.data_parallel DataParallelSync._fsdp_reduce, after a W step where it splits the backward) still run
    when the forward's gathers start. Cached: searches ask again and again."""
    steps = make_scheduler(schedule, vpp).steps(stage, stages, microbatches)
    follows: list[Counter[int]] = [Counter() for _ in range(max(step.chunk for step in steps) + 1)]
    before = -1
    for step in steps:
        if step.kind == "F":
            follows[step.chunk][before] += 1
            before = -1
        else:
            before = step.chunk
    return tuple(tuple((chunk, count / sum(counts.values())) for chunk, count in sorted(counts.items()))
                 for counts in follows)


def stretched(compute: float, comm: float, slower: float) -> float:
    """Seconds `compute` seconds of kernels take beside `comm` seconds of communication, which slows them by
    1 + `slower` while it lasts (the SMs NCCL holds, Estimator.stretch): the part of them it overlaps, comm / (1 +
    slower) of their own time and at most all of it, runs that much slower; communication that outlasts them slows
    nothing more."""
    return compute + min(compute, comm / (1 + slower)) * slower


def pipelined_exposed(gemms: Iterable[float], comm: float, slower: float, casts: float = 0.0) -> float:
    """Seconds that GEMMs run one after the other (`gemms`, their own seconds each) and `comm` seconds of a
    collective launched with the first of them, as Transformer Engine's userbuffers pipeline them (tp_comm_overlap:
    workload.megatron gathered_gemms, tp_reduce), take beyond the GEMMs' own time, the kernel after them waiting for
    both: as the replay runs a kernel pipelined with its collective (engine.replay_input.pipelined), each GEMM that
    starts while the collective runs keeps that stretch (1 + `slower`: the SMs NCCL holds) for its whole time, not
    only while the collective lasts. `casts`: seconds of the memory-bound operand casts run between the collective's
    launch and the first GEMM (exposed_beside), which the collective does not slow."""
    ran = total = casts
    for gemm in gemms:
        ran, total = ran + (gemm * (1 + slower) if ran < comm else gemm), total + gemm
    return max(ran, comm) - total


def exposed_beside(gemms: float, comm: float, slower: float, casts: float = 0.0) -> float:
    """Seconds `comm` seconds of communication add to the kernels the rank runs beside it from its start and then
    waits for it: `casts` seconds of memory-bound kernels first (the narrow operand casts the tracer runs before each
    GEMM reading one, workload.megatron run), which the SMs NCCL holds do not slow (engine.replay_input.SM_BOUND),
    then `gemms` seconds of GEMMs, slowed while it lasts (stretched)."""
    return max(comm, casts + stretched(gemms, max(0.0, comm - casts), slower)) - casts - gemms


def held_twice(slower: float) -> float:
    """How much slower kernels run beside two collectives at once than alone, where one slows them by `slower`
    (Estimator.stretch): the replay adds up the SMs the collectives running on a GPU hold (engine/replay.py), so the
    share of the SMs held doubles, up to MAX_HELD_SHARE."""
    held = min(2 * (1 - 1 / (1 + slower)), MAX_HELD_SHARE)
    return 1 / (1 - held) - 1


def spread_slowing(kernels: float, span: float, beside: Iterable[tuple[float, float]]) -> float:
    """Seconds `kernels` seconds of kernels spread evenly over a `span` of seconds (the rest communication they wait
    for, or kernels nothing slows) take longer beside communication that runs from the span's start, `beside` its
    phases in turn: (seconds, how much slower the kernels run meanwhile), each covering as much of the span as it
    lasts, the span stretched where its kernels are. With kernels alone in the span, the slowing stretched gives."""
    density = kernels / span if span > 0 else 0.0
    covered = slowed = 0.0
    for seconds, slower in beside:
        part = min(span - covered, seconds / (1 + density * slower))
        covered, slowed = covered + part, slowed + part * density * slower
    return slowed


def pipelined(first: float, second: float, shares: tuple[float, float]) -> float:
    """Seconds until two streams working bucket by bucket are both done, where each bucket of `second` starts once
    the same bucket of `first` has (a bucket's gradient reduction once the backward has filled it, a unit's forward
    once its bucket of parameters has been gathered); `shares`: the first and the last bucket's share of each stream
    (workload.data_parallel.bucket_shares; (1, 1): all of `second` after all of `first`). The later of the first
    stream's end followed by the second's last bucket, and its first bucket followed by all of the second."""
    head, tail = shares
    return max(first + tail * second, head * first + second)


def gather_waits(gathers: Iterable[float], computes: Iterable[float], busy: float = 0.0) -> float:
    """Seconds units run one after another (`computes`) wait for their parameter all-gathers (`gathers`), as FSDP runs
    them (workload.data_parallel DataParallelSync._fsdp_gather): each unit's gather prefetched on one stream once the
    unit before it starts, the first's issued when the first unit is reached, so waited for in full. `busy`: seconds
    of reduce-scatters still to run on the same links when the first unit is reached (those of the backward the
    units' forward follows, reduce_tail); the links are shared alike while both run (the replay's flows share each
    link fairly, engine/fair_share.py), so a gather beside them takes up to twice its time, and they drain alone
    while no gather runs."""
    return played_gathers(gathers, computes, busy)[0]


def played_gathers(gathers: Iterable[float], computes: Iterable[float], busy: float = 0.0) -> tuple[float, float]:
    """gather_waits played out: (seconds the units wait, seconds a unit's kernels run while a gather shares the links
    with `busy`'s reduce-scatters, beside both)."""
    start = end = gathered = total = clock = paired = 0.0
    for gather, compute in zip(gathers, computes, strict=True):
        issued = max(start, gathered)
        busy = max(0.0, busy - (issued - clock))
        shared = min(gather, busy)
        gathered = clock = issued + gather + shared
        busy -= shared
        paired += max(0.0, min(issued + 2 * shared, end) - max(issued, start))  # the unit before it computing
        start = max(end, gathered)
        end, total = start + compute, total + compute
    return end - total, paired


def reduce_tail(computes: Iterable[float], reduces: Iterable[float]) -> float:
    """Seconds the gradient reduce-scatters of units whose backwards run one after another (`computes`) go on after
    the last backward, each launched on one stream once its unit's backward is done (workload.data_parallel
    DataParallelSync._fsdp_reduce)."""
    end = reduced = 0.0
    for compute, reduce in zip(computes, reduces, strict=True):
        end += compute
        reduced = max(reduced, end) + reduce
    return max(0.0, reduced - end)


ChunkTimes = tuple[tuple[tuple[float, float, float], ...], ...]
"""Per pipeline rank, per model chunk: the seconds of a micro-batch's forward, backward and, of it, weight gradients."""


FORWARD, BACKWARD, WEIGHT, BACKWARD_LESS_WEIGHT = range(4)
"""Which part of a chunk's micro-batch time a played step takes (StepGraph.part)."""


@dataclass(frozen=True)
class StepGraph:
    """A pipeline schedule's steps over every rank, in an order in which each step comes after the step it waits for
    (schedule_idle plays them in it): per step, its rank, its model chunk, the part of the chunk's time it takes, the
    index of the step it waits for (-1: none) with whether that step ran on another rank (a send between them), and
    whether its rank's next step waits for its send too (`holds`). What a step waits for depends on the schedule
    alone, not on the times."""

    rank: tuple[int, ...]
    chunk: tuple[int, ...]
    part: tuple[int, ...]
    after: tuple[int, ...]
    cross: tuple[bool, ...]
    holds: tuple[bool, ...]
    first: tuple[bool, ...] = ()  # its rank's first forward of its chunk (the step's first micro-batch)
    last: tuple[bool, ...] = ()   # its rank's last backward (or weight step) of its chunk: the chunk's gradients done

    @cached_property
    def flags(self) -> tuple[np.ndarray, np.ndarray]:
        """The first and last columns as arrays, for the compiled player of the data-parallel syncs (synced_end)."""
        return np.array(self.first, dtype=np.bool_), np.array(self.last, dtype=np.bool_)

    @cached_property
    def arrays(self) -> tuple[np.ndarray, ...]:
        """The columns as arrays, for the compiled player (played_end)."""
        return (np.array(self.rank, dtype=np.int64), np.array(self.chunk, dtype=np.int64),
                np.array(self.part, dtype=np.int64), np.array(self.after, dtype=np.int64),
                np.array(self.cross, dtype=np.bool_), np.array(self.holds, dtype=np.bool_))


@lru_cache(maxsize=256)
def step_graph(schedule: str, vpp: int, microbatches: int, ranks: int) -> StepGraph:
    """Every rank's steps in its schedule's order (make_scheduler(...).steps, as the tracer emits them), each after
    the step it waits for: a forward after the model stage before it has run the micro-batch's forward, a backward
    after the stage after it has run its backward (the last stage: after its own forward), a weight-gradient step
    after its backward; a backward whose weight gradients a later W step runs takes its time less theirs (cached:
    searches ask again and again). Raises ValueError where the steps wait for one another."""
    scheduler = make_scheduler(schedule, vpp)
    placement = scheduler.placement
    orders = [scheduler.steps(rank, ranks, microbatches) for rank in range(ranks)]
    split = [{(step.microbatch, step.chunk) for step in order if step.kind == "W"} for order in orders]
    last = placement.model_stages(ranks, placement.chunks(vpp)) - 1
    index: dict[tuple[str, int, int, int], int] = {}
    rank_of, chunk_of, part_of, after_of, cross_of = [], [], [], [], []
    at = [0] * ranks
    progressed = True
    while progressed:
        progressed = False
        for rank, order in enumerate(orders):
            while at[rank] < len(order):
                kind, microbatch, chunk, _ = order[at[rank]]
                stage = placement.model_stage(rank, chunk, ranks)
                if kind == "F":
                    after = None if stage == 0 else ("F", *placement.previous(rank, chunk, ranks), microbatch)
                elif kind == "B":
                    after = (("F", rank, chunk, microbatch) if stage == last
                             else ("B", *placement.next(rank, chunk, ranks), microbatch))
                else:
                    after = ("B", rank, chunk, microbatch)
                if after is not None and after not in index:
                    break  # waits for another rank
                index[(kind, rank, chunk, microbatch)] = len(rank_of)
                rank_of.append(rank)
                chunk_of.append(chunk)
                part_of.append(FORWARD if kind == "F" else WEIGHT if kind == "W" else
                               BACKWARD_LESS_WEIGHT if (microbatch, chunk) in split[rank] else BACKWARD)
                after_of.append(-1 if after is None else index[after])
                cross_of.append(after is not None and after[1] != rank)
                at[rank] += 1
                progressed = True
    if any(at[rank] < len(order) for rank, order in enumerate(orders)):
        raise ValueError(f"{schedule}: its steps wait for one another")
    holds = sender_holds(scheduler, ranks, microbatches, rank_of, after_of, cross_of)
    firsts, lasts = {}, {}
    for i, (rank, chunk, part) in enumerate(zip(rank_of, chunk_of, part_of, strict=True)):
        if part == FORWARD:
            firsts.setdefault((rank, chunk), i)
        else:
            lasts[rank, chunk] = i
    first, last = set(firsts.values()), set(lasts.values())
    return StepGraph(tuple(rank_of), tuple(chunk_of), tuple(part_of), tuple(after_of), tuple(cross_of), holds,
                     tuple(i in first for i in range(len(rank_of))), tuple(i in last for i in range(len(rank_of))))


def sender_holds(scheduler: PipelineScheduler, ranks: int, microbatches: int, rank_of: list[int],
                 after_of: list[int], cross_of: list[bool]) -> tuple[bool, ...]:
    """Per step (in step_graph's order), whether its rank's next step waits for the step's send, as the tracer's
    stages do (workload.megatron, hold_pending): a step that sends to another rank holds its rank where the call
    after it blocks (the scheduler's blocking_sends) or where the next step receives nothing, so that the send is
    still what the next kernel waits for; the rank's last step holds nothing (the pipeline's grad-norm all-reduce
    and the receiver's own step follow it)."""
    sends = {after for after, cross in zip(after_of, cross_of, strict=True) if cross}
    holds = [False] * len(rank_of)
    for rank in range(ranks):
        blocking = scheduler.blocking_sends(rank, ranks, microbatches)
        steps = [i for i, of in enumerate(rank_of) if of == rank]
        for position, (i, following) in enumerate(pairwise(steps)):
            holds[i] = i in sends and (blocking[position] or not cross_of[following])
    return tuple(holds)


@lru_cache(maxsize=256)
def schedule_idle(schedule: str, vpp: int, microbatches: int, times: ChunkTimes, send: float = 0.0) -> float:
    """Seconds a pipeline's step lasts beyond its busiest rank's work: every rank runs its schedule's steps in order
    (step_graph), each once the step it waits for has run (and `send` seconds more where that ran on another rank).
    Sends, and combined forward-backward steps, are left to the caller. Cached: searches ask again and again. The
    steps' order comes from step_graph, cached per schedule and shape, so that a play is one pass over them (the
    search plays two for each strategy it estimates, Estimator.sends_exposed, and a third with the data-parallel
    syncs, synced_idle)."""
    graph = step_graph(schedule, vpp, microbatches, len(times))
    parts = np.zeros((len(times), max(len(chunks) for chunks in times), 4))
    for rank, chunks in enumerate(times):
        for chunk, (forward, backward, weight) in enumerate(chunks):
            parts[rank, chunk] = forward, backward, weight, backward - weight
    return played_end(*graph.arrays, parts, send)


@njit(cache=True)
def played_end(rank: np.ndarray, chunk: np.ndarray, part: np.ndarray, after: np.ndarray, cross: np.ndarray,
               holds: np.ndarray, parts: np.ndarray, send: float) -> float:
    """schedule_idle's pass over a step graph's columns (StepGraph.arrays), compiled: each step ends its time after
    the later of its rank's step before it and the step it waits for (with a send where that ran on another rank),
    and the result is how far the last rank's end lies beyond the busiest rank's work; `parts[rank, chunk, part]`
    the seconds of a step. Every operation is the Python one in the same order, so that it is the same to the bit
    (tests/search/test_schedule_player.py keeps a Python player as reference). In Python, the pass cost DeepSeek-V3's
    search (16 stages, 120 micro-batches, two plays a strategy) about ten times its CPU time."""
    ranks = parts.shape[0]
    done = np.zeros(rank.shape[0])
    free, work = np.zeros(ranks), np.zeros(ranks)
    for i in range(rank.shape[0]):
        r = rank[i]
        length = parts[r, chunk[i], part[i]]
        ready = 0.0 if after[i] < 0 else done[after[i]] + (send if cross[i] else 0.0)
        done[i] = max(free[r], ready) + length
        free[r] = done[i] + (send if holds[i] else 0.0)
        work[r] += length
    return free.max() - work.max()


CASTS, GATHER, GATHER_HEAD, GATHER_TAIL, SCATTER, SCATTER_HEAD, SCATTER_TAIL, BUCKETS, SLOWER, FORWARD_KERNELS, \
    BACKWARD_KERNELS = range(11)
"""The fields of a model chunk's data-parallel sync as the synced player takes them (ChunkSyncs, synced_end): the
seconds of the weight casts its first forward runs (a step's only, where the number format caches them), of the
all-gather of its parameters and the first and the last bucket's shares of it in forward order, of the
reduce-scatter (or all-reduce) of its gradients and the first and the last bucket's shares of it in backward order, of
the passes over its gradient buckets (NaN check and scaling, on the compute stream), how much slower kernels run beside
either collective, and the share of a forward's and of a backward's span that is kernels it slows."""

ChunkSyncs = tuple[tuple[tuple[float, ...], ...], ...]
"""Per pipeline rank, per model chunk: its data-parallel sync's fields (CASTS ... BACKWARD_KERNELS)."""


@lru_cache(maxsize=256)
def synced_idle(schedule: str, vpp: int, microbatches: int, times: ChunkTimes, syncs: ChunkSyncs,
                send: float, shared: bool = False) -> float:
    """schedule_idle with each rank's data-parallel syncs played out where Megatron runs them (synced_end): how far
    the end of the step's last collective lies beyond the busiest rank's work (at its chunk times alone). Cached:
    searches ask again and again."""
    graph = step_graph(schedule, vpp, microbatches, len(times))
    width = max(len(chunks) for chunks in times)
    parts, fields = np.zeros((len(times), width, 4)), np.zeros((len(times), width, 11))
    for rank, chunks in enumerate(times):
        for chunk, (forward, backward, weight) in enumerate(chunks):
            parts[rank, chunk] = forward, backward, weight, backward - weight
            fields[rank, chunk] = syncs[rank][chunk]
    return synced_end(*graph.arrays, *graph.flags, parts, fields, send, shared)


@njit(cache=True)
def synced_end(rank: np.ndarray, chunk: np.ndarray, part: np.ndarray, after: np.ndarray, cross: np.ndarray,
               holds: np.ndarray, first: np.ndarray, last: np.ndarray, parts: np.ndarray, syncs: np.ndarray,
               send: float, shared: bool) -> float:
    """played_end with the data-parallel syncs of Megatron's gradient buffers on each rank's own stream, as the
    tracer runs them (workload/data_parallel.py) and Megatron-Core schedules them: the parameter all-gathers of every
    chunk (overlap_param_gather) issued at the step's start one after another, a chunk's first forward waiting for
    its first bucket and ending no sooner than the last bucket's share of it after the last (pipelined); the first
    forward of each chunk running its weight casts (`syncs[..., CASTS]`); each chunk's gradient reduction launched
    during its last backward (the interleaved schedule enables a chunk's grad sync for its last micro-batch only:
    schedules.py forward_backward_pipelining_with_interleaving, enable_grad_sync), bucket by bucket, once the first
    bucket is filled (pipelined: it ends no sooner than the backward plus its last bucket's share), the backward
    running the passes over its buckets and slowed beside it. Every kernel that runs while its rank's stream still
    moves data is slowed by the SMs NCCL holds (stretched, over its kernels' share of the step), so a reduction that
    outlasts its backward slows the steps after it, and the step ends when every rank's stream has. `shared`: the
    pipeline's sends and the data-parallel collectives leave through the same NICs (both span scale-up domains), so
    a send while its sender's stream still moves data, or arriving while its receiver's does, shares the NIC with it
    alike (the replay's flows share each link fairly, engine/fair_share.py; as gather_waits): the send takes up to
    twice its time and the stream's collectives end as much later, a ring being as slow as its slowest link. With
    the collectives not put off, a 16-layer GPT (hidden 4096) at tp 2 pp 2 vpp 4 dp 4 on 8 nodes of 2 H100s at 200
    Gb/s, whose 384 MiB gradient reduce-scatters take 13.1 ms alone and up to 15.0 in the replay beside the
    cool-down's sends, was estimated 0.964 of its replay (0.978 put off on the sender's side alone, 0.980 on the
    receiver's, 0.996 on both; tests/search/test_search_played_syncs.py). The result is how far that end lies beyond
    the busiest rank's work at its chunk times alone (`parts`), so that less the same schedule's
    played_end with the same `send` it is what the syncs add to the pipeline. Before, the syncs were costed once a
    step, as if the slowest stage's whole backward were its last one, and each other stage's drain by one chunk's
    share: Llama 3 70B at tp 8 pp 2 vpp 8 (1,024 H100s, 4 micro-batches), whose cool-down runs every chunk's last
    backward one after another through both ranks, was estimated 0.972 of its replay (3,093 against 3,183 ms; a
    bubble and sends of 127 ms where the replay idles its ranks 191), 0.994 with them played."""
    ranks, width = parts.shape[0], parts.shape[1]
    done, sent = np.zeros(rank.shape[0]), np.zeros(rank.shape[0])
    free, work, busy = np.zeros(ranks), np.zeros(ranks), np.zeros(ranks)
    gathered, last_gathered = np.zeros((ranks, width)), np.zeros((ranks, width))
    for r in range(ranks):
        for c in range(width):
            gathered[r, c] = busy[r] + syncs[r, c, GATHER_HEAD] * syncs[r, c, GATHER]
            busy[r] += syncs[r, c, GATHER]
            last_gathered[r, c] = busy[r]
    sends = np.zeros(rank.shape[0], dtype=np.bool_)  # whether a step's end sends to another rank
    for i in range(rank.shape[0]):
        if after[i] >= 0 and cross[i]:
            sends[after[i]] = True
    for i in range(rank.shape[0]):
        r, c = rank[i], chunk[i]
        length = parts[r, c, part[i]]
        work[r] += length
        ready = 0.0 if after[i] < 0 else done[after[i]]
        if after[i] >= 0 and cross[i]:
            ready += sent[after[i]]
            if shared:  # the send arriving shares the receiver's NIC with its stream's collectives
                received = min(send, max(0.0, busy[r] - done[after[i]]))
                ready = max(ready, done[after[i]] + send + received)
                busy[r] += received
        forward = part[i] == FORWARD
        if forward and first[i]:
            ready = max(ready, gathered[r, c])
            length += syncs[r, c, CASTS]
        start = max(free[r], ready)
        slower = syncs[r, c, SLOWER]
        kernels = length * syncs[r, c, FORWARD_KERNELS if forward else BACKWARD_KERNELS]
        length += min(kernels, max(0.0, busy[r] - start) / (1 + slower)) * slower
        if last[i]:
            scatter, head, tail = syncs[r, c, SCATTER], syncs[r, c, SCATTER_HEAD], syncs[r, c, SCATTER_TAIL]
            begun = max(busy[r], start + head * length)
            length += syncs[r, c, BUCKETS] + min(kernels * (1 - head), scatter * (1 - tail) / (1 + slower)) * slower
            busy[r] = max(begun + scatter, start + length + tail * scatter)
        done[i] = start + length
        if forward and first[i]:  # its last bucket's units wait for their gather (pipelined)
            done[i] = max(done[i], last_gathered[r, c] + syncs[r, c, GATHER_TAIL] * length)
        sent[i] = send
        if shared and sends[i]:  # the send shares the sender's NIC with its stream's collectives, each slowed alike
            shared_for = min(send, max(0.0, busy[r] - done[i]))
            sent[i] += shared_for
            busy[r] += shared_for
        free[r] = done[i] + (sent[i] if holds[i] else 0.0)
    return max(free.max(), busy.max()) - work.max()


def played_pipeline(schedule: str, vpp: int, microbatches: int, times: ChunkTimes,
                    send: float) -> tuple[float, float]:
    """A pipeline step's bubble and what its sends add to it, its schedule played out (schedule_idle): the seconds
    the schedule lasts beyond its busiest rank's work at free sends, and the seconds sends of `send` each add to
    that. With the busiest rank's work they sum to the schedule played out with its sends, the time by which every
    rank is done, which longer work never shortens: each step ends its own time after the later of its rank's step
    before it and the step it waits for (with a send), a sum and a maximum of times that each grow with it.
    Estimator.estimate counts the pair as the step's bubble and pp terms. Its bubble was the formula of Narayanan et
    al. (SC'21, section 2.2), each other stage's micro-batch time over vpp, with the sends' term played: the two
    disagree on how much of a stage's work the fill and drain wait for, and 0.61 ms more backward in stage 0's first
    chunk (the word embedding's dense weight gradient) on the seed's search winner (tp 1 pp 4 vpp 4, 4 micro-batches)
    added 0.15 ms to the formula's bubble and 2.42 ms to the schedule played at free sends, of which its sends then
    hid 1.82 ms: the estimate fell 192.18 -> 190.52 ms where the replay rose 205.48 -> 206.08 ms."""
    idle = schedule_idle(schedule, vpp, microbatches, times)
    return idle, schedule_idle(schedule, vpp, microbatches, times, send) - idle if send else 0.0


def is_layer(unit: Unit) -> bool:
    return isinstance(unit, LayerUnit)


def unit_table(kernels: LayerKernels, unit: Unit) -> LayerKernels:
    """The kernels a unit runs: a layer's twin (LayerUnit.table), the embedding's and the head's as they are."""
    return unit.table(kernels) if is_layer(unit) else kernels


def amax_reductions(table: LayerKernels, names: Iterable[str], phase: Phase) -> int:
    """How many of a layer's sequence-parallel gathers in `phase` all-reduce their shares' amaxes over tp first, as
    the tracer runs them (workload.megatron gemm_gather): one for each of the kernels `names` that is the
    quantization of a rank's share before its gather (`<gemm>_gather_cast`) in that phase, where the number format
    scales by the tensor's amax (current scaling and NVFP4: Transformer Engine's quantizer with_amax_reduction)."""
    fmt = table.shape.number_format  # None: 16-bit
    if not (table.shape.sp and fmt is not None and fmt.amax_pass):
        return 0
    return sum(1 for name in names if name.endswith("_gather_cast") and phase in table[name])


AR, AG, RS, A2A, SR = (CollType.AllReduce, CollType.AllGather, CollType.ReduceScatter, CollType.AllToAll,
                       CollType.SendRecv)


@dataclass(frozen=True)
class Estimate:
    """A strategy's estimated step, in seconds, by where the time goes."""

    iteration_s: float
    compute_s: float       # the slowest stage's kernels over all micro-batches (recompute included)
    recompute_s: float     # of which re-run forwards
    tp_s: float            # exposed tensor-parallel communication
    cp_s: float
    ep_s: float
    pp_s: float            # what pipeline sends add to the schedule (Estimator.sends_exposed)
    bubble_s: float        # the schedule played out at free sends, beyond the busiest rank's work
    dp_s: float            # exposed data-parallel synchronisation (where played with the schedule, what it adds
    # to it: Estimator.plays_syncs)
    optimizer_s: float

    def breakdown_ms(self) -> dict[str, float]:
        return {name: 1e3 * getattr(self, f"{name}_s") for name in
                ("compute", "recompute", "tp", "cp", "ep", "pp", "bubble", "dp", "optimizer")}


class ShardedWaits(NamedTuple):
    """What ZeRO-2's and FSDP's per-unit collectives make a stage's micro-batch wait for (Estimator.sharded_waits)."""

    waited: float       # seconds a micro-batch waits on average for the gathers no prefetch hides
    reduce_tail: float  # seconds the reduce-scatters of its first chunk's backward go on after it (the step's last)
    paired: float       # seconds its kernels run beside both a forward's gather and a reduce-scatter
    shared: float       # FSDP: seconds its backward gathers share the links with its reduce-scatters


@dataclass
class ShardedPlay:
    """What a stage's ZeRO-2 or FSDP collectives make its micro-batch wait for that does not depend on where the stage
    sits in the schedule (Estimator.sharded_waits weighs it by the shares forwards_after_backward gives): worked out
    once for every stage whose units' collectives and costs are the same, as a pipeline's middle stages' are (played
    once a stage, played_gathers alone took 5.8 of the 141 profiled seconds of DeepSeek-V3's pp 16 tp 1 slice of the
    search, 82,048 calls for 2,974 strategies)."""

    waited: float  # FSDP: seconds the backwards wait for their gathers, summed over the model chunks (gather_waits)
    tails: tuple[float, ...]  # per model chunk, seconds its backward's reduce-scatters go on after it (reduce_tail)
    shared: float  # FSDP: seconds its backward gathers share the links with its reduce-scatters
    forwards: tuple[tuple[tuple[float, ...], tuple[float, ...]], ...]  # per chunk, its units' gathers and forwards
    played: dict[tuple[int, int], tuple[float, float]] = field(default_factory=dict)

    @classmethod
    def of(cls, fsdp: bool, timed: tuple[tuple[tuple[float, ...], tuple[tuple[float, float], ...]], ...],
           chunk_costs: tuple[tuple[_LayerCost, ...], ...]) -> ShardedPlay:
        """`timed`: per model chunk, Estimator._sharded_syncs's gathers and reduce-scatters; `chunk_costs`: its units'
        costs (Estimator._stage_unit_costs)."""
        waits = shared = 0.0
        tails, forwards = [], []
        for (gathers, reduces), costs in zip(timed, chunk_costs, strict=True):
            forwards.append((gathers, tuple(c.forward + c.forward_comm for c in costs)))
            backs = [c.backward + c.recompute + c.tp + c.cp + c.ep - c.forward_comm for c in reversed(costs)]
            if fsdp:
                waits += gather_waits(reversed(gathers), backs)
            # each backward runs slower beside the reduce-scatter of the unit before it, which lags it the less
            slowed = [stretched(back, reduce, slower)
                      for back, (reduce, slower) in zip(backs, [(0.0, 0.0), *reduces[:-1]], strict=True)]
            reduced = [reduce for reduce, _ in reduces]
            tails.append(reduce_tail(slowed, reduced))
            if fsdp:
                shared += sum(2 * min(gather, reduce)
                              for gather, reduce in zip(gathers[::-1][2:], reduced[:-2], strict=True))
        return cls(waits, tuple(tails), shared, tuple(forwards))

    def gathered(self, chunk: int, after: int) -> tuple[float, float]:
        """played_gathers of model chunk `chunk`'s forward after the backward of chunk `after` (-1: after none, on
        idle links)."""
        if (chunk, after) not in self.played:
            gathers, spans = self.forwards[chunk]
            self.played[chunk, after] = played_gathers(gathers, spans, self.tails[after] if after >= 0 else 0.0)
        return self.played[chunk, after]


@dataclass(frozen=True)
class _LayerCost:
    """One layer's (or the embedding's / head's) costs per micro-batch on one rank, seconds."""

    forward: float
    backward: float
    recompute: float
    weight_grad: float     # of the backward, the weight gradients (what ZB-H1 defers into the bubble)
    tp: float
    cp: float
    ep: float
    forward_comm: float    # of tp, cp and ep, what the forward exposes (the rest the backward's)
    sm_bound: float = 0.0  # of forward, backward and recompute, the GEMMs' and attention kernels' seconds


class Estimator:
    """Estimates strategies of one workload on one datacenter; caches what strategies share."""

    def __init__(self, workload: MegatronWorkload, datacenter: DatacenterConfig, plan: CollectivePlan,
                 collective: CollectiveConfig):
        self.workload, self.datacenter, self.plan, self.collective = workload, datacenter, plan, collective
        gpu = self.gpu = datacenter.single_node("the strategy search").gpu
        self._collectives: dict[tuple, float] = {}
        self.placement = datacenter.placement(plan.topology.num_gpus)
        self._placements: dict[tuple, tuple[tuple[int, ...], ...]] = {}
        self._stage_keys: dict[tuple[int, int], bytes] = {}
        self.sm_count = Calibrations.shipped().sm_count(gpu)
        self._units: dict[tuple, _LayerCost] = {}
        self._unit_times: dict[tuple, tuple[dict[Phase, float], dict[Phase, float], float, float]] = {}
        self._weight_casts: dict[tuple, float] = {}
        self._models: dict[str, AnalyticalModel] = {}
        self._params: dict[tuple, tuple[Counts, Counts]] = {}
        self._parameters: dict[tuple[LayerKernels, PipelineLayers], ModelParameters] = {}
        self._stages: dict[tuple, _StageCost] = {}
        self._amax: dict[tuple, _LayerCost] = {}
        self._compositions: dict[tuple, tuple[tuple[int, int], ...]] = {}
        self._pipelines: dict[tuple, tuple[int, _StageCost]] = {}
        self._syncs: dict[tuple, tuple[list[tuple[float, float, float, float]], float, float]] = {}
        self._drains: dict[tuple, float] = {}
        self._chunk_syncs: dict[tuple, ChunkSyncs] = {}
        self._embedding_syncs: dict[tuple, float] = {}
        self._tp_duplicated_syncs: dict[tuple, float] = {}
        self._mirror_syncs: dict[tuple, tuple[float, ...]] = {}
        self._shares: dict[tuple, tuple] = {}
        self._sharded: dict[tuple, ShardedWaits] = {}
        self._sharded_timings: dict[tuple, tuple | None] = {}
        self._sharded_plays: dict[tuple, ShardedPlay] = {}
        self._chunk_units: dict[tuple, tuple[tuple[_LayerCost, ...], ...]] = {}
        self._chunk_kinds: dict[tuple, tuple[tuple[tuple[Unit, ...], ...], int]] = {}
        self._kind_numbers: dict[tuple[tuple[Unit, ...], ...], int] = {}
        self._chunk_times: dict[tuple, ChunkTimes] = {}
        self._stage_times: dict[tuple, tuple[tuple[float, float, float], ...]] = {}
        self._kernel_times: dict[str, dict[KernelSpec, float]] = {}
        self._profiles: dict[str, KernelProfile] = {}

    @classmethod
    def on(cls, workload: MegatronWorkload, datacenter: DatacenterConfig, collective: CollectiveConfig,
           num_gpus: int | None = None) -> Estimator:
        """The estimator of a workload on a datacenter (its first `num_gpus` GPUs; None: all), its collectives planned
        on the datacenter's topology as the scenario's collective block says."""
        topology = Topology.from_datacenter(datacenter, num_gpus)
        return cls(workload, datacenter, CollectivePlan.from_config(topology, collective), collective)

    def compute_model(self, dtype: str) -> AnalyticalModel:
        """The calibrated compute model for a number format (read once per search), under a training step's
        sustained load as compute.populate times a replay's kernels: the estimate ranks what the replay runs."""
        if dtype not in self._models:
            self._models[dtype] = AnalyticalModel(self.gpu, DType(dtype), sustained_load=True)
        return self._models[dtype]

    def kernel_profile(self, dtype: str) -> KernelProfile | None:
        """The GPU's measured profile for a number format, as compute.populate reads it for a replay (None where the
        GPU has no timed runs): read once per search."""
        if not any(run.times_ms for run in self.gpu.kernel_runs):
            return None
        if dtype not in self._profiles:
            self._profiles[dtype] = KernelProfile(self.gpu, DType(dtype), self.compute_model(dtype),
                                                  AnalyticalModel(self.gpu, DType(dtype), repeats=PROFILE_REPEATS))
        return self._profiles[dtype]

    def kernel_seconds(self, dtype: str, specs: list[KernelSpec]) -> np.ndarray:
        """Each kernel's seconds as a replay's are (compute.populate.spec_seconds): the measured profile's where it
        has the kernel, else the compute model's (AnalyticalModel.seconds), each kernel worked out once per number
        format: the model times every kernel on its own (GEMMs on arrays, element by element), so the figures are
        the ones a single call over the list gives; strategies of other expert layouts or micro-batch counts share
        most of their kernels. Before, a profiled GPU's estimates ignored its profile (tp2 ranked best at 342 ms
        where tp4 replays at 194)."""
        known = self._kernel_times.setdefault(dtype, {})
        missing = list(dict.fromkeys(spec for spec in specs if spec not in known))
        if missing:
            times = self.compute_model(dtype).seconds(missing).tolist()
            profile = self.kernel_profile(dtype)
            if profile is not None:
                times = [measured if (measured := profile.seconds(spec)) is not None else time
                         for spec, time in zip(missing, times, strict=True)]
            known.update(zip(missing, times, strict=True))
        return np.array([known[spec] for spec in specs], dtype=float)

    def estimate(self, strategy: Strategy, workload: MegatronWorkload) -> Estimate:
        """`workload`: the base workload with the strategy applied (search.run builds it)."""
        zbv = workload.parallelism.pipeline_schedule == "zb_v"
        s = replace(strategy, zero_bubble=True) if zbv else strategy  # ZB-V splits every backward as ZB-H1 does
        layers = PipelineLayers.of(workload)
        kernels = LayerKernels.weights_of(workload)  # which layers are MoE, and the parameters a stage holds
        microbatches = workload.training.global_batch_size // (s.micro_batch_size * s.dp)
        slowest, cost = self._pipeline_cost(s, workload, kernels, layers)
        ep = self._combined_ep(workload, cost, microbatches, slowest) if (
            workload.parallelism.overlap_moe_expert_parallel_comm and pairs_experts(workload)) else cost.ep
        stage_casts = self._stage_weight_casts(s, workload, kernels, layers, slowest)
        cached = TrainingFormat.of_workload(workload).weight_cache  # cast once a step, else at every micro-batch
        casts, once = (0.0, stage_casts) if cached else (stage_casts, 0.0)
        per_mb = cost.total - cost.ep + ep + casts
        dualpipe = workload.parallelism.pipeline_schedule == "dualpipe"
        runs = microbatches / 2 if dualpipe else microbatches  # times a rank runs all of its stage's units
        held = self._stage_params(s, workload, kernels, layers, slowest)
        synced = self.plays_syncs(s, workload)
        dp, optimizer = self._data_parallel(s, workload, kernels, layers, slowest, held, cost, runs, synced)
        dp += self.embedding_sync(s, workload, kernels, layers) + self.tp_duplicated_sync(s, workload, kernels, layers)
        if dualpipe and s.pp > 1:
            dp += self._mirror_exposed(s, workload, kernels, layers, slowest, cost, microbatches)
        if dualpipe:
            bubble = self.dualpipe_bubble(s, workload, kernels, layers, microbatches)
            sends = microbatches * 2 * self.pipeline_send(s, workload)  # a send forward, one back
        else:
            bubble, sends = self.sends_exposed(s, workload, kernels, layers, microbatches)
            if synced:  # the syncs, and the casts of a step's first forwards (counted in `once`), played out
                dp += synced_idle(workload.parallelism.pipeline_schedule, s.vpp, microbatches,
                                  self.chunk_times(s, workload, kernels, layers),
                                  self.chunk_syncs(s, workload, kernels, layers), self.pipeline_send(s, workload),
                                  self.sends_share_links(s)) - bubble - sends - once
            elif not zbv:
                bubble += self._drain_syncs(s, workload, kernels, layers, slowest)
        total = runs * per_mb + sends + once + bubble + dp + optimizer
        return Estimate(total, runs * (cost.compute + casts) + once, runs * cost.recompute, runs * cost.tp,
                        runs * cost.cp, runs * ep, sends, bubble, dp, optimizer)

    def sends_exposed(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels, layers: PipelineLayers,
                      microbatches: int) -> tuple[float, float]:
        """The schedule played out (played_idle) at free pipeline sends, and the seconds its sends add to it: a
        hand-off between ranks waits for a send, and so does the sender's next step where the replay's does
        (step_graph's holds: Megatron's blocking p2p calls, workload.schedule blocking_sends; elsewhere a receive
        takes the send's place as what the next kernel waits for, so a stage that others keep waiting overlaps
        its sends). Counted whole, two sends a micro-batch, the estimate of a GPT of 4 layers (32,768-entry
        vocabulary, the head's stage the slowest) at tp 1 pp 2 dp 4 on 2 nodes of 4 H100s over 100 Gb/s NICs was
        1.136 of the replay (1.015 played out), 1.202 at 16 micro-batches (1.005); played out with 1F1B's blocking
        calls, 1.014 and 1.004 of the replay that waits as they do. The first is the step's bubble
        (played_pipeline)."""
        if s.pp == 1:
            return 0.0, 0.0
        return played_pipeline(workload.parallelism.pipeline_schedule, s.vpp, microbatches,
                               self.chunk_times(s, workload, kernels, layers), self.pipeline_send(s, workload))

    def dualpipe_bubble(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels, layers: PipelineLayers,
                        microbatches: int) -> float:
        """DualPipe's bubble: its schedule (workload/schedule.py, as the replay runs it) played out over every rank's
        chunk times (schedule_idle), each hand-off between ranks after a pipeline send (the sender's own time in
        the sends the step counts apart). DeepSeek's (p/2 - 1)(F&B + B - 3W) (V3 technical report, table 2) is for
        equal ranks, and bounds their played idle; the ranks holding both ends of the model (the embedding and the
        head) are heavier and wait for lighter ones, much less than it says: at pp 8 (8 H100s, 16 layers, 16
        micro-batches) it idled the heaviest rank 13.1 ms where the replay idles it 1.7 (the step estimated 9.6%
        long, 3.3% with its schedule played)."""
        return self.played_idle(s, workload, kernels, layers, microbatches, self.pipeline_send(s, workload))

    def played_idle(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels, layers: PipelineLayers,
                    microbatches: int, send: float) -> float:
        """Seconds the workload's schedule lasts beyond its busiest rank's work, played out (schedule_idle) over every
        rank's chunk times, `send` seconds between ranks. DualPipe's bubble, and ZB-V's: the reference's greedy V
        order (zbv.py `PipelineGraph.try_v_schedule`, which times an order this way; Qi et al., ICLR 2024: no rank
        idles at F = B = W), rank 0's two chunks holding the first model stage (the embedding) and the last (the
        head and the loss). Estimated as interleaved 1F1B over the V's two chunks, ZB-V was 5 to 19% long of the
        replay (pp 2 to 8 on 1 and 2 nodes of 8 H100s, dense and MoE, 1 to 4 times pp micro-batches)."""
        times = self.chunk_times(s, workload, kernels, layers)
        return schedule_idle(workload.parallelism.pipeline_schedule, s.vpp, microbatches, times, send)

    def chunk_times(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels,
                    layers: PipelineLayers) -> ChunkTimes:
        """Every pipeline rank's micro-batch forward, backward and weight-gradient seconds, per model chunk, as the
        schedule player takes them (schedule_idle). Cached per shape, data parallelism (where each stage's ranks
        lie), layer split and recompute_num_layers: strategies differing only in sharding or micro-batch count share
        them."""
        key = (self.shape_key(s), s.dp, layers, workload.parallelism.recompute_num_layers)
        if key not in self._chunk_times:
            self._chunk_times[key] = tuple(self._stage_chunk_times(s, workload, kernels, layers, stage)
                                           for stage in range(s.pp))
        return self._chunk_times[key]

    def _stage_chunk_times(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels,
                           layers: PipelineLayers, stage: int) -> tuple[tuple[float, float, float], ...]:
        """One rank's part of chunk_times, cached on what it reads (Estimator._chunk_costs): the shape, the kinds of
        its chunks' units in order (Estimator.chunk_kinds) and where its ranks lie, and where full recomputation
        spares some layers (recompute_num_layers), which ones by their place in each chunk (the split, the stage), so
        that a pipeline's alike middle stages share them (worked out for every stage, DeepSeek-V3's pp 16 tp 1 slice of
        the search summed 16,720 stages' unit costs for 2,974 strategies, 8.3 of its 145 profiled seconds)."""
        par = workload.parallelism
        spares = s.recompute == "full" and par.recompute_num_layers is not None
        key = (self.shape_key(s), s.dp, self.chunk_kinds(kernels, layers, stage)[1], self.stage_key(s, stage),
               *((layers, stage, par.recompute_num_layers) if spares else ()))
        if key not in self._stage_times:
            self._stage_times[key] = tuple((cost.forward_span, cost.backward_span, cost.weight_grad)
                                           for cost in self._chunk_costs(s, workload, kernels, layers, stage))
        return self._stage_times[key]

    def _chunk_costs(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels, layers: PipelineLayers,
                     stage: int) -> list[_StageCost]:
        """A stage's costs per micro-batch, per model chunk (its units' costs summed), so that they sum to its
        Estimator._stage_cost: the layers full recomputation spares under recompute_num_layers (those past the first
        that many of the chunk, Estimator.spared) at their cost without it. Costed as re-run, they lengthened every
        chunk the schedule player plays, and so the bubble: tp 2 pp 2 vpp 2 with recompute_num_layers 1 (8 H100s, 8
        layers, 4 micro-batches) played 32.62 ms of work on its busiest rank where the step counts 28.71."""
        par = workload.parallelism
        spares = s.recompute == "full" and par.recompute_num_layers is not None
        plain = replace(s, recompute="none") if spares else s
        costs = []
        for chunk in range(layers.chunks):
            cost, first = _StageCost(), layers.layers_of(stage, chunk).start
            for unit in layers.units_of(stage, chunk):
                spared = spares and unit >= 0 and not par.recomputes_layer(unit - first)
                cost.add(self._unit_cost(plain if spared else s, workload, unit_kind(kernels, unit), stage))
            cost.add(self._delayed_amax_reduction(s, workload, kernels, layers, stage, chunk))
            costs.append(cost)
        return costs

    def _delayed_amax_reduction(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels,
                                layers: PipelineLayers, stage: int, chunk: int) -> _LayerCost:
        """Delayed scaling's amax reductions of one model chunk per micro-batch, as the tracer runs them
        (workload.megatron amax_reduction): after the chunk's forward and after its backward, each an all-reduce over
        tp, then one over data x context, waited for whole (the forward's counted among the forward's
        communication). Cached per shape, data parallelism, the chunk's layer kinds and where the stage's ranks
        lie."""
        kinds = tuple(unit_kind(kernels, unit) for unit in layers.units_of(stage, chunk) if unit >= 0)
        key = (self.shape_key(s), s.dp, kinds, self.stage_key(s, stage))
        if key not in self._amax:
            seconds = {Phase.fwd: 0.0, Phase.bwd_ig: 0.0}
            if TrainingFormat.of_workload(workload).delayed_scaling:
                gemms = sum(unit.table(kernels).scaled_gemms(unit.kind) for unit in kinds)
                axes = [axis for axis, size in (("tp", s.tp), ("dp_cp", s.dp * s.cp)) if size > 1]
                for phase in seconds if gemms else ():
                    size = AMAX_BYTES * DELAYED_SCALING_QUANTIZERS[phase] * gemms
                    seconds[phase] = sum(self.slowest(AR, self.placed(s, axis, stage), size) for axis in axes)
            both = seconds[Phase.fwd] + seconds[Phase.bwd_ig]
            self._amax[key] = _LayerCost(0.0, 0.0, 0.0, 0.0, both, 0.0, 0.0, seconds[Phase.fwd])
        return self._amax[key]

    def _stage_weight_casts(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels,
                            layers: PipelineLayers, stage: int) -> float:
        """Seconds a stage spends quantizing its 16-bit weights once (LayerKernels.weight_cast: before each GEMM's
        forward), as the tracer runs them: at every micro-batch where Transformer Engine keeps no quantized copy
        between micro-batches (FSDP full sharding: config.number_formats TrainingFormat.of_workload), else once a
        step, at the first. Left out at every micro-batch, an fp8 FSDP run was estimated as fast as ZeRO-2 and ranked
        above one that replays faster (701 against 748 ms); left out once a step, every other fp8 run was estimated
        short by it."""
        total = 0.0
        for unit, count in self._composition(s, kernels, layers, stage):
            key = (self.kernel_key(s), unit)
            if key not in self._weight_casts:
                table = unit_table(LayerKernels.shared(workload), unit)
                specs = [table.weight_casts[name] for name in self._unit_kernels(table, unit)
                         if name in table.weight_casts for _ in range(table.repeats(name))]
                self._weight_casts[key] = float(self.kernel_seconds(s.dtype, specs).sum()) if specs else 0.0
            total += count * self._weight_casts[key]
        return total

    @staticmethod
    def _combined_ep(workload: MegatronWorkload, cost: _StageCost, microbatches: int, stage: int) -> float:
        """Exposed expert-parallel seconds per micro-batch under overlap_moe_expert_parallel_comm: a combined step
        (workload.megatron combined_step) runs one micro-batch's forward beside another's backward, the all-to-alls
        of each beside the other's kernels, so of its all-to-alls (one micro-batch's worth, `cost.ep`) only what
        outlasts its kernels (one micro-batch's forward and backward) is exposed; the warm-up forwards and cool-down
        backwards, which run alone, expose theirs. Credited only where some combined step pairs two layers with
        experts (workload.megatron.pairs_experts), as the replay hides none elsewhere: Qwen3-Next-80B (single-block
        mixers and MoE blocks alternating) at pp 2 vpp 2 was estimated 2,729 -> 2,347 ms with the overlap, where
        the replay gave 2,596.9 -> 2,598.0 ms."""
        par = workload.parallelism
        paired = combined_share(par.pipeline_schedule, par.vpp, stage, par.pp, microbatches)
        return (1 - paired) * cost.ep + paired * max(0.0, cost.ep - cost.compute)

    # ---- per stage ----

    @staticmethod
    def kernel_key(s: Strategy) -> tuple:
        """What a layer's kernels and their times depend on (TP overlap runs some GEMMs in chunks; neither
        recomputation nor where the expert-parallel group's members sit changes them)."""
        return s.tp, s.cp, s.ep, s.etp, s.micro_batch_size, s.sequence_parallel, s.dtype, s.tp_comm_overlap

    @staticmethod
    def shape_key(s: Strategy) -> tuple:
        """What a layer's kernels and communication depend on: strategies equal here share their unit costs (ZB-H1's
        split backward hides less of the tensor-parallel reduction)."""
        expert_layout = s.dp if s.ep > 1 else 0  # where the expert-parallel group's members sit
        return (s.tp, s.cp, expert_layout, s.ep, s.etp, s.micro_batch_size, s.sequence_parallel, s.recompute,
                s.dtype, s.tp_comm_overlap, s.zero_bubble)

    def _pipeline_cost(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels,
                       layers: PipelineLayers) -> tuple[int, _StageCost]:
        """The slowest stage and its costs (cached per shape and pipeline: most strategies differ only in what these
        do not depend on)."""
        key = (self.shape_key(s), s.dp, s.pp, s.vpp, s.first_layers, s.last_layers,
               workload.parallelism.recompute_num_layers)
        if key not in self._pipelines:
            costs = [self._stage_cost(s, workload, kernels, layers, stage) for stage in range(s.pp)]
            slowest = max(range(s.pp), key=lambda stage: costs[stage].total)
            self._pipelines[key] = (slowest, costs[slowest])
        return self._pipelines[key]

    def _stage_cost(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels, layers: PipelineLayers,
                    stage: int) -> _StageCost:
        """A stage's costs: each kind of unit it holds times how many (stages alike in that share them), those
        full recomputation leaves alone (Estimator.spared) at their cost without it."""
        composition = self._composition(s, kernels, layers, stage)
        spared = self.spared(s, workload, kernels, layers, stage)
        key = (self.shape_key(s), composition, spared, self.stage_key(s, stage))
        if key not in self._stages:
            total, left = _StageCost(), dict(spared)
            for kind, count in composition:
                total.add(self._unit_cost(s, workload, kind, stage), count - left.get(kind, 0))
                if left.get(kind):
                    total.add(self._unit_cost(replace(s, recompute="none"), workload, kind, stage), left[kind])
            self._stages[key] = total
        total = replace(self._stages[key])  # and each chunk's amax reductions (not cached with the units)
        for chunk in range(layers.chunks):
            total.add(self._delayed_amax_reduction(s, workload, kernels, layers, stage, chunk))
        return total

    @staticmethod
    def spared(s: Strategy, workload: MegatronWorkload, kernels: LayerKernels, layers: PipelineLayers,
               stage: int) -> tuple[tuple[Unit, int], ...]:
        """(kind, count) of a stage's layers that full recomputation does not re-run: under recompute_num_layers
        (Megatron's block method) those past the first that many of each model chunk, as the tracer re-runs them
        (ParallelismSpec.recomputes_layer); none where every layer re-runs or recomputation is not full. Counted as
        re-run, recompute_num_layers 1 at tp 2 (8 layers, one stage) was estimated 33.9 ms where the replay gives
        30.1, as long as recomputing all 8 (37.1)."""
        par = workload.parallelism
        if s.recompute != "full" or par.recompute_num_layers is None:
            return ()
        kinds = Counter(unit_kind(kernels, layer) for chunk in range(layers.chunks)
                        for position, layer in enumerate(layers.layers_of(stage, chunk))
                        if not par.recomputes_layer(position))
        return tuple(sorted(kinds.items(), key=lambda item: repr(item[0])))

    def stage_key(self, s: Strategy, stage: int) -> bytes:
        """Where a stage's ranks lie: the node group of each (stages alike in it time their collectives alike). Worked
        out once per stage size and stage, one bytes object: most of the estimate's caches key on it (made at every
        ask, 316,965 asks took 3.3 of the 145 profiled seconds of DeepSeek-V3's pp 16 tp 1 slice of the search)."""
        size = s.tp * s.cp * s.dp
        key = (size, stage)
        if key not in self._stage_keys:
            self._stage_keys[key] = self.placement.group[stage * size:(stage + 1) * size].tobytes()
        return self._stage_keys[key]

    def _unit_cost(self, s: Strategy, workload: MegatronWorkload, unit: Unit, stage: int) -> _LayerCost:
        """A unit's costs on a stage (cached per shape, unit and where the stage's ranks lie)."""
        key = (self.shape_key(s), unit, self.stage_key(s, stage))
        if key not in self._units:
            self._units[key] = self._cost_of_unit(s, workload, unit, stage)
        return self._units[key]

    def _composition(self, s: Strategy, kernels: LayerKernels, layers: PipelineLayers,
                     stage: int) -> tuple[tuple[Unit, int], ...]:
        """(kind, count) of the units of a stage: the embedding, the head and each kind of layer."""
        key = (s.pp, s.vpp, s.first_layers, s.last_layers, stage)
        if key not in self._compositions:
            kinds = Counter(unit_kind(kernels, unit) for unit in layers.stage_units(stage))
            self._compositions[key] = tuple(sorted(kinds.items(), key=lambda item: repr(item[0])))
        return self._compositions[key]

    def _cost_of_unit(self, s: Strategy, workload: MegatronWorkload, unit: Unit, stage: int) -> _LayerCost:
        """Kernels and exposed communication of a layer of one kind, the embedding or the head."""
        kernels = LayerKernels.shared(workload)
        seconds, gemms, bound, attention_core, undeferred = self._unit_seconds(s, kernels, unit)
        forward, backward = seconds[Phase.fwd], seconds[Phase.bwd_ig] + seconds[Phase.bwd_wg]
        recompute = 0.0
        if is_layer(unit) and s.recompute == "full":
            recompute = forward
        elif is_layer(unit) and s.recompute == "selective":
            recompute = self._selective_recompute(s, workload, kernels, unit, attention_core)
        tp, cp, ep, ahead = self._layer_comm(s, workload, kernels, unit, gemms, stage)
        # a re-run forward's kernels are SM-bound in the forward's proportion
        sm_bound = sum(bound.values()) + (recompute * bound[Phase.fwd] / forward if forward else 0.0)
        return _LayerCost(forward, backward, recompute, seconds[Phase.bwd_wg] - undeferred, tp, cp, ep, ahead,
                          sm_bound)

    def _selective_recompute(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels, unit: Unit,
                             attention_core: float) -> float:
        """Seconds selective recomputation re-runs in a layer of kind `unit`, as the tracer does
        (workload.megatron recompute_modules): core attention where the modules name it, and every other named
        module's forward kernels (LayerKernels.recomputed) with the casts of their narrow operands."""
        par = workload.parallelism
        table = unit.table(kernels)
        names = [name for module in par.recomputed_kernel_modules for name in table.recomputed(module, unit.kind)]
        specs = [table[k][Phase.recompute] for name in names for k in (f"{name}_cast", name)
                 if k in table and Phase.recompute in table[k]]
        rest = float(self.kernel_seconds(s.dtype, specs).sum()) if specs else 0.0
        return (attention_core if par.recomputes_core_attention else 0.0) + rest

    def _unit_seconds(self, s: Strategy, kernels: LayerKernels,
                      unit: Unit) -> tuple[dict[Phase, float], dict[Phase, float], dict[Phase, float], float, float]:
        """(seconds of each phase, of which GEMMs, of which SM-bound kernels, the attention core's forward, of the
        weight gradients those a split backward runs in B: UNDEFERRED_WEIGHT_GRADIENTS) of a unit's kernels, cached
        per kernel shape (what recomputation and TP overlap make of them is the caller's); SM-bound: the GEMMs and
        attention kernels, those the replay slows beside a collective (engine.replay_input.SM_BOUND)."""
        key = (self.kernel_key(s), unit)
        if key not in self._unit_times:
            table = unit_table(kernels, unit)
            names = self._unit_kernels(table, unit)
            specs = {phase: [chunked(table[n][phase], table.ub_chunks(n, phase) if s.tp_comm_overlap else 1)
                             for n in names if phase in table[n] for _ in range(table.repeats(n))]
                     for phase in (Phase.fwd, Phase.bwd_ig, Phase.bwd_wg)}
            each = {phase: self.kernel_seconds(s.dtype, specs[phase]) if specs[phase] else () for phase in specs}
            seconds = {phase: float(each[phase].sum()) if specs[phase] else 0.0 for phase in specs}
            gemms = {phase: sum(float(t) for t, spec in zip(each[phase], specs[phase], strict=True)
                                if spec.kclass in (KernelClass.gemm, KernelClass.grouped_gemm))
                     for phase in specs}  # what TP communication hides behind
            bound = {phase: sum(float(t) for t, spec in zip(each[phase], specs[phase], strict=True)
                                if spec.kclass in SM_BOUND) for phase in specs}
            attention_core = 0.0
            if is_layer(unit) and "attention" in unit.kind:
                core = [table[n][Phase.fwd] for n in table.attention_core for _ in range(table.repeats(n))]
                if LAYOUT_COPY in table:  # inside Transformer Engine's attention, re-run with it (workload.megatron)
                    core.append(table[LAYOUT_COPY][Phase.fwd])
                attention_core = float(self.kernel_seconds(s.dtype, core).sum())
            wgrads = [n for n in names if Phase.bwd_wg in table[n] for _ in range(table.repeats(n))]
            undeferred = sum(float(t) for t, n in zip(each[Phase.bwd_wg], wgrads, strict=True)
                             if n in UNDEFERRED_WEIGHT_GRADIENTS)
            self._unit_times[key] = seconds, gemms, bound, attention_core, undeferred
        return self._unit_times[key]

    def _column_seconds(self, s: Strategy, kernels: LayerKernels, unit: LayerUnit,
                        groups: list[ColumnGroup]) -> list[tuple[tuple[float, float], tuple[float, float]]]:
        """Per group of column-parallel GEMMs (LayerKernels.column_groups), ((the seconds of their dgrads, of their
        wgrads), (of the operand casts before the dgrads, before the wgrads): _cast_seconds), those that its
        backward's tensor-parallel regather and reduction run beside (workload.megatron column_block_backward)."""
        table = unit.table(kernels)
        out = []
        for group in groups:
            names = [n for n in group.gemms if n in table]
            phases = (Phase.bwd_ig, Phase.bwd_wg)
            out.append((tuple(sum(self._gemm_seconds(s, table, names, phase)) for phase in phases),
                        tuple(self._cast_seconds(s, table, names, phase) for phase in phases)))
        return out

    def unit_seconds(self, s: Strategy, workload: MegatronWorkload, unit: Unit) -> float:
        """One rank's seconds per micro-batch for one unit: a layer of one kind (config/hybrid.py), the embedding
        (EMBEDDING_LAYER) or the head (HEAD_LAYER): its kernels, recompute and exposed TP/CP/EP communication,
        as a stage's total counts them (on stage 0's ranks)."""
        cost = _StageCost()
        cost.add(self._unit_cost(s, workload, unit, 0))
        return cost.total

    @staticmethod
    def _unit_kernels(kernels: LayerKernels, unit: Unit) -> list[str]:
        head = {"final_norm", "lm_head", "loss", "lm_head_cast"}
        if unit == EMBEDDING_LAYER:
            return ["embedding"]
        if unit == HEAD_LAYER:  # the LM head and loss once more for each multi-token-prediction depth
            names = [n for n in kernels.table if n in head]
            return names + [n for n in names if n != "final_norm"] * kernels.model.mtp_layers
        return [name for block in unit.kind for name in kernels.block_kernels(block)]

    def _layer_comm(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels, unit: Unit,
                    gemms: dict[Phase, float], stage: int) -> tuple[float, float, float, float]:
        """Exposed TP, CP and EP communication of one unit per micro-batch (forward and backward) on a stage, and of
        them the forward's (its first run's collectives; under tp_comm_overlap the tensor-parallel ones are counted
        with the backward, hidden beside the GEMMs of both), each
        collective at the slowest of the stage's groups (Estimator.placed); `gemms`: the seconds of its GEMMs per phase,
        which TP communication hides behind where it runs beside them. A recomputed forward sends what the forward sent
        once more, as the tracer re-runs it (workload.megatron layer_forward, core_attention): under full recomputation
        all of the layer's, under selective recomputation of core attention its context-parallel exchange, of the dense
        MLP or the MoE layer their collectives (tp 4 with sequence parallelism, recompute_modules [mlp]: estimate over
        replay 0.83 without, 0.92 with, 0.91 recomputing core attention). Left out, full recomputation at tp 4 (8
        layers, hidden 2048, sequence 2048) was estimated 43.9 ms where the replay gives 52.2 (without recomputation
        37.2 against 39.1). ZB-H1 runs every backward's wgrads in a step of their own: hidden behind them as under 1F1B,
        its reduction left ZB-H1 at tp 2 pp 2 (16 layers) estimated 101.1 ms where the replay gives 105.6. Each block's
        backward collectives hide behind its own column-parallel GEMMs only (Estimator._column_seconds), the GEMMs
        slowed only while they overlap (stretched): hidden behind all of the layer's backward GEMMs, with the slowing
        counted again where the collective outlasted them, tp 8 pp 4 (4 nodes of 8 H100s) was estimated 86.2 ms where
        the replay gives 90.4, tp 2 dp 8 98.1 where it gives 95.5."""
        if not is_layer(unit):
            return self._edge_comm(s, kernels, unit, gemms, stage), 0.0, 0.0, self._edge_comm(s, kernels, unit)
        again = 1 if s.recompute == "full" else 0  # the layer's forward runs twice
        core_again = 1 if again or (s.recompute == "selective"
                                    and workload.parallelism.recomputes_core_attention) else 0
        # the dense MLP's and the MoE layer's forwards re-run whole, collectives included, where selective
        # recomputation names them (workload.megatron recompute_modules)
        modules = workload.parallelism.recomputed_modules
        moe_again = 1 if again or "moe" in modules else 0
        kernels, kind = unit.table(kernels), unit.kind
        shape, h, moe = kernels.shape, workload.model.hidden_size, workload.model.moe
        block = shape.tokens * h * shape.act_bytes  # a block's output, whole sequence share of this rank
        # attention, the MLP and the Mamba mixer each reduce their output across tp; an MoE block only where its
        # output has partial sums (LayerKernels.moe_output_reduced)
        routed = "moe" in kind
        reducing = [b for b in kind if b != "moe" or kernels.moe_output_reduced]
        blocks = len(reducing)
        rerun = blocks if again else sum(1 for b in reducing if (b == "mlp" and "mlp" in modules)
                                         or (b == "moe" and moe_again))
        tp = ahead = 0.0
        if s.tp > 1:
            group = self.placed(s, "tp", stage)
            if s.sequence_parallel:  # forward: gather the input, reduce-scatter the output; backward: gather the
                # output's gradient (each as narrow as Transformer Engine gathers it: LayerKernels.block_gather_bytes)
                # (MLA's: its latents, LayerKernels.latents)
                gradient = sum(self.slowest(AG, group, kernels.block_gather_bytes(b)[1]) for b in reducing)
                gather = sum(self.slowest(AG, group, size) for b in reducing for size in kernels.block_input_gathers(b))
                forward, waited = gather + blocks * self.slowest(RS, group, block), gradient
            else:  # the row-parallel output's all-reduce forward
                forward, waited = blocks * self.slowest(AR, group, block), 0.0
            # each group of column-parallel GEMMs' input re-gather and input gradient's reduction (LayerKernels.
            # column_groups: a block's, or each of MLA's up projections')
            groups = [g for b in reducing for g in kernels.column_groups(b)]
            regathers = [self.slowest(AG, group, g.regather) if s.sequence_parallel and g.regather else 0.0
                         for g in groups]
            reductions = [self.slowest(RS if s.sequence_parallel else AR, group, g.reduction) for g in groups]
            reduction = sum(reductions)
            waited += forward * (1 + rerun / blocks) if blocks else 0.0
            # backward, the column-parallel GEMMs' input re-gathered during their dgrads and the dgrads' reduction
            # during their wgrads (sequence parallelism), or the input gradient's all-reduce during the wgrads, as
            # Megatron and Transformer Engine overlap them (workload/megatron.py column_block_backward)
            channels = self.plan.choose(AG if s.sequence_parallel else AR, group[0], block).channels
            slower = self.stretch(channels) - 1
            # each block's column-parallel GEMMs hide its own: their dgrads the regather, their wgrads the
            # reduction; ZB-H1 splits every backward (a W step for each micro-batch, workload/schedule.py), so
            # its wgrads run in a step of their own and the next block's dgrads wait for the reduction
            # (the operand casts before each GEMM beside them too, unslowed)
            columns = self._column_seconds(s, kernels, unit, groups)
            tp = (reduction if s.zero_bubble else 0.0) + sum(
                exposed_beside(gemm[phase], comm, slower, casts[phase])
                for (gemm, casts), each in zip(columns, zip(regathers, reductions, strict=True), strict=True)
                for comm, phase in [(each[0], 0)] + ([] if s.zero_bubble else [(each[1], 1)]))
            if s.tp_comm_overlap and s.sequence_parallel:  # the rest pipelined with the GEMMs reading or writing it
                firsts, backward = self._pipelined_tp(s, kernels, reducing, group, slower)
                tp += backward + sum(first * (1 + (again or (b == "mlp" and "mlp" in modules)
                                                   or (b == "moe" and moe_again)))
                                     for b, first in zip(reducing, firsts, strict=True))
                ahead = sum(firsts)
            else:
                tp, ahead = tp + waited, forward
            if s.sequence_parallel and not again and "mla_up_proj" in modules and "attention" in kind:
                # MLA's up projections re-gather their latents when selective recomputation re-runs them
                # (workload.megatron mla_up_recompute)
                tp += sum(self.slowest(AG, group, kernels.latent_bytes(latent)) for latent in kernels.latents
                          if latent.gemm is not None)
            # the amaxes all-reduced before the narrow gathers (amax_reductions): each waited for by its gather, which
            # the GEMM reading it waits for, so exposed whole even where tp_comm_overlap runs the gather beside it
            amax = self.slowest(AR, group, AMAX_BYTES)
            names = [name for b in kind for name in kernels.block_kernels(b)]
            rerun_names = names if again else [name for b in kind if b == "mlp" and "mlp" in modules
                                               for name in kernels.block_kernels(b)] + (
                [f"{latent.gemm}_gather_cast" for latent in kernels.latents if latent.gemm is not None]
                if "mla_up_proj" in modules and "attention" in kind else [])
            forward_amax = amax * amax_reductions(kernels, names, Phase.fwd)
            tp += forward_amax + amax * (amax_reductions(kernels, names, Phase.bwd_ig)
                                         + amax_reductions(kernels, [n for n in rerun_names if n in kernels],
                                                           Phase.recompute))
            ahead += forward_amax
            if kernels.sparse is not None and "attention" in kind:  # the indexer's inputs and its loss's target
                tp += (1 + again) * self.slowest(AR, group, kernels.indexer_target_bytes)
                tp += (1 + again) * self.slowest(AG, group, kernels.indexer_input_bytes) if s.sequence_parallel else 0.0
        cp = 0.0
        cp_group = self.placed(s, "cp", stage)
        if s.cp > 1 and "attention" in kind:
            m = workload.model
            local_kv = 2 * shape.tokens * max(m.kv_heads // s.tp, 1) * m.head_size * shape.act_bytes
            group = cp_group
            if shape.cp_a2a > 1:  # Q, K, V and the output each way, waited for (workload.megatron cp_all_to_all)
                a2a = self.placed(s, "cp_a2a", stage, shape.cp_a2a)
                each = sum(self.slowest(A2A, a2a, elements * shape.act_bytes)
                           for elements in kernels.attention_tensors().values())
                cp, ahead = (2 + core_again) * each, ahead + each
                group = self.placed(s, "cp_p2p", stage, shape.cp_a2a)  # the ring between the all-to-all groups
            if RING_BLOCK in kernels:  # each pass hides behind the block computed meanwhile (workload.megatron)
                block = {phase: float(self.kernel_seconds(s.dtype, [kernels[RING_BLOCK][phase]]).sum())
                         for phase in (Phase.fwd, Phase.bwd_ig)}
                forward_pass = kernels.repeats(RING_BLOCK) * max(0.0, self.slowest(SR, group, local_kv)
                                                                 - block[Phase.fwd])
                cp += (1 + core_again) * forward_pass + kernels.repeats(RING_BLOCK) * max(
                    0.0, self.slowest(SR, group, 2 * local_kv) - block[Phase.bwd_ig])
                ahead += forward_pass
                cp += self.slowest(SR, group, local_kv)  # the key/value gradients' way home
            elif kernels.gathers_kv and kernels.sparse is not None:  # the MQA key (core attention's), then the
                sizes = (kernels.latent_key_bytes, core_again), (kernels.indexer_key_bytes, again)  # indexer's keys
                cp = sum((1 + twice) * self.slowest(AG, group, s.cp * size) + self.slowest(RS, group, s.cp * size)
                         for size, twice in sizes)
                ahead += sum(self.slowest(AG, group, s.cp * size) for size, _ in sizes)
            elif kernels.gathers_kv:
                gather = self.slowest(AG, group, s.cp * local_kv)
                cp, ahead = (1 + core_again) * gather + self.slowest(RS, group, s.cp * local_kv), ahead + gather
        for mixer in MIXERS:
            if s.cp > 1 and mixer in kind:  # the scan's inputs and its output each way, waited for
                each = sum(self.slowest(A2A, cp_group, elements * shape.act_bytes)
                           for elements in kernels.mixer_shard(mixer).all_to_all().values())
                cp, ahead = cp + (2 + again) * each, ahead + each
        ep = 0.0
        if routed and s.ep > 1:  # dispatch and combine, forward and back
            size = shape.dispatched_tokens(moe.top_k) * h * shape.act_bytes
            a2a = self.slowest(A2A, self.placed(s, "ep", stage), size, dispatch_algorithm(workload))
            ep, ahead = (4 + 2 * moe_again) * a2a, ahead + 2 * a2a
        if routed and shape.gathers_routed_tokens:  # the routed tokens' gather and their outputs' scatter, both ways
            size, group = shape.routed_tokens(moe.top_k) * h * shape.act_bytes, self.placed(s, "etp", stage)
            pair = self.slowest(AG, group, size) + self.slowest(RS, group, size)
            ep, ahead = ep + (2 + moe_again) * pair, ahead + pair
        return tp, cp, ep, ahead

    def _pipelined_tp(self, s: Strategy, kernels: LayerKernels, reducing: list[str], group: tuple[tuple[int, ...], ...],
                      slower: float) -> tuple[list[float], float]:
        """Under tp_comm_overlap, (each reducing block's forward, the layer's backward) seconds of sequence-parallel
        communication the tracer pipelines with a GEMM beyond that GEMM (pipelined_exposed), or waits for whole:
        a block's input gathered beside the column-parallel GEMMs reading it and its output reduce-scattered beside
        the row-parallel GEMM writing it, the output's gradient gathered beside that GEMM's dgrad (workload.megatron
        gathered_gemms, tp_reduce); MLA's latents each beside its up projection, those with none waited for
        (latent_forward); the mixture of experts' own gathers and reduction waited for (moe_pre_dispatch,
        moe_reduce). The column-parallel backward's regather and reduction are no different from without it
        (column_block_backward)."""
        hidden = kernels.shape.tokens * kernels.model.hidden_size * kernels.shape.act_bytes
        reduce = self.slowest(RS, group, hidden)
        firsts, backward = [], 0.0
        for b in reducing:
            pair = kernels.parallel_gemms(b)
            gradient = self.slowest(AG, group, kernels.block_gather_bytes(b)[1])
            if pair is None:
                firsts.append(sum(self.slowest(AG, group, size) for size in kernels.block_input_gathers(b)) + reduce)
                backward += gradient
                continue
            if b == "attention" and kernels.latents:
                inputs = [((latent.gemm,) if latent.gemm else (), kernels.latent_bytes(latent))
                          for latent in kernels.latents]
            else:
                inputs = [(kernels.column_groups(b)[0].gemms, kernels.block_gather_bytes(b)[0])]
            row = pair[1]
            # the casts of the GEMMs' operands run after the gather's launch, before the GEMM (not the reduce-
            # scatter's, launched with the GEMM after them)
            firsts.append(sum(pipelined_exposed(self._gemm_seconds(s, kernels, names, Phase.fwd),
                                                self.slowest(AG, group, size), slower,
                                                self._cast_seconds(s, kernels, names, Phase.fwd))
                              for names, size in inputs)
                          + pipelined_exposed(self._gemm_seconds(s, kernels, (row,), Phase.fwd), reduce, slower))
            backward += pipelined_exposed(self._gemm_seconds(s, kernels, (row,), Phase.bwd_ig), gradient, slower,
                                          self._cast_seconds(s, kernels, (row,), Phase.bwd_ig))
        return firsts, backward

    def _gemm_seconds(self, s: Strategy, kernels: LayerKernels, names: Iterable[str], phase: Phase) -> list[float]:
        """Seconds of each launch of GEMMs `names` in `phase`, in the chunks tp_comm_overlap splits them into
        (LayerKernels.ub_chunks), as _unit_seconds times them."""
        specs = [chunked(kernels[n][phase], kernels.ub_chunks(n, phase) if s.tp_comm_overlap else 1)
                 for n in names if n in kernels for _ in range(kernels.repeats(n))]
        return [float(t) for t in self.kernel_seconds(s.dtype, specs)] if specs else []

    def _cast_seconds(self, s: Strategy, kernels: LayerKernels, names: Iterable[str], phase: Phase) -> float:
        """Seconds of the narrow operand casts GEMMs `names` run before `phase` (`<gemm>_cast`, where the table has
        one in that phase: workload.megatron run)."""
        specs = [kernels[f"{n}_cast"][phase] for n in names if f"{n}_cast" in kernels and phase in kernels[f"{n}_cast"]
                 for _ in range(kernels.repeats(n))]
        return float(self.kernel_seconds(s.dtype, specs).sum()) if specs else 0.0

    def _edge_comm(self, s: Strategy, kernels: LayerKernels, unit: int, gemms: dict[Phase, float] | None = None,
                   stage: int = 0) -> float:
        """Exposed tensor-parallel seconds per micro-batch of the embedding or the head (`gemms`: the seconds of its
        GEMMs per phase; None: of the forward alone, what the forward waits for), as the tracer runs them
        (workload.megatron forward_unit, head_forward, head_backward): the vocab-parallel embedding's output reduced
        (an all-reduce, or a reduce-scatter under sequence parallelism) and, under sequence parallelism, its output
        gradient gathered before its weight gradient; at the head, for the main loss and each multi-token-prediction
        depth's, the final norm's output gathered before the LM head (under sequence parallelism; pipelined with the
        GEMM under tp_comm_overlap), the cross entropy's three all-reduces of one float per token, and the LM head's
        backward as a layer's column-parallel block's (the input re-gathered beside the dgrad, the input gradient's
        reduction beside the wgrad: Estimator._layer_comm). Left out, tp 8 with sequence parallelism (2 layers,
        hidden 2048, vocabulary 128,000; 8 H100s) was estimated 0.915 of its replay."""
        if s.tp == 1:
            return 0.0
        shape = kernels.shape
        group, hidden = self.placed(s, "tp", stage), shape.tokens * kernels.model.hidden_size * shape.act_bytes
        gather = self.slowest(AG, group, hidden) if s.sequence_parallel else 0.0
        reduce = self.slowest(RS if s.sequence_parallel else AR, group, hidden)
        if unit == EMBEDDING_LAYER:
            return reduce if gemms is None else reduce + gather
        depths = 1 + kernels.model.mtp_layers
        loss = 3 * self.slowest(AR, group, shape.tokens * 4.0)
        slower = self.stretch(self.plan.choose(AG if s.sequence_parallel else AR, group[0], hidden).channels) - 1
        # the final norm's output gathered beside the LM head (pipelined_exposed) under tp_comm_overlap
        forward = pipelined_exposed(self._gemm_seconds(s, kernels, ("lm_head",), Phase.fwd), gather, slower) if (
            s.tp_comm_overlap) else gather
        if gemms is None:
            return depths * (loss + forward)
        dgrad, wgrad = gemms[Phase.bwd_ig] / depths, gemms[Phase.bwd_wg] / depths
        casts = [self._cast_seconds(s, kernels, ("lm_head",), phase) for phase in (Phase.bwd_ig, Phase.bwd_wg)]
        backward = exposed_beside(dgrad, gather, slower, casts[0]) + (
            reduce if s.zero_bubble else exposed_beside(wgrad, reduce, slower, casts[1]))
        return depths * (loss + forward + backward)

    def model_flops(self) -> float:
        """Model FLOPs of one step (Narayanan et al.'s convention, as the replay counts them): every layer's
        forward and backward kernels on one unsharded micro-batch of one sequence, times the global batch (every
        pipeline stage's layers: stage 0's alone made a workload of pp 2 half its FLOPs)."""
        base = self.workload
        parallelism = base.parallelism.model_copy(update={"tp": 1, "cp": 1, "ep": 1, "sequence_parallel": False,
                                                          "expert_tensor_parallel": None})
        training = base.training.model_copy(update={"micro_batch_size": 1})
        one = base.model_copy(update={"parallelism": parallelism, "training": training})
        kernels = LayerKernels.of(one)
        layers = PipelineLayers.of(one)
        flops = 0.0
        for unit in (unit for stage in range(layers.pp) for unit in layers.stage_units(stage)):  # every stage's
            kind = unit_kind(kernels, unit)
            table = unit_table(kernels, kind)
            for name in self._unit_kernels(table, kind):
                flops += sum(spec.flops for phase, spec in table[name].items() if phase != Phase.recompute)
        return flops * base.training.global_batch_size

    def seconds(self, ctype: CollType, group: tuple[int, ...], size: float, channels: int | None = None,
                algorithm: str = "") -> float:
        """One collective alone on its group's links, as simulon times it, on `channels` where given (else the
        scenario's, or NCCL's) and by `algorithm` where given (else the scenario's: workload.megatron's
        dispatch_algorithm names DeepEP's for the token dispatch); cached per collective, group shape, the node groups
        its members lie in, size, channels and algorithm."""
        key = (ctype, self.plan.shape(group), self.lies_in(group), round(size), channels, algorithm)
        if key not in self._collectives:
            c = self.collective
            timing = time_collective(self.datacenter, ctype, group, size,
                                     algorithm or algorithm_for(ctype, c.algorithm), channels or c.num_channels,
                                     c.protocol)
            self._collectives[key] = timing.time_us * 1e-6
        return self._collectives[key]

    def lies_in(self, group: tuple[int, ...]) -> bytes:
        """The node group of each of a group's members (which links a collective over them runs on)."""
        return self.placement.group[list(group)].tobytes()

    def slowest(self, ctype: CollType, groups: tuple[tuple[int, ...], ...], size: float, algorithm: str = "") -> float:
        """A collective at the slowest of its placements (Estimator.placed): the step waits for the last."""
        return max(self.seconds(ctype, group, size, algorithm=algorithm) for group in groups)

    def placed(self, s: Strategy, axis: str, stage: int, cp_a2a: int = 1) -> tuple[tuple[int, ...], ...]:
        """A stage's process groups along `axis` (RankLayout.group), one for each way their members lie in the
        node groups (the stage's first where every rank is on one node group): on a datacenter whose node groups'
        links differ, a collective is timed on each group's own links, as the replay runs it (a tensor-parallel
        group on the slower NVLink of a second DGX group took 160 ms of a step estimated on the first's,
        replayed 491 ms longer)."""
        key = (s.tp, s.cp, s.dp, s.pp, s.ep, s.etp, cp_a2a, axis, stage)
        if key not in self._placements:
            layout = RankLayout(tp=s.tp, cp=s.cp, dp=s.dp, pp=s.pp, ep=s.ep, etp=s.etp, cp_a2a=cp_a2a)
            self._placements[key] = self._distinct(layout.group(axis, rank) for rank in self._stage_ranks(s, stage))
        return self._placements[key]

    def _stage_ranks(self, s: Strategy, stage: int) -> range:
        """The ranks of a stage whose groups are timed (Estimator.placed): all, or its first alone where every rank
        is on one node group."""
        size = s.tp * s.cp * s.dp
        return range(stage * size, stage * size + (1 if self.placement.uniform else size))

    def _distinct(self, groups: Iterable[tuple[int, ...]]) -> tuple[tuple[int, ...], ...]:
        """Of some process groups, the first of each shape and way of lying in the node groups."""
        distinct: dict[tuple, tuple[int, ...]] = {}
        for group in groups:
            distinct.setdefault((self.plan.shape(group), self.lies_in(group)), group)
        return tuple(distinct.values())

    def stretch(self, channels: int) -> float:
        """How much longer a kernel runs beside a collective of `channels` channels (engine/replay.py)."""
        held = min(channels, MAX_HELD_SHARE * self.sm_count)
        return self.sm_count / (self.sm_count - held)

    def parameters(self, kernels: LayerKernels, workload: MegatronWorkload, layers: PipelineLayers) -> ModelParameters:
        """The parameters of a kernel table (LayerKernels.weights_of, one object per shard shape: keyed by identity)
        and layer split, one ModelParameters for every strategy that shares them, so that each stage's
        (ModelParameters.stage) and the embedding's copies are worked out once; rebuilt for every call, they took 13.9
        of the 66 profiled CPU seconds of DeepSeek-V3's pp 16 tp 1 slice of the search. The table's model is the
        workload's (weights_of keys its tables on it)."""
        key = (kernels, layers)
        if key not in self._parameters:
            self._parameters[key] = ModelParameters(kernels, workload.model, layers)
        return self._parameters[key]

    def _stage_params(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels, layers: PipelineLayers,
                      stage: int) -> tuple[Counts, Counts]:
        """(dense, expert) parameters one rank of a stage holds, and the (dense, expert) bytes their all-gather moves
        (StageParameters.gathered_bytes); they depend on the sharding of weights and the number format only."""
        key = (s.tp, s.ep, s.etp, s.dtype, self._composition(s, kernels, layers, stage))
        if key not in self._params:
            held, shape = self.parameters(kernels, workload, layers).stage(stage), ShardShape.of(workload)
            self._params[key] = held.total(), held.summed(
                lambda unit: held.gathered_bytes(unit, shape))
        return self._params[key]

    def pipeline_send(self, s: Strategy, workload: MegatronWorkload) -> float:
        """A micro-batch's activations sent to the next stage, at the slowest pair of neighbouring ranks, on the
        channels NCCL gives it on the pipeline-parallel group's communicator, as the replay sends it
        (dag.builder.DAGBuilder._send)."""
        shape = ShardShape.of(workload)
        size = shape.norm_tokens * workload.model.hidden_size * shape.act_bytes
        stage = s.tp * s.cp * s.dp
        senders = range(1) if self.placement.uniform else range(stage * (s.pp - 1))
        layout = RankLayout(tp=s.tp, cp=s.cp, dp=s.dp, pp=s.pp)  # the replay's groups (dag.builder.DAGBuilder._send)
        return max(self._send_seconds((rank, rank + stage), layout.group("pp", rank), size) for rank in senders)

    def _send_seconds(self, pair: tuple[int, int], pipeline: tuple[int, ...], size: float) -> float:
        """A send/receive of `size` over `pair` on the channels of the communicator `pipeline` (the pair's
        pipeline-parallel group)."""
        return self.seconds(SR, pair, size, self.plan.choose(SR, pair, size, communicator=pipeline).channels)

    def _data_parallel(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels, layers: PipelineLayers,
                       stage: int, held: tuple[Counts, Counts], cost: _StageCost, microbatches: int,
                       synced: bool = False) -> tuple[float, float]:
        """(exposed gradient and parameter sync, optimizer step) of the slowest stage, whose rank holds `held`:
        (dense, expert) parameters and the (dense, expert) bytes their all-gather moves. `synced`: the overlapped
        syncs and the passes over the buckets are played with the schedule (Estimator.plays_syncs), so only what
        runs apart from it is counted here."""
        syncs, optimizer, buckets = self._gradient_sync(s, workload, stage, held)
        if synced:
            par = workload.parallelism
            return (sum((0.0 if par.overlap_grad_reduce else scatter) + (0.0 if par.gathers_overlapped else gather)
                        for scatter, gather, _, _ in syncs),
                    optimizer - (buckets if par.overlap_grad_reduce else 0.0))
        shares = self._bucket_shares(s, workload, kernels, layers, stage)
        if s.sharding not in MEGATRON_SHARDINGS:  # every micro-batch's sync; the reduce-scatters after the step's last
            waits = self.sharded_waits(s, workload, kernels, layers, stage)  # the reduce-scatters after stage 0's
            return (microbatches * self._microbatch_sync(s, syncs, cost, waits)
                    + self.sharded_waits(s, workload, kernels, layers, 0).reduce_tail), optimizer
        exposed = 0.0
        for scatter, gather, slower, axis in syncs:
            exposed += self._bucketed_sync(workload, cost, scatter, gather, slower, shares[axis], buckets)
        return exposed, optimizer

    def embedding_sync(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels,
                        layers: PipelineLayers) -> float:
        """Seconds of the all-reduce that sums the gradients of the word-embedding copies several stages hold
        (ModelParameters.embedding_stages: tied embeddings on the first and the last stage, multi-token prediction's
        copy on its stage), at the slowest of the groups of the first such stage's ranks: Megatron-Core runs it in
        finalize_model_grads after the data-parallel sync, and the optimizer step waits for it, as the tracer emits it
        (workload.data_parallel DataParallelSync._tied_embedding_sync); none under FSDP or ZeRO-2, whose gradients
        the tracer syncs otherwise. Left out, tp 2 pp 2 dp 2 (2 nodes of 4 H100s, 4 layers, vocabulary 32,768) was
        estimated 0.76 of its replay with tied embeddings and 0.80 with one multi-token-prediction layer (its
        embedding copy's 67 MB of gradients summed over the nodes' NICs in 6.8 ms)."""
        if s.sharding not in MEGATRON_SHARDINGS:
            return 0.0
        parameters = self.parameters(kernels, workload, layers)
        stages = parameters.embedding_stages
        if not stages:
            return 0.0
        size = parameters.tied_embedding(stages[0]) * ShardShape.of(workload).grad_bytes
        key = (s.tp, s.cp, s.dp, s.pp, stages, size)
        if key not in self._embedding_syncs:
            layout = RankLayout(tp=s.tp, cp=s.cp, dp=s.dp, pp=s.pp, embedding_stages=stages)
            groups = self._distinct(layout.group("emb", rank) for rank in self._stage_ranks(s, stages[0]))
            self._embedding_syncs[key] = self.slowest(AR, groups, size)
        return self._embedding_syncs[key]

    def tp_duplicated_sync(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels,
                           layers: PipelineLayers) -> float:
        """Seconds of the all-reduce over tp of the gradients of the weights every tensor-parallel rank holds whole
        (StageParameters.tp_duplicated: DSA's indexer, and MLA's down projections under sequence parallelism), at the
        slowest of stage 0's tensor-parallel groups: Megatron-Core runs it in finalize_model_grads after the
        data-parallel sync, and the optimizer step waits for it, as the tracer emits it (workload.data_parallel
        DataParallelSync._tp_duplicated_sync): exposed whole on stage 0, which runs the step's last backward; none
        under FSDP or ZeRO-2, whose gradients the tracer syncs otherwise. Left out, an MLA GPT (4 layers, hidden 2048,
        DeepSeek-V3's latent ranks) at tp 4 with sequence parallelism on 8 H100s was estimated 0.9956 of its
        replay."""
        if s.tp == 1 or s.sharding not in MEGATRON_SHARDINGS:
            return 0.0
        key = (s.tp, s.cp, s.dp, s.pp, s.sequence_parallel, s.dtype, self._composition(s, kernels, layers, 0),
               self.stage_key(s, 0))
        if key not in self._tp_duplicated_syncs:
            params = self.parameters(kernels, workload, layers).stage(0).tp_duplicated
            size = params * ShardShape.of(workload).grad_bytes
            self._tp_duplicated_syncs[key] = self.slowest(AR, self.placed(s, "tp", 0), size) if size else 0.0
        return self._tp_duplicated_syncs[key]

    def _mirror_exposed(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels,
                        layers: PipelineLayers, stage: int, cost: _StageCost, microbatches: int) -> float:
        """Seconds DualPipe's mirror all-reduces add to a step on `stage`'s ranks (Estimator.mirror_syncs): the one of
        the chunk whose gradients complete last runs after the data-parallel reduction of its buckets, on the same
        stream, and the optimizer step waits for it: exposed whole; the other runs beside the remaining backwards
        and slows them only by the SMs it holds (stretched, over one pass's backward as the data-parallel
        reduction's, Estimator._bucketed_sync)."""
        order = chunks_by_completion(workload.parallelism.pipeline_schedule, s.vpp, stage, s.pp, microbatches)
        times = self.mirror_syncs(s, workload, kernels, layers, stage)
        *earlier, last = order
        groups = self.placed(s, "mirror", stage)
        slower = self.stretch(self.plan.choose(AR, groups[0], 1.0).channels) - 1
        return times[last] + sum(stretched(cost.backward, times[chunk], slower) - cost.backward for chunk in earlier)

    def mirror_syncs(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels, layers: PipelineLayers,
                     stage: int) -> tuple[float, ...]:
        """Per model chunk of a DualPipe stage, the seconds of the all-reduce that sums its gradients with the mirror
        rank's copy (rank s and rank pp - 1 - s hold the same two chunks: workload.data_parallel
        DataParallelSync.mirror_sync, which the tracer runs once a chunk's last weight gradient has), at the slowest
        of the stage's mirror groups (cached per shape and the stage's units). Left out,
        DualPipe at pp 2 (8 H100s, 16 layers, hidden 2048) was estimated 80.5 ms where the replay gives 93.3, its two
        1.9 GB all-reduces taking 8.3 ms each, and step_timer did not take DualPipe."""
        key = (self.shape_key(s), s.pp, s.dp, s.sharding, self._composition(s, kernels, layers, stage),
               self.stage_key(s, stage))
        if key not in self._mirror_syncs:
            held, grad_bytes = self.parameters(kernels, workload, layers).stage(stage), ShardShape.of(workload)
            groups = self.placed(s, "mirror", stage)
            self._mirror_syncs[key] = tuple(
                self.slowest(AR, groups, sum(sum(held.of(unit)) for unit in layers.units_of(stage, chunk))
                             * grad_bytes.grad_bytes) for chunk in range(layers.chunks))
        return self._mirror_syncs[key]

    @staticmethod
    def _bucketed_sync(workload: MegatronWorkload, cost: _StageCost, scatter: float, gather: float, slower: float,
                       shares: tuple[tuple[float, float], tuple[float, float]], buckets: float) -> float:
        """Seconds a step waits beyond its micro-batches for Megatron's bucketed gradient reduction (`scatter`) and
        parameter all-gather (`gather`), `shares` the (first, last) bucket's share of each in backward and forward order
        (Estimator._bucket_shares): where overlapped, the reduction runs from the last micro-batch's backward once its
        first bucket is filled (pipelined) and the gather ahead of the first forward, whose units each wait for their
        bucket; the kernels beside either are stretched only over what it overlaps (stretched), and the sync goes on
        through the collectives the micro-batch waits for (`buckets`: the seconds of the passes over the gradient
        buckets, on the compute stream in the backward, which the step counts with the optimizer). Not overlapped, each
        is exposed whole. With the stretch counted over all the backward beside a reduction that
        outlasted it, tp 2 dp 8 (2 nodes of 8 H100s, 16 layers, hidden 2048) was estimated 103.4 ms where the replay
        gives 95.5."""
        par = workload.parallelism
        exposed = scatter + gather  # neither overlapped
        if par.overlap_grad_reduce:  # the buckets' passes (counted with the optimizer step) run in the backward too
            compute = cost.backward + buckets
            exposed += pipelined(stretched(compute, scatter, slower) + cost.backward_span - cost.backward, scatter,
                                 shares[0]) - cost.backward_span - buckets - scatter
        if par.gathers_overlapped:
            exposed += pipelined(gather, stretched(cost.forward, gather, slower) + cost.forward_span - cost.forward,
                                 shares[1]) - cost.forward_span - gather
        return exposed

    def _bucket_shares(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels, layers: PipelineLayers,
                       stage: int) -> tuple[tuple[tuple[float, float], tuple[float, float]], ...]:
        """Per parameters a stage syncs (0 dense, 1 expert), the (first, last) bucket's share of them in the order the
        backward fills the buckets and in the order the forward gathers them (workload.data_parallel.bucket_shares):
        the first unit of the backward, often the LM head, and the last, often the embedding, may make a bucket of
        their own. Cached per layout and the stage's units."""
        dp_cp = s.dp * s.cp
        key = (s.tp, s.ep, s.etp, dp_cp, self._composition(s, kernels, layers, stage), stage, s.pp, s.vpp,
               s.first_layers, s.last_layers)
        if key not in self._shares:
            held, bucket = self.parameters(kernels, workload, layers).stage(stage), bucket_params(workload, dp_cp)
            self._shares[key] = tuple(
                (bucket_shares((held.of(unit)[axis] for unit in reversed(held.units)), bucket),
                 bucket_shares((held.of(unit)[axis] for unit in held.units), bucket)) for axis in (0, 1))
        return self._shares[key]

    @staticmethod
    def plays_syncs(s: Strategy, workload: MegatronWorkload) -> bool:
        """Whether the step's data-parallel syncs are played out with its pipeline schedule (synced_idle): Megatron's
        gradient buffers (not ZeRO-2's or FSDP's, synced every micro-batch: Estimator._microbatch_sync) under 1F1B or
        interleaved 1F1B, whose backwards run whole; ZB-H1, ZB-V and DualPipe keep the syncs counted apart."""
        return (s.pp > 1 and s.sharding in MEGATRON_SHARDINGS and not s.zero_bubble
                and workload.parallelism.pipeline_schedule in PLAYED_SYNC_SCHEDULES)

    def sends_share_links(self, s: Strategy) -> bool:
        """Whether the pipeline's sends and the data-parallel collectives both leave the first stage's ranks
        through the scale-out network (each spans scale-up domains: Topology.domains), so that they share the
        ranks' NICs (synced_end)."""
        topology, next_stage = self.plan.topology, s.tp * s.cp * s.dp  # the second stage's first rank
        return (s.pp > 1 and s.dp * s.cp > 1 and topology.domains((0, next_stage)) > 1
                and topology.domains([rank for group in self.placed(s, "dp_cp", 0) for rank in group]) > 1)

    def chunk_syncs(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels,
                    layers: PipelineLayers) -> ChunkSyncs:
        """Per pipeline rank, per model chunk, its data-parallel sync as synced_end plays it: each stage's
        collectives (Estimator._gradient_sync, at the slowest of its groups), passes over its buckets and weight
        casts (Estimator._stage_weight_casts: once a step where the format caches them) shared among its chunks by
        the parameters each holds (Megatron-Core gives each model chunk buffers and buckets of its own), of each axis
        (dense over dp x cp, experts over the expert-data-parallel group) one after the other on the stream, with
        the first and the last bucket's share of each chunk's (bucket_shares); the collectives not overlapped are
        not played (Estimator._data_parallel counts them whole). Cached per shape, layout and split: strategies
        differing only in micro-batch count share them."""
        par = workload.parallelism
        key = (self.shape_key(s), s.pp, s.vpp, s.dp, s.sharding, layers, par.recompute_num_layers)
        if key not in self._chunk_syncs:
            parameters = self.parameters(kernels, workload, layers)
            bucket = bucket_params(workload, s.dp * s.cp)
            cached = TrainingFormat.of_workload(workload).weight_cache
            ranks = []
            for stage, chunk_times in enumerate(self.chunk_times(s, workload, kernels, layers)):
                held = self._stage_params(s, workload, kernels, layers, stage)
                syncs, _, buckets = self._gradient_sync(s, workload, stage, held)
                casts = self._stage_weight_casts(s, workload, kernels, layers, stage) if cached else 0.0
                cost, stage_params = self._stage_cost(s, workload, kernels, layers, stage), parameters.stage(stage)
                units = [layers.units_of(stage, chunk) for chunk in range(len(chunk_times))]
                counts = [[stage_params.of(unit) for unit in chunk] for chunk in units]
                totals = [sum(count[axis] for chunk in counts for count in chunk) for axis in (0, 1)]
                every = sum(totals)
                slower = max((slow for _, _, slow, _ in syncs), default=0.0)
                chunks = []
                for chunk in counts:
                    held_share = [sum(count[axis] for count in chunk) / totals[axis] if totals[axis] else 0.0
                                  for axis in (0, 1)]
                    share = sum(held_share[axis] * totals[axis] for axis in (0, 1)) / every if every else 0.0
                    scatter = sum(held_share[axis] * time for time, _, _, axis in syncs) if par.overlap_grad_reduce \
                        else 0.0
                    gather = sum(held_share[axis] * time for _, time, _, axis in syncs) if par.gathers_overlapped \
                        else 0.0
                    weights = [count[0] + count[1] for count in chunk]
                    head, tail = bucket_shares(weights, bucket)
                    back_head, back_tail = bucket_shares(weights[::-1], bucket)
                    chunks.append((casts * held_share[0], gather, head, tail, scatter, back_head, back_tail,
                                   buckets * share if par.overlap_grad_reduce else 0.0, slower,
                                   cost.forward / cost.forward_span if cost.forward_span else 0.0,
                                   cost.backward / cost.backward_span if cost.backward_span else 0.0))
                ranks.append(tuple(chunks))
            self._chunk_syncs[key] = tuple(ranks)
        return self._chunk_syncs[key]

    def _drain_syncs(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels, layers: PipelineLayers,
                     slowest: int) -> float:
        """Seconds the data-parallel sync adds to the pipeline's drain beyond the slowest stage's (whose own the step
        counts in full, Estimator._data_parallel), where the syncs are not played with the schedule
        (Estimator.plays_syncs): the last micro-batch's backward runs through every stage in turn,
        and under overlap_grad_reduce each stage reduces its gradients bucket by bucket during it, so each other
        stage's last backward is as long again as its bucket kernels (the NaN check and scaling, on its compute
        stream) and as its kernels run slower beside its reduction (workload/data_parallel.py), each chunk's share
        (the drain runs through one model chunk of each other stage, as Narayanan's (pp - 1) / vpp); not under ZB-H1,
        whose split backwards send the input gradient on before the weight gradients run. ZeRO-2 and FSDP sync every
        micro-batch: each other stage's share of the fill and drain is its micro-batch time with its sync, as the
        slowest stage's every micro-batch is counted (Estimator._microbatch_sync). Left out, tp 1 pp 4 dp 2 (8 H100s,
        16 layers, 4 micro-batches) was estimated 61.4 ms where the replay gives 67.9, and as faster than without
        overlap_grad_reduce (64.6 ms), which the replay runs in 64.5."""
        par = workload.parallelism
        megatron = s.sharding in MEGATRON_SHARDINGS
        if s.pp == 1 or (megatron and (s.zero_bubble or not par.overlap_grad_reduce)):
            return 0.0
        key = (self.shape_key(s), s.pp, s.vpp, s.first_layers, s.last_layers, par.recompute_num_layers, s.dp,
               s.sharding, slowest)  # cached: strategies differing only in micro-batches share it
        if key not in self._drains:
            added = 0.0
            for stage in range(s.pp):
                if stage == slowest:
                    continue
                held = self._stage_params(s, workload, kernels, layers, stage)
                cost = self._stage_cost(s, workload, kernels, layers, stage)
                syncs, _, buckets = self._gradient_sync(s, workload, stage, held)
                if megatron:
                    added += (buckets + sum(min(scatter, cost.backward) * slower
                                            for scatter, _, slower, _ in syncs)) / s.vpp  # one chunk's
                else:  # its own micro-batch time in the fill and drain (Estimator.estimate's bubble)
                    # the gathers its micro-batch would wait for it runs while it waits for its neighbour
                    waits = self.sharded_waits(s, workload, kernels, layers, stage)
                    added += (self._microbatch_sync(s, syncs, cost, waits) - waits.waited) / s.vpp
            self._drains[key] = added
        return self._drains[key]

    @staticmethod
    def _microbatch_sync(s: Strategy, syncs: list[tuple[float, float, float, float]], cost: _StageCost,
                         waits: ShardedWaits) -> float:
        """Seconds a stage's sync adds to each of its micro-batches where it syncs every micro-batch: FSDP gathers each
        unit's weights before its forward and again before its backward and reduce-scatters its gradients, ZeRO-2
        gathers them before the forward and reduce-scatters the gradients, as workload.data_parallel runs both, on
        streams of their own that go on into the next micro-batch, over the same links, which they share while they run
        at once (FSDP's backward gathers beside its reduce-scatters: `shared` seconds of both at once,
        Estimator.sharded_waits, the kernels beside them slowed by the SMs both hold, held_twice). The micro-batch lasts
        as long as the longer of its communication and its kernels slowed beside it (stretched: its GEMMs and attention
        kernels, those the replay slows, for the part of them the communication overlaps); `waits`
        (Estimator.sharded_waits): its `waited`, the seconds of those gathers no prefetch hides, waited for in full and
        beside no kernel, and its `paired`, the seconds kernels run while a forward's gathers share the links with the
        reduce-scatters of the backward before it, beside both; `syncs` as Estimator._gradient_sync gives them; 0 for
        Megatron's buffers, reduced once a step. With ZeRO-2's gather counted once a step, the first unit's left out,
        ZeRO-2 at pp 2 vpp 2 (8 H100s, 16 layers, hidden 2048) was estimated 0.941 of its replay; with what outlasted
        the kernels alone exposed, ZeRO-2 at tp 8 on 4 nodes 1.182 (its reduce-scatters hide behind the tensor-parallel
        communication too). With every second of communication counted as slowing a second of kernels, and the slowing
        added to what outlasted them, ZeRO-2 at pp 1 (8 H100s, 16 layers, hidden 2048) was estimated 1.036 of its
        replay; FSDP's pair timed as one collective at a time, 0.959 (across 2 nodes 0.886); with every backward gather
        counted as beside a reduce-scatter (twice the shorter of the two sums), FSDP at tp 1 dp 4 (4 H100s, 4 layers,
        hidden 4096) 1.044, its kernels slowed beside both for 11.7 ms a micro-batch where the replay runs both at once
        for 7.8."""
        if s.sharding not in ("fsdp", "zero2"):
            return 0.0
        waited, _, paired, shared = waits
        added = waited
        for scatter, gather, slower, axis in syncs:
            sync = (2 if s.sharding == "fsdp" else 1) * gather + scatter - (waited if axis == 0 else 0.0)
            twice, paired = held_twice(slower), min(paired if axis == 0 else 0.0, sync)
            both = min(shared if axis == 0 else 0.0, sync - paired) if s.sharding == "fsdp" else 0.0
            covered = min(paired / (1 + twice), cost.sm_bound)  # kernels known to run beside both
            slowed = covered * twice + spread_slowing(cost.sm_bound - covered, cost.total - covered,
                                                      ((both, twice), (sync - paired - both, slower)))
            added += max(sync - cost.total, slowed)
        return added

    def sharded_waits(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels, layers: PipelineLayers,
                      stage: int) -> ShardedWaits:
        """Under ZeRO-2 and FSDP, which gather each unit's parameters before its forward (and, FSDP, again before its
        backward) and reduce-scatter its gradients after its backward, every micro-batch: (seconds a micro-batch of
        the stage waits on average for the gathers no prefetch hides, over its model chunks: each chunk's first
        unit's forward, and under FSDP its last unit's backward, waits for its unit's gather in full, the next ones
        as far as a gather outlasts the unit before it: gather_waits; a forward that follows a backward on the rank
        (forwards_after_backward: every micro-batch's but the first without pipelining, the steady state's under
        1F1B) gathers on links that backward's last reduce-scatters still load, its reduce_tail; seconds the
        reduce-scatters of its first chunk's backward go on after it: reduce_tail, exposed where that backward is the
        step's last, stage 0's, each unit's backward slowed beside the reduce-scatter before it; seconds a micro-batch's
        kernels run beside both a gather and such a reduce-scatter: played_gathers; under FSDP, seconds a micro-batch's
        backward gathers share the links with its reduce-scatters: each unit's backward runs beside the reduce-scatter
        of the unit before it and the gather of the unit after it, prefetched as it starts, so from the third unit of
        a chunk's backward on each gather runs beside the reduce-scatter of the unit two before it, both at once for
        twice the shorter's seconds, the replay's fair shares). Left out, ZeRO-2 at pp 2 vpp 2
        (8 H100s, 16 layers, hidden 2048) was estimated 0.941 of its replay, FSDP 0.935; with the gathers after a
        backward timed alone, ZeRO-2 at pp 4 vpp 2 0.95 (its kernels slowed as the replay slows them); with the
        reduce-scatters lagging the backward at its kernels' own time, ZeRO-2 with 8 experts at tp 2 ep 2 on 4 nodes
        1.10."""
        schedule = workload.parallelism.pipeline_schedule
        microbatches = workload.training.global_batch_size // (s.micro_batch_size * s.dp)
        key = (self.shape_key(s), s.pp, s.vpp, s.first_layers, s.last_layers, s.dp, s.sharding, stage,
               self.stage_key(s, stage), schedule, microbatches)
        if key not in self._sharded:
            timed = self._sharded_syncs(s, workload, kernels, layers, stage)
            if timed is None:
                self._sharded[key] = ShardedWaits(0.0, 0.0, 0.0, 0.0)
            else:
                costs = self._stage_unit_costs(s, workload, kernels, layers, stage)
                play_key = (s.sharding == "fsdp", timed, costs)
                if play_key not in self._sharded_plays:
                    self._sharded_plays[play_key] = ShardedPlay.of(*play_key)
                play = self._sharded_plays[play_key]
                waits, paired = play.waited, 0.0
                follows = forwards_after_backward(schedule, layers.chunks, stage, s.pp, microbatches)
                for forward, after in enumerate(follows):
                    for chunk, share in after:
                        waited, beside = play.gathered(forward, chunk)
                        waits, paired = waits + share * waited, paired + share * beside
                self._sharded[key] = ShardedWaits(waits, play.tails[0], paired, play.shared)
        return self._sharded[key]

    def _sharded_syncs(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels, layers: PipelineLayers,
                       stage: int) -> tuple[tuple[tuple[float, ...], tuple[tuple[float, float], ...]], ...] | None:
        """Per model chunk of a stage, under ZeRO-2 and FSDP: the seconds of each unit's parameter all-gather in forward
        order, and of each unit's gradient reduce-scatter in backward order with how much slower kernels run beside
        it (Estimator.stretch), each at the slowest of the stage's data x context groups; None where the group is of
        one rank. They depend on the layout, the kernel table (its shard's element sizes) and the layer split alone,
        not on the micro-batch, recomputation or schedule, so strategies differing in those share them (cached)."""
        key = (kernels, layers, stage, s.tp, s.cp, s.dp, s.ep, s.etp, s.dtype)
        if key not in self._sharded_timings:
            groups = self.placed(s, "dp_cp", stage)
            found = None
            if len(groups[0]) > 1:
                held, shape = self.parameters(kernels, workload, layers).stage(stage), ShardShape.of(workload)
                timed: dict[tuple[CollType, float], tuple[float, float]] = {}  # a stage's units repeat a few sizes

                def sync(op: CollType, size: float) -> tuple[float, float]:
                    """(seconds, how much slower kernels run beside it) of a collective of `size` bytes."""
                    if (op, size) not in timed:
                        slower = self.stretch(self.plan.choose(op, groups[0], size).channels) - 1 if size else 0.0
                        timed[op, size] = self.slowest(op, groups, size), slower
                    return timed[op, size]

                found = tuple((tuple(sync(AG, sum(held.gathered_bytes(unit, shape)))[0] for unit in units),
                               tuple(sync(RS, sum(held.of(unit)) * shape.grad_bytes) for unit in reversed(units)))
                              for units in (layers.units_of(stage, chunk) for chunk in range(layers.chunks)))
            self._sharded_timings[key] = found
        return self._sharded_timings[key]

    def _stage_unit_costs(self, s: Strategy, workload: MegatronWorkload, kernels: LayerKernels,
                          layers: PipelineLayers, stage: int) -> tuple[tuple[_LayerCost, ...], ...]:
        """Per model chunk of a stage, its units' costs in forward order (Estimator._unit_cost). Cached on what those
        read: the shape, the kinds of the chunks' units in order (Estimator.chunk_kinds) and where the stage's ranks
        lie, so that a pipeline's alike middle stages share them (cached per stage, DeepSeek-V3's pp 16 tp 1 slice of
        the search worked them out 16,720 times for 2,974 strategies, 8.3 of its 145 profiled seconds)."""
        kinds, number = self.chunk_kinds(kernels, layers, stage)
        key = (self.shape_key(s), number, self.stage_key(s, stage))
        if key not in self._chunk_units:
            self._chunk_units[key] = tuple(tuple(self._unit_cost(s, workload, kind, stage) for kind in chunk)
                                           for chunk in kinds)
        return self._chunk_units[key]

    def chunk_kinds(self, kernels: LayerKernels, layers: PipelineLayers,
                    stage: int) -> tuple[tuple[tuple[Unit, ...], ...], int]:
        """Per model chunk of a stage, the kinds of its units in forward order (unit_kind), and a number that stands
        for them: stages whose chunks hold the same kinds in the same order have the same number (cached per kernel
        table, layer split and stage)."""
        key = (kernels, layers, stage)
        if key not in self._chunk_kinds:
            kinds = tuple(tuple(unit_kind(kernels, unit) for unit in layers.units_of(stage, chunk))
                          for chunk in range(layers.chunks))
            self._chunk_kinds[key] = kinds, self._kind_numbers.setdefault(kinds, len(self._kind_numbers))
        return self._chunk_kinds[key]

    def _gradient_sync(self, s: Strategy, workload: MegatronWorkload, stage: int,
                       held: tuple[Counts, Counts]) -> tuple[list[tuple[float, float, float, float]], float, float]:
        """Per data-parallel group of more than one rank that holds parameters of the stage (dense over dp x cp,
        experts over the expert-data-parallel group; under ZeRO-2 and FSDP both at once over dp x cp, as the tracer
        reduce-scatters and gathers each unit's, workload.data_parallel DataParallelSync._fsdp_reduce: timed over the
        expert-data-parallel group apart, ZeRO-2 with 8 experts at ep 2 across 4 nodes of 8 H100s was estimated 1.51
        of its replay, 1.02 with them together): the seconds of its gradient reduce-scatter and parameter
        all-gather (plain data parallelism: its gradient all-reduce, no gather, workload/data_parallel.py), how
        much slower compute runs beside them and which parameters they sync (0 dense, 1 expert); the optimizer step's
        seconds (over every parameter the stage holds under plain data parallelism, over the rank's shard otherwise,
        Megatron's buffer passes included); and of those, the seconds of the passes over the gradient buckets before
        their reduction; each collective at the slowest of the stage's groups (Estimator.placed). Cached per layout,
        number format (the element sizes: the rest of the workload is the search's base), counts and where the stage's
        ranks lie."""
        key = (s.tp, s.cp, s.dp, s.pp, s.ep, s.etp, s.dtype, s.sharding, held, self.stage_key(s, stage))
        if key not in self._syncs:
            (dense, expert), gathered = held
            shape = ShardShape.of(workload)
            syncs, shards = [], 0.0
            ddp = s.sharding == "ddp"  # every rank updates every parameter; gradients all-reduced, none gathered
            dense_groups = self.placed(s, "dp_cp", stage)
            megatron = s.sharding in MEGATRON_SHARDINGS  # Megatron's buffers (not ZeRO-2's or FSDP's)
            axes = ((dense, gathered[0], dense_groups), (expert, gathered[1], self.placed(s, "edp", stage)))
            for axis, (count, weights, groups) in enumerate(axes):
                if count == 0:
                    continue
                shards += count if ddp else count / len(groups[0])
                if not megatron:  # FSDP's collectives move a unit's dense and expert parameters at once
                    count, weights, groups = (dense + expert, sum(gathered), dense_groups) if axis == 0 else (0, 0, ())
                if count == 0 or len(groups[0]) == 1:
                    continue
                grads = count * shape.grad_bytes
                reduce = AR if ddp else RS
                slower = self.stretch(self.plan.choose(reduce, groups[0], grads).channels) - 1  # compute beside it
                syncs.append((self.slowest(reduce, groups, grads), 0.0 if ddp else self.slowest(AG, groups, weights),
                              slower, axis))
            step, buckets = [optimizer_kernel(shards, megatron)], 0.0
            if megatron:
                scaled = scales_gradients(workload.parallelism, len(dense_groups[0]))
                step.append(grad_zero_kernel(dense + expert, shape.grad_bytes))
                buckets = float(self.kernel_seconds(s.dtype, [bucket_kernel(dense + expert, shape.grad_bytes,
                                                                            scaled)]).sum())
            self._syncs[key] = syncs, float(self.kernel_seconds(s.dtype, step).sum()) + buckets, buckets
        return self._syncs[key]


@dataclass
class _StageCost:
    """A stage's costs per micro-batch, summed over its units."""

    compute: float = 0.0
    forward: float = 0.0
    backward: float = 0.0
    recompute: float = 0.0
    weight_grad: float = 0.0
    tp: float = 0.0
    cp: float = 0.0
    ep: float = 0.0
    forward_comm: float = 0.0
    sm_bound: float = 0.0

    def add(self, unit: _LayerCost, count: int = 1) -> None:
        self.forward += count * unit.forward
        self.backward += count * (unit.backward + unit.recompute)
        self.recompute += count * unit.recompute
        self.weight_grad += count * unit.weight_grad
        self.compute += count * (unit.forward + unit.backward + unit.recompute)
        self.tp += count * unit.tp
        self.cp += count * unit.cp
        self.ep += count * unit.ep
        self.forward_comm += count * unit.forward_comm
        self.sm_bound += count * unit.sm_bound

    @property
    def total(self) -> float:
        return self.compute + self.tp + self.cp + self.ep

    @property
    def forward_span(self) -> float:
        """A micro-batch's forward as it runs: its kernels and the communication it waits for."""
        return self.forward + self.forward_comm

    @property
    def backward_span(self) -> float:
        """A micro-batch's backward as it runs (recompute included): its kernels and the communication it waits
        for."""
        return self.total - self.forward_span


MEGATRON_SHARDINGS = tuple(name for name, settings in SHARDING_SETTINGS.items() if settings["fsdp"] == "none")

PLAYED_SYNC_SCHEDULES = ("1f1b", "interleaved_1f1b")
"""The pipeline schedules whose data-parallel syncs the estimate plays out with them (Estimator.plays_syncs)."""
"""The shardings that keep Megatron's gradient buffers, reduced once a step from the last micro-batch's backward."""


ESTIMATED_SCHEDULES = ("1f1b", "interleaved_1f1b", "zb_h1", "dualpipe", "zb_v")
"""The pipeline schedules the estimate's step formula is written for (the module docstring); the first three those the
search tries. ZB-V Estimator.estimate times by its own step order played out (Estimator.played_idle): within 3.5% of
the replay over pp 2 to 8 on 1 and 2 nodes of 8 H100s at tp 1 (tests/search/test_search_zbv_estimate.py).
DualPipe's mirrored stages Estimator.estimate times by its schedule played out
(Estimator.dualpipe_bubble) and the mirrored ranks' gradient all-reduce (Estimator.mirror_syncs): 5% short at pp 2,
2% short at pp 4, 3% long at pp 8 (8 H100s, 16 layers; with DeepSeek's bubble formula, for equal ranks, 5% and 10%
long: it idles the heaviest rank, which holds both ends of the model, longer than the replay does); without the
all-reduce pp 2 was 14% short and step_timer did not take DualPipe."""


def step_timer(sc: ScenarioConfig) -> Callable[[ScenarioConfig], float] | None:
    """A scenario's step as the estimate times it (its strategy, Strategy.of, on its datacenter): what a search ranks
    strategies by, in well under a second where a replay takes seconds to minutes; for the scenario and for variants
    of it that change only its strategy (memory.remedies' changes), which share one Estimator's caches as a search's
    strategies do. None where the estimate does not take the scenario: a datacenter of several GPU types
    (search.hetero plans those) or a schedule not in ESTIMATED_SCHEDULES. `sc`: a ScenarioConfig with a workload
    block (scenario_argument's TypeError or ValueError otherwise)."""
    sc = scenario_argument(sc, need_workload=True)
    if sc.workload.parallelism.pipeline_schedule not in ESTIMATED_SCHEDULES:
        return None
    try:
        sc.datacenter.single_node("the estimate")
    except ValueError:
        return None
    estimators: dict[tuple[int, ...], Estimator] = {}

    def timed(variant: ScenarioConfig) -> float:
        # one Estimator a split of the layers over the stages: its caches know a strategy's first and last stage
        # layers only, not the split a layout string or a first_stage_layers writes (memory.remedies' even split)
        split = PipelineLayers.of(variant.workload).counts
        if split not in estimators:
            estimators[split] = Estimator.on(sc.workload, sc.datacenter, sc.collective, sc.workload.training.num_gpus)
        return estimators[split].estimate(Strategy.of(variant), variant.workload).iteration_s
    return timed


def step_seconds(sc: ScenarioConfig) -> float | None:
    """A scenario's step as the estimate times it (step_timer); None where the estimate does not take it."""
    timer = step_timer(sc)
    return None if timer is None else timer(sc)
