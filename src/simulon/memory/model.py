"""Peak memory of each pipeline stage: model states, the activations of the micro-batches in flight, the
transient of the layer running at the peak, and the runtime around them.

Activations in flight follow the stage's own schedule table (workload/schedule.py; walked on arrays, walk.py):
walking its forward and backward steps in order, each forward of a model chunk adds what the chunk keeps and each
backward frees it (a split backward, ZB-H1's B then W, holds from B to W what its weight gradients read, every
GEMM's input and output gradient, and frees that at W; a backward is split when the table has a W for its
micro-batch and chunk, as DualPipe splits only some), so 1F1B peaks at min(pp - stage, micro-batches) micro-batches
on stage `stage`, interleaved 1F1B at its own count, and any schedule simulon runs (ZB-V, DualPipe, DualPipeV) gets
its count from the same walk, over the model chunks its placement gives the stage (DualPipe's two chunks are
mirrored stages, so its parameters and their states count twice: ModelStates sums the units the stage holds). The
peak is taken over every step: the kept activations plus what the running forward or backward holds on top
(activations.py), or the optimizer step's transient after the last backward. The activations in flight are reported
in micro-batches' worth of the stage's activations (the kept bytes over what one micro-batch keeps through the
stage's model chunks it runs: all of an interleaved or V schedule's, so chunk passes / vpp where the chunks are
alike; one of DualPipe's mirrored two; a split backward waiting for its W counted as the micro-batch its chunk kept,
not by the larger bytes the W reads), and as none where the optimizer step sets the peak.

Three figures per stage, as three tools report them:
allocated (torch.cuda.max_memory_allocated), reserved (max_memory_reserved: allocated plus the caching
allocator's excess, the high-water mark of the schedule's walk and of the optimizer step after it, whichever sets
the allocated peak) and device (nvidia-smi's used memory: reserved plus the CUDA context and NCCL's buffers).

Each stage is held to its own GPU's memory: on a cluster of several GPU types (config/placement.py) a stage runs on
the GPUs the placement gives it, and where its ranks span types the smallest of them decides. The stage that
decides whether the run fits is the one with the least headroom: the largest share of its own GPU's memory in use
(device / capacity; above 1 where it does not fit). On one GPU type that is the stage with the most memory in use.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from itertools import pairwise

import numpy as np

from ..config.scenario import ScenarioConfig, scenario_argument
from ..config.workload import MegatronWorkload
from ..workload.layout import RankLayout
from ..workload.parameters import PipelineLayers
from ..workload.program import EMBEDDING_LAYER, HEAD_LAYER
from ..workload.schedule import MIRRORED, scheduler_of
from .activations import ActivationModel, LayerCache
from .runtime import CUDA_CONTEXT_BYTES, AllocatorModel, nccl_buffers
from .states import ModelStates, StageStates
from .walk import StagePlan, steady_microbatches

TRANSIENT_TERMS = ("layer transient", "optimizer step transient")
"""Short-lived blocks at the peak: what the caching allocator's excess grows with (runtime.AllocatorModel)."""
DYNAMIC_TERMS = ("activations", *TRANSIENT_TERMS)
"""Terms allocated and freed within a step; the rest (model states) stay allocated throughout."""


@dataclass(frozen=True)
class StageMemory:
    """One rank of a pipeline stage at its peak."""

    stage: int
    terms: dict[str, float]              # allocated bytes by term at the peak, largest terms first
    activation_parts: dict[str, float]   # what one micro-batch's activations on this stage are made of
    microbatches_in_flight: float        # activations kept at the stage's peak, in micro-batches' worth of this
                                         # stage's activations (a micro-batch through the chunks it runs; a pending
                                         # W as its micro-batch); 0 where the optimizer step sets the peak
    kept_activations: float              # bytes of activations kept at the stage's peak (the "activations" term;
                                         # 0 where the optimizer step, after the last backward, sets it)
    reserved: float
    runtime: dict[str, float]
    capacity: float
    params: float
    unit_kept: dict[int, float] = field(default_factory=dict)  # bytes each layer (or the embedding, -1, or the
                                                                # LM head, -2) keeps per micro-batch
    unit_deferred: dict[int, float] = field(default_factory=dict)  # bytes each holds from a split B to its W
    gpu: str = ""                                               # the GPU type whose memory `capacity` is

    @property
    def states(self) -> float:
        """Weights, gradients and optimizer states: allocated for the whole step."""
        return sum(v for name, v in self.terms.items() if name not in DYNAMIC_TERMS)

    @property
    def allocated(self) -> float:
        return sum(self.terms.values())

    @property
    def transient(self) -> float:
        """The short-lived blocks at the peak (a layer's transient, or the optimizer step's)."""
        return sum(self.terms.get(name, 0.0) for name in TRANSIENT_TERMS)

    @property
    def dynamic(self) -> float:
        """The allocated bytes that come and go within the step (activations and transients)."""
        return sum(self.terms.get(name, 0.0) for name in DYNAMIC_TERMS)

    @property
    def device(self) -> float:
        """What nvidia-smi shows: reserved plus the CUDA context and NCCL's buffers."""
        return self.reserved + sum(self.runtime.values())

    @property
    def fits(self) -> bool:
        return self.device <= self.capacity

    @property
    def fill(self) -> float:
        """The share of its GPU's memory the stage uses (nvidia-smi's figure over the capacity; above 1 where it does
        not fit, infinite on a GPU of no memory)."""
        return self.device / self.capacity if self.capacity > 0 else math.inf

    def largest_terms(self, count: int = 3) -> list[tuple[str, float]]:
        return sorted(self.terms.items(), key=lambda item: -item[1])[:count]

    def to_json(self) -> dict:
        return {"stage": self.stage, "allocated_bytes": self.allocated, "reserved_bytes": self.reserved,
                "device_bytes": self.device, "capacity_bytes": self.capacity, "gpu": self.gpu, "fits": self.fits,
                "parameters": self.params, "microbatches_in_flight": self.microbatches_in_flight,
                "kept_activations_bytes": self.kept_activations,
                "terms_bytes": dict(self.terms), "runtime_bytes": dict(self.runtime)}


@dataclass(frozen=True)
class MemoryReport:
    """Every pipeline stage's peak, each against its own GPU's capacity; the GPU type (or types) they run on."""

    stages: list[StageMemory]
    gpu: str
    notes: list[str] = field(default_factory=list)

    @property
    def peak(self) -> StageMemory:
        """The stage that decides whether the run fits: the one with the least headroom, i.e. the largest share of
        its own GPU's memory in use (StageMemory.fill); ties go to the most bytes, then the first stage. On one GPU
        type it is the stage with the most memory in use."""
        return max(self.stages, key=lambda s: (s.fill, s.device, -s.stage))

    @property
    def capacity(self) -> float:
        """The memory of the deciding stage's GPU (`peak`): the GPU's memory where every stage runs on one type."""
        return self.peak.capacity

    @property
    def uniform(self) -> bool:
        """Whether every stage has the same capacity (one GPU type, or types of equal memory)."""
        return len({s.capacity for s in self.stages}) <= 1

    @property
    def fits(self) -> bool:
        return all(s.fits for s in self.stages)

    def to_json(self) -> dict:
        return {"gpu": self.gpu, "capacity_bytes": self.capacity, "fits": self.fits,
                "peak_stage": self.peak.stage, "stages": [s.to_json() for s in self.stages], "notes": self.notes}


@dataclass(frozen=True)
class _Chunk:
    """What one model chunk of a stage keeps per micro-batch, and the most its forward and backward hold on top."""

    kept: float
    forward: float
    backward: float
    parts: dict[str, float]
    units: dict[int, float]  # bytes each unit of the chunk keeps
    deferred_units: dict[int, float]  # bytes each unit holds from a split backward's B until its W

    @property
    def deferred(self) -> float:
        """What a split backward holds from its B until its W (ActivationModel.deferred)."""
        return sum(self.deferred_units.values())

    @cached_property
    def largest_layer(self) -> float:
        """The most one transformer layer of the chunk keeps: what a combined step holds on top of what was kept
        before it (walk.py). Its head is not counted: the backward's head and loss run first in the step and free
        theirs, the forward's run last (TransformerModelChunkSchedulePlan.run)."""
        return max((kept for unit, kept in self.units.items() if unit >= 0), default=0.0)

    @property
    def head(self) -> float:
        """What the chunk's LM head and loss keep per micro-batch (none where it holds no head): what a combined
        step's backward frees before its forward's layers run (walk.py)."""
        return self.units.get(HEAD_LAYER, 0.0)

    @property
    def row(self) -> tuple[float, float, float, float, float, float]:
        """What a walk of the schedule reads of the chunk (MemoryModel._columns)."""
        return self.kept, self.forward, self.backward, self.deferred, self.largest_layer, self.head


WALKS = 1 << 16
"""Stage walks `walked` keeps: a strategy search's distinct (schedule shape, model chunks) pairs, with room."""


@lru_cache(maxsize=WALKS)
def walked(plan: tuple, rows: tuple[tuple[float, ...], ...], overhead: float) -> tuple[float, float, float,
                                                                                        tuple[float, float]]:
    """MemoryModel._peaks of a stage whose schedule is StagePlan.of(*plan) and whose model chunks read `rows`
    (`_Chunk.row`), with the allocator's `overhead`: worked out once for every strategy of a search that gives a stage
    the same schedule and the same chunks (those differing only in their sharding, or in a data parallelism that
    leaves the micro-batches a walk runs as they are), since it reads nothing else."""
    return MemoryModel._peaks(StagePlan.of(*plan), MemoryModel._columns(rows), overhead)


def scenario_channels(sc: ScenarioConfig) -> int | None:
    """The NCCL channels a scenario fixes for its collectives (their buffers count in memory), None where NCCL
    chooses."""
    return sc.collective.num_channels if sc.collective is not None else None


def rank_layout(workload: MegatronWorkload, num_gpus: int) -> RankLayout:
    """The ranks of `workload` on `num_gpus` GPUs as the memory model lays them out: its parallel sizes, data
    parallelism what they leave, and an FSDP shard group of fsdp_size ranks, by default the whole data x context
    group."""
    par = workload.parallelism
    dp = par.data_parallel(num_gpus)
    return RankLayout(tp=par.tp, cp=par.cp, dp=dp, pp=par.pp, ep=par.ep, etp=par.etp,
                      fsdp=par.fsdp_size or dp * par.cp)


class MemoryModel:
    """The memory model of one workload on one GPU type."""

    def __init__(self, workload: MegatronWorkload, num_gpus: int, capacity_bytes: float | Sequence[float],
                 gpu: str = "", channels: int | None = None, stage_gpus: Sequence[str] | None = None,
                 layers: LayerCache | None = None, fp8_any_layout: bool | Sequence[bool] = False):
        """`capacity_bytes`: the GPU's memory, or per pipeline stage its GPUs' smallest (GPUs of several types), and
        then `stage_gpus` the type each of those is (else every stage is named `gpu`); `layers`: layers' activations
        worked out for other workloads of the model (a strategy search's); `fp8_any_layout`: whether those GPUs' FP8
        GEMMs read every layout (config.dc.GPUSpec.fp8_any_layout: no fp8 transposes kept), or per stage."""
        par, train = workload.parallelism, workload.training
        dp = par.data_parallel(num_gpus)
        self.layout = rank_layout(workload, num_gpus)
        self.workload, self.capacity, self.gpu, self.channels = workload, capacity_bytes, gpu, channels
        self.stage_gpus = stage_gpus
        self.num_microbatches = max(*train.replica_microbatches(dp), 1)  # the replica keeping the most in flight
        self.layers = PipelineLayers.of(workload)
        self.activations = ActivationModel(workload, layers)
        self.states = ModelStates(workload, self.layout, fp8_any_layout, self.activations.shape, self.layers)
        self.allocator = AllocatorModel.shipped()

    @classmethod
    def of(cls, sc: ScenarioConfig) -> MemoryModel:
        if sc.workload is None:
            raise ValueError("the scenario has no workload block")
        num_gpus = sc.workload.training.num_gpus or sc.datacenter.num_gpus
        channels = scenario_channels(sc)
        placement = sc.placement()
        if placement.uniform:
            gpu = placement.gpu_of(0)
            return cls(sc.workload, num_gpus, gpu.memory_bytes, gpu.name, channels,
                       fp8_any_layout=gpu.fp8_any_layout)
        gpus = [g.gpu for g in placement.groups]
        stage_groups = placement.group.reshape(sc.workload.parallelism.pp, -1)
        smallest = [min(sorted(set(row.tolist())), key=lambda g: gpus[g].memory_bytes) for row in stage_groups]
        names = " + ".join(dict.fromkeys(placement.groups[g].gpu.name for g in placement.used))
        return cls(sc.workload, num_gpus, [gpus[g].memory_bytes for g in smallest], names, channels,
                   [gpus[g].name for g in smallest], fp8_any_layout=[gpus[g].fp8_any_layout for g in smallest])

    def stage_capacity(self, stage: int) -> float:
        """Bytes of memory of the stage's GPUs (the smallest, where the stage spans GPU types)."""
        return self.capacity if isinstance(self.capacity, float | int) else self.capacity[stage]

    def stage_gpu(self, stage: int) -> str:
        """The type of the stage's GPUs (the one of least memory, where the stage spans types)."""
        return self.gpu if self.stage_gpus is None else self.stage_gpus[stage]

    def report(self) -> MemoryReport:
        return MemoryReport([self.stage(s) for s in range(self.layout.pp)], self.gpu)

    # ---- one stage ----

    def stage(self, stage: int) -> StageMemory:
        return self._assembled(stage, self.states.stage(stage), self._chunks(stage))

    def fullest(self, stages: Iterable[int]) -> StageMemory:
        """The stage of `stages` with the most memory in use (nvidia-smi's figure; the earliest of them on a tie), as
        `stage` gives it; what a strategy search asks of every strategy it weighs. Stages whose model chunks hold
        layers of the same kinds in the same places, and neither the embedding nor the LM head (a pipeline's middle
        stages, of a model of dense then MoE layers or of a hybrid pattern), hold the same states and keep the same
        activations per micro-batch: those are worked out once for all of them and each stage's schedule walked on
        them; where the schedule has an earlier stage keep at least what a later one keeps before every step
        (PipelineScheduler.earlier_stages_keep_more), the first of them holds the most (its walk peaks the higher
        by either ranking, and its states and the optimizer step's reserve are theirs), so the later ones are not
        walked at all. Its figures are `stage`'s for the stage it names (tests/memory/test_fullest_stage.py)."""
        par = self.workload.parallelism
        covered = scheduler_of(par).earlier_stages_keep_more
        alike: dict[tuple, tuple[int, StageStates, list[_Chunk]]] = {}
        keys = self._alike_keys()
        best: StageMemory | None = None
        exact = True
        for stage in stages:
            key = keys[stage]
            if key is None:
                memory, own = self.stage(stage), True
            elif key in alike:
                first, states, chunks = alike[key]
                if covered and first < stage:
                    continue
                memory, own = self._assembled(stage, states, chunks), first == stage
            else:
                states, chunks = self.states.stage(stage), self._chunks(stage)
                memory, own = self._assembled(stage, states, chunks), True
                alike[key] = (stage, states, chunks)
            if best is None or memory.device > best.device:
                best, exact = memory, own
        if best is None:
            raise ValueError("no stage to compare")
        return best if exact else self.stage(best.stage)  # its own layers' ids (StageMemory.unit_kept)

    def _alike_keys(self) -> tuple[tuple | None, ...]:
        """`_alike_key` of every stage, worked out once per layer split, full recomputation's extent, number format
        and GPUs' layouts where a LayerCache serves the model (a search's strategies of one split share them)."""
        cache = self.activations.cache
        make = lambda: tuple(self._alike_key(stage) for stage in range(self.layout.pp))  # noqa: E731
        if cache is None:
            return make()
        return cache.served(cache.splits, cache.split_key(self.activations, self.layers, self.states.fp8_any_layout),
                            make)

    def _alike_key(self, stage: int) -> tuple | None:
        """What a stage's states and activations depend on, for stages that hold transformer layers only: per model
        chunk its layers' kinds (ActivationModel.layer_kinds) at their places in the chunk, after whether its GPUs' FP8
        GEMMs read every layout (their narrow weight copies, and what a split backward's W holds of per-tensor fp8
        output gradients); None for a stage holding
        the embedding or the LM head (computed alone). The multi-token-prediction layers are a kind of their own, all
        on one stage (config/pipeline_layout.py), so no other stage shares their key."""
        layers, key = self.layers, [self.states.any_layout(stage)]
        for chunk in range(layers.chunks):
            span = layers.layers_of(stage, chunk)
            if layers.is_first(stage, chunk) or layers.is_last(stage, chunk):
                return None
            key.append(tuple((kind, tuple(m - span.start for m in members))
                             for kind, members in self.activations.layer_kinds(span)))
        return tuple(key)

    def _assembled(self, stage: int, states: StageStates, chunks: list[_Chunk]) -> StageMemory:
        """The stage's peak from its states and model chunks, walking its schedule."""
        overhead = 0.0 if self.workload.training.expandable_segments else self.allocator.overhead
        kept, transient, in_flight, high = walked(self._plan_arguments(stage), tuple(c.row for c in chunks), overhead)
        terms = {**states.terms()}
        if states.step_transient > kept + transient:  # the step's fp32 gradient copy outgrows the activations
            terms["optimizer step transient"] = states.step_transient
            kept = in_flight = 0.0  # the peak comes after the last backward has freed every activation
        else:
            terms["activations"] = kept
            terms["layer transient"] = transient
        reserved = sum(terms.values()) + overhead * sum(terms.get(t, 0.0) for t in TRANSIENT_TERMS)
        if high != (kept, transient):  # the allocator's high-water mark is at another step
            reserved = max(reserved, states.total + high[0] + (1.0 + overhead) * high[1])
        # the optimizer step comes after every step walked, so the high-water mark is the larger of the two
        # phases' even where the activations set the allocated peak
        reserved = max(reserved, states.total + (1.0 + overhead) * states.step_transient)
        runtime = {"CUDA context": float(CUDA_CONTEXT_BYTES),
                   "NCCL buffers": nccl_buffers(self._communicators(), self.channels)}
        parts: dict[str, float] = {}
        for chunk in chunks:
            for name, value in chunk.parts.items():
                parts[name] = parts.get(name, 0.0) + value
        units = {unit: kept for chunk in chunks for unit, kept in chunk.units.items()}
        deferred = {unit: held for chunk in chunks for unit, held in chunk.deferred_units.items()}
        return StageMemory(stage, dict(sorted(terms.items(), key=lambda item: -item[1])), parts, in_flight, kept,
                           reserved, runtime, self.stage_capacity(stage), states.params, units, deferred,
                           self.stage_gpu(stage))

    def _chunks(self, stage: int) -> list[_Chunk]:
        transients = self._fsdp_transients(stage)  # the stage's, the same for each of its chunks
        return [self._chunk(stage, chunk, transients) for chunk in range(self.layers.chunks)]

    def _chunk(self, stage: int, chunk: int, transients: tuple[float, float]) -> _Chunk:
        """Sum the kept activations of a chunk's layers (with the embedding or the head where it holds them), and
        what FSDP holds on top of its forward and backward (`transients`: the stage's, `_fsdp_transients`). The
        activations are served from the LayerCache where the model has one: they depend on the chunk's layers and
        ends, not on the stage's place."""
        acts, any_layout, layers = self.activations, self.states.any_layout(stage), self.layers
        span, ends = layers.layers_of(stage, chunk), (layers.is_first(stage, chunk), layers.is_last(stage, chunk))
        make = lambda: self._chunk_activations(span, ends, any_layout)  # noqa: E731
        cache = acts.cache
        base = make() if cache is None else cache.served(
            cache.chunks, cache.chunk_activations_key(acts, span, ends, any_layout), make)
        forward, backward = transients
        if not forward and not backward:
            return base
        return replace(base, forward=base.forward + forward, backward=base.backward + backward)

    def _chunk_activations(self, span: range, ends: tuple[bool, bool], any_layout: bool) -> _Chunk:
        """A model chunk of layers `span` (with the embedding, the head: `ends`) before FSDP's transients."""
        acts = self.activations
        parts: dict[str, float] = {}
        units: dict[int, float] = {}
        deferred: dict[int, float] = {}
        forward = backward = 0.0
        for kind, members in acts.layer_kinds(span):
            one = acts.layer(*kind)
            for name, value in one.parts.items():
                parts[name] = parts.get(name, 0.0) + value * len(members)
            units.update(dict.fromkeys(members, one.total))
            deferred.update(dict.fromkeys(members, one.held_for_weight_gradient(any_layout)))
            forward = max(forward, one.forward_transient)
            backward = max(backward, one.backward_transient_on(any_layout))
        if ends[0]:
            parts.update(acts.embedding())
            units[EMBEDDING_LAYER] = sum(acts.embedding().values())
            backward = max(backward, acts.vocabulary_weight_gradient())
        if ends[1]:
            parts.update(acts.head())
            units[HEAD_LAYER] = sum(acts.head().values())
            deferred[HEAD_LAYER] = acts.head_deferred()
            forward = max(forward, acts.head_transient())
            backward = max(backward, acts.vocabulary_weight_gradient() + acts.head()["logits"])
        return _Chunk(sum(parts.values()), forward, backward, parts, units, deferred)

    def _fsdp_transients(self, stage: int) -> tuple[float, float]:
        """What FSDP holds beyond its states in forward and in backward: in backward the running layer's unsharded
        gradients before their reduce-scatter, and under full_shard the gathered weights of the running layer and the
        prefetched next one of the stage (the most two of its consecutive layers hold; its one layer's where it has
        one), of the layers the stage holds (shard_grad_op keeps every layer's weights gathered from forward to
        backward: the states' weights term); nothing over a shard group of one rank, which gathers and scatters
        nothing: the experts' group is the expert-data-parallel one (RankLayout.expert_fsdp), of one rank where ep
        takes all of data x context, and then their weights and gradients stay whole in the states."""
        par, layout, layers = self.workload.parallelism, self.layout, self.layers
        if par.fsdp == "none":
            return 0.0, 0.0
        dense_shared, expert_shared = layout.fsdp > 1, layout.expert_fsdp > 1
        sizes = [dense * dense_shared + expert * expert_shared
                 for chunk in range(layers.chunks) for layer in layers.layers_of(stage, chunk)
                 for dense, expert in (self.states.kernels.layer_params(self.workload.model.layer_blocks(layer)),)]
        if not sizes:
            return 0.0, 0.0
        weight = 4.0 if self.states.fp32 else 2.0
        pairs = [a + b for a, b in pairwise(sizes)] or sizes
        gathered = max(pairs) * weight if par.fsdp == "full_shard" else 0.0
        return gathered + 0.0, gathered + max(sizes) * self.states.shape.grad_bytes

    def _plan_arguments(self, stage: int) -> tuple:
        """StagePlan.of's arguments for the stage's schedule, as far as its peak can lie (walk.py,
        steady_microbatches)."""
        par, pp = self.workload.parallelism, self.layout.pp
        return (par.pipeline_schedule, par.vpp, stage, pp,
                steady_microbatches(self.num_microbatches, par.microbatch_group, par.vpp),
                par.overlap_moe_expert_parallel_comm, par.microbatch_group_size)

    @staticmethod
    def _columns(rows: Sequence[tuple[float, ...]]) -> list[np.ndarray]:
        """Per model chunk what a micro-batch keeps, what its forward and backward hold on top, what a split backward
        holds until its W, the most one layer keeps and what its head keeps (`_Chunk.row`), as the columns a walk of
        the schedule reads (StagePlan.peak)."""
        return list(np.array(rows, dtype=float).T)

    @staticmethod
    def _peaks(plan: StagePlan, columns: list[np.ndarray], overhead: float) -> tuple[float, float, float,
                                                                                    tuple[float, float]]:
        """(kept, transient, micro-batches kept) at the stage's activation peak, walking its schedule (walk.py), and
        (kept, transient) where the activations and transients reserve the most along it: kept + (1 + overhead) x
        transient (runtime.AllocatorModel); one walk for both.

        The micro-batches are the kept bytes over what one micro-batch keeps on the whole stage
        (StagePlan.per_microbatch: all its model chunks under an interleaved or V schedule), so chunk passes / vpp
        where the chunks are alike, weighted by bytes where they are not (a chunk of the embedding alone); a split
        backward waiting for its W counts as what its chunk kept (StagePlan.held_at_peak), not as the GEMM inputs and
        output gradients the W reads, which under recomputation are several micro-batches' worth.

        The reserved figure's step can be another than the allocated one's where a step keeps more with less on
        top: under recomputation a split B's deferred W holds more than its layers kept, while the layer the B
        before it re-created stays reserved (the caching allocator does not give it back)."""
        (kept, transient), high = plan.peaks(*columns, weights=(1.0, 1.0 + overhead))
        per_microbatch = plan.per_microbatch(columns[0])  # every chunk a micro-batch runs through on the stage
        held = plan.held_at_peak(*columns) if plan.split.any() else kept  # a pending W as its micro-batch
        return kept, transient, held / per_microbatch if per_microbatch else 0.0, high

    def _communicators(self) -> int:
        """Process groups of more than one rank this rank talks through (NCCL connects them lazily, on use)."""
        layout, par = self.layout, self.workload.parallelism
        sizes = [layout.tp, layout.cp, layout.dp * layout.cp, layout.pp]
        if self.workload.model.moe is not None:
            sizes += [layout.ep, layout.edp]
        if par.fsdp != "none" and layout.fsdp != layout.dp * layout.cp:
            sizes.append(layout.fsdp)
        if self.layers.placement is MIRRORED:  # DualPipe sums gradients with the mirror rank
            sizes.append(2 if layout.pp > 1 else 1)
        return sum(1 for size in sizes if size > 1)


def estimate_memory(sc: ScenarioConfig) -> MemoryReport:
    """The per-stage peak memory of a scenario's workload on its GPU (`sc`: a ScenarioConfig, load_scenario's)."""
    return MemoryModel.of(scenario_argument(sc)).report()
