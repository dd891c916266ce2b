"""Pipeline schedules: the order in which one stage runs forward and backward micro-batches."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Literal

Step = tuple[Literal["F", "B"], int]


class PipelineScheduler(ABC):
    """Orders (phase, micro-batch) steps for one pipeline stage."""

    @abstractmethod
    def steps(self, stage: int, num_stages: int, num_microbatches: int) -> list[Step]: ...


class OneFOneBScheduler(PipelineScheduler):
    """PipeDream-Flush / Megatron 1F1B: warm-up forwards, steady one-forward-one-backward, cool-down."""

    def steps(self, stage: int, num_stages: int, num_microbatches: int) -> list[Step]:
        warmup = min(num_stages - stage - 1, num_microbatches)
        order: list[Step] = [("F", mb) for mb in range(warmup)]
        for i in range(num_microbatches - warmup):
            order += [("F", warmup + i), ("B", i)]
        order += [("B", mb) for mb in range(num_microbatches - warmup, num_microbatches)]
        return order


_SCHEDULERS: dict[str, type[PipelineScheduler]] = {"1f1b": OneFOneBScheduler}


def make_scheduler(name: str) -> PipelineScheduler:
    try:
        return _SCHEDULERS[name]()
    except KeyError:
        raise ValueError(f"pipeline schedule {name!r} is not built (available: {', '.join(_SCHEDULERS)})") from None
