"""What would make a run that does not fit its GPUs' memory fit: the settings training engineers change first, each
applied to the scenario as written, parsed and checked as any scenario is, and its memory estimated by the memory
model; the changes whose fullest stage then fits are listed in the order of a ladder of what they cost, or
fastest first by an estimate of their step.

The ladder follows NVIDIA's Megatron-Bridge tuning guides (docs.nvidia.com/nemo/megatron-bridge: the performance
tuning guide's hierarchy, data parallelism first and tensor or context parallelism when memory is constrained,
pipeline parallelism when the model cannot fit otherwise, expert parallelism for MoE models; the memory-tuning
guide's order for a run out of memory, expandable segments, then selective recomputation):

1. the distributed optimizer (sharding optimizer states over data parallelism "without increasing communication
   overhead"; Megatron-Core shards them over the data x context group, dp·cp ranks, and expert states over the
   expert-data-parallel group, so a run with dp = 1 and cp > 1 has ranks to shard over), PyTorch's expandable
   segments (no cost), and sequence parallelism beside tensor parallelism (the same bytes as its all-reduce, as a
   reduce-scatter and an all-gather); and Megatron's even split of the layers over the stages where the scenario
   writes its own (layers_per_stage, a layout string, first and last stage counts), which may load one stage more;
2. selective recomputation (core attention re-run in the backward), to a run that recomputes nothing;
3. ZeRO-2 and ZeRO-3 sharding (gradients, then parameters, gathered per micro-batch) over the data x context group,
   in place of the distributed optimizer where the run has it (FSDP shards the optimizer states itself);
4. twice the tensor, context, expert or pipeline parallelism, at the same GPU count (data parallelism halves, so
   it must be even);
5. full recomputation (a layer's forward run twice), and half the micro-batch size (more, shorter GEMMs).

Where no one change fits, two of them together are tried, the ladder's earliest first. A change the scenario
refuses is kept with the reason (Advice.refused), not offered; one that leaves the fullest stage no further from
fitting than the run as written is never offered, not even as the closest miss. Given a step-time estimate
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
from ..config.loading import parse_scenario, written_value
from ..config.scenario import ScenarioConfig, scenario_argument
from ..config.units import GiB
from ..config.workload import FSDP_UNREAD, without_other_recompute_settings
from ..workload.layout import RankLayout
from .model import MemoryReport, estimate_memory, rank_layout

Change = tuple[tuple[str, str, Any], ...]
"""Settings to write, each (block under workload, key, value)."""

DERIVED = ("dp", "num_microbatches")
"""Parallelism keys a scenario may state that another parallel size or micro-batch size changes (derived again)."""
RESIZING = ("tp", "cp", "pp", "micro_batch_size")
"""The settings whose change derives DERIVED again."""
DEPENDENT = {"distributed_optimizer": ("overlap_param_gather",)}
"""Parallelism keys that hold only with another's setting: switching that one off drops them (Megatron overlaps the
parameter all-gather of the distributed optimizer only)."""
SAME_CHOICE = {"distributed_optimizer": "sharding", "fsdp": "sharding"}
"""Settings that are one choice between them: no change sets two of them apart."""
RECOMPUTE_ORDER = ("none", "selective", "full")
"""Recomputation modes, from the one keeping the most activations to the one keeping the fewest."""
FSDP_ORDER = ("none", "shard_grad_op", "full_shard")
"""FSDP sharding, from the one holding the most model states on a rank to the one holding the fewest."""
SPLIT_KEYS = ("layers_per_stage", "pipeline_layout", "first_stage_layers", "last_stage_layers")
"""Parallelism keys that split the layers unevenly over the stages (the even split: none of them)."""
PIPELINE_SPLIT = (*SPLIT_KEYS, "microbatch_group_size")
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
        change = (("parallelism", key, 2 * getattr(par, key)),)
        if not keeps_the_gpu_count(sc, change):
            return []
        if key == "tp" and 2 * par.tp > sc.datacenter.domain_gpus:
            return []
        if key == "pp" and any(getattr(par, name) is not None for name in PIPELINE_SPLIT):
            return []
        if key == "ep" and sc.workload.model.moe is None:
            return []
        return [change]
    return offer


def keeps_the_gpu_count(sc: ScenarioConfig, change: Change) -> bool:
    """Whether the data parallelism left divides by what the change multiplies tensor, context and pipeline
    parallelism by (tp·cp·dp·pp is the GPU count; expert parallelism is carved out of the data x context group)."""
    par = sc.workload.parallelism
    growth = math.prod(value // getattr(par, key) for _, key, value in change if key in ("tp", "cp", "pp"))
    return shard_groups(sc).dp % growth == 0


def _sequence_parallel(sc: ScenarioConfig) -> list[Change]:
    return _flag("parallelism", "sequence_parallel", True)(sc) if sc.workload.parallelism.tp > 1 else []


def shard_groups(sc: ScenarioConfig) -> RankLayout:
    """The scenario's ranks as the memory model lays them out (RankLayout): its dp·cp ranks are the group the
    distributed optimizer and FSDP shard dense parameters' states over, its edp ranks the expert ones'."""
    return rank_layout(sc.workload, sc.placement().num_gpus)


def _distributed_optimizer(sc: ScenarioConfig) -> list[Change]:
    """The distributed optimizer, where its groups have ranks to shard over: the data x context group (dp·cp, a
    run of dp 1 and cp 2 too), or for a MoE model the expert-data-parallel group; not under FSDP, which shards the
    states itself."""
    layout, moe = shard_groups(sc), sc.workload.model.moe is not None
    if sc.workload.parallelism.fsdp != "none" or (layout.dp * layout.cp == 1 and not (moe and layout.edp > 1)):
        return []
    return _flag("parallelism", "distributed_optimizer", True)(sc)


def _beyond(key: str, value: str, order: tuple[str, ...]) -> Callable[[ScenarioConfig], list[Change]]:
    """A parallelism setting offered to a run whose own comes earlier in `order` (keeps more in memory): never
    selective recomputation to a run at full, nor ZeRO-2 to one at ZeRO-3."""
    def offer(sc: ScenarioConfig) -> list[Change]:
        current = getattr(sc.workload.parallelism, key)
        return [(("parallelism", key, value),)] if order.index(current) < order.index(value) else []
    return offer


def _zero(stage: str) -> Callable[[ScenarioConfig], list[Change]]:
    """FSDP sharding (`stage`: shard_grad_op, ZeRO-2, or full_shard, ZeRO-3) over the data x context group, where it
    has more than one rank, to a run sharding less; with the distributed optimizer switched off where the run has
    it, as the scenario takes one or the other."""
    def offer(sc: ScenarioConfig) -> list[Change]:
        layout = shard_groups(sc)
        if layout.dp * layout.cp == 1:
            return []
        par = sc.workload.parallelism
        instead = (("parallelism", "distributed_optimizer", False),) if par.distributed_optimizer else ()
        return [change + instead for change in _beyond("fsdp", stage, FSDP_ORDER)(sc)]
    return offer


def _even_split(sc: ScenarioConfig) -> list[Change]:
    """Megatron's own split of the layers over the pipeline stages (evenly, as get_num_layers_to_build does), in place
    of the one the scenario writes (PIPELINE_SPLIT's layer counts and layout string): a split that loads one stage
    with more layers than the others holds more memory there."""
    par = sc.workload.parallelism
    written = [key for key in SPLIT_KEYS if getattr(par, key) is not None]
    return [tuple(("parallelism", key, None) for key in written)] if written else []


def _half_micro_batch(sc: ScenarioConfig) -> list[Change]:
    mbs = sc.workload.training.micro_batch_size
    return [(("training", "micro_batch_size", mbs // 2),)] if mbs > 1 and mbs % 2 == 0 else []


LADDER: tuple[Callable[[ScenarioConfig], list[Change]], ...] = (
    _distributed_optimizer,
    _flag("training", "expandable_segments", True),
    _sequence_parallel,
    _even_split,
    _beyond("recompute", "selective", RECOMPUTE_ORDER),
    _zero("shard_grad_op"),
    _zero("full_shard"),
    _doubled("tp"), _doubled("cp"), _doubled("ep"), _doubled("pp"),
    _beyond("recompute", "full", RECOMPUTE_ORDER),
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
    restated: Change = ()  # DERIVED sizes the scenario writes that the change gives new values (_restated)

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
        """The change as dotted paths of the scenario and their values, with the sizes the scenario writes that it
        derives anew (else the file with the change alone is refused: num_microbatches no longer the batch's)."""
        return {f"workload.{block}.{key}": value for block, key, value in self.change + self.restated}

    def to_json(self) -> dict:
        peak = self.report.peak
        return {"settings": self.settings, "peak_stage": peak.stage, "device_bytes": peak.device,
                "capacity_bytes": peak.capacity, "estimated_step_s": self.step_s,
                "as_written_estimated_step_s": self.as_written_s}


def settings_text(settings: dict[str, Any]) -> str:
    """Settings by dotted path as a scenario's blocks write them: 'distributed_optimizer: true and tp: 8'."""
    return " and ".join(f"{path.rsplit('.', 1)[-1]}: {written_value(value)}" for path, value in settings.items())


def variant(sc: ScenarioConfig, change: Change) -> ScenarioConfig:
    """The scenario with the change's settings written in, parsed as a scenario file is (what a setting changed
    makes stale goes: DERIVED sizes, other recomputation modes' settings, DEPENDENT keys, what FSDP reads none of);
    a ConfigError where the scenario refuses them (a size its model does not divide, a setting its framework cannot
    run)."""
    data = sc.as_data()
    workload = data["workload"]
    for block, key, value in change:
        workload[block][key] = value
        if key in RESIZING:
            for derived in DERIVED:
                workload["parallelism"].pop(derived, None)
        if key == "recompute":
            without_other_recompute_settings(workload["parallelism"])
        if not value:
            for dependent in DEPENDENT.get(key, ()):
                workload["parallelism"].pop(dependent, None)
        if key == "fsdp" and value != "none":
            for unread_block, unread in FSDP_UNREAD:
                workload[unread_block].pop(unread, None)
    return parse_scenario(data, "remedy")


def _restated(sc: ScenarioConfig, change: Change, changed: ScenarioConfig) -> Change:
    """The DERIVED sizes the scenario writes that `change` (a RESIZING one) gives other values in `changed`, with
    those values: what the change's text must name for the file to take it."""
    written = sc.as_data()["workload"]["parallelism"]
    if not any(key in RESIZING for _, key, _ in change):
        return ()
    workload = changed.workload
    dp = workload.parallelism.data_parallel(workload.training.num_gpus or changed.datacenter.num_gpus)
    values = {"dp": dp, "num_microbatches": max(workload.training.replica_microbatches(dp))}
    return tuple(("parallelism", key, values[key]) for key in DERIVED if key in written and values[key] != written[key])


def applied(sc: ScenarioConfig, change: Change) -> ScenarioConfig | None:
    """The scenario with the change's settings written in (variant); None where the scenario refuses them."""
    try:
        return variant(sc, change)
    except ConfigError:
        return None


def choices(change: Change) -> set[str]:
    """The choices a change makes: its settings, the distributed optimizer and FSDP being one (how the optimizer
    states are sharded: the scenario takes one or the other)."""
    return {SAME_CHOICE.get(key, key) for _, key, _ in change}


def _candidates(sc: ScenarioConfig) -> Iterator[Change]:
    """Every change of the ladder, then every two of them making different choices whose parallel sizes together
    still divide the GPU count, the ladder's earliest first."""
    singles = [change for offer in LADDER for change in offer(sc)]
    yield from singles
    for first, second in combinations(singles, 2):
        if choices(first).isdisjoint(choices(second)) and keeps_the_gpu_count(sc, first + second):
            yield first + second


@dataclass(frozen=True)
class Refused:
    """A candidate change the scenario or the memory model refuses, and why (its error's message)."""

    change: Change
    reason: str


def _evaluated(sc: ScenarioConfig) -> Iterator[Remedy | Refused]:
    """Every candidate change (_candidates) with its memory, fitting or not, or where the scenario or the memory
    model refuses it, why."""
    for change in _candidates(sc):
        try:
            changed = variant(sc, change)
            yield Remedy(change, estimate_memory(changed), changed, restated=_restated(sc, change, changed))
        except (ConfigError, ValueError) as error:  # the scenario refusing the change, or the memory model
            yield Refused(change, str(error))


LADDER_ORDER = "in the order tuning guides try them"
TIMED_ORDER = "fastest first by the search's estimate of a step"
"""How the remedies are ordered, as `simulate`, `memory` and the report say it (Advice.timed picks one)."""


@dataclass(frozen=True)
class Advice:
    """What the changes tried say about a run that does not fit: those that make it fit, and where none does, the one
    that comes closest."""

    remedies: list[Remedy]
    closest: Remedy | None  # None where a change fits, or none tried leaves the run nearer fitting than as written
    tried: tuple[str, ...] = ()  # the settings of the changes whose memory was estimated, as one names them
    refused: tuple[Refused, ...] = ()  # the candidates the scenario or the memory model refused

    @property
    def timed(self) -> bool:
        """Whether the remedies are ranked by their estimated step (advise's `step_time`), not by the ladder."""
        return any(r.step_s is not None for r in self.remedies)


def advise(sc: ScenarioConfig, most: int = 3,
           step_time: Callable[[ScenarioConfig], float | None] | None = None) -> Advice:
    """Up to `most` changes that make a run that does not fit fit, changes of two settings only where no change of one
    fits: the ladder's first, or with `step_time` (a scenario's step in seconds, None where it cannot tell) the fastest
    of all that fit, the ladder's order among equals and after the untimed; where none fits, of the changes tried the
    one that leaves the fullest stage the least over its GPU's memory (the ladder's earliest among equals), where that
    is less than the run as written needs. Nothing for a run that fits. Every change is evaluated once."""
    sc = scenario_argument(sc, need_workload=True)
    as_written = estimate_memory(sc)
    if as_written.fits:
        return Advice([], None)
    found: list[Remedy] = []
    nearest: Remedy | None = None
    tried: list[Remedy] = []
    refused: list[Refused] = []
    for remedy in _evaluated(sc):
        if isinstance(remedy, Refused):
            refused.append(remedy)
            continue
        if found and len(remedy.change) > len(found[0].change):
            break
        tried.append(remedy)
        if remedy.report.fits:
            found.append(remedy)
            if step_time is None and len(found) == most:
                break
        elif remedy.report.peak.fill < (nearest.report if nearest else as_written).peak.fill:
            nearest = remedy
    if step_time is not None and found:
        seconds = step_time(sc)
        found = [replace(r, step_s=step_time(r.scenario), as_written_s=seconds) for r in found]
        found.sort(key=lambda r: math.inf if r.step_s is None else r.step_s)  # stable: the ladder's among equals
    names = tuple(dict.fromkeys(key for r in tried for _, key, _ in r.change))
    return Advice(found[:most], None if found else nearest, names, tuple(refused))


def remedies(sc: ScenarioConfig, most: int = 3) -> list[Remedy]:
    """The changes that make a run that does not fit fit (advise; `sc`: a ScenarioConfig, load_scenario's)."""
    return advise(sc, most).remedies
