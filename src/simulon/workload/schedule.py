"""Pipeline schedules: the order in which one stage runs forward and backward micro-batches.

The Megatron-style schedules (1F1B, interleaved 1F1B, ZB-H1) are a table and one loop, as Megatron-Core's
`forward_backward_pipelining_with_interleaving` (megatron/core/pipeline_parallel/schedules.py) runs it. The table
gives the (micro-batch, model chunk) of each virtual step, forward and backward (`get_schedule_table`; a backward
runs the chunks in reverse order, `get_model_chunk_id(..., forward=False)`); the loop runs the warm-up forwards,
then one forward and one backward at a time (the steady 1F1B state), then the remaining backwards (the
cool-down).

* 1F1B (PipeDream-Flush, `forward_backward_pipelining_without_interleaving`): one chunk, micro-batches in
  order, num_stages - stage - 1 warm-up forwards.
* Interleaved 1F1B (Narayanan et al., SC'21): each rank holds `chunks` model chunks and runs groups of
  num_stages micro-batches (`microbatch_group_size_per_vp_stage`) through chunk 0, then chunk 1, ...;
  2 (num_stages - stage - 1) + (chunks - 1) num_stages warm-up forwards shrink the bubble by 1/chunks.
  A larger group (Megatron-Core's --microbatch-group-size-per-virtual-pipeline-stage N, from num_stages to the
  micro-batch count; the Llama 3 paper's flexible N, section 3.3.2) runs N micro-batches through each chunk in a
  row and warms up with (chunks - 1) N of them in place of (chunks - 1) num_stages (get_pp_rank_microbatches,
  get_schedule_table): more activations in flight for the same ideal bubble (balanced stages, transfers free), and
  time for the next chunk's first micro-batch to come round the pipeline, which a group of num_stages leaves none.

* Combined 1F1B (Megatron-Core's overlap_moe_expert_parallel_comm, pipeline_parallel/combined_1f1b.py): either
  table above with one more warm-up forward (get_pp_rank_microbatches), so that each steady-state forward works on
  another micro-batch than the backward after it; each such backward is marked `combined` and runs with that forward
  as one step (workload/megatron.py, combined_step). Without pipeline parallelism Megatron-Core's no-pipelining path
  does the same (combined_1f1b_schedule_for_no_pipelining: the first forward alone, then forward i with backward
  i - 1); with it, only the interleaved schedule combines.

* ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 3.1 and figure 3): the backward
  split into B, the input gradient, and W, the weight gradient. 1F1B's table and warm-up; stage i runs the W
  of a micro-batch right after its B except for its first i, which it defers to the end, where they fill the
  cool-down bubble: the bubble shrinks from (p - 1)(T_F + T_B + T_W) to (p - 1)(T_F + T_B - T_W) at 1F1B's
  peak activation memory. The same rule with `deferred = stage` is what PyTorch's pipelining runs for its
  zero-bubble schedules (torch/distributed/pipelining/schedules.py, `_get_1f1b_rank_ops`, whose
  `num_1f1b_microbatches` is the rank).

* ZB-V (Qi et al., "Zero Bubble (Almost) Pipeline Parallelism", ICLR 2024; the zero-bubble repository,
  sail-sg/zero-bubble-pipeline-parallelism, megatron/core/pipeline_parallel/zerobubble/scheduler/zbv.py): two
  model chunks per rank placed as a V (rank i holds model stages i and 2p - 1 - i), backward split into B and
  W, the order produced by the reference's greedy list scheduler (`PipelineGraph.try_v_schedule`) at 1F1B's
  peak activation memory. The reference runs it on measured F, B, W and communication times; simulon's table
  is built once, before kernel times exist, at the fixed costs F = B = W = 1000 and communication 1 that the
  reference itself uses for its fixed V schedules (runtime.py, `zbv_greedy.PipelineGraph(..., 1000, 1000,
  1000, 1)`), and ZBV_MEMORY below. With F = B = W and free communication no rank idles between its first
  forward and its last step (the repository's "bubble rate 0"), at 2p chunks of activations, 1F1B's peak.
* DualPipe (DeepSeek-V3 technical report, section 3.2.1; deepseek-ai/DualPipe, dualpipe/dualpipe.py,
  `DualPipe.step`): micro-batches injected from both ends, rank i holding model stage i (chunk 0, the forward
  direction) and stage p - 1 - i (chunk 1, the reverse direction), so every stage's parameters exist twice.
  The reference's eight phases; some backwards split off their weight gradients (W, run from a FIFO). With
  F = B = W and the pairs below overlapped as units of F + B, the bubble is DeepSeek-V3 Table 2's
  (p/2 - 1)(F&B + B - 3W) exactly, at p + 1 stages of activations (tests/workload/test_dualpipe.py).
* DualPipeV (dualpipe/dualpipev.py, `DualPipeV.step`, Sea AI Lab's "cut-in-half"): DualPipe folded onto p
  ranks as a V: chunk 0 is stage i, chunk 1 stage 2p - 1 - i, every micro-batch through both.

DualPipe's "overlapped chunks" (`_forward_backward_chunk`) run one chunk's forward and another's backward as
one unit so that each one's all-to-all and pipeline traffic hides behind the other's computation. By default simulon
runs them one after the other on the compute stream, forward first, which is the reference's own path for modules
without `overlapped_forward_backward` (`_forward_backward_compute_chunk`); with overlap_moe_expert_parallel_comm
each such pair's backward is marked `combined` (but the first of step 4 on DualPipe's middle rank and DualPipeV's
last, which the reference runs apart "to further reduce bubble size") and the pair runs as one combined step, layer by
layer as Megatron-Core's combined 1F1B interleaves them (DeepSeek-V3's figure 4 overlaps the same four parts:
attention, dispatch, MLP, combine).

Megatron-style schedules are a table and one loop (warm-up, steady state, cool-down); the V and DualPipe
schedules are step lists generated as their references generate them. Where each model chunk of a rank sits in
the model is the schedule's `Placement`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal, NamedTuple, get_args

from ..config.pipeline_layout import model_stage
from ..config.workload import ParallelismSpec, ScheduleName


class Step(NamedTuple):
    kind: Literal["F", "B", "W"]  # forward; backward (with the weight gradient unless the order has a W of the
                                  # same micro-batch and chunk: then B is the input gradient only)
    microbatch: int
    chunk: int = 0  # model chunk (virtual pipeline stage) on this rank
    combined: bool = False  # a B run as one step with the F before it (combined 1F1B: overlap_moe_expert_parallel_comm)


VirtualStep = tuple[int, int]
"""(micro-batch, model chunk) of one virtual step."""


def megatron_schedule_table(num_microbatches: int, chunks: int, group_size: int) -> list[VirtualStep]:
    """Megatron-Core's `get_schedule_table`: groups of `group_size` micro-batches, each run through chunk 0,
    then chunk 1, ...; the last group takes the micro-batches left."""
    table: list[VirtualStep] = []
    for first in range(0, num_microbatches, group_size):
        group = range(first, min(first + group_size, num_microbatches))
        table += [(microbatch, chunk) for chunk in range(chunks) for microbatch in group]
    return table


@dataclass(frozen=True)
class ScheduleTable:
    """One stage's schedule: the (micro-batch, chunk) of every virtual forward and backward step, in order,
    and the forwards it runs before its first backward."""

    forwards: tuple[VirtualStep, ...]
    backwards: tuple[VirtualStep, ...]
    warmup: int
    deferred: int | None = None  # None: B includes the weight gradient; else W steps, the first `deferred` late
    combined: bool = False  # each steady-state F and the B after it run as one step

    @classmethod
    def megatron(cls, num_microbatches: int, chunks: int, group_size: int, warmup: int,
                 combined: bool = False) -> ScheduleTable:
        """Megatron's table: backwards take the forwards' order with the chunks reversed."""
        forwards = megatron_schedule_table(num_microbatches, chunks, group_size)
        backwards = [(microbatch, chunks - 1 - chunk) for microbatch, chunk in forwards]
        return cls(tuple(forwards), tuple(backwards), warmup, combined=combined)

    def steps(self) -> list[Step]:
        """Warm-up forwards, steady one-forward-one-backward (combined, each B marked as run with its F), cool-down
        backwards; with split weight gradients, each backward after the first `deferred` followed by the oldest W
        not yet run, the rest at the end."""
        total = len(self.forwards)
        warmup = min(self.warmup, total)
        order = [self.forward(k) for k in range(warmup)]
        for k in range(total):
            steady = warmup + k < total
            if steady:
                order.append(self.forward(warmup + k))
            order.append(self.backward(k)._replace(combined=steady and self.combined))
            if self.deferred is not None and k >= self.deferred:
                order.append(self.weight(k - self.deferred))
        if self.deferred is not None:
            order += [self.weight(k) for k in range(max(total - self.deferred, 0), total)]
        return order

    def forward(self, k: int) -> Step:
        return Step("F", *self.forwards[k])

    def backward(self, k: int) -> Step:
        return Step("B", *self.backwards[k])

    def weight(self, k: int) -> Step:
        return Step("W", *self.backwards[k])


@dataclass(frozen=True)
class Placement:
    """Where model chunk c of pipeline rank s sits in the model: which model stage it runs and where its forward
    output goes.

    interleaved (Megatron): chunk c of rank s is model stage c * p + s, a forward going on to the next rank and
    wrapping from the last rank to chunk c + 1 of the first. v: chunk 0 is stage s, chunk 1 stage 2p - 1 - s;
    chunk 0 sends to the next rank, chunk 1 to the previous one, and the turn at the last rank stays on it.
    mirrored (DualPipe): the model has p stages and rank s holds stage s as chunk 0 and stage p - 1 - s as chunk
    1; chunk 0's micro-batches flow to the next rank, chunk 1's (the reverse direction's) to the previous one.
    """

    kind: Literal["interleaved", "v", "mirrored"]

    def chunks(self, vpp: int) -> int:
        """Model chunks each rank runs: vpp when interleaved, else two."""
        return vpp if self.kind == "interleaved" else 2

    def model_stages(self, ranks: int, chunks: int) -> int:
        """Distinct model stages the model is cut into (DualPipe's are held twice, so one per rank)."""
        return ranks if self.kind == "mirrored" else ranks * chunks

    def model_stage(self, rank: int, chunk: int, ranks: int) -> int:
        if self.kind == "mirrored":
            return rank if chunk == 0 else ranks - 1 - rank
        return model_stage(rank, chunk, ranks, v_shape=self.kind == "v")

    def next(self, rank: int, chunk: int, ranks: int) -> tuple[int, int]:
        """(rank, chunk) that runs the model stage after this chunk's, for the same micro-batch."""
        if self.kind == "mirrored":
            return (rank + 1, 0) if chunk == 0 else (rank - 1, 1)
        return self._holder(self.model_stage(rank, chunk, ranks) + 1, ranks)

    def previous(self, rank: int, chunk: int, ranks: int) -> tuple[int, int]:
        """(rank, chunk) that runs the model stage before this chunk's, for the same micro-batch."""
        if self.kind == "mirrored":
            return (rank - 1, 0) if chunk == 0 else (rank + 1, 1)
        return self._holder(self.model_stage(rank, chunk, ranks) - 1, ranks)

    def _holder(self, model_stage: int, ranks: int) -> tuple[int, int]:
        chunk, position = divmod(model_stage, ranks)
        if self.kind == "v" and chunk == 1:
            return ranks - 1 - position, 1
        return position, chunk


INTERLEAVED, V_SHAPE, MIRRORED = Placement("interleaved"), Placement("v"), Placement("mirrored")


class PipelineScheduler:
    """Orders the forward and backward steps of one pipeline stage: a Megatron-style schedule gives its table,
    run by ScheduleTable's loop; the V and DualPipe schedules override `steps` with their generated order."""

    placement: Placement = INTERLEAVED

    @property
    def earlier_stages_keep_more(self) -> bool:
        """Whether every stage runs the same forwards and backwards in the same order, a later stage after no more
        warm-up forwards, each backward whole and none combined with a forward: then before each step a stage keeps
        at least what a later stage keeps before the same step of the same chunks (one more backward done can only
        have freed more), so over stages holding alike layers the earlier's activation peak is the higher
        (memory/model.py, MemoryModel.fullest). Megatron's 1F1B and interleaved 1F1B; not ZB-H1 (a later stage
        defers more weight gradients), combined steps, or the generated V and DualPipe orders."""
        return False

    def table(self, stage: int, num_stages: int, num_microbatches: int) -> ScheduleTable:
        raise NotImplementedError(f"{type(self).__name__} generates its steps, not a Megatron table")

    def steps(self, stage: int, num_stages: int, num_microbatches: int) -> list[Step]:
        return self.table(stage, num_stages, num_microbatches).steps()

    def blocking_sends(self, stage: int, num_stages: int, num_microbatches: int) -> list[bool]:
        """Per step of `steps`, whether the pipeline call after it waits for the step's send before the stage's
        next kernel, whether or not it also receives (a blocking call); else a receive in that call is all the
        next kernel waits for. None blocks here: the V and DualPipe orders, and ZB-H1, keep their sends
        unwaited past a receive (what their references wait for was not checked)."""
        return [False] * len(self.steps(stage, num_stages, num_microbatches))


class InterleavedOneFOneBScheduler(PipelineScheduler):
    """Megatron's interleaved 1F1B: `chunks` model chunks per rank, in groups of `group_size` micro-batches (None:
    num_stages, Megatron-Core's default). `combined` (overlap_moe_expert_parallel_comm): one more warm-up forward, so
    that every steady-state forward and the backward after it work on different micro-batches and run as one
    combined step (Megatron-Core's get_pp_rank_microbatches: "we schedule one extra micro-batch forward step before
    the 1f1b stages")."""

    def __init__(self, chunks: int, combined: bool = False, group_size: int | None = None):
        self.chunks, self.combined, self.group_size = chunks, combined, group_size

    def group(self, num_stages: int) -> int:
        """The micro-batches each chunk runs in a row (microbatch_group_size_per_vp_stage)."""
        return self.group_size or num_stages

    @property
    def earlier_stages_keep_more(self) -> bool:
        """One table for every stage (ScheduleTable.megatron), warm-ups falling with the stage (`warmup`)."""
        return not self.combined

    def warmup(self, stage: int, num_stages: int) -> int:
        """Forwards before the first backward (`num_warmup_microbatches` in Megatron-Core)."""
        return (num_stages - stage - 1) * 2 + (self.chunks - 1) * self.group(num_stages) + self.combined

    def table(self, stage: int, num_stages: int, num_microbatches: int) -> ScheduleTable:
        return ScheduleTable.megatron(num_microbatches, self.chunks, self.group(num_stages),
                                      self.warmup(stage, num_stages), self.combined)

    def blocking_sends(self, stage: int, num_stages: int, num_microbatches: int) -> list[bool]:
        """Megatron-Core's p2p calls (pipeline_parallel/p2p_communication.py, `_communicate`) wait on every request
        they post, sends and receives, before they return (`req.wait()` for each; with batch_p2p_comm, one
        batch_isend_irecv and torch.cuda.synchronize after it), unless the interleaved schedule overlaps them
        (overlap_p2p_comm, which Megatron-LM's arguments.py turns on by default and off without virtual stages,
        batch_p2p_comm = not overlap_p2p_comm in argument_utils.py). Overlapped, the steady state's
        send_forward_recv_forward and send_backward_recv_backward (schedules.py,
        forward_backward_pipelining_with_interleaving: pp_post_forward, pp_post_backward) leave each send's handle to
        be waited after the next send of its kind is posted, a step later; the warm-up's send_forward_recv_forward
        and the cool-down's send_backward_recv_backward still block (without overlap_p2p_comm_warmup_flush, off by
        default). Since April 2026 (Megatron-LM 260cba7, "wait for async P2P send before deallocating output
        tensor") the steady forward's send is waited at once; the published runs predate it. One chunk per rank
        (forward_backward_pipelining_without_interleaving): every call blocks."""
        steps = self.steps(stage, num_stages, num_microbatches)
        if self.chunks == 1:
            return [True] * len(steps)
        total = len(self.table(stage, num_stages, num_microbatches).forwards)
        warmup = min(self.warmup(stage, num_stages), total)
        steady = range(warmup, warmup + 2 * (total - warmup))  # one forward and one backward a steady micro-batch
        return [i not in steady for i in range(len(steps))]


class OneFOneBScheduler(InterleavedOneFOneBScheduler):
    """PipeDream-Flush / Megatron 1F1B: the interleaved table over one chunk, warmed up with one forward per
    later stage (the non-interleaved schedule's warm-up, not the interleaved one's doubled one)."""

    def __init__(self, combined: bool = False) -> None:
        super().__init__(chunks=1, combined=combined)

    def warmup(self, stage: int, num_stages: int) -> int:
        """Combined (one stage only: Megatron-Core combines only interleaved pipelines): the first forward alone,
        then forward i with backward i - 1 (combined_1f1b_schedule_for_no_pipelining)."""
        return num_stages - stage - 1 + self.combined


class ZeroBubbleH1Scheduler(OneFOneBScheduler):
    """ZB-H1: 1F1B with the weight gradients split off, stage i deferring its first i."""

    @property
    def earlier_stages_keep_more(self) -> bool:
        return False  # a later stage holds more deferred weight gradients

    def table(self, stage: int, num_stages: int, num_microbatches: int) -> ScheduleTable:
        return replace(super().table(stage, num_stages, num_microbatches), deferred=stage)

    blocking_sends = PipelineScheduler.blocking_sends  # the reference's waits were not checked: none blocks


# ---- DualPipe and DualPipeV: the reference's eight phases ----

Phase = tuple[str, int, bool, bool]
"""(kind F, B or W; the reference's local phase 0 or 1; whether a B splits off its W; whether a B runs overlapped
with the F before it, `_forward_backward_chunk`) of one step."""


def dualpipe_phases(ranks: int, rank: int, per_chunk: int) -> list[Phase]:
    """The compute steps of `DualPipe.step` / `DualPipeV.step` on rank `rank` of `ranks` (DualPipe: its half rank
    of the half ranks), `per_chunk` micro-batches through each chunk, in the reference's eight phases.

    An overlapped pair (`_forward_backward_chunk(a, b)`) is its forward, then its backward, marked as paired with
    it. A W runs the weight gradients of the oldest backward that split them off (the reference's WeightGradStore
    FIFO)."""
    forward, full, split, weight = ("F", 0, False, False), ("B", 1, False, False), ("B", 1, True, False), (
        "W", 0, False, False)
    paired = ("B", 1, False, True)
    later, earlier = ranks - rank - 1, rank + 1

    def on(step: Phase, phase: int) -> Phase:
        return step[0], phase, step[2], step[3]

    order = [forward] * (2 * later)                                                       # 1: nF0
    order += [forward, on(forward, 1)] * earlier                                          # 2: nF0F1
    order += [split, weight, on(forward, 1)] * later                                      # 3: nB1W1F1
    main = [forward, paired, on(forward, 1), on(paired, 0)] * (per_chunk - 2 * ranks + rank + 1)  # 4: nF0B1F1B0
    if main and later == 0:  # DualPipe's middle rank, DualPipeV's last: "We don't overlap these two chunks to
        main[1] = full       # further reduce bubble size" (the first pair runs forward, then backward, apart)
    order += main
    order += [full, on(forward, 1), on(paired, 0)] * later                                # 5: nB1F1B0
    for i in range(earlier):                                                              # 6: nB1B0, the
        zero_bubble = i > earlier // 2 or (i == earlier // 2 and rank % 2 == 1)           # second half split
        order += [on(split if zero_bubble else full, 1), on(split if i >= earlier // 2 else full, 0)]
    order += [weight, on(split, 0)] * later                                               # 7: nWB0
    return order + [weight] * earlier                                                     # 8: nW


def number_phases(phases: list[Phase], chunk_of: tuple[int, int], first_microbatch: tuple[int, int],
                  combined: bool = False) -> list[Step]:
    """Steps from phases: phase p runs chunk chunk_of[p]; each chunk's forwards and backwards take its
    micro-batches in order from first_microbatch[chunk]; W steps take the split backwards first in, first out.
    `combined`: the overlapped pairs' backwards run as one step with their forwards."""
    forwards, backwards = list(first_microbatch), list(first_microbatch)
    waiting: list[Step] = []
    steps: list[Step] = []
    for kind, phase, split, paired in phases:
        chunk = chunk_of[phase]
        if kind == "W":
            steps.append(waiting.pop(0))
            continue
        counter = forwards if kind == "F" else backwards
        steps.append(Step(kind, counter[chunk], chunk, combined and paired))  # type: ignore[arg-type]
        counter[chunk] += 1
        if split:
            waiting.append(Step("W", steps[-1].microbatch, chunk))
    return steps


class DualPipeScheduler(PipelineScheduler):
    """DeepSeek-V3's DualPipe: half the micro-batches enter at the first rank (chunk 0, micro-batches 0 to M/2 - 1),
    half at the last (chunk 1, M/2 to M - 1); ranks in the second half run the reference's phases mirrored
    (`phase ^= is_in_second_half`)."""

    placement = MIRRORED

    def __init__(self, combined: bool = False) -> None:
        self.combined = combined  # the overlapped pairs as combined steps (overlap_moe_expert_parallel_comm)

    def steps(self, stage: int, num_stages: int, num_microbatches: int) -> list[Step]:
        half, per_chunk = num_stages // 2, num_microbatches // 2
        mirrored = int(stage >= half)
        phases = dualpipe_phases(half, min(stage, num_stages - 1 - stage), per_chunk)
        return number_phases(phases, (mirrored, 1 - mirrored), (0, per_chunk), self.combined)


class DualPipeVScheduler(DualPipeScheduler):
    """DualPipeV: DualPipe cut in half onto a V; every micro-batch runs through both chunks."""

    placement = V_SHAPE

    def steps(self, stage: int, num_stages: int, num_microbatches: int) -> list[Step]:
        return number_phases(dualpipe_phases(num_stages, stage, num_microbatches), (0, 1), (0, 0), self.combined)


# ---- ZB-V: the reference's greedy list scheduler ----

ZBV_COSTS = (1000, 1000, 1000, 1)
"""F, B, W and communication times the ZB-V table is built at: the reference's fixed-cost call (runtime.py)."""
ZBV_MEMORY = (1400832, -1007616, -393216)
"""Activation memory an F adds, a B and a W release, in the reference's units (runtime.py: f = 34h + 5as,
w = -32h, b = -f - w), evaluated at GPT-3 175B's h = 12288, a = 96, s = 2048; the limit is 2p forwards' worth,
1F1B's peak, as the reference's default max_mem. The table does not move with the shape for M >= 2p at these
ratios (tests/workload/test_schedule_v.py)."""


class _VGreedy:
    """`PipelineGraph.try_v_schedule` (zbv.py): places forwards, then backwards and forwards micro-batch round by
    round, filling the gaps with pending weight gradients; category 0, 1, 2 are F, B, W; a B of the scheduler's
    chunk 0 runs model chunk 1 (the backward passes the V from its far end)."""

    def __init__(self, stages: int, microbatches: int, fill_f: bool, fill_b: bool, approved: list[float] | None):
        self.n, self.m, self.fill_f, self.fill_b = stages, microbatches, fill_f, fill_b
        self.cost, self.comm = ZBV_COSTS[:3], ZBV_COSTS[3]
        self.mem_cost, self.max_mem = ZBV_MEMORY, ZBV_MEMORY[0] * stages * 2
        self.approved = approved or [-1.0] * stages
        self.count = [[0] * 6 for _ in range(stages)]
        self.end = [-1.0] * (6 * stages * microbatches)
        self.time, self.mem, self.bubble = [0.0] * stages, [0.0] * stages, [0.0] * stages
        self.pending_w: list[list[int]] = [[] for _ in range(stages)]
        self.order: list[list[tuple[int, int, int]]] = [[] for _ in range(stages)]

    def node(self, cat: int, chunk: int, stage: int, micro: int) -> int:
        return ((cat * 2 + chunk) * self.n + stage) * self.m + micro

    def max_bubble(self, stage: int = -1) -> float:
        worst = max(0.0, *self.bubble)
        return max(worst, max(self.approved) - self.approved[stage]) if stage >= 0 else worst

    def put(self, cat: int, chunk: int, stage: int) -> None:
        done = self.count[stage][cat * 2 + chunk]
        assert done < self.m and self.mem[stage] + self.mem_cost[cat] <= self.max_mem
        finish = no_bubble = self.time[stage] + self.cost[cat]
        if cat < 2 and ((chunk == 0 and stage > 0) or (chunk == 1 and stage < self.n - 1)):
            feeder = self.end[self.node(cat, chunk, stage + (1 if chunk else -1), done)]
            assert feeder >= 0
            finish = max(finish, feeder + self.comm + self.cost[cat])
        if self.count[stage][0] > 0:
            self.bubble[stage] += finish - no_bubble
        self.end[self.node(cat, chunk, stage, done)] = self.time[stage] = finish
        self.mem[stage] += self.mem_cost[cat]
        self.order[stage].append((cat, chunk, done))
        if cat == 1:
            self.pending_w[stage].append(chunk)
        self.count[stage][cat * 2 + chunk] += 1

    def put_w(self, stage: int) -> None:
        self.put(2, self.pending_w[stage].pop(0), stage)

    def fill(self, stage: int, feeder: int, fill: bool) -> None:
        """Weight gradients into the wait for `feeder` (-1: none; the reference then reads end[-1], kept)."""
        while self.pending_w[stage] and feeder >= 0 and self.end[feeder] + self.comm >= self.time[stage] + self.cost[2]:
            self.put_w(stage)
        gap = self.end[feeder] + self.comm - self.time[stage]
        if self.pending_w[stage] and gap > self.max_bubble(stage) - self.bubble[stage] and fill:
            self.put_w(stage)

    def run(self) -> _VGreedy:
        n, m, f_mem = self.n, self.m, self.mem_cost[0]
        for i in range(n):
            self.put(0, 0, i)
        for i in range(n - 1, -1, -1):
            if i < n - 1:
                until = self.end[self.node(0, 1, i + 1, 0)] + self.comm
                while (self.mem[i] + f_mem * (2 + 2 * i) <= self.max_mem and self.time[i] + self.cost[0] <= until
                       and self.count[i][0] < m):
                    for j in range(i + 1):
                        self.put(0, 0, j)
            self.put(0, 1, i)
        chunk = 0
        for i in range(1, n):
            while (self.count[i][0] + self.count[i][1] < self.count[i - 1][0] + self.count[i - 1][1]
                   or self.count[i][1] <= self.count[i - 1][1] < m):
                for j in range(n - 1, i - 1, -1):
                    if self.count[j][chunk] < m:
                        self.put(0, chunk, j)
                chunk = 1 - chunk
        for _ in range(2 * m):
            self.backward_round()
            self.forward_round()
        for i in range(n):
            while self.pending_w[i]:
                self.put_w(i)
        return self

    def backward_round(self) -> None:
        n = self.n
        for i in range(n):
            while self.mem[i] + self.mem_cost[1] > self.max_mem:
                self.put_w(i)
        b0, b1 = [], []
        for i in range(n):
            c = self.count[i]
            if c[3] >= c[2]:
                b0.append(i)
            elif i == n - 1 or self.end[self.node(1, 1, i + 1, c[3])] >= 0 or c[2] >= self.m:
                b1.append(i)
            else:
                b0.append(i)
        for i, chunk in [*((i, 1) for i in reversed(b1)), *((i, 0) for i in b0)]:
            feeder = -1
            if chunk == 1 and i < n - 1:
                feeder = self.node(1, 1, i + 1, self.count[i][3])
            if chunk == 0 and i > 0:
                feeder = self.node(1, 0, i - 1, self.count[i][2])
            self.fill(i, feeder, chunk == 1 or self.fill_b)
            self.put(1, chunk, i)

    def forward_round(self) -> None:
        n, m = self.n, self.m
        for i in range(n):
            c = self.count[i]
            if c[1] >= m:
                continue
            if c[1] >= c[0]:
                chunk = 0
            elif i == n - 1 or self.end[self.node(0, 1, i + 1, c[1])] >= 0:
                chunk = 1
            elif c[0] < m and (i == 0 or self.end[self.node(0, 0, i - 1, c[0])] >= 0):
                chunk = 0
            else:
                continue
            while self.mem[i] + self.mem_cost[0] > self.max_mem:
                self.put_w(i)
            feeder = -1
            if chunk == 0 and i > 0:
                feeder = self.node(0, 0, i - 1, c[0])
            if chunk == 1 and i < n - 1:
                feeder = self.node(0, 1, i + 1, c[1])
            self.fill(i, feeder, self.fill_f)
            self.put(0, chunk, i)


def _try_v_schedule(stages: int, microbatches: int, fill_f: bool, fill_b: bool,
                    approved: list[float] | None = None) -> _VGreedy:
    """One try and, as the reference, one retry with every stage allowed the worst stage's bubble."""
    first = _VGreedy(stages, microbatches, fill_f, fill_b, approved).run()
    worst, allowed = first.max_bubble(), max(approved) if approved else -1.0
    if allowed < 0 or worst < allowed:
        retry = _try_v_schedule(stages, microbatches, fill_f, fill_b, list(first.bubble))
        if retry.max_bubble() < worst:
            return retry
    return first


@lru_cache(maxsize=256)
def zbv_orders(stages: int, microbatches: int) -> tuple[tuple[Step, ...], ...]:
    """Every stage's ZB-V steps: the best of the reference's four tries (`create_schedule`), model chunks as
    placed (a backward or weight gradient of the greedy's chunk c runs model chunk 1 - c)."""
    best: _VGreedy | None = None
    for fill_b in (True, False):
        for fill_f in (True, False):
            tried = _try_v_schedule(stages, microbatches, fill_f, fill_b)
            if best is None or tried.max_bubble() < best.max_bubble():
                best = tried
    assert best is not None
    return tuple(tuple(Step("FBW"[cat], micro, chunk if cat == 0 else 1 - chunk)  # type: ignore[arg-type]
                       for cat, chunk, micro in order) for order in best.order)


class ZeroBubbleVScheduler(PipelineScheduler):
    """ZB-V: the V placement with the reference's greedy order."""

    placement = V_SHAPE

    def steps(self, stage: int, num_stages: int, num_microbatches: int) -> list[Step]:
        return list(zbv_orders(num_stages, num_microbatches)[stage])


SCHEDULERS: dict[str, type[PipelineScheduler]] = {
    "zb_h1": ZeroBubbleH1Scheduler, "zb_v": ZeroBubbleVScheduler,
    "dualpipe": DualPipeScheduler, "dualpipev": DualPipeVScheduler,
}
"""The schedules with a fixed number of model chunks per rank (one, or two for V and DualPipe)."""


def one_stage_per_rank(par: ParallelismSpec) -> bool:
    """Whether each pipeline rank runs one stage of the model: vpp 1 on 1F1B's placement (1f1b, zb_h1), not
    interleaved chunks, DualPipe's mirrored pair nor the V's two stages; the pipelines the heterogeneous planner
    (search/hetero.py) places and splits."""
    return par.vpp == 1 and SCHEDULERS.get(par.pipeline_schedule, PipelineScheduler).placement is INTERLEAVED


def scheduler_of(par: ParallelismSpec) -> PipelineScheduler:
    """The scheduler a workload's parallelism block names, with its chunks, combined steps and micro-batch groups."""
    return make_scheduler(par.pipeline_schedule, par.vpp, par.overlap_moe_expert_parallel_comm,
                          par.microbatch_group_size)


def make_scheduler(name: str, chunks: int = 1, combined: bool = False,
                   group_size: int | None = None) -> PipelineScheduler:
    """The scheduler for a pipeline_schedule name; more than one chunk per rank means interleaved, except for the
    schedules whose placement fixes their chunks (zb_h1: one; zb_v, dualpipev: vpp = 2; dualpipe: vpp = 1, its
    two chunks mirrored stages). `combined`: Megatron's 1F1B schedules with forward and backward combined
    (overlap_moe_expert_parallel_comm). `group_size`: the interleaved schedule's micro-batches a chunk runs in a
    row (None: the stages'; ParallelismSpec.microbatch_group_size)."""
    if combined and name in ("zb_h1", "zb_v"):
        raise ValueError(f"{name} has no combined forward-backward steps (Megatron-Core's 1F1B schedules and "
                         "DualPipe's overlapped pairs only)")
    if name in SCHEDULERS:
        scheduler = SCHEDULERS[name](combined) if combined else SCHEDULERS[name]()
        expected = 2 if scheduler.placement is V_SHAPE else 1
        if chunks != expected:
            raise ValueError(f"{name} needs vpp = {expected}, not {chunks}")
        return scheduler
    if name == "interleaved_1f1b" or chunks > 1:
        return InterleavedOneFOneBScheduler(chunks, combined, group_size)
    if name == "1f1b":
        return OneFOneBScheduler(combined)
    raise ValueError(f"pipeline schedule {name!r} is not built (available: {', '.join(get_args(ScheduleName))})")
