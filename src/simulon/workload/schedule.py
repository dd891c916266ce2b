"""Pipeline schedules: the order in which one stage runs forward and backward micro-batches.

Every schedule is a table and one loop, as Megatron-Core's `forward_backward_pipelining_with_interleaving`
(megatron/core/pipeline_parallel/schedules.py) runs it. The table gives the (micro-batch, model chunk) of
each virtual step, forward and backward (`get_schedule_table`; a backward runs the chunks in reverse order,
`get_model_chunk_id(..., forward=False)`); the loop runs the warm-up forwards, then one forward and one
backward at a time (the steady 1F1B state), then the remaining backwards (the cool-down).

* 1F1B (PipeDream-Flush, `forward_backward_pipelining_without_interleaving`): one chunk, micro-batches in
  order, num_stages - stage - 1 warm-up forwards.
* Interleaved 1F1B (Narayanan et al., SC'21): each rank holds `chunks` model chunks and runs groups of
  num_stages micro-batches (`microbatch_group_size_per_vp_stage`) through chunk 0, then chunk 1, ...;
  2 (num_stages - stage - 1) + (chunks - 1) num_stages warm-up forwards shrink the bubble by 1/chunks.

* ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 3.1 and figure 3): the backward
  split into B, the input gradient, and W, the weight gradient. 1F1B's table and warm-up; stage i runs the W
  of a micro-batch right after its B except for its first i, which it defers to the end, where they fill the
  cool-down bubble: the bubble shrinks from (p - 1)(T_F + T_B + T_W) to (p - 1)(T_F + T_B - T_W) at 1F1B's
  peak activation memory. The same rule with `deferred = stage` is what PyTorch's pipelining runs for its
  zero-bubble schedules (torch/distributed/pipelining/schedules.py, `_get_1f1b_rank_ops`, whose
  `num_1f1b_microbatches` is the rank).

A new schedule is a new table (warm-up and deferred weight gradients), not a new loop.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple, get_args

from ..config.workload import ScheduleName


class Step(NamedTuple):
    kind: Literal["F", "B", "W"]  # forward; backward (with the weight gradient unless W steps are split off)
    microbatch: int
    chunk: int = 0  # model chunk (virtual pipeline stage) on this rank


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

    @classmethod
    def megatron(cls, num_microbatches: int, chunks: int, group_size: int, warmup: int) -> ScheduleTable:
        """Megatron's table: backwards take the forwards' order with the chunks reversed."""
        forwards = megatron_schedule_table(num_microbatches, chunks, group_size)
        backwards = [(microbatch, chunks - 1 - chunk) for microbatch, chunk in forwards]
        return cls(tuple(forwards), tuple(backwards), warmup)

    def steps(self) -> list[Step]:
        """Warm-up forwards, steady one-forward-one-backward, cool-down backwards; with split weight gradients,
        each backward after the first `deferred` followed by the oldest W not yet run, the rest at the end."""
        total = len(self.forwards)
        warmup = min(self.warmup, total)
        order = [self.forward(k) for k in range(warmup)]
        for k in range(total):
            if warmup + k < total:
                order.append(self.forward(warmup + k))
            order.append(self.backward(k))
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


class PipelineScheduler(ABC):
    """Orders the forward and backward steps of one pipeline stage."""

    @abstractmethod
    def table(self, stage: int, num_stages: int, num_microbatches: int) -> ScheduleTable: ...

    def steps(self, stage: int, num_stages: int, num_microbatches: int) -> list[Step]:
        return self.table(stage, num_stages, num_microbatches).steps()


class InterleavedOneFOneBScheduler(PipelineScheduler):
    """Megatron's interleaved 1F1B: `chunks` model chunks per rank, in groups of num_stages micro-batches."""

    def __init__(self, chunks: int):
        self.chunks = chunks

    def warmup(self, stage: int, num_stages: int) -> int:
        """Forwards before the first backward (`num_warmup_microbatches` in Megatron-Core)."""
        return (num_stages - stage - 1) * 2 + (self.chunks - 1) * num_stages

    def table(self, stage: int, num_stages: int, num_microbatches: int) -> ScheduleTable:
        return ScheduleTable.megatron(num_microbatches, self.chunks, num_stages, self.warmup(stage, num_stages))


class OneFOneBScheduler(InterleavedOneFOneBScheduler):
    """PipeDream-Flush / Megatron 1F1B: the interleaved table over one chunk, warmed up with one forward per
    later stage (the non-interleaved schedule's warm-up, not the interleaved one's doubled one)."""

    def __init__(self) -> None:
        super().__init__(chunks=1)

    def warmup(self, stage: int, num_stages: int) -> int:
        return num_stages - stage - 1


class ZeroBubbleH1Scheduler(OneFOneBScheduler):
    """ZB-H1: 1F1B with the weight gradients split off, stage i deferring its first i."""

    def table(self, stage: int, num_stages: int, num_microbatches: int) -> ScheduleTable:
        return replace(super().table(stage, num_stages, num_microbatches), deferred=stage)


def make_scheduler(name: str, chunks: int = 1) -> PipelineScheduler:
    """The scheduler for a pipeline_schedule name; more than one chunk per rank means interleaved."""
    if name == "zb_h1":
        if chunks > 1:
            raise ValueError("zb_h1 runs one model chunk per rank (vpp = 1)")
        return ZeroBubbleH1Scheduler()
    if name == "interleaved_1f1b" or chunks > 1:
        return InterleavedOneFOneBScheduler(chunks)
    if name == "1f1b":
        return OneFOneBScheduler()
    raise ValueError(f"pipeline schedule {name!r} is not built (available: {', '.join(get_args(ScheduleName))})")
