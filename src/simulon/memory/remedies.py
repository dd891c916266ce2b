"""What would make a run that does not fit its GPUs' memory fit: the settings training engineers change first, each
applied to the scenario as written, parsed and checked as any scenario is, and its memory estimated by the memory
model; the changes whose fullest stage then fits are listed in the order of a ladder of what they cost, or
fastest first by an estimate of their step.

The ladder follows NVIDIA's Megatron-Bridge tuning guides (docs.nvidia.com/nemo/megatron-bridge: the performance
tuning guide's hierarchy, data parallelism first and tensor or context parallelism when memory is constrained,
pipeline parallelism when the model cannot fit otherwise, expert parallelism for MoE models; the memory-tuning
guide's order for a run out of memory, expandable segments, then selective recomputation):

1. the distributed optimizer (sharding optimizer states over data parallelism "without increasing communication
   overhead"), PyTorch's expandable segments (no cost), and sequence parallelism beside tensor parallelism (the
   same bytes as its all-reduce, as a reduce-scatter and an all-gather);
2. selective recomputation (core attention re-run in the backward);
3. ZeRO-2 and ZeRO-3 sharding (gradients, then parameters, gathered per micro-batch);
4. twice the tensor, context, expert or pipeline parallelism, at the same GPU count (data parallelism halves);
5. full recomputation (a layer's forward run twice), and half the micro-batch size (more, shorter GEMMs).

Where no one change fits, two of them together are tried, the ladder's earliest first. Given a step-time estimate
(`advise`'s `step_time`: the CLI passes the strategy search's, search.estimate.step_timer, which this package does
not import), every change of the fewest settings that fits is timed and they are listed fastest first, the ladder's
order among equal times, with the estimate of the run as written beside them (what it would take if it fitted); the
estimate is the search's ranking model, not a replay: `simulon simulate` a change for its step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any

from ..config.errors import ConfigError
from ..config.loading import parse_scenario
from ..config.scenario import ScenarioConfig
from ..config.units import GiB
from ..config.workload import without_other_recompute_settings
from .model import MemoryReport, estimate_memory

Change = tuple[tuple[str, str, Any], ...]
"""Settings to write, each (block under workload, key, value)."""

DERIVED = ("dp", "num_microbatches")
"""Parallelism keys a scenario may state that another parallel size or micro-batch size changes (derived again)."""
PIPELINE_SPLIT = ("layers_per_stage", "pipeline_layout", "first_stage_layers", "last_stage_layers",
                  "microbatch_group_size")
"""Parallelism keys that hold for one pipeline depth only: a scenario stating one is not offered another depth."""


def _flag(block: str, key: str, value: Any) -> Callable[[ScenarioConfig], list[Change]]:
    """A setting offered where the scenario's differs."""
    def offer(sc: ScenarioConfig) -> list[Change]:
        return [] if getattr(getattr(sc.workload, block), key) == value else [((block, key, value),)]
    return offer


def _doubled(key: str) -> Callable[[ScenarioConfig], list[Change]]:
    """Twice a parallel size, the GPU count kept (data parallelism halves: its stated size and micro-batch count go);
    tensor parallelism only inside an NVLink domain, where the guides keep it."""
    def offer(sc: ScenarioConfig) -> list[Change]:
        par = sc.workload.parallelism
        if key == "tp" and 2 * par.tp > sc.datacenter.domain_gpus:
            return []
        if key == "pp" and any(getattr(par, name) is not None for name in PIPELINE_SPLIT):
            return []
        if key == "ep" and sc.workload.model.moe is None:
            return []
        return [(("parallelism", key, 2 * getattr(par, key)),)]
    return offer


def _sequence_parallel(sc: ScenarioConfig) -> list[Change]:
    return _flag("parallelism", "sequence_parallel", True)(sc) if sc.workload.parallelism.tp > 1 else []


def _data_parallel_sharding(key: str, value: Any) -> Callable[[ScenarioConfig], list[Change]]:
    """A sharding over data parallelism, where there is data parallelism to shard over."""
    def offer(sc: ScenarioConfig) -> list[Change]:
        dp = sc.workload.parallelism.data_parallel(sc.placement().num_gpus)
        return _flag("parallelism", key, value)(sc) if dp > 1 else []
    return offer


def _half_micro_batch(sc: ScenarioConfig) -> list[Change]:
    mbs = sc.workload.training.micro_batch_size
    return [(("training", "micro_batch_size", mbs // 2),)] if mbs > 1 and mbs % 2 == 0 else []


LADDER: tuple[Callable[[ScenarioConfig], list[Change]], ...] = (
    _data_parallel_sharding("distributed_optimizer", True),
    _flag("training", "expandable_segments", True),
    _sequence_parallel,
    _flag("parallelism", "recompute", "selective"),
    _data_parallel_sharding("fsdp", "shard_grad_op"),
    _data_parallel_sharding("fsdp", "full_shard"),
    _doubled("tp"), _doubled("cp"), _doubled("ep"), _doubled("pp"),
    _flag("parallelism", "recompute", "full"),
    _half_micro_batch,
)
"""The changes offered, cheapest in step time first (the module's docstring says why in this order)."""


@dataclass(frozen=True)
class Remedy:
    """A change of settings, the scenario with it, the memory the run then takes on its fullest stage, and where
    timed (advise's `step_time`) its step and the run's as written, seconds."""

    change: Change
    report: MemoryReport  # the scenario's memory with the change (a closest miss's does not fit)
    scenario: ScenarioConfig = field(compare=False, repr=False)
    step_s: float | None = None
    as_written_s: float | None = None

    def text(self) -> str:
        """'distributed_optimizer: true (61.20 GiB on stage 0 of 80.00)', with '; step 5.88 s, +5.4%' where timed
        (the step's change on the run as written)."""
        peak = self.report.peak
        timed = ""
        if self.step_s is not None:
            timed = f"; step {self.step_s:.2f} s"
            if self.as_written_s:
                timed += f", {100 * (self.step_s / self.as_written_s - 1):+.1f}%"
        return (f"{settings_text(self.settings)} ({peak.device / GiB:.2f} GiB on stage {peak.stage} of "
                f"{peak.capacity / GiB:.2f}{timed})")

    @property
    def settings(self) -> dict[str, Any]:
        """The change as dotted paths of the scenario and their values."""
        return {f"workload.{block}.{key}": value for block, key, value in self.change}

    def to_json(self) -> dict:
        peak = self.report.peak
        return {"settings": self.settings, "peak_stage": peak.stage, "device_bytes": peak.device,
                "capacity_bytes": peak.capacity, "estimated_step_s": self.step_s,
                "as_written_estimated_step_s": self.as_written_s}


def settings_text(settings: dict[str, Any]) -> str:
    """Settings by dotted path as a scenario's blocks write them: 'distributed_optimizer: true and tp: 8'."""
    return " and ".join(f"{path.rsplit('.', 1)[-1]}: {str(value).lower() if isinstance(value, bool) else value}"
                        for path, value in settings.items())


def applied(sc: ScenarioConfig, change: Change) -> ScenarioConfig | None:
    """The scenario with the change's settings written in, parsed as a scenario file is; None where the scenario
    refuses them (a size that does not divide, a setting its framework or model cannot run)."""
    data = sc.as_data()
    workload = data["workload"]
    for block, key, value in change:
        workload[block][key] = value
        if key in ("tp", "cp", "pp", "micro_batch_size"):
            for derived in DERIVED:
                workload["parallelism"].pop(derived, None)
        if key == "recompute":
            without_other_recompute_settings(workload["parallelism"])
    try:
        return parse_scenario(data, "remedy")
    except ConfigError:
        return None


def _candidates(sc: ScenarioConfig) -> Iterator[Change]:
    """Every change of the ladder, then every two of them on different settings, the ladder's earliest first."""
    singles = [change for offer in LADDER for change in offer(sc)]
    yield from singles
    for first, second in combinations(singles, 2):
        if {(b, k) for b, k, _ in first}.isdisjoint((b, k) for b, k, _ in second):
            yield first + second


def _evaluated(sc: ScenarioConfig) -> Iterator[Remedy]:
    """Every candidate change (_candidates) the scenario accepts and the memory model can take, with its memory,
    fitting or not."""
    for change in _candidates(sc):
        variant = applied(sc, change)
        if variant is None:
            continue
        try:
            yield Remedy(change, estimate_memory(variant), variant)
        except ValueError:  # a variant the memory model cannot take
            continue


LADDER_ORDER = "in the order tuning guides try them"
TIMED_ORDER = "fastest first by the search's estimate of a step"
"""How the remedies are ordered, as `simulate`, `memory` and the report say it (Advice.timed picks one)."""


@dataclass(frozen=True)
class Advice:
    """What the changes tried say about a run that does not fit: those that make it fit, and where none does, the one
    that comes closest."""

    remedies: list[Remedy]
    closest: Remedy | None  # None where a change fits, or none could be tried

    @property
    def timed(self) -> bool:
        """Whether the remedies are ranked by their estimated step (advise's `step_time`), not by the ladder."""
        return any(r.step_s is not None for r in self.remedies)


def advise(sc: ScenarioConfig, most: int = 3,
           step_time: Callable[[ScenarioConfig], float | None] | None = None) -> Advice:
    """Up to `most` changes that make a run that does not fit fit, changes of two settings only where no change of one
    fits: the ladder's first, or with `step_time` (a scenario's step in seconds, None where it cannot tell) the fastest
    of all that fit, the ladder's order among equals and after the untimed; where none fits, of the changes tried the
    one that leaves the fullest stage the least over its GPU's memory (the ladder's earliest among equals). Nothing for
    a run that fits. Every change is evaluated once."""
    if estimate_memory(sc).fits:
        return Advice([], None)
    found: list[Remedy] = []
    nearest: Remedy | None = None
    for remedy in _evaluated(sc):
        if found and len(remedy.change) > len(found[0].change):
            break
        if remedy.report.fits:
            found.append(remedy)
            if step_time is None and len(found) == most:
                break
        elif nearest is None or remedy.report.peak.fill < nearest.report.peak.fill:
            nearest = remedy
    if step_time is not None and found:
        as_written = step_time(sc)
        found = [replace(r, step_s=step_time(r.scenario), as_written_s=as_written) for r in found]
        found.sort(key=lambda r: math.inf if r.step_s is None else r.step_s)  # stable: the ladder's among equals
    return Advice(found[:most], None if found else nearest)


def remedies(sc: ScenarioConfig, most: int = 3) -> list[Remedy]:
    """The changes that make a run that does not fit fit (advise)."""
    return advise(sc, most).remedies


def settings_tried(sc: ScenarioConfig) -> list[str]:
    """The settings the ladder offers this scenario, as one names them: 'distributed_optimizer', 'recompute', ..."""
    return list(dict.fromkeys(key for offer in LADDER for change in offer(sc) for _, key, _ in change))
