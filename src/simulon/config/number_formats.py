"""Number formats a training run computes its GEMMs in: one row per `training.dtype`, saying everything the
rest of simulon needs to know about it, so that adding a format is adding a row here (and its dense peak to the
GPU templates that have a tensor-core rate for it), not editing the tracer, the kernel model and the memory model.

What a row holds:

* the element (`DType`, whose width is `DType.bytes` and whose dense peak the GPU template lists under the same
  name: a GPU without that entry has no tensor-core rate for the format and is refused);
* its scaling: per tensor (one fp32 scale; Transformer Engine's DelayedScaling and Float8CurrentScaling for fp8),
  or per block of `block` elements sharing a `scale_bytes` scale (OCP Microscaling v1.0: MXFP8 has 32-element
  blocks of e4m3/e5m2 with an e8m0 scale; NVIDIA's NVFP4 has 16-element blocks of e2m1 with an e4m3 scale and a
  second, per-tensor fp32 scale, Transformer Engine's NVFP4BlockScaling), and the weights' block where their stored
  scales differ (none does: NVFP4 scales weights in 16 x 16 tiles, "Pretraining Large Language Models with NVFP4",
  arXiv 2509.25149, section 4.3, but stores a tile's scale once for each of its 16 rows, as the block-scaled FP4
  GEMM reads one e4m3 scale per 16 elements of K: Transformer Engine's NVFP4Quantizer.make_empty allocates the
  same 1 x 16 scale tensors, get_scale_shape, with or without its 2D quantization);
* whether its cast reads each tensor once more first to find its absolute maximum (Float8CurrentScaling, and
  NVFP4's per-tensor scale; DelayedScaling takes the scale from the amax history of earlier steps and MXFP8 finds
  each block's amax inside the cast kernel);
* whether the column-wise copy of activations and output gradients (the weight-gradient GEMM's operands) is cast
  after a random Hadamard transform by a kernel of its own, which reads the 16-bit tensor once more (Transformer
  Engine's NVFP4BlockScaling applies its 16-point RHT to the column-wise usage of inputs and gradients, not to
  weights: NVFP4Quantizer::quantize_impl runs nvte_hadamard_transform_amax, which finds the amax before and after
  the transform in one read, then nvte_quantize_v2 for the row-wise copy and
  nvte_hadamard_transform_cast_fusion_columnwise for the column-wise one, three reads of the input where a cast
  without RHT reads it twice; the stochastic rounding of gradients happens inside those casts and moves no bytes);
* which transformer layers stay in bf16 (Megatron-Core's `--first-last-layers-bf16`,
  `--num-layers-at-start-in-bf16`, `--num-layers-at-end-in-bf16`, off by default; the NVFP4 paper keeps about 16%
  of its 12B model's 62 blocks in bf16, the first two and the last eight, section 4.1: as fractions of the
  depth here, each rounded to the nearest layer; DOUBT: the two and eight are recalled from the paper, the sources
  read while writing this confirm only "about 16%");
* whose fitted GEMM efficiency a GPU without a fit for the format borrows (compute/calibration.py), and the
  16-bit type fused attention runs in (attention, softmax and the score GEMMs stay in 16 bits in every recipe).

The GEMMs every narrow recipe leaves in bf16 whatever the layer (the MoE router and the LM head: Transformer
Engine's modules are the transformer layers' linears only) are named in `HIGH_PRECISION_GEMMS`.
The fp8 scaling recipe is `training.fp8_recipe` (`FP8_RECIPES`, also read under Megatron's name `tensorwise`:
`fp8_recipe_named`), meaningful only for per-tensor fp8.
A precision as tables and people write it ("FP8 current-scaling", "amp_bf16", "float32", "int8") is read here too
(`precision_named`, and `training_precision` for a table's cell, which refuses formats no row above trains in).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .common import DType, dtype_named

TENSOR_SCALE_BYTES = 4.0
"""One fp32 scale (and its inverse) per tensor: negligible next to the tensor, not counted in bytes moved."""
QUANTIZED_COPIES = 2
"""A narrow GEMM operand is written twice: row-wise for the forward (or input-gradient) GEMM and column-wise for
the other backward GEMM (Transformer Engine's rowwise and columnwise data: a transpose for per-tensor fp8 on
a GPU whose FP8 GEMMs read only the TN layout, Hopper's, a second quantization along the other axis for block-scaled
formats, whose blocks run along K); per-tensor fp8 on a GPU whose FP8 GEMMs read every layout (Blackwell's
data-center parts) is written once (NumberFormat.copies)."""


@dataclass(frozen=True)
class NumberFormat:
    """How one training dtype stores and scales the operands of its GEMMs."""

    dtype: DType
    quantized: bool = False            # GEMM operands are cast from 16-bit tensors to the narrow element
    block: int | None = None           # elements sharing one scale; None: one scale per tensor
    scale_bytes: float = 0.0           # bytes of one block scale
    weight_block: int | None = None    # the weights' stored scale block where it differs from the activations'
    amax_pass: bool = False            # the cast first reads the tensor to find its amax (current scaling)
    hadamard_columnwise: bool = False  # activations' and gradients' column-wise copy cast after an RHT, one more read
    keeps_narrow_weights: bool = True  # a framework can keep the GEMM weights in the format (fp8_params)
    gathers_16bit_weights: bool = False  # weights kept narrow (fp8_params) all-gathered 16-bit: gathered_weight_bytes
    gathers_weight_scales: bool = True   # ... with their block scales (else each rank computes them itself)
    transposes_gathered_weights: bool = False  # ... and their column-wise copy made from the row-wise after the gather
    weight_amax_bytes: float = 0.0  # amaxes the optimizer all-reduces per narrow weight element before quantizing it
    sp_norm_input_copies: int = 1  # copies of a norm-fused GEMM's input saved under sequence parallelism (below)
    quantized_sp_gather: bool = True  # GEMM inputs quantized before their sequence-parallel all-gather (below)
    bf16_first_fraction: float = 0.0  # share of the transformer layers, from the first, whose GEMMs stay bf16
    bf16_last_fraction: float = 0.0   # the same from the last
    calibration_chain: tuple[DType, ...] = ()  # whose fitted GEMM efficiency it borrows, in order (itself first)

    @property
    def name(self) -> str:
        return self.dtype.value

    @property
    def element_bytes(self) -> float:
        return self.dtype.bytes

    def operand_bytes(self, block: int | None = None) -> float:
        """Bytes per element of one quantized copy: the element and its share of a block scale."""
        block = block or self.block
        return self.element_bytes + (self.scale_bytes / block if block else 0.0)

    def copies(self, any_layout: bool = False) -> int:
        """Quantized copies of a narrow GEMM operand: one on a GPU whose FP8 GEMMs read every layout
        (`any_layout`: config.dc.GPUSpec.fp8_any_layout) for a per-tensor scaled format, whose one copy serves as
        its own transpose (Transformer Engine's Float8Quantizer and Float8CurrentScalingQuantizer allocate `_data`
        alone for both usages and no `_transpose` where `is_non_tn_fp8_gemm_supported`, csrc/quantizer.cpp;
        Float8TensorStorage.update_usage drops the transpose there); QUANTIZED_COPIES otherwise, block-scaled
        formats included (MXFP8Tensor's and NVFP4Tensor's column-wise data is quantized along the other axis, with
        scales of its own, on every GPU)."""
        return 1 if any_layout and self.quantized and self.block is None else QUANTIZED_COPIES

    @property
    def weight_operand_bytes(self) -> float:
        return self.operand_bytes(self.weight_block)

    def gathered_weight_bytes(self, weight_bytes: float) -> float:
        """Bytes per element a parameter all-gather moves of a GEMM weight kept narrow (fp8_params), whose 16-bit
        form would be `weight_bytes` each: its 16-bit form for a format that `gathers_16bit_weights` (MXFP8), else
        one quantized copy, with its block scales unless each rank computes them itself (NVFP4)."""
        if self.gathers_16bit_weights:
            return weight_bytes
        return self.weight_operand_bytes if self.gathers_weight_scales else self.element_bytes

    @property
    def sp_norm_input_bytes(self) -> float | None:
        """Bytes per element of the input a norm-fused column-parallel GEMM (Transformer Engine's LayerNormLinear:
        QKV, fc1, the mixers' in_proj) saves for its weight gradient under sequence parallelism: the rank's own rows,
        quantized before the all-gather and gathered again in backward (layernorm_linear.py `ln_out_to_save = ln_out`,
        `ln_out_needs_gather`). Its forward quantizes them for both usages (per-tensor fp8 for the row-wise alone,
        the only data its all-gather moves: Float8Quantizer.supports_only_rowwise_all_gather), and before saving drops
        the row-wise copy only of an MXFP8TensorStorage or Float8BlockwiseQTensorStorage, so that an NVFP4 tensor
        keeps both (`sp_norm_input_copies`) where every other format keeps one. None for a format that Transformer
        Engine does not quantize before the gather (`quantized_sp_gather`): the module saves the 16-bit rows."""
        if not self.quantized_sp_gather:
            return None
        return self.sp_norm_input_copies * self.operand_bytes()

    def gathered_operand_bytes(self, both_usages: bool) -> float:
        """Bytes per element a tensor-parallel all-gather along the sequence moves of a narrow GEMM operand that
        Transformer Engine quantizes on each rank's share before gathering it (gather_along_first_dim with a
        quantizer, transformer_engine/pytorch/distributed.py; since TE 1.x for per-tensor fp8, 2.0 for MXFP8 and
        NVFP4): one quantized copy for the GEMM input (the forward's row-wise data, the wgrad re-gather's column-wise
        data of a block-scaled format or per-tensor fp8's row-wise data, transposed after); with `both_usages` (a
        row-parallel GEMM's output gradient, which its dgrad and wgrad GEMMs both read) both copies of a block-scaled
        format, each scaled along its own axis and gathered (_all_gather_mxfp8, _all_gather_nvfp4), one of per-tensor
        fp8, whose transpose is made from the gathered data (_all_gather_fp8): `copies` on a GPU reading any
        layout."""
        return (self.copies(any_layout=True) if both_usages else 1) * self.operand_bytes()

    @property
    def attention_dtype(self) -> DType:
        """Fused attention runs in 16 bits: fp16 in an fp16 run, bf16 otherwise."""
        return DType.fp16 if self.dtype == DType.fp16 else DType.bf16

    def cast_bytes(self, elements: float, input_bytes: float, amax_pass: bool | None = None,
                   block: int | None = None, weight: bool = False, any_layout: bool = False) -> float:
        """Bytes the cast kernels move quantizing `elements` of `input_bytes` each: read the input (once more with an
        amax pass, and once more where an activation's or gradient's column-wise copy is cast after a Hadamard
        transform; a `weight` never is), write the quantized copies (`copies`: both, or one for per-tensor fp8 on a
        GPU whose FP8 GEMMs read every layout) with their block scales."""
        amax = self.amax_pass if amax_pass is None else amax_pass
        reads = input_bytes * (1 + int(amax) + int(self.hadamard_columnwise and not weight))
        return elements * (reads + self.copies(any_layout) * self.operand_bytes(block))

    def transpose_bytes(self, elements: float, block: int | None = None) -> float:
        """Of cast_bytes, the bytes of the copy a GPU whose FP8 GEMMs read every layout does not write (`copies`): a
        per-tensor fp8 tensor's transpose, none for block-scaled formats."""
        return elements * (self.copies(False) - self.copies(True)) * self.operand_bytes(block)

    @property
    def keeps_bf16_layers(self) -> bool:
        """Whether the format's recipe keeps some share of the layers in bf16 by default (at a depth where that share
        rounds to one layer or more: bf16_layers)."""
        return self.quantized and (self.bf16_first_fraction > 0 or self.bf16_last_fraction > 0)

    def bf16_layers(self, num_layers: int) -> tuple[int, int]:
        """(first, last) transformer layers whose GEMMs the format's recipe keeps in bf16 by default: its fractions of
        the depth, each rounded to the nearest layer (halves up), so that the share kept in bf16 stays the recipe's
        at any depth (rounded up, 3 of an 8-layer model's layers stayed in bf16 under NVFP4, 37.5% for the paper's
        16%, and a 1- or 2-layer model ran no layer in NVFP4 at all)."""
        if not self.quantized:
            return 0, 0
        return (math.floor(self.bf16_first_fraction * num_layers + 0.5),
                math.floor(self.bf16_last_fraction * num_layers + 0.5))


_FP8_CHAIN = (DType.fp8, DType.bf16)
NUMBER_FORMATS: dict[DType, NumberFormat] = {
    DType.fp32: NumberFormat(DType.fp32, calibration_chain=(DType.fp32, DType.tf32, DType.bf16)),
    DType.tf32: NumberFormat(DType.tf32, calibration_chain=(DType.tf32, DType.bf16)),
    DType.fp16: NumberFormat(DType.fp16, calibration_chain=(DType.fp16, DType.bf16)),
    DType.bf16: NumberFormat(DType.bf16, calibration_chain=(DType.bf16,)),
    DType.fp8: NumberFormat(DType.fp8, quantized=True, calibration_chain=_FP8_CHAIN),
    # the fp4 GEMM rate as a kernel's dtype (compute.AnalyticalModel): a per-tensor-scaled fp4, which no public
    # recipe trains in (a run naming a bare fp4 trains in NVFP4: config.workload.TrainingDType); no public fp4
    # measurements, so fp8's efficiency surface
    DType.fp4: NumberFormat(DType.fp4, quantized=True, calibration_chain=(DType.fp4, *_FP8_CHAIN)),
    # Transformer Engine's MXFP8BlockScaling: e4m3 (e5m2 gradients) in 1 x 32 blocks, e8m0 (1-byte) scales;
    # the block-scaled tensor-core MMA of Blackwell applies the scales in the main loop, so it runs at the fp8
    # rate with fp8's fitted efficiency where the GPU has no mxfp8 fit
    # Kept narrow (fp8_params) under Megatron's distributed optimizer, its weights are all-gathered in bf16 and
    # quantized after the gather (gathers_16bit_weights).
    # Megatron's _ParamAndGradBuffer cannot hold MXFP8 weights in a parameter buffer of their own: Transformer
    # Engine's replace_raw_data raises NotImplementedError for an MXFP8Tensor.
    # With --reuse-grad-buf-for-mxfp8-param-ag it gathers the bf16 weights into the gradient buffer instead, and
    # _ParamAndGradBucketGroup._post_param_sync quantizes them (megatron/core/distributed/param_and_grad_buffer.py,
    # _ParamAndGradBuffer.__init__ `shared_buffer`).
    # Megatron-FSDP gathers the row-wise and column-wise e4m3 data instead, the same 2 bytes an element
    # (megatron_fsdp/param_and_grad_buffer.py `transpose_weight_buffer`), after its optimizer step all-reduced the
    # amax of every 32-element block, row-wise and column-wise, in bf16, so that every rank scales its shard alike
    # (Transformer Engine's _cast_master_weights_to_fp8_mxfp8_scaling `packed_amaxes`): weight_amax_bytes, 2 x 2
    # bytes per 32 elements.
    DType.mxfp8: NumberFormat(DType.mxfp8, quantized=True, block=32, scale_bytes=1.0, gathers_16bit_weights=True,
                              weight_amax_bytes=2 * 2 / 32,
                              calibration_chain=(DType.mxfp8, *_FP8_CHAIN)),
    # OCP MXFP4: e2m1 in 1 x 32 blocks with e8m0 (1-byte) scales and no per-tensor scale, so no amax pass (each
    # block's amax is found inside the cast, as for MXFP8); the block-scaled FP4 MMA of Blackwell (tcgen05 kind
    # mxf4) and CDNA4 runs it at the FP4 tensor-core rate. No framework's recipe names layers kept in bf16
    # (Megatron-Core runs it only as a custom fp4 recipe), and Quartet (arXiv 2505.14669, on Blackwell) runs
    # every linear layer in MXFP4, forward and backward, so none stay here. (Tseng et al., arXiv 2502.20586,
    # quantize the backward GEMMs only: a recipe this row does not model.)
    # No framework keeps MXFP4 weights (fp8_params, keeps_narrow_weights).
    # Megatron-Core's --fp4-param-gather lays out, gathers and re-quantizes NVFP4 weights only
    # (param_and_grad_buffer.py `has_nvfp4_params`, fp4_utils.py quantize_nvfp4_param_shard).
    # The MXFP4 quantizer its custom recipe builds (Transformer Engine's NVFP4QuantizerRef with pow_2_scales,
    # custom_recipes/reference_nvfp4.py) returns an NVFP4TensorRef, a dataclass, not a tensor a parameter can be.
    # Quantizer.make_empty raises NotImplementedError for custom quantizers.
    # A custom quantizer is not handed the norm's output or a Linear's input before a sequence-parallel all-gather
    # (layernorm_linear.py: "custom recipe doesn't need to support quantized AG"; linear.py `and not args.custom`).
    # gather_along_first_dim, which knows no NVFP4QuantizerRef, gathers the 16-bit tensor and quantizes the whole
    # sequence after it (its "High-precision communication for quantized tensors").
    # The module saves this rank's 16-bit rows for its weight gradient (quantized_sp_gather).
    DType.mxfp4: NumberFormat(DType.mxfp4, quantized=True, block=32, scale_bytes=1.0, keeps_narrow_weights=False,
                              quantized_sp_gather=False,
                              calibration_chain=(DType.mxfp4, DType.nvfp4, DType.fp4, DType.mxfp8, *_FP8_CHAIN)),
    # Transformer Engine's NVFP4BlockScaling: e2m1 in 1 x 16 blocks with e4m3 (1-byte) scales, weights scaled in
    # 16 x 16 tiles but stored with a scale per 16 elements like the rest (module docstring), plus a per-tensor fp32
    # scale from the tensor's amax (so an amax pass before every cast), and the column-wise copies of inputs and
    # gradients cast after a random Hadamard transform (module docstring); kept narrow (fp8_params: Megatron's
    # --fp4-param-gather) its weights are all-gathered as their packed row-wise e2m1 data alone, each rank computing
    # every 16 x 16 tile's scale from amaxes all-reduced over the data-parallel group (param_and_grad_buffer.py
    # `nvfp4_packed_numel`, numel // 2 bytes; Transformer Engine's _cast_master_weights_to_nvfp4_2d), whose
    # column-wise copy (the 16 x 16 tiles make it the row-wise one transposed) every rank then makes from the gathered
    # data (Megatron's _post_param_sync: Transformer Engine's post_all_gather_processing,
    # _nvfp4_2d_multi_tensor_transpose); the amaxes: one fp32 per 16 x 16 tile of every weight, all-reduced (MAX)
    # over the data-parallel group by each optimizer step before it quantizes its shard (`packed_amaxes`; the
    # per-tensor amaxes beside them, one fp32 a weight, are left out); a norm-fused GEMM's input saved under sequence
    # parallelism keeps both its copies (NumberFormat.sp_norm_input_bytes)
    DType.nvfp4: NumberFormat(DType.nvfp4, quantized=True, block=16, scale_bytes=1.0, gathers_weight_scales=False,
                              transposes_gathered_weights=True, weight_amax_bytes=4 / (16 * 16),
                              amax_pass=True, hadamard_columnwise=True, sp_norm_input_copies=2,
                              bf16_first_fraction=2 / 62, bf16_last_fraction=8 / 62,
                              calibration_chain=(DType.nvfp4, DType.fp4, DType.mxfp8, *_FP8_CHAIN)),
}
"""Every training dtype's format (one row each; see the module docstring)."""

FP8_RECIPES = {"delayed": False, "current": True}
"""Per-tensor fp8 scaling recipes and whether the cast needs an amax pass first: Transformer Engine's DelayedScaling
(scale from the amax history of earlier iterations, recorded by the cast itself) and Float8CurrentScaling (amax of
this tensor, a reduction over it before the cast; Megatron's `--fp8-recipe tensorwise`)."""
DEFAULT_FP8_RECIPE = "delayed"
FP8_RECIPE_SPELLINGS = {"tensorwise": "current", "current_scaling": "current", "float8currentscaling": "current",
                        "delayed_scaling": "delayed", "delayedscaling": "delayed"}
"""Other names of the per-tensor fp8 recipes, lower case with '_' for spaces and '-': Megatron's `--fp8-recipe
tensorwise` (its name for current scaling), and Transformer Engine's recipe classes."""


OTHER_FP8_RECIPES = {
    "mxfp8": "is dtype mxfp8 here: set training.dtype: mxfp8 and leave fp8_recipe out",
    "blockwise": "(Transformer Engine's Float8BlockScaling, 1 x 128 and 128 x 128 blocks) is not modelled; the "
                 "nearest are current (per tensor) and dtype mxfp8 (per 32-element block)",
}
"""Megatron's other --fp8-recipe choices (megatron/training/arguments.py: tensorwise, delayed, mxfp8, blockwise),
each with what to write instead, so that a recipe copied from a Megatron command is answered, not only refused."""


def fp8_recipe_named(value: object) -> object:
    """The fp8 recipe (FP8_RECIPES) a name written in any case or as one of FP8_RECIPE_SPELLINGS denotes, as
    config.common.dtype_named reads a dtype; ValueError for Megatron's other recipes (OTHER_FP8_RECIPES); other
    values are left for validation to refuse."""
    if not isinstance(value, str):
        return value
    key = re.sub(r"[\s-]+", "_", value.strip().lower())
    if key in OTHER_FP8_RECIPES:
        raise ValueError(f"Megatron's --fp8-recipe {key} {OTHER_FP8_RECIPES[key]}")
    return key if key in FP8_RECIPES else FP8_RECIPE_SPELLINGS.get(key, value)

HIGH_PRECISION_GEMMS = ("moe_route", "lm_head", "mamba_ssd_chunk_state", "mamba_ssd_bmm", "mamba_ssd_scan",
                        "attn_q_absorb", "attn_v_up", "attn_index_logits")
"""GEMMs a narrow-format run leaves in bf16 in every layer: Transformer Engine quantizes the transformer layers'
linears only (Megatron-Core's router and output layer are plain 16-bit GEMMs; the Mamba-2 scan's products are
mamba_ssm's Triton kernels on 16-bit operands; absorbed MLA's per-head products with the key and value up-projection
are torch.einsum, and DeepSeek sparse attention's indexer scores Megatron-Core's 16-bit kernels, where DeepSeek's
own runs them in FP8)."""


def number_format(dtype: DType) -> NumberFormat:
    return NUMBER_FORMATS[dtype]


@dataclass(frozen=True)
class TrainingFormat:
    """The format a run trains in, with its fp8 recipe and the transformer layers it keeps in bf16."""

    format: NumberFormat
    amax_pass: bool
    bf16_first: int = 0
    bf16_last: int = 0
    num_layers: int = 0
    narrow_weights: bool = False  # GEMM weights kept only in the narrow format (fp8_params): no per-step cast
    weight_cache: bool = True     # quantized weights cached from the first micro-batch for the step (see below)
    quantize_after_gather: bool = False  # narrow weights gathered 16-bit, then quantized (of_workload)
    frozen_weights: bool = False  # narrow weights that never change (LoRA's base weights): made once, not each step

    @classmethod
    def of(cls, dtype: DType, num_layers: int, fp8_recipe: str | None = None,
           bf16_layers: tuple[int | None, int | None] = (None, None), narrow_weights: bool = False,
           weight_cache: bool = True, fsdp: bool = False, frozen: bool = False) -> TrainingFormat:
        """`fsdp`: the run shards with FSDP (Megatron-FSDP), whose gathers move the narrow weights' quantized
        copies themselves, where Megatron's distributed optimizer gathers a format that `gathers_16bit_weights` in
        16 bits and quantizes it after (quantize_after_gather). `frozen`: the base weights are not trained (LoRA),
        so narrow ones are neither gathered nor re-made after a step: their transpose or second copy, made once,
        stays valid (Transformer Engine drops a Float8Tensor's transpose only when its data changes)."""
        fmt = number_format(dtype)
        amax = fmt.amax_pass or FP8_RECIPES[fp8_recipe or DEFAULT_FP8_RECIPE]
        first, last = fmt.bf16_layers(num_layers)
        first = first if bf16_layers[0] is None else bf16_layers[0]
        last = last if bf16_layers[1] is None else bf16_layers[1]
        narrow = narrow_weights and fmt.quantized
        return cls(fmt, amax and fmt.quantized, first, last, num_layers, narrow, weight_cache,
                   narrow and fmt.gathers_16bit_weights and not fsdp, narrow and frozen)

    @property
    def delayed_scaling(self) -> bool:
        """Whether the run scales per tensor from the amax history of earlier iterations (Transformer Engine's
        DelayedScaling: per-tensor fp8 under the `delayed` recipe; the block-scaled formats and current scaling find
        their amaxes in the cast): each module's quantizers record the amaxes into their history's current row,
        which the autocast region all-reduces once per forward and once per backward (workload.megatron
        amax_reduction)."""
        return self.format.dtype == DType.fp8 and not self.amax_pass

    def layer_in_bf16(self, layer: int) -> bool:
        """Whether transformer layer `layer` (0-based, of the whole model) runs its GEMMs in bf16. A
        multi-token-prediction layer (ids from num_layers) is no layer of the first or last ones kept in bf16:
        Megatron-Core's MultiTokenPredictionLayer.forward runs it under the global fp8 context of an fp8 recipe
        (fp8, mxfp8: get_fp8_context without a layer number, so whatever --num-layers-at-end-in-bf16 says) and under
        none for an fp4 one (nvfp4, mxfp4: "currently ignoring FP4 in MTP layers", so in bf16 always;
        megatron/core/transformer/multi_token_prediction.py)."""
        if not self.format.quantized or layer < 0:
            return False
        if layer >= self.num_layers:
            return self.format.element_bytes < 1  # a 4-bit element: Megatron's --fp4-format, not --fp8-format
        return layer < self.bf16_first or layer >= self.num_layers - self.bf16_last

    @classmethod
    def of_workload(cls, workload) -> TrainingFormat:
        """The format of a Megatron workload (config.workload.MegatronWorkload) as its training block asks.

        Transformer Engine caches a module's quantized weight (both copies) from the first micro-batch to the
        last only when the caller passes `is_first_microbatch` (transformer_engine/pytorch/module/linear.py:
        `cache_name=(None if is_first_microbatch is None else "weight")`), as Megatron-Core's TE modules do
        (megatron/core/extensions/transformer_engine.py, unless disable_parameter_transpose_cache). Under ZeRO-3 /
        FSDP full sharding a layer's whole weight exists only while the layer runs (and JAX frameworks quantize
        inside the jitted layer), so nothing is cached: the weight is quantized at every micro-batch's forward and
        its copies live as long as the layer's gathered weight."""
        train = workload.training
        fsdp = workload.parallelism.fsdp
        return cls.of(train.dtype, workload.model.num_layers, train.fp8_recipe,
                      (train.bf16_first_layers, train.bf16_last_layers), train.fp8_params,
                      fsdp != "full_shard", fsdp != "none", train.peft == "lora")


PRECISION_WORDS: tuple[tuple[tuple[str, ...], DType], ...] = (
    (("mxfp4",), DType.mxfp4),
    (("nvfp4", "fp4", "float4", "e2m1"), DType.nvfp4),  # a bare fp4 (e2m1) is NVFP4: TE's only 4-bit recipe
    (("mxfp8",), DType.mxfp8),
    (("fp8", "float8", "e4m3", "e5m2"), DType.fp8),
    (("bf16", "bfloat16"), DType.bf16),          # before fp16: "bf16/fp16" trains in bf16, "bfloat16" holds "float16"
    (("fp16", "float16"), DType.fp16),
    (("tf32", "tensorfloat32"), DType.tf32),
    (("fp32", "float32"), DType.fp32),           # last: "bf16 with fp32 master weights" trains in bf16
)
"""The words (lower case, without spaces, '_' or '-') a free-text precision names each training format by; a
precision naming two ("amp_fp8", "BF16/FP16", "bf16 with fp32 master weights") trains its GEMMs in the first named
here, the narrowest."""
OTHER_FORMAT = re.compile(r"(?<![a-z])(?:u?int|fp|float|bf)[\s_-]?\d+|(?<![a-z])double(?![a-z])")
"""A number format named in a precision that PRECISION_WORDS does not know (int8, fp64, fp6): not one simulon
trains in."""


def precision_named(text: str) -> tuple[DType | None, str | None]:
    """The training dtype and fp8 recipe a free-text precision names, as published tables write it ("NVFP4",
    "MXFP8", "MXFP4", "FP8 current-scaling", "amp_fp8", "bf16 mixed", "FP32", "float32") or as users name a dtype
    (config.common.dtype_named: "half", "torch.float16"), or (None, None) where it names none. ValueError where it
    names fp8 with block scales (BLOCKWISE_WORDS)."""
    words = re.sub(r"[\s_-]+", "", text.lower())
    dtype = next((d for names, d in PRECISION_WORDS if any(name in words for name in names)), None)
    if dtype is None:
        named = dtype_named(text)
        dtype = named if isinstance(named, DType) else None
    if dtype == DType.fp8:
        if any(word in words for word in BLOCKWISE_WORDS):  # no per-tensor recipe: not read as delayed scaling
            raise ValueError(f"precision {text.strip()!r}: fp8 with per-block scales "
                             f"{OTHER_FP8_RECIPES['blockwise']}")
        return dtype, "current" if "current" in words or "tensorwise" in words else None
    return dtype, None


BLOCKWISE_WORDS = ("blockwise", "blockscaling", "perblock", "1x128", "128x128")
"""Words (lower case, without spaces, '_' or '-') by which a precision names fp8 with per-block scales
(Transformer Engine's Float8BlockScaling, DeepSeek-V3's 1 x 128 and 128 x 128 tiles): not modelled
(OTHER_FP8_RECIPES), so a cell naming it is refused rather than read as per-tensor delayed scaling."""


def training_precision(text: str) -> tuple[DType, str | None]:
    """The training dtype and fp8 recipe of a table's precision cell (precision_named), bf16 where it names no
    format ("", "unknown", "not stated", "mixed": the mixed precision every source of the shipped tables trains in
    unless it says otherwise). Raises ValueError where it names a format simulon does not train in (int8, fp64)."""
    dtype, recipe = precision_named(text)
    if dtype is not None:
        return dtype, recipe
    other = OTHER_FORMAT.search(text.lower())
    if other:
        trained = ", ".join(d.value for d in NUMBER_FORMATS if d != DType.fp4)
        raise ValueError(f"precision {text.strip()!r}: {other.group()} is not a format simulon trains in "
                         f"({trained})")
    return DType.bf16, None
