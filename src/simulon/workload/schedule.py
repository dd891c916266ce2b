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

A new schedule is a new table (and warm-up), not a new loop.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal, NamedTuple


class Step(NamedTuple):
    kind: Literal["F", "B"]
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

    @classmethod
    def megatron(cls, num_microbatches: int, chunks: int, group_size: int, warmup: int) -> ScheduleTable:
        """Megatron's table: backwards take the forwards' order with the chunks reversed."""
        forwards = megatron_schedule_table(num_microbatches, chunks, group_size)
        backwards = [(microbatch, chunks - 1 - chunk) for microbatch, chunk in forwards]
        return cls(tuple(forwards), tuple(backwards), warmup)

    def steps(self) -> list[Step]:
        """Warm-up forwards, steady one-forward-one-backward, cool-down backwards."""
        total = len(self.forwards)
        warmup = min(self.warmup, total)
        order = [self.forward(k) for k in range(warmup)]
        for k in range(total - warmup):
            order += [self.forward(warmup + k), self.backward(k)]
        return order + [self.backward(k) for k in range(total - warmup, total)]

    def forward(self, k: int) -> Step:
        return Step("F", *self.forwards[k])

    def backward(self, k: int) -> Step:
        return Step("B", *self.backwards[k])


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


def make_scheduler(name: str, chunks: int = 1) -> PipelineScheduler:
    """The scheduler for a pipeline_schedule name; more than one chunk per rank means interleaved."""
    if name == "interleaved_1f1b" or chunks > 1:
        return InterleavedOneFOneBScheduler(chunks)
    if name == "1f1b":
        return OneFOneBScheduler()
    raise ValueError(f"pipeline schedule {name!r} is not built (available: 1f1b, interleaved_1f1b)")
