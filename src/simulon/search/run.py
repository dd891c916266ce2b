"""The search: enumerate, prune by exact rules, drop what does not fit, estimate the rest, replay the best.

1. `space.Space` enumerates every strategy and prunes by divisibility and dominance, counting each rule.
2. The memory model (memory/) decides feasibility on the fullest stage (MemoryModel.fullest: stages of alike
   layers worked out once, and under 1F1B an earlier one of them standing for the later ones). An infeasible
   strategy is counted under the term that is largest on its fullest stage.
3. `estimate.Estimator` ranks every feasible strategy in well under a millisecond each.
4. The best `replay` strategies are simulated by the full contention-aware replay (pipeline.simulate) on a
   process pool (or Ray). The ranking is by step time: the replayed one where replayed, else the estimate in
   the ratio replayed / estimated of the replayed strategy with the median ratio (so a twin of it, the same
   estimate, gets its time to the bit); a tie goes to the replayed strategy. Each replay is first sized (the DAG
   it builds, dag/size.py, plus on the process pool the search's own footprint, which a forked worker starts
   from) and the replays run side by side only as far as their memory adds up on the machine
   (executors.Admission); one too large even alone is not run, and the search reports it with its reason and
   ranks it by its estimate.
"""

from __future__ import annotations

import dataclasses
import json
import math
import multiprocessing
import os
import resource
import sys
import time
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..config.common import DType, FieldError
from ..config.dc import workload_gpus
from ..config.errors import ConfigError
from ..config.loading import parse_scenario, problem, read_scenario_data
from ..config.scenario import ScenarioConfig, check_dispatcher, scenario_argument
from ..config.units import GiB
from ..config.workload import (
    FSDP_UNREAD,
    MegatronWorkload,
    ModelSpec,
    ParallelismSpec,
    TrainingSpec,
    without_other_recompute_settings,
)
from ..dag.size import DagSize
from ..executors import Executor, ProcessExecutor, Refused, check_processes
from ..memory import MemoryModel, StageMemory, scenario_channels
from ..memory.activations import LayerCache
from ..progress import SILENT, Progress
from .cache import Cache, finite_number, finite_positive
from .estimate import Estimate, Estimator
from .space import CHOICES, SHARDING_SETTINGS, Limits, Space, Strategy

ESTIMATE_FIELDS = len(dataclasses.fields(Estimate))
"""A cached candidate is one row: its estimate's fields, then its strategy's."""
STRATEGY_FIELDS = {f.name: {"int": int, "bool": bool, "str": str}[f.type] for f in dataclasses.fields(Strategy)}
"""A strategy's fields in order, by the type each holds (how a cached one is checked)."""


@dataclass(frozen=True)
class Ranked:
    """One strategy in the ranking: its estimate, its memory, and its replayed step time if it was replayed."""

    strategy: Strategy
    estimate: Estimate
    peak_memory_gib: float
    capacity_gib: float
    peak_stage: int
    replay_ms: float | None = None
    # (replayed ms, estimated ms) of the replayed strategy whose ratio is the median (the lower one of an even
    # count); an unreplayed strategy's step time is its estimate in that ratio, so a twin of it (same estimate)
    # gets its replayed time to the bit
    anchor: tuple[float, float] = (1.0, 1.0)

    @property
    def iteration_ms(self) -> float:
        if self.replay_ms is not None:
            return self.replay_ms
        return anchored_ms(self.estimate, self.anchor)

    @property
    def headroom_gib(self) -> float:
        return self.capacity_gib - self.peak_memory_gib


def by_count(counter: Counter) -> list[tuple[str, int]]:
    """A counter's entries, largest first, ties by name (the same order however the counter was filled)."""
    return sorted(counter.items(), key=lambda item: (-item[1], item[0]))


@dataclass(frozen=True)
class Reused:
    """What a search read from its cache instead of working out again."""

    estimates: bool  # the whole enumerate-prune-estimate phase
    replays: int

    def to_json(self) -> dict[str, Any]:
        return {"estimates": self.estimates, "replays": self.replays}


@dataclass
class Phase:
    """The enumerate-prune-estimate phase of a search: every feasible strategy with its estimate, best first."""

    enumerated: int
    pruned: Counter
    infeasible: Counter
    candidates: list[tuple[Estimate, Strategy]]
    closest: tuple[float, Strategy, str] | None  # the smallest memory need that does not fit: bytes, strategy, term
    from_cache: bool = True

    def to_json(self) -> dict[str, Any]:
        closest = None if self.closest is None else [self.closest[0], self.closest[1].to_json(), self.closest[2]]
        return {"enumerated": self.enumerated, "pruned": dict(self.pruned), "infeasible": dict(self.infeasible),
                "candidates": [[*dataclasses.astuple(e), *dataclasses.astuple(s)] for e, s in self.candidates],
                "closest": closest}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Phase:
        """The phase a cache entry records; ValueError, TypeError or KeyError where the entry is not of the shape
        to_json writes (a count that is not a whole number, a row of the wrong length, a time that is not finite,
        a strategy's field of the wrong type), so that the cache treats it as missing."""
        closest = data["closest"]
        if closest is not None:
            device, strategy, term = closest
            closest = (finite_positive(device), checked_strategy(strategy), _typed(term, str))
        return cls(_typed(data["enumerated"], int), _counts(data["pruned"]), _counts(data["infeasible"]),
                   [candidate_from_json(row) for row in data["candidates"]], closest)


def candidate_from_json(row: list) -> tuple[Estimate, Strategy]:
    """One cached candidate (its estimate's fields, then its strategy's: Phase.to_json), checked."""
    if not isinstance(row, list) or len(row) != ESTIMATE_FIELDS + len(STRATEGY_FIELDS):
        raise ValueError(f"expected a row of {ESTIMATE_FIELDS + len(STRATEGY_FIELDS)} fields, got {row!r}")
    estimate = Estimate(*(finite_number(v) for v in row[:ESTIMATE_FIELDS]))
    finite_positive(estimate.iteration_s)
    return estimate, checked_strategy(dict(zip(STRATEGY_FIELDS, row[ESTIMATE_FIELDS:], strict=True)))


def checked_strategy(fields: dict[str, Any]) -> Strategy:
    """A strategy from its fields by name, each of the type Strategy declares (a yes/no is not a number)."""
    if not isinstance(fields, dict) or set(fields) - set(STRATEGY_FIELDS):
        raise ValueError(f"expected a strategy's fields, got {fields!r}")
    for name, value in fields.items():
        _typed(value, STRATEGY_FIELDS[name])
        if name in CHOICES and value not in CHOICES[name]:
            raise ValueError(f"{name}: expected one of {CHOICES[name]}, got {value!r}")
        if type(value) is int and value < (0 if name in ("first_layers", "last_layers") else 1):
            raise ValueError(f"{name}: out of range, got {value!r}")
    return Strategy(**fields)


def _typed(value: Any, kind: type) -> Any:
    """`value` if it is exactly of `kind` (a bool is not an int here), else TypeError."""
    if type(value) is not kind:
        raise TypeError(f"expected {kind.__name__}, got {value!r}")
    return value


def _counts(data: dict) -> Counter:
    """A cached count by name (rule or memory term)."""
    if not isinstance(data, dict) or not all(isinstance(k, str) and type(v) is int for k, v in data.items()):
        raise TypeError(f"expected counts by name, got {data!r}")
    return Counter(data)


@dataclass
class SearchResult:
    enumerated: int
    pruned: Counter
    infeasible: Counter
    estimated: int
    replayed: int
    seconds: float                  # wall clock: kept out of to_json, so a search's output is reproducible
    ranked: list[Ranked]
    tokens_per_step: float
    num_gpus: int
    model_flops: float              # per step
    peak_flops: dict[str, float]    # per GPU, by number format
    closest_miss: tuple[Strategy, str] | None = None
    # (replayed ms, estimated ms) of the strategy whose ratio the unreplayed ones' step times take (median_anchor)
    anchor: tuple[float, float] = (1.0, 1.0)
    reused: Reused = Reused(False, 0)
    candidates: list[tuple[Estimate, Strategy]] = dataclasses.field(default_factory=list)  # every feasible one
    gpu_counts: tuple[int, ...] = ()        # the counts searched (several with --gpus 512,1024); () = num_gpus
    objective: str = "time"
    gpu_hour_price: float | None = None     # what a GPU-hour costs, for the cost column
    parts: dict[int, SearchResult] = dataclasses.field(default_factory=dict)  # each count's own search
    refused: list[tuple[Strategy, str]] = dataclasses.field(default_factory=list)  # replays not run, and why

    @property
    def estimate_scale(self) -> float:
        """How the replayed strategies' step times compare with their estimates: the anchor's ratio."""
        return self.anchor[0] / self.anchor[1]

    def tokens_per_s(self, r: Ranked) -> float:
        return self.tokens_per_step / (r.iteration_ms / 1e3)

    def mfu(self, r: Ranked) -> float:
        """Model FLOPs utilisation against the peak of the strategy's number format."""
        return (self.model_flops / (r.iteration_ms / 1e3)
                / (r.strategy.num_gpus * self.peak_flops[r.strategy.dtype]))

    def gpu_hours_per_million_tokens(self, r: Ranked) -> float:
        """GPU-hours one million training tokens take: GPUs x step time / tokens per step."""
        return gpu_hours_per_million_tokens(r.iteration_ms, r.strategy.num_gpus, self.tokens_per_step)

    def rank_key(self, r: Ranked) -> tuple:
        """What the objective minimises (step time, or GPU-hours per token); of a tie the replayed strategy first,
        then the fewer GPUs, then the strategy's fields."""
        value = r.iteration_ms if self.objective == "time" else self.gpu_hours_per_million_tokens(r)
        return value, r.replay_ms is None, r.strategy.num_gpus, r.strategy

    def to_json(self) -> dict[str, Any]:
        top = [{**{k: v for k, v in r.strategy.to_json().items() if k != "dtype"}, "dtype": r.strategy.dtype,
                "iteration_time_ms": r.iteration_ms, "estimated_ms": 1e3 * r.estimate.iteration_s,
                "tokens_per_s": self.tokens_per_s(r), "mfu": self.mfu(r), "peak_memory_gib": r.peak_memory_gib,
                "memory_capacity_gib": r.capacity_gib, "fits": r.headroom_gib >= 0,
                "replayed": r.replay_ms is not None, "num_gpus": r.strategy.num_gpus,
                "gpu_hours_per_million_tokens": self.gpu_hours_per_million_tokens(r),
                **({} if self.gpu_hour_price is None else
                   {"cost_per_million_tokens": self.gpu_hour_price * self.gpu_hours_per_million_tokens(r)}),
                "breakdown_ms": r.estimate.breakdown_ms()} for r in self.ranked]
        return {"enumerated": self.enumerated, "pruned": sum(self.pruned.values()),
                "pruned_by_rule": dict(by_count(self.pruned)), "infeasible": sum(self.infeasible.values()),
                "infeasible_by_term": dict(by_count(self.infeasible)), "estimated": self.estimated,
                "replayed": self.replayed, "num_gpus": self.num_gpus,
                "gpu_counts": list(self.gpu_counts or (self.num_gpus,)), "objective": self.objective,
                "cached": self.reused.to_json(), "top": top,
                "refused": [{**strategy.to_json(), "reason": why} for strategy, why in self.refused]}


OBJECTIVES = ("time", "cost")
"""What a search minimises: the step time, or the GPU-hours (hence the cost) of a million tokens."""


def anchored_ms(estimate: Estimate, anchor: tuple[float, float]) -> float:
    """An unreplayed strategy's step time (ms): its estimate in the ratio of the anchor's (replayed ms, estimated
    ms), so that a twin of the anchor, with the same estimate, gets its replayed time to the bit. The search's table
    and its Pareto front (pareto.py) both take it from here."""
    return anchor[0] * (1e3 * estimate.iteration_s / anchor[1])


def median_anchor(replayed: list[Ranked]) -> tuple[float, float]:
    """(replayed ms, estimated ms) of the replayed strategy whose replayed / estimated ratio is the median, the
    lower of the middle two for an even count (ties broken by the strategy); (1, 1) when none was replayed."""
    if not replayed:
        return 1.0, 1.0
    ordered = sorted(replayed, key=lambda r: (r.replay_ms / (1e3 * r.estimate.iteration_s), r.strategy))
    middle = ordered[(len(ordered) - 1) // 2]
    return middle.replay_ms, 1e3 * middle.estimate.iteration_s


def gpu_hours_per_million_tokens(iteration_ms: float, num_gpus: int, tokens_per_step: float) -> float:
    return num_gpus * iteration_ms / 3.6e6 / (tokens_per_step / 1e6)


def combine(results: list[SearchResult], objective: str = "time", top: int = 10,
            gpu_hour_price: float | None = None) -> SearchResult:
    """One ranking of searches of the same scenario on several GPU counts, by the objective. Within one count
    the GPU-hours of a token are the step time times a constant, so both objectives rank one count alike."""
    if objective not in OBJECTIVES:
        raise ConfigError(f"--objective: expected one of {', '.join(OBJECTIVES)}, got {objective!r}")
    first = results[0]
    merged = dataclasses.replace(first, objective=objective, gpu_hour_price=gpu_hour_price)
    ranked = sorted((r for result in results for r in result.ranked), key=merged.rank_key)[:top]
    return dataclasses.replace(
        merged, enumerated=sum(r.enumerated for r in results), pruned=sum((r.pruned for r in results), Counter()),
        infeasible=sum((r.infeasible for r in results), Counter()), estimated=sum(r.estimated for r in results),
        replayed=sum(r.replayed for r in results), seconds=sum(r.seconds for r in results), ranked=ranked,
        num_gpus=ranked[0].strategy.num_gpus if ranked else first.num_gpus,
        closest_miss=next((r.closest_miss for r in results if r.closest_miss), None),
        reused=Reused(all(r.reused.estimates for r in results), sum(r.reused.replays for r in results)),
        candidates=[], gpu_counts=tuple(r.num_gpus for r in results), parts={r.num_gpus: r for r in results},
        refused=[item for r in results for item in r.refused])


def apply(workload: MegatronWorkload, strategy: Strategy) -> MegatronWorkload:
    """The workload with a strategy's parallelism and training settings (the parallelism block validated; the
    model and the rest of training are the base's, already validated). The layout's own settings (micro-batch count
    and groups, layers per stage) go: each strategy has its own pp and micro-batches."""
    parallelism = workload.parallelism.model_dump(exclude_none=True)
    for key in ("num_microbatches", "microbatch_group_size", "layers_per_stage", "expert_tensor_parallel"):
        parallelism.pop(key, None)
    parallelism.update(strategy.parallelism(workload.model.num_layers))
    if not parallelism["distributed_optimizer"]:  # the scenario's gather overlap, for its distributed optimizer
        parallelism.pop("overlap_param_gather", None)
    without_other_recompute_settings(parallelism)
    if strategy.etp != strategy.tp:
        parallelism["expert_tensor_parallel"] = strategy.etp
    changed = {key: None for block, key in FSDP_UNREAD if block == "training"} if parallelism["fsdp"] != "none" else {}
    if workload.training.moe_dispatcher == "deepep" and strategy.ep * strategy.etp == 1:
        changed[DISPATCHER] = "alltoall"  # nothing to dispatch, and Megatron-Core refuses DeepEP's (check_dispatcher)
    training = workload.training.model_copy(update={"micro_batch_size": strategy.micro_batch_size,
                                                    "dtype": DType(strategy.dtype), **changed})
    applied = workload.model_copy(update={"parallelism": every_layer_named(ParallelismSpec.model_validate(parallelism),
                                                                           workload.model),
                                          "training": training})
    if applied.parallelism.overlap_moe_expert_parallel_comm and applied.expert_overlap_problem():
        # the scenario's all-to-all overlap where the strategy can run it (Megatron-Core refuses it elsewhere)
        return applied.model_copy(update={"parallelism": applied.parallelism.model_copy(
            update={"overlap_moe_expert_parallel_comm": False})})
    return applied


def every_layer_named(par: ParallelismSpec, model: ModelSpec) -> ParallelismSpec:
    """`par` recomputing every layer as such where its recompute_num_layers is no fewer than any model chunk holds:
    the base scenario's count, kept for a strategy of more, smaller chunks, would be refused as more than a rank
    holds (config.scenario, as Megatron-Core refuses it), though it asks for what recomputing every layer does."""
    if par.recompute_num_layers is None:
        return par
    try:
        chunks = model.stage_layers(par)
    except FieldError:
        return par  # the scenario's check names the split
    if par.recompute_num_layers < max(chunks):
        return par
    return par.model_copy(update={"recompute_num_layers": None})


def scenario_for(sc: ScenarioConfig, strategy: Strategy, num_gpus: int) -> ScenarioConfig:
    """The base scenario running a strategy on `num_gpus` GPUs."""
    data = sc.model_copy(update={"workload": apply(sc.workload, strategy)}).as_data()
    data["workload"]["training"]["num_gpus"] = num_gpus
    return parse_scenario(data, "search")


INVALID = "not replayed: its scenario is refused"
"""Why a strategy's replay did not run where its scenario breaks a rule the space's own (space.rule_checks) do not
know: listed with the refused replays, and not ranked (a strategy the framework cannot run is no answer)."""

ESTIMATE_PARTS_PER_WORKER = 3
"""The space is cut into this many parts per worker (by tp, pp, vpp, of about equal work: Space.shares), so that a
worker whose parts ran faster than their weight said takes another while a slow one runs; a worker's parts share
one search and its caches (part_search)."""


def estimate_part(args: tuple[dict, int, dict | None, bool, tuple[int, ...]]) -> Phase:
    """One part of a search's space (the (tp, pp, vpp) blocks at positions `blocks`, Space.shares) estimated; runs in
    a worker process (module level, picklable)."""
    data, num_gpus, limits, fp8, blocks = args
    return part_search(json.dumps([data, num_gpus, limits, fp8], sort_keys=True)).estimate_blocks(blocks)


@lru_cache(maxsize=1)
def part_search(spec: str) -> Search:
    """The search a worker estimates its parts with (`spec`: estimate_part's arguments but the blocks, as JSON), kept
    for its next part of the same search: a process pool's worker runs several, which then share the collectives
    timed, the kernel tables and the layers' activations worked out (caches of what the inputs alone decide)."""
    data, num_gpus, limits, fp8 = json.loads(spec)
    limits = {dimension: tuple(values) for dimension, values in limits.items()} if limits else limits
    # validated on one GPU with the layout set aside, as load_search_scenario does, then the count and the layout
    # set back as the search's scenario has them (a scenario loaded whole keeps its own, as the search in process
    # does: validated on one GPU, its tp 2 x pp 2 was refused, 'tp*cp*pp = 4 does not divide num_gpus 1'); the
    # all-to-all overlap is the strategies' to check (apply), not the base layout's
    training, parallelism = data["workload"]["training"], dict(data["workload"].get("parallelism", {}))
    overlap = bool(parallelism.pop(EXPERT_OVERLAP, False))
    kept, deepep = set_aside_dispatcher(training)
    sc = parse_scenario({**data, "workload": {**data["workload"], "training": {**kept, "num_gpus": 1},
                                              "parallelism": framework_settings(parallelism, training)}},
                      "search")
    training = sc.workload.training.model_copy(update={"num_gpus": training.get("num_gpus")})
    return Search(_base(sc, training, overlap, deepep, ParallelismSpec.model_validate(parallelism)), num_gpus,
                  Limits(limits), fp8)


def merge(pieces: list[Phase]) -> Phase:
    """The phases of a space's parts as one: counts added, candidates best first, the closest miss the smallest
    (ties by the strategy)."""
    candidates = sorted((c for piece in pieces for c in piece.candidates), key=lambda c: (c[0].iteration_s, c[1]))
    misses = [piece.closest for piece in pieces if piece.closest is not None]
    return Phase(sum(piece.enumerated for piece in pieces), sum((piece.pruned for piece in pieces), Counter()),
                 sum((piece.infeasible for piece in pieces), Counter()), candidates,
                 min(misses, key=lambda miss: (miss[0], miss[1])) if misses else None)


SAMPLES_FIRST_ABOVE = 2
"""A candidate of at least this many times its larger sampled micro-batch count is counted from its sampled counts
before it is traced whole (pipeline.plan_step). A choice, not a fit: DeepSeek-V3's tp1 dp128 candidates (120
micro-batches, sampled at 16 and 32) are then sampled without a whole trace, while Llama 3 70B's on 1,024 H100 (16
micro-batches, sampled at 8 and 12) run whole without sampled traces they would not use (its search: 29.9 s median
of 3 before these candidates were counted from samples, 29.2 s after, benchmarks/bench_search.py, one session)."""


def replay_size(args: tuple[dict, str, float | None]) -> DagSize:
    """The size of the DAG one scenario's replay builds within its memory limit (bytes, None: none), as
    replay_step_ms plans it; runs in a worker process (module level, picklable)."""
    from ..pipeline import step_size

    data, name, limit = args
    return step_size(parse_scenario(data, name), micro_batches="auto", samples_first_above=SAMPLES_FIRST_ABOVE,
                     memory_limit=limit)


def resident_memory() -> float:
    """Bytes this process holds in memory now (Linux: /proc/self/statm's resident pages; elsewhere its peak so
    far, as getrusage reports it)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return float(pages * os.sysconf("SC_PAGE_SIZE"))
    except (OSError, IndexError, ValueError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return float(peak if sys.platform == "darwin" else peak * 1024)  # bytes on macOS, KiB on Linux


def worker_baseline(executor: Executor) -> float:
    """What a replay's worker holds before it builds anything, beyond the fitted size (dag/size.py, measured
    over a fresh import of simulon): a worker of the local process pool is forked from this process and starts
    as its copy, and Python's reference counts and garbage collector write to most of the objects it inherits,
    so their pages are copied as the replay runs; the search's own footprint is added to each replay's need
    (a DeepSeek-V3 replay peaked at 7.7 GB against a DAG estimate of 5.6 GB). Ray's workers and spawned ones
    start fresh: nothing is added."""
    forked = isinstance(executor, ProcessExecutor) and multiprocessing.get_start_method() == "fork"
    return resident_memory() if forked else 0.0


def replay_from_json(entry: dict[str, Any]) -> float:
    """The step ms a cached replay records (a finite positive number, else ValueError, TypeError or KeyError)."""
    return finite_positive(entry["iteration_time_ms"])


def replay_step_ms(args: tuple[dict, str, float | None]) -> float:
    """The step ms of one scenario replayed within its memory limit (bytes, None: none), folded and sampled as
    `simulate --max-memory` would be to fit it; runs in a worker process (module level, to be picklable)."""
    from ..pipeline import simulate

    data, name, limit = args
    sim = simulate(parse_scenario(data, name), micro_batches="auto", samples_first_above=SAMPLES_FIRST_ABOVE,
                   memory_limit=limit)
    return sim.result.iteration_time_ms


class Search:
    """A strategy search over one scenario's model, datacenter and batch."""

    def __init__(self, sc: ScenarioConfig, num_gpus: int | None = None, limits: Limits | None = None,
                 fp8: bool = True):
        sc = scenario_argument(sc)
        if sc.workload is None:
            raise ConfigError("the scenario has no workload block to search strategies for")
        count_argument(num_gpus, "num_gpus", 1)
        self.sc, self.workload = sc, sc.workload
        dc = sc.datacenter
        self.num_gpus = num_gpus or sc.workload.training.num_gpus or dc.num_gpus
        if self.num_gpus > dc.num_gpus:
            raise ConfigError(f"--gpus: {self.num_gpus} is more than the datacenter's {dc.num_gpus} GPUs")
        try:
            gpu = dc.single_node("the strategy search").gpu
        except ValueError as exc:
            raise ConfigError(f"datacenter.node_groups: {exc}") from None
        has_fp8 = fp8 and gpu.has_peak(DType.fp8)
        self.space = Space(self.workload, self.num_gpus, dc.domain_gpus, has_fp8, limits)
        self.estimator = Estimator.on(self.workload, dc, sc.collective, self.num_gpus)
        self.capacity = gpu.memory_bytes
        self.gpu = gpu
        self.fp8 = fp8
        self.layers = LayerCache(self.workload.model)  # every strategy's workload shares the model (apply)

    def run(self, top: int = 10, replay: int = 10, progress: Progress = SILENT, workers: int | None = None,
            executor: Executor | None = None, cache: Cache | None = None) -> SearchResult:
        """`executor` runs the replays (default: a process pool of `workers`); `cache` keeps estimates and
        replays on disk (search/cache.py), so that a search run again reads what it had finished. The counts are
        checked as the CLI's options are (`top` 1 to 1000, `replay` 0 to 1000, `workers` executors.check_processes)."""
        count_argument(top, "top", 1, 1000)
        count_argument(replay, "replay", 0, 1000)
        check_processes(workers, "workers")  # as --workers is checked
        started = time.perf_counter()
        phase = self.estimated(progress, cache, executor if executor is not None or workers != 1 else None,
                               workers)
        best = [self._ranked(strategy, estimate) for estimate, strategy in phase.candidates[:max(top, replay)]]
        tried, reused, refused = self._replay(best[:replay], progress, executor or ProcessExecutor(workers), cache)
        replayed = [r for r in tried if r.replay_ms is not None]
        anchor = median_anchor(replayed)
        invalid = {strategy for strategy, why in refused if why.startswith(INVALID)}  # not ranked: none can run
        rest = [dataclasses.replace(r, anchor=anchor) for r in tried + best[len(tried):]
                if r.replay_ms is None and r.strategy not in invalid]
        ranked = sorted(replayed + rest, key=lambda r: (r.iteration_ms, r.replay_ms is None, r.strategy))
        train = self.workload.training
        miss = None
        if phase.closest is not None:
            device, strategy, term = phase.closest
            miss = (strategy, f"needs {device / GiB:.1f} GiB, {(device - self.capacity) / GiB:.1f} GiB over the "
                              f"{self.capacity / GiB:.0f} GiB of a {self.gpu.name}; largest term: {term}")
        return SearchResult(phase.enumerated, phase.pruned, phase.infeasible, len(phase.candidates), len(replayed),
                            time.perf_counter() - started, ranked[:top],
                            train.global_batch_size * train.sequence_length, self.num_gpus,
                            self.estimator.model_flops(), {d: self.gpu.peak_flops(DType(d)) for d in self.space.dtypes},
                            miss, anchor, Reused(phase.from_cache, reused), phase.candidates,
                            refused=refused)

    def estimated(self, progress: Progress = SILENT, cache: Cache | None = None, executor: Executor | None = None,
                  workers: int | None = 1) -> Phase:
        """Every feasible strategy with its estimate, best first: from the cache where it has this search's. With
        an executor (or a pool of `workers`), the space is shared out by (tp, pp, vpp) over its workers: no
        family of the memory dominance spans two parts, so the answer is the same as in one process."""
        key = None
        if cache is not None:
            key = cache.key({"scenario": self.sc.model_dump(mode="json", exclude_none=True),
                             "num_gpus": self.num_gpus, "fp8": self.fp8, "limits": self.space.limits.values})
            found = cache.get("estimates", key, Phase.from_json)
            if found is not None:
                return found
        progress.stage("enumerating and estimating strategies")
        runner = executor if executor is not None else (ProcessExecutor(workers) if workers != 1 else None)
        parts = ESTIMATE_PARTS_PER_WORKER * getattr(runner, "workers", 2) if runner is not None else 1
        if parts == 1:
            phase = self.estimate_blocks()
        else:
            spec = (self.sc.model_dump(mode="json", exclude_none=True), self.num_gpus, self.space.limits.values,
                    self.fp8)
            progress.stage("enumerating and estimating strategies", total=parts, unit="parts")
            found: dict[int, Phase] = {}
            shares = self.space.shares(parts)
            for part, piece in runner.map_unordered(estimate_part, [(*spec, share) for share in shares]):
                found[part] = piece
                progress.advance(len(found))
            phase = merge([found[part] for part in range(parts)])
        if cache is not None and key is not None:
            cache.put("estimates", key, phase.to_json())
        return dataclasses.replace(phase, from_cache=False)

    def estimate_blocks(self, blocks: tuple[int, ...] | None = None) -> Phase:
        """Every strategy of the (tp, pp, vpp) blocks at positions `blocks` (default: all; a worker's share,
        Space.shares) checked for memory and estimated, in this process."""
        infeasible: Counter[str] = Counter()
        candidates: list[tuple[Estimate, Strategy]] = []
        self.space.enumerated, self.space.pruned = 0, Counter()  # these blocks' counts alone (part_search)
        self._known: dict[tuple, list[tuple[int, str | None]]] = {}
        self._closest: tuple[float, Strategy, str] | None = None
        for strategy in self.space.strategies(blocks):
            try:
                workload = apply(self.workload, strategy)
            except ValueError as exc:
                self.space.pruned[f"invalid: {str(exc).splitlines()[0][:80]}"] += 1
                continue
            why = self._fits(strategy, workload)
            if why is not None:
                infeasible[why] += 1
                continue
            candidates.append((self.estimator.estimate(strategy, workload), strategy))
        candidates.sort(key=lambda c: (c[0].iteration_s, c[1]))  # ties broken by the strategy's fields
        return Phase(self.space.enumerated, Counter(self.space.pruned), infeasible, candidates, self._closest)

    def _ranked(self, strategy: Strategy, estimate: Estimate) -> Ranked:
        peak = self.memory(strategy)
        return Ranked(strategy, estimate, peak.device / GiB, self.capacity / GiB, peak.stage)

    def _fits(self, strategy: Strategy, workload: MegatronWorkload) -> str | None:
        """None if the strategy fits, else the largest term of its fullest stage. Memory never falls with a
        larger micro-batch (every activation and transient term scales with it, what stays resident does not), so
        a strategy is settled without the memory model when a smaller one that does not fit or a larger one that
        fits was evaluated: `_known` keeps the evaluated ones per family, every other dimension equal. The
        recomputation is part of the family: a stronger one keeps fewer activations but may hold a larger
        transient (full recomputation rebuilds a whole layer's activations during its backward), so it is not
        assumed to need less."""
        family = (strategy.tp, strategy.pp, strategy.vpp, strategy.cp, strategy.ep, strategy.etp,
                  strategy.sequence_parallel, strategy.sharding, strategy.dtype, strategy.first_layers,
                  strategy.last_layers, strategy.zero_bubble,  # the split too: its stages hold other layer counts
                  strategy.recompute)
        known = self._known.setdefault(family, [])
        for mbs, why in known:
            if why is None and strategy.micro_batch_size <= mbs:
                return None
            if why is not None and strategy.micro_batch_size >= mbs:
                return why
        peak = self.memory(strategy, workload)
        why = None if peak.fits else peak.largest_terms(1)[0][0]
        known.append((strategy.micro_batch_size, why))
        if why is not None and (self._closest is None or peak.device < self._closest[0]):
            self._closest = (peak.device, strategy, why)
        return why

    def memory(self, strategy: Strategy, workload: MegatronWorkload | None = None,
               num_gpus: int | None = None) -> StageMemory:
        """The fullest stage (MemoryModel.fullest, over every stage: a middle stage can be the fullest, as under ZB-H1
        with full recomputation, where a later stage defers more weight gradients), with the scenario's NCCL channels
        (their buffers) as `simulate` counts them. On `num_gpus` GPUs of this search's kind where given (a workload
        over another GPU count)."""
        workload = workload or apply(self.workload, strategy)
        model = MemoryModel(workload, num_gpus or self.num_gpus, self.capacity, self.gpu.name,
                            scenario_channels(self.sc), layers=self.layers,
                            fp8_any_layout=self.gpu.fp8_any_layout)
        return model.fullest(range(strategy.pp))

    def _replay(self, best: list[Ranked], progress: Progress, executor: Executor,
                cache: Cache | None) -> tuple[list[Ranked], int, list[tuple[Strategy, str]]]:
        """The strategies tried (each replay recorded in the cache as it finishes; replay_ms None where refused),
        how many the cache had, and the refused with why. The replays not cached are first sized (the DAG each
        builds, dag/size.py, on the executor), then run side by side as far as their memory adds up
        (executors.py). Each is planned within what one job may take (the executor's ceiling, less what a forked
        worker starts from), folded and sampled as `simulate --max-memory` would be: a replay too large even so is
        refused, and the others go on."""
        if not best:
            return [], 0, []
        baseline = worker_baseline(executor)
        ceiling = executor.ceiling() - baseline
        limit = ceiling if 0 < ceiling < math.inf else None  # none left: every replay is refused as it stands
        jobs: dict[int, tuple[dict, str, float | None]] = {}
        refused: dict[int, str] = {}
        for index, r in enumerate(best):
            try:
                jobs[index] = (scenario_for(self.sc, r.strategy, self.num_gpus).model_dump(mode="json",
                                                                                          exclude_none=True), "search",
                               limit)
            except ConfigError as exc:  # a rule the search's own (space.rule_checks) do not know
                refused[index] = f"{INVALID}: {exc}"
        keys = {index: cache.key({"replay": job[0]}) for index, job in jobs.items()} if cache is not None else {}
        results: dict[int, float] = {}
        for index, key in keys.items():
            found = cache.get("replays", key, replay_from_json) if cache is not None else None
            if found is not None:
                results[index] = found
        reused = len(results)
        todo = [index for index in jobs if index not in results]
        sizes: dict[int, DagSize] = {}
        if todo:
            progress.stage(f"sizing the {len(todo)} replays", total=len(todo), unit="strategies")
            for position, size in executor.map_unordered(replay_size, [jobs[index] for index in todo]):
                sizes[todo[position]] = size
                progress.advance(len(sizes))
        todo.sort(key=lambda index: (-sizes[index].nodes, index))  # the largest first: the last to finish is short
        progress.stage(f"replaying the best {len(best)}", total=len(best), unit="strategies")
        progress.advance(reused + len(refused))
        needs = [sizes[index].memory_bytes() + baseline for index in todo]
        for position, outcome in executor.map_unordered(replay_step_ms, [jobs[index] for index in todo], needs):
            index = todo[position]
            if isinstance(outcome, Refused):
                size = sizes[index]
                inherited = (f" (of which {baseline / 1e9:,.1f} GB is the search's own memory, which a forked worker "
                             f"starts from)" if baseline else "")
                refused[index] = (f"not replayed: {size.nodes:,} DAG nodes and {size.flows:,} flows over "
                                  f"{size.simulated_gpus:,} simulated GPUs; the replay {outcome.reason}{inherited}")
                continue
            results[index] = outcome
            if cache is not None:
                cache.put("replays", keys[index], {"iteration_time_ms": outcome})
            progress.advance(len(results) + len(refused))
        tried = [dataclasses.replace(r, replay_ms=results.get(index)) for index, r in enumerate(best)]
        return tried, reused, [(best[index].strategy, why) for index, why in sorted(refused.items())]


FRAMEWORK_SETTINGS = ("overlap_grad_reduce", "overlap_param_gather", "average_in_collective", "pipeline_send",
                      "context_parallel_comm", "account_for_embedding_in_pipeline_split",
                      "account_for_loss_in_pipeline_split")
"""Fields of a parallelism block that say how the framework runs, not how the GPUs are split: a search keeps a
scenario's own, and so does every strategy it tries (apply), as it keeps overlap_moe_expert_parallel_comm where the
strategy can run it."""
EXPERT_OVERLAP = "overlap_moe_expert_parallel_comm"
DISPATCHER = "moe_dispatcher"


def count_argument(value: object, name: str, least: int, most: int | None = None) -> None:
    """A Python entry point's whole-number parameter `name` (None: its default) checked: a TypeError unless it is an
    int, a ValueError naming the parameter unless it lies in least..most, rather than an IndexError from deep inside
    or a count silently taken as another."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected a whole number, got {type(value).__name__} {value!r}")
    if value < least or (most is not None and value > most):
        bound = f"{least} to {most}" if most is not None else f"at least {least}"
        raise ValueError(f"{name}: expected {bound}, got {value}")


def framework_settings(parallelism: dict, training: object = None) -> dict:
    """Of a parallelism block, what a search keeps: how the framework runs (FRAMEWORK_SETTINGS), not the layout
    the search chooses; a2a+p2p context parallelism goes with the layout (its group sizes are the layout's). A
    `training` block keeping its weights narrow (fp8_params, which Megatron gathers only with a sharded optimizer)
    is validated on the distributed optimizer, as every strategy the search weighs runs it or shards further (the
    rule on plain data parallelism prunes ddp); the sharding set aside, such a scenario was refused as asking
    fp8_params without the distributed optimizer it sets."""
    kept = {k: v for k, v in parallelism.items() if k in FRAMEWORK_SETTINGS}
    if kept.get("context_parallel_comm") == "a2a+p2p":
        del kept["context_parallel_comm"]
    if isinstance(training, dict) and training.get("fp8_params"):
        kept.update(SHARDING_SETTINGS["distributed_optimizer"])
    return kept


def load_search_scenario(path: Path) -> tuple[ScenarioConfig, int | None]:
    """A scenario to search strategies for, and the GPU count it asks for (None: every GPU of its datacenter).
    Its parallelism block's layout is set aside: the search chooses it, and a layout the model and batch cannot run
    must not stop the file from loading. How the framework runs (FRAMEWORK_SETTINGS and the all-to-all overlap) is
    kept: the overlap is checked against each strategy (apply), not against the file's layout."""
    data = read_scenario_data(path)
    workload = data.get("workload") if isinstance(data, dict) else None
    asked, overlap, deepep = None, False, False
    if isinstance(workload, dict):
        given = workload.get("parallelism")
        given = given if isinstance(given, dict) else {}
        overlap = _flag(path, given, EXPERT_OVERLAP)
        workload = {**workload, "parallelism": framework_settings(given, workload.get("training"))}
        training = workload.get("training")
        if isinstance(training, dict):
            # validated on one GPU with one micro-batch of the whole batch (any batch divides, and no count of
            # micro-batches is too many): the search picks both
            asked = training.get("num_gpus")
            whole = training.get("global_batch_size")
            training, deepep = set_aside_dispatcher(training)
            workload["training"] = {**training, "num_gpus": 1,
                                    "micro_batch_size": whole if isinstance(whole, int) and whole > 0 else 1}
        data = {**data, "workload": workload}
    with workload_gpus(asked):  # a datacenter stating no node count holds the GPUs asked for, not the one validated on
        sc = parse_scenario(data, str(path), path.parent)
    try:
        sc.datacenter.single_node("the strategy search")
    except ValueError as exc:
        raise ConfigError(f"{path}: datacenter.node_groups: {exc}") from None
    if sc.workload is None:
        raise ConfigError(f"{path}: workload: required to search parallel strategies")
    training = sc.workload.training.model_copy(update={"num_gpus": None})
    if asked is not None:  # the GPU count the file asks for gets the field's own checks
        try:
            asked = TrainingSpec.model_validate({**training.model_dump(), "num_gpus": asked}).num_gpus
        except ValidationError as exc:
            raise ConfigError(f"{path}: workload.training.num_gpus: {problem(exc.errors()[0])}") from None
    try:
        return _base(sc, training, overlap, deepep), asked
    except FieldError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def set_aside_dispatcher(training: dict) -> tuple[dict, bool]:
    """A training block without DeepEP's dispatcher, and whether it named it: a scenario validated for a search runs
    on one GPU, where ep 1 has nothing to dispatch and deepep is refused (config.scenario.check_dispatcher); each
    strategy runs it where Megatron-Core can (apply), and _base checks the rest of its rules."""
    if training.get(DISPATCHER) != "deepep":
        return training, False
    return {key: value for key, value in training.items() if key != DISPATCHER}, True


def _base(sc: ScenarioConfig, training: TrainingSpec, overlap: bool, deepep: bool = False,
          parallelism: ParallelismSpec | None = None) -> ScenarioConfig:
    """The scenario validated for a search with `training`, `parallelism` (default: its own) and the all-to-all
    overlap and DeepEP's dispatcher set back as given (each strategy checks the overlap and the dispatcher against
    its own layout: apply); the dispatcher's rules on the model checked here (a FieldError)."""
    parallelism = (parallelism or sc.workload.parallelism).model_copy(update={EXPERT_OVERLAP: overlap})
    if deepep:
        training = training.model_copy(update={DISPATCHER: "deepep"})
        check_dispatcher(sc.workload.model, training, None)
    return sc.model_copy(update={"workload": sc.workload.model_copy(
        update={"training": training, "parallelism": parallelism})})


def _flag(path: Path, block: dict, name: str) -> bool:
    """A yes/no field of a parallelism block, checked as the block would check it."""
    if name not in block:
        return False
    try:
        return bool(getattr(ParallelismSpec.model_validate({name: block[name]}), name))
    except ValidationError as exc:
        raise ConfigError(f"{path}: workload.parallelism.{name}: {problem(exc.errors()[0])}") from None


def search(sc: ScenarioConfig, num_gpus: int | None = None, top: int = 10, replay: int = 10,
           limits: Limits | None = None, fp8: bool = True, progress: Progress = SILENT,
           workers: int | None = None, executor: Executor | None = None, cache: Cache | None = None) -> SearchResult:
    """Search every strategy for a scenario's model and batch on its datacenter (see the module docstring): `sc` a
    ScenarioConfig with a workload block, searched alike in one process and in a pool of workers; `num_gpus`
    (default: the scenario's, else every GPU), `top`, `replay` and `workers` checked as the CLI's options are."""
    return Search(scenario_argument(sc, need_workload=True), num_gpus, limits, fp8).run(top, replay, progress, workers,
                                                                                       executor, cache)

