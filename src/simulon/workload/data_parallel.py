"""Data-parallel gradient sync and parameter sharding, as the frameworks overlap them with compute.

* DDP (Megatron-Core): gradients go into buckets in backward order; each bucket's all-reduce is launched
  as soon as the last micro-batch's backward has produced all of it (overlap_grad_reduce).
* Distributed optimizer (ZeRO-1): the buckets are reduce-scattered, each rank updates its shard, and the
  updated parameters are all-gathered bucket by bucket, overlapped with the first forward (overlap_param_gather);
  without the overlap, every bucket right after the optimizer step (DistributedOptimizer.step_with_ready_grads'
  start_param_sync(force_sync=True)). Megatron-LM's own defaults overlap neither (arguments.py:
  --overlap-grad-reduce and --overlap-param-gather are off unless given). Without overlap_grad_reduce, Megatron
  makes each gradient buffer one bucket (DistributedDataParallel sets bucket_size to None) and reduces it
  synchronously (start_grad_sync's async_op is False): the compute stream waits for the reduction, so the next
  buffer's NaN check and scaling, and the optimizer, start only once it is done.
* FSDP (ZeRO-3 full_shard, ZeRO-2 shard_grad_op): every layer's parameters are all-gathered before its
  forward (and again before its backward for full_shard), the next layer's gather prefetched while the
  current one computes, and its gradients reduce-scattered right after its backward, every micro-batch.
Then the optimizer step (Adam) over the parameters this rank owns.

Megatron's gradient buffers cost memory traffic of their own each step (`grad_zero_kernel`, `bucket_kernel`,
`optimizer_kernel`): train_step zeroes them before the first forward (zero_grad_buffer), each bucket's gradients are
normed for the NaN check and scaled by 1/dp before their reduction (ParamAndGradBucketGroup.start_grad_sync), and
after Adam the updated fp32 master shard is read again to be cast into the bf16 parameters
(_copy_main_params_to_model_params). Every framework norms its gradients for clipping (clip_grad, 1.0 by default),
and the norm's all-reduce over the pipeline holds every stage's optimizer step until all have reduced theirs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from functools import partial
from typing import NamedTuple

from ..collective.types import CollType
from ..config.workload import MegatronWorkload, ParallelismSpec
from .kernels import KernelSpec, Phase, memory_bound
from .layer_kernels import ShardShape
from .layout import RankLayout
from .parameters import StageParameters
from .program import EMBEDDING_LAYER, NO_OP, OPTIMIZER_LAYER, StageProgram, Stream

MIRROR_SYNC = "mirror_grad_allreduce"
"""The label of DualPipe's all-reduce of a stage's gradients between its two ranks (DataParallelSync.mirror_sync):
pipeline-parallel traffic, though it runs on the data-parallel stream (analysis/kinds.py)."""

ADAM_BYTES_PER_PARAM = 30.0
"""Adam step traffic per parameter with bf16/fp16 mixed precision: fp32 gradient read (4), fp32 master
weight, first and second moment each read and written (3 x 8), low-precision weight written (2)."""
GRAD_NORM_BYTES_PER_PARAM = 4.0
"""Gradient clipping's global L2 norm reads the fp32 gradients of the parameters a rank updates (Megatron's
get_grad_norm_fp32, torch's clip_grad_norm_)."""
NORM_BYTES = 4.0
"""The partial norm a stage contributes to the global one: one fp32."""
MASTER_COPY_BYTES_PER_PARAM = 4.0
"""Megatron's optimizers cast the updated fp32 master weights into the model's bf16 parameters in a kernel of
their own (_copy_main_params_to_model_params), reading the master again (its 2-byte write is Adam's above)."""
MEGATRON_MIN_BUCKET_PARAMS = 40_000_000
"""Megatron-Core DDP default bucket: max(40M, 1M x data-parallel size) parameters."""
AXES = ("dp_cp", "edp")  # dense parameters sync over data x context, expert parameters over expert-data


def bucket_params(workload: MegatronWorkload, dp_cp: int) -> float:
    """Parameters of one gradient bucket (each launched once full, its parameters' all-gather likewise):
    grad_bucket_size, else Megatron-Core's default (MEGATRON_MIN_BUCKET_PARAMS); without overlap_grad_reduce one
    bucket per buffer."""
    if not workload.parallelism.overlap_grad_reduce:
        return math.inf
    return workload.training.grad_bucket_size or max(MEGATRON_MIN_BUCKET_PARAMS, 1_000_000 * dp_cp)


def bucket_shares(counts: Iterable[float], bucket: float) -> tuple[float, float]:
    """The first and the last bucket's shares of the parameters `counts` (one a unit, in the order their gradients fill
    the buckets or their parameters are gathered), each bucket closed once it holds `bucket` parameters and the last
    with what is left, as DataParallelSync fills and gathers them; (1, 1) where there are none."""
    sizes, filling = [], 0.0
    for count in counts:
        filling += count
        if filling > 0 and filling >= bucket:
            sizes.append(filling)
            filling = 0.0
    if filling > 0:
        sizes.append(filling)
    total = sum(sizes)
    return (sizes[0] / total, sizes[-1] / total) if sizes else (1.0, 1.0)


def grad_zero_kernel(params: float, grad_bytes: float) -> KernelSpec:
    """Megatron's train_step zeroing the gradient buffer (`grad_bytes` per element) of every parameter a rank holds
    before the first forward."""
    return memory_bound("grad_zero", Phase.step, params * grad_bytes, params)


def scales_gradients(parallelism: ParallelismSpec, dp_cp: int) -> bool:
    """Whether Megatron scales each bucket by 1/dp before reducing it: unless the reduction averages
    (average_in_collective) or one rank holds the gradients (DistributedDataParallel's gradient_scaling_factor)."""
    return dp_cp > 1 and not parallelism.average_in_collective


CHECK_PASSES, CHECK_SCALE_PASSES = 1, 3
"""Passes over a bucket's gradients: the NaN check's norm reads them; scaling them by 1/dp also reads and writes."""


def bucket_kernel(params: float, grad_bytes: float, scaled: bool) -> KernelSpec:
    """What Megatron does to a bucket's gradients before reducing them: their L2 norm for the NaN check
    (check_for_nan_in_grad, on in Megatron-LM and NeMo), a read, and where `scaled` (scales_gradients) their
    scaling by 1/dp, a read and a write."""
    return memory_bound("grad_check_scale" if scaled else "grad_check", Phase.step,
                        params * grad_bytes * (CHECK_SCALE_PASSES if scaled else CHECK_PASSES), params)


def optimizer_kernel(params: float, megatron_buffers: bool) -> KernelSpec:
    """The step over the parameters a rank updates: the clipping norm, Adam and, in Megatron, the cast of the
    master weights into the model's."""
    per_param = ADAM_BYTES_PER_PARAM + GRAD_NORM_BYTES_PER_PARAM + megatron_buffers * MASTER_COPY_BYTES_PER_PARAM
    return memory_bound("optimizer", Phase.step, per_param * params, params)


class Gathers(NamedTuple):
    """Parameter gathers a unit's first kernel waits for, and the prefetch of the next unit's gather to issue
    once that kernel is queued (FSDP), if any."""

    waits: tuple[int, ...] = ()
    prefetch: Callable[[], None] | None = None


class DataParallelSync:
    """The gradient sync and optimizer step of one stage's program, from the parameters the stage holds."""

    def __init__(self, workload: MegatronWorkload, layout: RankLayout, parameters: StageParameters,
                 shape: ShardShape, program: StageProgram, frozen: bool):
        self.layout, self.parameters, self.shape, self.program, self.frozen = layout, parameters, shape, program, frozen
        self.parallelism = parallelism = workload.parallelism
        self.hidden_size = workload.model.hidden_size
        self.group_size = {"dp_cp": layout.dp * layout.cp, "edp": layout.edp}
        self.fsdp = parallelism.fsdp != "none"
        self.bucket_params = bucket_params(workload, self.group_size["dp_cp"])
        self.syncs: list[int] = []                        # collectives the optimizer waits for
        self._bucket = dict.fromkeys(AXES, 0.0)
        self._first_use: dict[int, list[int]] = {}        # distributed optimizer: unit -> its gathers
        self._gathers: dict[tuple[int, int, Phase], int] = {}  # FSDP: (unit, mb, phase) -> prefetched gather
        self._amax_syncs: list[int] = []                  # the narrow weights' amax all-reduces the gathers follow

    # ---- hooks called by the stage emitter ----

    def start_of_iteration(self) -> None:
        if self.frozen:
            return  # frozen weights have no gradient buffer to zero and no update to gather
        if not self.fsdp:
            dense, expert = self.parameters.total()
            self.program.compute(grad_zero_kernel(dense + expert, self.shape.grad_bytes), OPTIMIZER_LAYER, -1)
        if self.parallelism.distributed_optimizer and self.parallelism.gathers_overlapped:
            self._distributed_optimizer_gathers()

    def before_forward(self, unit: int, mb: int, next_unit: int | None) -> Gathers:
        """Gathers the unit's first forward kernel waits for."""
        if self.fsdp:
            return self._fsdp_gather(unit, mb, Phase.fwd, next_unit)
        return Gathers(tuple(self._first_use.pop(unit, ())) if mb == 0 else ())

    def before_backward(self, unit: int, mb: int, next_unit: int | None) -> Gathers:
        if self.parallelism.fsdp == "full_shard":  # parameters were freed after the forward
            return self._fsdp_gather(unit, mb, Phase.bwd_ig, next_unit)
        return Gathers()

    def after_backward(self, unit: int, mb: int, last_microbatch: bool) -> None:
        if self.frozen:
            return
        if self.fsdp:
            self._fsdp_reduce(unit, mb)
        elif last_microbatch and self.parallelism.overlap_grad_reduce:
            self._fill(unit)

    def end_of_iteration(self) -> None:
        if self.frozen:
            return  # frozen weights (LoRA) get no gradient sync and no optimizer step
        if not self.fsdp:
            if not self.parallelism.overlap_grad_reduce:
                for unit in reversed(self.parameters.units):
                    self._fill(unit)
            for axis in AXES:
                self._launch(axis)
            self._tied_embedding_sync()
            self._tp_duplicated_sync()
        self._grad_norm_sync()
        self._optimizer_step()
        if self.parallelism.distributed_optimizer and not self.parallelism.gathers_overlapped and not self.fsdp:
            self._distributed_optimizer_gathers()

    def _grad_norm_sync(self) -> None:
        """Gradient clipping needs the global norm: every stage sums its share once its gradients are reduced
        (Megatron's get_grad_norm_fp32 all-reduces one fp32 over the model-parallel ranks), so no stage starts its
        optimizer step before the slowest has reduced its gradients. Over the pipeline group: the tensor- and
        data-parallel ranks of a stage already reach it together. On the pipeline's stream: the time a stage waits in
        it for the others is the pipeline's imbalance, not data-parallel traffic."""
        if self.layout.pp > 1:
            self.syncs.append(self.program.collective(CollType.AllReduce, "pp", NORM_BYTES, Stream.pp_comm,
                                                      "grad_norm_allreduce", OPTIMIZER_LAYER, -1, Phase.step,
                                                      tuple(self.syncs)))

    def _optimizer_step(self) -> None:
        """Adam over the parameters this rank owns: its shard under FSDP or the distributed optimizer."""
        dense, expert = self.parameters.total()
        if self.fsdp:
            dense, expert = dense / self.layout.fsdp, expert / self.layout.expert_fsdp
        elif self.parallelism.distributed_optimizer:
            dense, expert = dense / self.group_size["dp_cp"], expert / self.group_size["edp"]
        params = dense + expert
        self.program.compute(optimizer_kernel(params, megatron_buffers=not self.fsdp), OPTIMIZER_LAYER, -1,
                             tuple(self.syncs))
        self._weight_amax_sync()

    def _weight_amax_sync(self) -> None:
        """Weights kept narrow in a block-scaled format whose shards the ranks quantize alike: before quantizing its
        shard, the optimizer all-reduces (MAX) the amaxes of every such weight the rank holds, whole, over the group
        it shards over (NumberFormat.weight_amax_bytes: NVFP4's fp32 per 16 x 16 tile under Megatron's distributed
        optimizer, quantize_nvfp4_param_shard; MXFP8's per 32-element block under Megatron-FSDP, fp8_quantize;
        Transformer Engine's _cast_master_weights_to_nvfp4_2d and _cast_master_weights_to_fp8_mxfp8_scaling
        `packed_amaxes`), a synchronous all-reduce the parameter gathers follow. None where the weights are gathered
        16-bit and quantized after (TrainingFormat.quantize_after_gather)."""
        fmt = self.shape.number_format
        sharded = self.parallelism.distributed_optimizer or self.fsdp
        if (not sharded or fmt is None or not fmt.narrow_weights or fmt.quantize_after_gather
                or not fmt.format.weight_amax_bytes):
            return
        narrow = self.parameters.summed(lambda unit: self.parameters.narrow_gemm(unit, fmt))
        if self.fsdp:
            groups = [("fsdp", sum(narrow))] if self.layout.fsdp > 1 else []
        else:
            groups = [(axis, params) for axis, params in zip(AXES, narrow, strict=True) if self.group_size[axis] > 1]
        for axis, params in groups:
            if params:
                self._amax_syncs.append(self.program.collective(
                    CollType.AllReduce, axis, params * fmt.format.weight_amax_bytes, Stream.dp_comm,
                    "weight_amax_allreduce", OPTIMIZER_LAYER, -1, Phase.step))

    # ---- DDP and distributed optimizer ----

    def _fill(self, unit: int) -> None:
        """Count a finished unit's gradients into the open buckets; launch each full bucket."""
        for axis, params in zip(AXES, self.parameters.of(unit), strict=True):
            if params:
                self._bucket[axis] += params
                if self._bucket[axis] >= self.bucket_params:
                    self._launch(axis)

    def _launch(self, axis: str) -> None:
        params, self._bucket[axis] = self._bucket[axis], 0.0
        if params == 0:
            return
        scaled = scales_gradients(self.parallelism, self.group_size["dp_cp"])
        synchronous = () if self.parallelism.overlap_grad_reduce else tuple(self.syncs)  # waits for the last buffer
        self.program.compute(bucket_kernel(params, self.shape.grad_bytes, scaled), OPTIMIZER_LAYER, -1, synchronous)
        if self.group_size[axis] == 1:
            return
        scatter = self.parallelism.distributed_optimizer
        label = ("expert_" if axis == "edp" else "") + ("grad_reduce_scatter" if scatter else "grad_allreduce")
        self.syncs.append(self.program.collective(
            CollType.ReduceScatter if scatter else CollType.AllReduce, axis, params * self.shape.grad_bytes,
            Stream.dp_comm, label, OPTIMIZER_LAYER, -1, Phase.bwd_wg))

    def _tied_embedding_sync(self) -> None:
        """Tied word embeddings live on the first and the last stage; their gradients are summed."""
        if self.parameters.tied_embedding:
            size = self.parameters.tied_embedding * self.shape.grad_bytes
            self.syncs.append(self.program.collective(CollType.AllReduce, "emb", size, Stream.dp_comm,
                                                      "embedding_grad_allreduce", EMBEDDING_LAYER, -1, Phase.step))

    def _tp_duplicated_sync(self) -> None:
        """Gradients of parameters every tensor-parallel rank holds whole (StageParameters.tp_duplicated) are averaged
        over tp once the data-parallel sync has finished (finalize_model_grads, after finish_grad_sync)."""
        if self.parameters.tp_duplicated:
            size = self.parameters.tp_duplicated * self.shape.grad_bytes
            self.syncs.append(self.program.collective(CollType.AllReduce, "tp", size, Stream.tp_comm,
                                                      "tp_duplicated_grad_allreduce", OPTIMIZER_LAYER, -1, Phase.step,
                                                      tuple(self.syncs)))

    def mirror_sync(self, units: list[int]) -> None:
        """DualPipe: rank i and rank p - 1 - i hold the same two stages. Once a stage's last weight gradient has run,
        the pair sums that stage's gradients (an all-reduce over the pair, which the optimizer step waits for; the
        DualPipe example sums the two copies the same way). Both ranks of a pair finish the same stage first (the
        reference's phase 1, mirrored on the second half), so they call the two all-reduces in the same order."""
        if self.parameters.mirrored and not self.frozen:
            size = sum(sum(self.parameters.of(unit)) for unit in units) * self.shape.grad_bytes
            self.syncs.append(self.program.collective(CollType.AllReduce, "mirror", size, Stream.dp_comm,
                                                      MIRROR_SYNC, OPTIMIZER_LAYER, -1, Phase.step))

    def _distributed_optimizer_gathers(self) -> None:
        """All-gather the updated parameters bucket by bucket in forward order: at the start of the step, where the
        first forward of each unit waits for its bucket (in steady state, the previous step's gather overlapping
        this one), or after the optimizer step, which they follow."""
        units = self.parameters.units
        for axis_index, axis in enumerate(AXES):
            if self.group_size[axis] == 1:
                continue
            waiting: list[int] = []
            bucket = size = 0.0
            for i, unit in enumerate(units):
                bucket += self.parameters.of(unit)[axis_index]
                size += self._gathered_bytes(unit)[axis_index]
                waiting.append(unit)
                if bucket > 0 and (bucket >= self.bucket_params or i == len(units) - 1):
                    op = self.program.collective(CollType.AllGather, axis, size, Stream.param_comm, "param_allgather",
                                                 OPTIMIZER_LAYER, -1, Phase.fwd, tuple(self._amax_syncs))
                    if self.parallelism.gathers_overlapped:  # after the optimizer step, no forward of this step waits
                        for pending in waiting:
                            self._first_use.setdefault(pending, []).append(op)
                    bucket, size, waiting = 0.0, 0.0, []

    def _gathered_bytes(self, unit: int) -> tuple[float, float]:
        """(dense, expert) bytes a parameter all-gather of the unit moves (StageParameters.gathered_bytes)."""
        return self.parameters.gathered_bytes(unit, self.shape)

    # ---- FSDP ----

    def _fsdp_gather(self, unit: int, mb: int, phase: Phase, next_unit: int | None) -> Gathers:
        """This unit's gather (issued now unless prefetched) and a prefetch of the next one, issued once
        this unit's first kernel is queued, as FSDP's forward/backward prefetch does."""
        op = self._gathers.pop((unit, mb, phase), None)
        if op is None:
            op = self._issue_gather(unit, mb, phase)
        prefetch = None if next_unit is None else partial(self._prefetch, next_unit, mb, phase)
        return Gathers((op,) if op != NO_OP else (), prefetch)

    def _prefetch(self, unit: int, mb: int, phase: Phase) -> None:
        self._gathers[(unit, mb, phase)] = self._issue_gather(unit, mb, phase)

    def _issue_gather(self, unit: int, mb: int, phase: Phase) -> int:
        if self.layout.fsdp == 1:
            return NO_OP
        return self.program.collective(CollType.AllGather, "fsdp", sum(self._gathered_bytes(unit)),
                                       Stream.param_comm, "fsdp_param_allgather", unit, mb, phase)

    def _fsdp_reduce(self, unit: int, mb: int) -> None:
        """Reduce-scatter the unit's gradients over its shard group; with hybrid sharding, then all-reduce
        the shard across the replicas."""
        layout = self.layout
        grads = sum(self.parameters.of(unit)) * self.shape.grad_bytes
        if layout.fsdp > 1:
            self.syncs.append(self.program.collective(CollType.ReduceScatter, "fsdp", grads, Stream.dp_comm,
                                                      "fsdp_grad_reduce_scatter", unit, mb, Phase.bwd_wg))
        if layout.fsdp_replicas > 1:
            self.syncs.append(self.program.collective(CollType.AllReduce, "fsdp_replica", grads / layout.fsdp,
                                                      Stream.dp_comm, "fsdp_grad_allreduce", unit, mb, Phase.bwd_wg))
