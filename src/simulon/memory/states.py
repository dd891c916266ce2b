"""Model states one rank holds for the whole step: weights, gradients and optimizer states.

Mixed-precision Adam as Megatron-Core keeps it (megatron/core/optimizer/, distributed/param_and_grad_buffer.py):
16-bit weights (2 bytes), gradients accumulated into an fp32 `main_grad` buffer (4; 2 when training in fp16,
whose reductions stay in fp16), and fp32 master weights with Adam's two moments (12). Without sharding that
is 18 bytes per parameter; the distributed optimizer (ZeRO-1) shards the 12 over the data x context group,
6 + 12/(dp cp) (Megatron-LM docs/source/distrib_optimizer.md, Rajbhandari et al. 2020 section 5.1); expert
parameters shard over their own expert-data-parallel group. ZeRO-2 (FSDP shard_grad_op) shards gradients
too and ZeRO-3 (full_shard) weights as well, over the FSDP shard group. fp32 training has no master copy
(8 bytes of moments). Megatron's precision-aware optimizer may keep the two moments in bf16
(`adam_moments_dtype`), 4 bytes instead of 8, and its master copy in 16 bits (`master_weights_dtype`), as
Apex's DistributedFusedAdam does at dtype bf16 (NeMo's `optim.dtype: bf16`: a bf16 copy and bf16 moments, 6
bytes; apex/contrib/optimizers/distributed_fused_adam.py `dtype`, `store_params`). LoRA freezes the base
weights: no gradients and no optimizer states for them.

fp8 (and fp4) training keeps the 16-bit weights and, for the step, each GEMM weight cast to the narrow type
with its transpose (Transformer Engine caches them across micro-batches: `is_first_microbatch`); with
`fp8_params` (Megatron's --fp8-param-gather) the GEMM weights live only in the narrow type, with their transpose.
Per-tensor fp8 on a GPU whose FP8 GEMMs read every layout (Blackwell's B200, B300, GB200, GB300) keeps no transpose:
one narrow copy (config/number_formats.py NumberFormat.copies, Transformer Engine's `is_non_tn_fp8_gemm_supported`);
MXFP8 and NVFP4 keep their column-wise copy everywhere.

The optimizer step of a run whose gradients are 16-bit first copies them to fp32 (Megatron's
`_copy_model_grads_to_main_grads`, `main_grad.float()`): a transient of 4 bytes per parameter it updates,
which a 16-bit master copy does not need.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from ..config.workload import MegatronWorkload, ModelSpec
from ..workload.layer_kernels import LayerKernels, ShardShape
from ..workload.layout import RankLayout
from ..workload.parameters import ModelParameters, PipelineLayers, StageParameters

FP32_BYTES = 4.0


@dataclass(frozen=True)
class StageStates:
    """Model-state bytes of one rank of a stage, and the parameters they come from."""

    dense_params: float
    expert_params: float
    weights: float
    gradients: float
    optimizer: float
    cast_weights: float
    step_transient: float

    @property
    def params(self) -> float:
        return self.dense_params + self.expert_params

    def terms(self) -> dict[str, float]:
        terms = {"weights": self.weights, "gradients": self.gradients, "optimizer states": self.optimizer}
        if self.cast_weights:
            terms["quantized weight copies"] = self.cast_weights  # fp8, MXFP8, NVFP4: config/number_formats.py
        return terms

    @property
    def total(self) -> float:
        return sum(self.terms().values())


@lru_cache(maxsize=4096)
def stage_parameters(kernels: LayerKernels, model: ModelSpec, layers: PipelineLayers, stage: int) -> StageParameters:
    """What one rank of a stage holds, per kernel table (LayerKernels.weights_of shares them), model, layer split
    and stage."""
    return ModelParameters(kernels, model, layers).stage(stage)


class ModelStates:
    """Weights, gradients and optimizer states of each pipeline stage's ranks."""

    def __init__(self, workload: MegatronWorkload, layout: RankLayout, fp8_any_layout: bool | Sequence[bool] = False,
                 shape: ShardShape | None = None, layers: PipelineLayers | None = None):
        """`fp8_any_layout`: whether the GPUs' FP8 GEMMs read every layout (config.dc.GPUSpec.fp8_any_layout), for
        all stages or per pipeline stage (GPUs of several types); `shape`, `layers`: the workload's ShardShape.of and
        PipelineLayers.of where the caller has them (the memory model's)."""
        self.workload, self.layout = workload, layout
        self.fp8_any_layout = fp8_any_layout
        par, train = workload.parallelism, workload.training
        self.shape = shape or ShardShape.of(workload)
        self.kernels = LayerKernels.weights_of(workload, self.shape)  # parameters only: not the tokens
        self.layers = layers or PipelineLayers.of(workload)
        self.parameters = ModelParameters(self.kernels, workload.model, self.layers)
        self.frozen = train.peft == "lora"
        # fp32 parameters: an fp32 run's, or torch.autocast's over them (fp32 weights and gradients, no master copy;
        # the 16-bit casts a layer keeps for its backward are not counted)
        self.fp32 = train.fp32_parameters
        self.par = par
        self._by_stage: dict[int, StageParameters] = {}  # stage_parameters by stage (its cache hashes the model)

    def stage_parameters(self, stage: int) -> StageParameters:
        if stage not in self._by_stage:
            self._by_stage[stage] = stage_parameters(self.kernels, self.workload.model, self.layers, stage)
        return self._by_stage[stage]

    def shards(self) -> tuple[float, float]:
        """Over how many ranks the optimizer states of dense and of expert parameters are split."""
        par, layout = self.par, self.layout
        if par.fsdp != "none":
            return float(layout.fsdp), float(layout.expert_fsdp)
        if par.distributed_optimizer:
            return float(layout.dp * layout.cp), float(layout.edp)
        return 1.0, 1.0

    def stage(self, stage: int) -> StageStates:
        dense, expert = self.stage_parameters(stage).total()
        dense_shard, expert_shard = self.shards()
        sharded = dense / dense_shard + expert / expert_shard
        weight_bytes = FP32_BYTES if self.fp32 else 2.0
        weights = weight_bytes * (sharded if self.par.fsdp == "full_shard" else dense + expert)
        if self.narrow_params:  # GEMM weights in the narrow type with their transpose, the rest 16-bit
            shards = (dense_shard, expert_shard) if self.par.fsdp == "full_shard" else (1.0, 1.0)
            gemm = sum(self._layer_gemm_params(stage, shards))  # sharded as the weights they replace
            weights -= gemm * (weight_bytes - self.narrow_weight_bytes(stage))
        if self.frozen:
            return StageStates(dense, expert, weights, 0.0, 0.0, self._cast_weights(stage), 0.0)
        grad_bytes = FP32_BYTES if self.fp32 else self.shape.grad_bytes
        gradients = grad_bytes * (sharded if self.par.fsdp != "none" else dense + expert)
        train = self.workload.training
        moments = 2 * train.adam_moments_dtype.bytes  # Adam's first and second moments
        master = 0.0 if self.fp32 else train.master_weights_dtype.bytes
        optimizer_bytes = moments + master
        step = FP32_BYTES * sharded if grad_bytes < FP32_BYTES and master == FP32_BYTES else 0.0
        return StageStates(dense, expert, weights, gradients, optimizer_bytes * sharded,
                           self._cast_weights(stage), step)

    @property
    def narrow_params(self) -> bool:
        return bool(self.shape.quantized_bytes) and self.workload.training.fp8_params

    def any_layout(self, stage: int) -> bool:
        """Whether the stage's GPUs' FP8 GEMMs read every layout (config.dc.GPUSpec.fp8_any_layout)."""
        return self.fp8_any_layout if isinstance(self.fp8_any_layout, bool) else self.fp8_any_layout[stage]

    def narrow_weight_bytes(self, stage: int) -> float:
        """Bytes per GEMM weight element of its quantized copies on the stage's GPUs (row-wise and column-wise, or
        the row-wise one alone for per-tensor fp8 where the FP8 GEMMs read every layout; block scales included:
        config/number_formats.py NumberFormat.copies)."""
        fmt = self.shape.number_format.format
        return fmt.copies(self.any_layout(stage)) * fmt.weight_operand_bytes

    def _layer_gemm_params(self, stage: int, shards: tuple[float, float] = (1.0, 1.0)) -> list[float]:
        """Parameters of the GEMM weights of each of a stage's transformer layers (not norms, embedding or LM head)
        that run in the narrow format (not those its recipe keeps in bf16); `shards`: over how many ranks the
        dense and the expert ones are split (a rank's share under FSDP full sharding)."""
        params, fmt = self.stage_parameters(stage), self.shape.number_format
        return [dense / shards[0] + expert / shards[1] for unit in params.units
                if unit >= 0 and not fmt.layer_in_bf16(unit)
                for dense, expert in (params.narrow_gemm(unit, fmt),)]

    def _gemm_params(self, stage: int) -> float:
        return sum(self._layer_gemm_params(stage))

    def _cast_weights(self, stage: int) -> float:
        """Narrow copies (and transposes) of the GEMM weights of a narrow-format run that keeps 16-bit weights:
        Transformer Engine quantizes each weight at the first micro-batch and keeps both copies for the step
        (`is_first_microbatch`, the module's weight workspace); without that cache (FSDP full sharding:
        config/number_formats.py TrainingFormat.of_workload) only the running layer's copies exist at a time."""
        if not self.shape.quantized_bytes or self.narrow_params:
            return 0.0
        if not self.shape.number_format.weight_cache:
            return self.narrow_weight_bytes(stage) * max(self._layer_gemm_params(stage), default=0.0)
        return self.narrow_weight_bytes(stage) * self._gemm_params(stage)
