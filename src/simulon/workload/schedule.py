"""Pipeline schedules: the order in which one stage runs forward and backward micro-batches."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Literal, NamedTuple


class Step(NamedTuple):
    kind: Literal["F", "B"]
    microbatch: int
    chunk: int = 0  # model chunk (virtual pipeline stage) on this rank


class PipelineScheduler(ABC):
    """Orders the forward and backward steps of one pipeline stage."""

    @abstractmethod
    def steps(self, stage: int, num_stages: int, num_microbatches: int) -> list[Step]: ...


class OneFOneBScheduler(PipelineScheduler):
    """PipeDream-Flush / Megatron 1F1B: warm-up forwards, steady one-forward-one-backward, cool-down."""

    def steps(self, stage: int, num_stages: int, num_microbatches: int) -> list[Step]:
        warmup = min(num_stages - stage - 1, num_microbatches)
        order = [Step("F", mb) for mb in range(warmup)]
        for i in range(num_microbatches - warmup):
            order += [Step("F", warmup + i), Step("B", i)]
        order += [Step("B", mb) for mb in range(num_microbatches - warmup, num_microbatches)]
        return order


class InterleavedOneFOneBScheduler(PipelineScheduler):
    """Megatron's interleaved 1F1B (Narayanan et al. SC'21): each rank holds `chunks` model chunks and
    cycles through them in groups of `num_stages` micro-batches, shrinking the bubble by 1/chunks."""

    def __init__(self, chunks: int):
        self.chunks = chunks

    def _chunk_and_microbatch(self, k: int, num_stages: int, forward: bool) -> tuple[int, int]:
        group, in_group = divmod(k, num_stages * self.chunks)
        chunk = in_group // num_stages
        microbatch = group * num_stages + in_group % num_stages
        return (chunk if forward else self.chunks - 1 - chunk), microbatch

    def steps(self, stage: int, num_stages: int, num_microbatches: int) -> list[Step]:
        total = num_microbatches * self.chunks
        warmup = min((num_stages - stage - 1) * 2 + (self.chunks - 1) * num_stages, total)

        def step(kind: Literal["F", "B"], k: int) -> Step:
            chunk, mb = self._chunk_and_microbatch(k, num_stages, kind == "F")
            return Step(kind, mb, chunk)

        order = [step("F", k) for k in range(warmup)]
        for i in range(total - warmup):
            order += [step("F", warmup + i), step("B", i)]
        order += [step("B", k) for k in range(total - warmup, total)]
        return order


def make_scheduler(name: str, chunks: int = 1) -> PipelineScheduler:
    """The scheduler for a pipeline_schedule name; more than one chunk per rank means interleaved."""
    if name == "interleaved_1f1b" or chunks > 1:
        return InterleavedOneFOneBScheduler(chunks)
    if name == "1f1b":
        return OneFOneBScheduler()
    raise ValueError(f"pipeline schedule {name!r} is not built (available: 1f1b, interleaved_1f1b)")
