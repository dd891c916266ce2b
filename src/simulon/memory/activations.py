"""Activations one rank keeps for backward, per transformer layer and micro-batch, and the transients of a
layer's forward and backward.

A tensor is counted where autograd saves it, as Megatron-Core with Transformer Engine saves it
(megatron/core/transformer/transformer_layer.py, attention.py, mlp.py, moe/; TE's LayerNormLinear,
Linear, DotProductAttention). Written element by element, the sum reproduces Korthikanti et al. 2022
("Reducing Activation Recomputation in Large Transformer Models", arXiv 2205.05198, section 4): a GPT layer
keeps sbh(34 + 5as/h) bytes in 16 bits, sbh(10 + 24/t + 5as/(ht)) with tensor parallelism,
sbh(34/t + 5as/(ht)) with sequence parallelism too, sbh * 34/t with selective recomputation and 2sbh/t
(the layer's input) with full recomputation:

* attention: the norm's input (2sbh), the QKV GEMM's input (2sbh), Q, K and V (6sbh), the projection's
  input (2sbh), the dropout mask after it (sbh); an unfused attention adds the softmax output (2as^2b), its
  dropout mask (as^2b) and the dropout output (2as^2b); a flash attention keeps only the log-sum-exp (fp32,
  one per query and head) instead.
* MLP: the norm's input (2sbh), fc1's input (2sbh), the activation's input (8sbh for a 4h FFN, twice that
  for a gated one), fc2's input (8sbh), the dropout mask (sbh).

An fp8 (fp4, MXFP8, NVFP4) run keeps a GEMM's input for the weight gradient in the narrow type with its block
scales (config/number_formats.py), the copy Transformer Engine casts for the GEMM (only the column-wise one the
weight gradient reads), except in the layers its recipe keeps in bf16; norms, activation functions and
attention keep theirs in 16 bits. Sequence parallelism divides what norms and dropouts keep by t; context
parallelism divides every row count by cp (its all-to-all variants keep the whole sequence of a share of the heads:
the same bytes, and the attention kernel's output beside the all-to-all's that the projection keeps). A model
without dropout keeps no masks (Llama, DeepSeek).
Grouped-query attention keeps fewer K and V heads; multi-head latent attention keeps its low-rank latents
and the up-projected Q, K, V.
Mixture-of-experts layers keep the router's fp32 logits, the dispatched tokens each expert GEMM reads, the
expert activations (top_k x the tokens, times the capacity factor where tokens are padded) and the expert
outputs the combine weights by the router's probabilities (megatron/core/transformer/moe/moe_utils.py
`unpermute`), and the dropout mask after the block, as the MLP's.
Selective recomputation of a module (`mlp`, `moe`, `shared_experts`) keeps what its checkpoint's input is and what
runs outside it: the bias-dropout-add after the MLP or MoE block keeps its mask (ActivationModel._mlp, _moe);
recomputed core attention keeps Q, K and V (its checkpoint's input), not the kernel's softmax statistics (flash)
or scores (unfused).

What recomputation drops it re-creates in backward (ActivationModel.recreated): full recomputation the whole layer
at the start of the layer's backward, selective recomputation each recomputed module just before that module's
backward, so a layer's backward transient holds, besides its gradients, the layer's re-created activations (full)
or the most any one of its blocks re-creates (selective): with unfused attention and core attention recomputed,
the 5as^2b/t of scores, softmax and dropout mask.
"""

from __future__ import annotations

from collections.abc import Callable
from copy import copy
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..config.hybrid import Block, LayerKind
from ..config.workload import CORE_ATTENTION_MODULES, MegatronWorkload
from ..workload.gated_delta import GdnShard
from ..workload.kernels import INDEX_BYTES, MASK_BYTES
from ..workload.layer_kernels import MambaShard, ShardShape

FP32_BYTES = 4.0
INDEXER_QUERY_BLOCK = 8192
"""Queries DeepSeek sparse attention's indexer scores at once, its fp32 scores against every key held while it picks
their top-k (Megatron-Core DSAttention's fused_indexer_block_size default)."""


@dataclass(frozen=True)
class LayerActivations:
    """Bytes one layer keeps per micro-batch, by part, and the most its forward and backward hold on top."""

    parts: dict[str, float]
    forward_transient: float
    backward_transient: float
    deferred: float = 0.0  # what a split backward holds from its B to its W (ActivationModel.deferred)
    deferred_any_layout: float = 0.0  # the same on a GPU whose FP8 GEMMs read every layout
    backward_transient_any_layout: float = 0.0  # backward_transient on such a GPU

    @property
    def total(self) -> float:
        return sum(self.parts.values())

    def held_for_weight_gradient(self, any_layout: bool) -> float:
        """What a split backward holds from its B to its W on a GPU whose FP8 GEMMs read every layout (`any_layout`:
        config.dc.GPUSpec.fp8_any_layout) or not."""
        return self.deferred_any_layout if any_layout else self.deferred

    def backward_transient_on(self, any_layout: bool) -> float:
        """The backward's transient on a GPU whose FP8 GEMMs read every layout (`any_layout`:
        config.dc.GPUSpec.fp8_any_layout) or not: ActivationModel._regathered."""
        return self.backward_transient_any_layout if any_layout else self.backward_transient


LayerGroups = tuple[tuple[tuple[LayerKind, bool, bool], tuple[int, ...]], ...]
"""A model chunk's layers by kind: ((blocks, fully recomputed, kept in bf16), its layers) in order of first layer."""


class LayerCache:
    """Layers' activations already worked out (ActivationModel.layer), by everything they depend on but the model,
    which is this cache's one: a strategy search builds an ActivationModel for each of its strategies of one model,
    and most share their layers (every dp, pp, vpp, sharding and layer split of one tp, cp, micro-batch size,
    format and recomputation). A workload of another model object is not served from it. It also keeps how a model
    chunk's layers group into kinds (ActivationModel.layer_kinds), which the memory model asks for every stage of every
    strategy, and which most strategies share (every tp, cp, micro-batch size, sharding and dp of one layer split)."""

    def __init__(self, model) -> None:
        self.model = model  # held, so that its identity stands for it
        self.known: dict[tuple, LayerActivations] = {}
        self.kinds: dict[tuple, LayerGroups] = {}
        self.chunks: dict[tuple, Any] = {}  # memory.model's model chunks, by chunk_activations_key
        self.splits: dict[tuple, Any] = {}  # memory.model's stages of alike layers, by split_key

    @staticmethod
    def served(store: dict, key: tuple | None, make: Callable[[], Any]) -> Any:
        """What `store` keeps under `key`, made (`make()`) and kept there the first time; made afresh without a key
        (a workload of another model)."""
        if key is None:
            return make()
        if key not in store:
            store[key] = make()
        return store[key]

    def key(self, acts: ActivationModel, kind: LayerKind, recompute: bool | None, in_bf16: bool) -> tuple | None:
        """What ActivationModel.layer reads beyond the model (its shard shape, recomputation, attention and
        cross-entropy settings, and its arguments), or None for a workload of another model."""
        if acts.model is not self.model:
            return None
        return (acts.shape, acts.par.recompute, acts.modules, acts.train.attention, acts.train.cross_entropy, kind,
                recompute, in_bf16)

    def chunk_activations_key(self, acts: ActivationModel, layers: range, ends: tuple[bool, bool],
                              any_layout: bool) -> tuple | None:
        """What the activations of a model chunk of `layers` read beyond the model (as ActivationModel.layer and
        layer_kinds do; `ends`: whether it holds the embedding and the LM head; `any_layout`: its GPUs' FP8 GEMMs
        read every layout), or None for a workload of another model."""
        if acts.model is not self.model:
            return None
        return (acts.shape, acts.par.recompute, acts.par.recompute_num_layers, acts.modules, acts.train.attention,
                acts.train.cross_entropy, layers.start, layers.stop, ends, any_layout)

    def split_key(self, acts: ActivationModel, split: Any, any_layout: Any) -> tuple | None:
        """What grouping every model chunk of a layer split (`split`: a PipelineLayers) into kinds reads beyond the
        model (layer_kinds: the full recomputation's extent and the number format's bf16 layers), with the GPUs'
        layouts (`any_layout`: one for all stages or per stage), or None for a workload of another model."""
        if acts.model is not self.model:
            return None
        layouts = any_layout if isinstance(any_layout, bool) else tuple(any_layout)
        return split, acts.par.recompute, acts.par.recompute_num_layers, acts.shape.number_format, layouts

    def chunk_key(self, acts: ActivationModel, layers: range) -> tuple | None:
        """What ActivationModel.layer_kinds reads beyond the model (the chunk's layers, the full recomputation's
        extent and the number format's bf16 layers), or None for a workload of another model."""
        if acts.model is not self.model:
            return None
        return layers.start, layers.stop, acts.par.recompute, acts.par.recompute_num_layers, acts.shape.number_format


class ActivationModel:
    """Saved activations of every kind of layer of one workload on one rank."""

    def __init__(self, workload: MegatronWorkload, cache: LayerCache | None = None):
        self.workload, self.cache = workload, cache
        self.model, self.par, self.train = workload.model, workload.parallelism, workload.training
        self.shape = ShardShape.of(workload)
        self.modules = self.par.recomputed_modules
        moe = self.model.moe
        self.capacity_factor = (moe.capacity_factor or 1.0) if moe is not None else 1.0

    # ---- sizes ----

    @property
    def a(self) -> float:
        return self.shape.act_bytes

    @property
    def gemm_input(self) -> float:
        """Bytes per element of a GEMM input kept for the weight gradient."""
        return self.shape.quantized_bytes or self.a

    @property
    def norm_gemm_input(self) -> float:
        """Bytes per element of a norm-fused GEMM's input (QKV's, fc1's, the mixers' in_proj's: Transformer Engine's
        LayerNormLinear) kept for the weight gradient: `gemm_input`, but under sequence parallelism what
        NumberFormat.sp_norm_input_bytes says the module keeps of the rank's rows (both copies of NVFP4; the 16-bit
        rows where it quantizes them only after the gather, MXFP4's custom recipe: `sp_16bit_gather`)."""
        fmt = self.shape.number_format
        if not self.shape.sp or not self.shape.quantized_bytes or fmt is None:
            return self.gemm_input
        return fmt.format.sp_norm_input_bytes or self.a

    @property
    def sp_16bit_gather(self) -> bool:
        """Whether sequence parallelism gathers a narrow GEMM's input in 16 bits and quantizes the whole sequence after
        (NumberFormat.quantized_sp_gather: MXFP4's custom recipe), so that the module saves the rank's 16-bit rows."""
        fmt = self.shape.number_format
        return (self.shape.sp and bool(self.shape.quantized_bytes) and fmt is not None
                and not fmt.format.quantized_sp_gather)

    @property
    def linear_gathered_input(self) -> float:
        """Bytes per element of the rank's rows that a Transformer Engine Linear gathering its input along the
        sequence (the shared experts' fc1, MTP's eh_proj) saves for its weight gradient: `gemm_input`, 16 bits where
        the gather is (`sp_16bit_gather`: linear.py quantizes no input of a custom recipe before the gather)."""
        return self.a if self.sp_16bit_gather else self.gemm_input

    def grad_output(self, any_layout: bool = False) -> float:
        """Bytes per element of a GEMM's output gradient a split backward holds from its B to its W: in a narrow
        format its quantized copies (Transformer Engine's _Linear.backward quantizes it for both usages, row-wise for
        the input gradient and column-wise for the weight gradient, grad_output_preprocess, and puts the quantized
        tensor in its WeightGradStore, the 16-bit gradient freed as B returns): for per-tensor fp8 its data and
        transpose, 2 bytes, where the GPU's FP8 GEMMs read the TN layout only (Hopper), its data alone, 1 byte, where
        they read every layout (`any_layout`, Blackwell's data-center parts: Float8Quantizer::create_tensor and
        Float8CurrentScalingQuantizer::create_tensor allocate no transpose there, csrc/quantizer.cpp,
        NumberFormat.copies); MXFP8's and NVFP4's two copies with their block scales on every GPU; its 16 bits
        otherwise."""
        fmt = self.shape.number_format
        if not self.shape.quantized_bytes or fmt is None:
            return self.a
        return fmt.format.copies(any_layout) * self.shape.quantized_bytes

    @property
    def mask(self) -> float:
        return MASK_BYTES if self.model.dropout > 0 else 0.0

    @property
    def rows(self) -> float:
        """Token rows of GEMMs on this rank: micro-batch x sequence / cp."""
        return float(self.shape.tokens)

    @property
    def norm_rows(self) -> float:
        """Token rows of norms, residuals and dropouts: sequence parallelism splits them over tp."""
        return float(self.shape.norm_tokens)

    @property
    def mamba_shard(self) -> MambaShard:
        return MambaShard.of(self.model.mamba, self.shape)

    @property
    def gdn_shard(self) -> GdnShard:
        return GdnShard.of(self.model.gdn, self.shape)

    @property
    def flash(self) -> bool:
        return self.train.attention != "unfused"

    # ---- layers ----

    def layer_in_bf16(self, layer: int) -> bool:
        """Whether the run's number format keeps transformer layer `layer` in bf16 (its GEMM inputs kept 16-bit)."""
        fmt = self.shape.number_format
        return fmt is not None and fmt.layer_in_bf16(layer)

    def layer_kinds(self, layers: range) -> LayerGroups:
        """A model chunk's layers (`layers`, in forward order) grouped by what their activations depend on: (blocks,
        fully recomputed, kept in bf16) with the layers of each, in the order each first occurs. Served from the
        LayerCache where the model has one."""
        if self.cache is None:
            return self._layer_kinds(layers)
        return self.cache.served(self.cache.kinds, self.cache.chunk_key(self, layers),
                                 lambda: self._layer_kinds(layers))

    def _layer_kinds(self, layers: range) -> LayerGroups:
        kinds: dict[tuple[LayerKind, bool, bool], list[int]] = {}
        for position, layer in enumerate(layers):  # full recomputation counts layers from the chunk's first
            kind = (self.model.layer_blocks(layer), self.par.recomputes_layer(position), self.layer_in_bf16(layer))
            kinds.setdefault(kind, []).append(layer)
        return tuple((kind, tuple(members)) for kind, members in kinds.items())

    def layer(self, kind: LayerKind, recompute: bool | None = None, in_bf16: bool = False) -> LayerActivations:
        """One layer of `kind` (its blocks, config/hybrid.py); `recompute`: whether full recomputation applies to
        it (default: whenever the strategy recomputes fully); `in_bf16`: a layer the number format keeps in bf16.
        Served from the LayerCache where the model has one."""
        if self.cache is None:
            return self._layer(kind, recompute, in_bf16)
        return self.cache.served(self.cache.known, self.cache.key(self, kind, recompute, in_bf16),
                                 lambda: self._layer(kind, recompute, in_bf16))

    def _layer(self, kind: LayerKind, recompute: bool | None, in_bf16: bool) -> LayerActivations:
        if in_bf16 and self.shape.quantized_bytes:
            twin = copy(self)
            twin.shape = self.shape.in_bf16()
            return twin._layer(kind, recompute, False)
        full = self.par.recompute == "full" if recompute is None else recompute
        parts: dict[str, float] = {}
        for block in kind:
            parts.update(self._block(block))
        saved = {"layer input": self.norm_rows * self.model.hidden_size * self.a} if full else parts
        recreated = self.recreated(kind, saved, full)
        return LayerActivations(saved, self._forward_transient(kind), self._backward_transient(kind, recreated),
                                self.deferred(kind), self.deferred(kind, any_layout=True),
                                self._backward_transient(kind, recreated, any_layout=True))

    # ---- a split backward's weight gradients ----

    def deferred(self, kind: LayerKind, any_layout: bool = False) -> float:
        """Bytes a layer's split backward (ZB-H1's, ZB-V's, DualPipe's B then W) holds from its B until its W: each
        GEMM's input, as its weight gradient reads it (the narrow copy in fp8), and its output gradient (`grad_output`),
        since dW = dY^T X reads both (DualPipe's WeightGradStore keeps the pair; the zero-bubble repository's memory
        model, sail-sg/zero-bubble-pipeline-parallelism runtime.py, lets a pending W hold 32h of a GPT layer's 34h
        bytes a token, which this sum gives too: inputs 2h + 2h + 2h + 8h, output gradients 6h + 2h + 8h + 2h). It
        does not depend on recomputation: what B re-creates from a checkpoint, W still reads. A column-parallel
        GEMM holds its input as its weight gradient reads it, the whole sequence under sequence parallelism
        (`gathered_input`), and its output gradient on its share of the columns; a row-parallel one (the attention's
        projection, fc2, out_proj) reads the whole sequence's output gradient, gathered for B. A tensor two GEMMs
        read (the norm's output, which MLA's two down projections read) counts once. The MoE router defers nothing:
        it is no Transformer Engine module, has no WeightGradStore and computes its weight gradient in B beside its
        input's (Megatron-Core's RouterGatingLinearFunction.backward, moe/moe_utils.py). `any_layout`: on a GPU whose
        FP8 GEMMs read every layout (`grad_output`)."""
        dy = self.grad_output(any_layout)
        return sum(x + dy_bytes for block in kind for x, dy_bytes in self._gemms(block, dy, any_layout))

    def gathered_input(self, width: int, any_layout: bool = False) -> float:
        """Bytes a split backward holds for the W of a column-parallel GEMM whose module gathers its input along the
        sequence (QKV, fc1, the mixers' in_proj, the shared experts' fc1, MTP's eh_proj), `width` elements a token.
        Under sequence parallelism the module re-gathers the rank's saved rows during B, overlapped with the dgrad,
        and hands W the gathered tensor: Transformer Engine's LayerNormLinear and Linear put `ln_out_total` /
        `inputmat_total` in their WeightGradStore (`wgrad_store.put([ln_out_total, grad_output], wgrad_gemm)`), as
        the zero-bubble repository's store keeps Megatron's gathered `total_input`; the rank's own rows are freed
        as B returns. Quantized, that is the one column-wise copy a block-scaled format gathers, or per-tensor fp8's
        gathered row-wise data with the transpose `update_usage(columnwise_usage=True)` makes of it where the GPU's
        FP8 GEMMs read the TN layout only (NumberFormat.copies). Without sequence parallelism: the rank's saved
        input, one copy (`gemm_input`)."""
        fmt = self.shape.number_format
        if not self.shape.sp:
            return self.norm_rows * width * self.gemm_input
        if not self.shape.quantized_bytes or fmt is None:
            return self.rows * width * self.a
        copies = fmt.format.copies(any_layout) if fmt.format.block is None else 1
        return self.rows * width * copies * self.shape.quantized_bytes

    def _gemms(self, block: Block, a: float, any_layout: bool = False) -> list[tuple[float, float]]:
        """(input, output gradient) bytes of each weight-gradient GEMM of a block (an input shared with an earlier
        GEMM of the block: 0), its output gradients `a` bytes an element (`grad_output`)."""
        m, t, g, h = self.model, self.shape.tp, self.gemm_input, self.model.hidden_size
        rows = self.rows
        gathered = self.gathered_input(h, any_layout)
        if block == "attention":
            return self._attention_gemms(a, gathered, any_layout)
        if block == "moe":
            moe = m.moe
            fe = (moe.expert_ffn_hidden_size or m.ffn_hidden_size) // self.shape.expert_tp
            routed = self.routed_rows
            gemms = [(routed * h * g, routed * (2 * fe if m.gated_mlp else fe) * a), (routed * fe * g, routed * h * a)]
            if moe.num_shared_experts:  # fc1 holds its input itself: the router's weight gradient is B's
                fs = (moe.shared_expert_ffn_hidden_size or fe * self.shape.expert_tp) * moe.num_shared_experts // t
                gemms += [(gathered, rows * (2 * fs if m.gated_mlp else fs) * a), (rows * fs * g, rows * h * a)]
            return gemms
        if block == "mamba":
            ms = self.mamba_shard
            return [(gathered, rows * ms.tp_in_proj * a), (rows * ms.tp_inner * g, rows * h * a)]
        if block == "gdn":
            gs = self.gdn_shard
            return [(gathered, rows * gs.tp_in_proj * a), (rows * gs.tp_values * g, rows * h * a)]
        if block == "mtp":
            return [(self.gathered_input(2 * h, any_layout), rows * h * a)]  # eh_proj
        f = m.ffn_hidden_size // t
        return [(gathered, rows * (2 * f if m.gated_mlp else f) * a), (rows * f * g, rows * h * a)]

    def _attention_gemms(self, a: float, gathered: float, any_layout: bool = False) -> list[tuple[float, float]]:
        """QKV (or MLA's down and up projections) and the output projection, output gradients `a` bytes an element,
        QKV's input `gathered` bytes (`gathered_input`). MLA's down projections read the rank's rows ungathered, one
        16-bit tensor, of which each keeps a quantized copy of its own in a narrow format (`_mla_down_inputs`); its
        query projection without a query latent (a column-parallel Linear) and its up projections (LayerNormLinears)
        hold their inputs as `gathered_input`, on a GPU whose FP8 GEMMs read every layout (`any_layout`) or not."""
        m, t, g, h, rows = self.model, self.shape.tp, self.gemm_input, self.model.hidden_size, self.rows
        n, norm_input = m.num_heads // t, self.norm_rows * h * g
        if m.mla is None:
            kv = max(m.kv_heads // t, 1)
            queries = n * (2 if m.attention_output_gate else 1)
            gemms = [(gathered, rows * (queries + 2 * kv) * m.head_size * a)]
            v_dim = m.head_size
        else:
            mla = m.mla
            qk_dim, v_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim, mla.v_head_dim
            own = norm_input if self.shape.quantized_bytes else 0.0  # a second down projection's copy of the input
            gemms = [(norm_input, rows * (mla.kv_lora_rank + mla.qk_rope_head_dim) * a),  # kv down
                     (self.gathered_input(mla.kv_lora_rank, any_layout),
                      rows * n * (mla.qk_nope_head_dim + v_dim) * a)]  # kv up
            if mla.q_lora_rank:  # q down, q up
                gemms += [(own, rows * mla.q_lora_rank * a),
                          (self.gathered_input(mla.q_lora_rank, any_layout), rows * n * qk_dim * a)]
            else:  # the query projection, gathering its input under sequence parallelism
                gemms.append((gathered if self.shape.sp else own, rows * n * qk_dim * a))
        return [*gemms, (rows * n * v_dim * g, rows * h * a)]  # the output projection

    def recreated(self, kind: LayerKind, saved: dict[str, float], full: bool) -> float:
        """Bytes a layer's backward re-creates by recomputation and holds while it runs: what the layer would keep
        recomputing nothing, less what it keeps (`saved`). Full recomputation re-runs the whole layer from its
        input at once; selective recomputation re-runs each recomputed module's checkpoint just before that
        module's backward and frees it after, so the most any one block re-creates (the recomputed core
        attention's scores, softmax and dropout mask, 5as^2b/t in Korthikanti et al.'s bytes; the recomputed MLP's
        fc1, activation and fc2 inputs; the recomputed MoE layer's dispatched tokens and expert activations)."""
        if full:
            plain = {name: value for block in kind for name, value in self._block(block).items()}
            return max(sum(plain.values()) - sum(saved.values()), 0.0)
        if not self.modules:
            return 0.0
        plain = copy(self)
        plain.modules = frozenset()
        return max((sum(plain._block(block).values()) - sum(self._block(block).values()) for block in kind),
                   default=0.0)

    def _block(self, block: Block) -> dict[str, float]:
        if block == "attention":
            return self._attention()
        if block == "moe":
            return self._moe()
        if block == "mamba":
            return self._mamba()
        if block == "gdn":
            return self._gdn()
        if block == "mtp":
            return self._mtp()
        return self._mlp("mlp", self.model.ffn_hidden_size, self.rows, "mlp")

    def _mtp(self) -> dict[str, float]:
        """A multi-token-prediction layer's own part (MultiTokenPredictionLayer): the shifted token ids, the inputs
        of enorm and hnorm, eh_proj's 2h-wide input (the concatenation, gathered inside the GEMM under sequence
        parallelism) and its final norm's input; its transformer layer keeps what the decoder's does."""
        h, a, norm_rows = self.model.hidden_size, self.a, self.norm_rows
        return {"MTP token ids": self.rows * INDEX_BYTES, "MTP norm inputs": 2 * norm_rows * h * a,
                "MTP projection input": norm_rows * 2 * h * self.linear_gathered_input,
                "MTP final norm input": norm_rows * h * a}

    def _mamba(self) -> dict[str, float]:
        """A Mamba-2 layer (Megatron-Core's MambaLayer and MambaMixer on mamba_ssm's memory-efficient path,
        `mamba_split_conv1d_scan_combined`, which keeps the scan's input and its ungated output and recomputes the
        convolution and the states in backward; workload.layer_kernels.MambaShard): the norm's input, in_proj's
        input, the scan's input (z, x, B, C, dt; after context parallelism's all-to-all, the whole sequence of a
        share of the heads), its output before and after the gate, the group RMSNorm's fp32 statistics,
        out_proj's input."""
        ms, a, h = self.mamba_shard, self.a, self.model.hidden_size
        rows = self.rows
        parts = {"Mamba norm input": self.norm_rows * h * a}
        if "layernorm" not in self.modules:
            parts["Mamba GEMM input"] = self.norm_rows * h * self.norm_gemm_input
        parts["Mamba scan input"] = ms.scan_tokens * ms.scan_in_proj * a
        parts["Mamba scan output"] = ms.scan_tokens * ms.inner * a
        parts["Mamba gated output"] = rows * ms.tp_inner * a
        parts["Mamba norm statistics"] = rows * ms.groups * ms.cp * FP32_BYTES
        parts["Mamba output projection input"] = rows * ms.tp_inner * self.gemm_input
        parts["Mamba dropout mask"] = self.norm_rows * h * self.mask
        return parts

    def _gdn(self) -> dict[str, float]:
        """A gated delta net layer (Megatron-Core's GatedDeltaNet on flash-linear-attention's chunk_gated_delta_rule,
        workload.gated_delta): the norm's input, in_proj's input, in_proj's output on the head split (the
        convolution's input and z, beta, alpha), the convolution's output, the kernel's saved q and k (repeated to
        the value heads), v, beta, the decay's fp32 cumulative sum and the chunks' A (C per token and head), the
        kernel's output (the gated norm's input) with its fp32 statistics, out_proj's input."""
        g, a, h = self.gdn_shard, self.a, self.model.hidden_size
        ST, H = g.scan_tokens, g.heads
        parts = {"gated delta net norm input": self.norm_rows * h * a}
        if "layernorm" not in self.modules:
            parts["gated delta net GEMM input"] = self.norm_rows * h * self.norm_gemm_input
        parts["gated delta net in_proj output"] = ST * (g.conv_channels + g.values + 2 * H) * a
        parts["gated delta net convolution output"] = ST * g.conv_channels * a
        parts["gated delta rule inputs"] = ST * H * (2 * g.key_dim + g.value_dim + 1 + g.chunk) * a \
            + ST * H * FP32_BYTES
        parts["gated delta rule output"] = ST * g.values * a + ST * H * FP32_BYTES
        parts["gated delta net output projection input"] = self.rows * g.tp_values * self.gemm_input
        parts["gated delta net dropout mask"] = self.norm_rows * h * self.mask
        return parts

    def _attention(self) -> dict[str, float]:
        m, t, a = self.model, self.shape.tp, self.a
        h, rows, norm_rows = m.hidden_size, self.rows, self.norm_rows
        n = m.num_heads // t
        parts = {"attention norm input": norm_rows * h * a}
        if "layernorm" not in self.modules:  # MLA's down projections are plain Linears behind a norm of its own
            parts["attention GEMM input"] = self._mla_down_inputs() if m.mla else norm_rows * h * self.norm_gemm_input
        if m.mla is None:
            kv, qk_dim, v_dim = max(m.kv_heads // t, 1), m.head_size, m.head_size
            parts["query, key, value"] = rows * (n * qk_dim + kv * (qk_dim + v_dim)) * a
        else:
            mla = m.mla
            qk_dim, v_dim, kv = mla.qk_nope_head_dim + mla.qk_rope_head_dim, mla.v_head_dim, n
            parts["attention latents"] = self._mla_latents()
            if mla.dsa is not None:
                parts.update(self._sparse_attention(n))
            elif "mla_up_proj" not in self.modules:
                parts["query, key, value"] = rows * n * (2 * qk_dim + v_dim) * a
        context_kept = "context" not in self.modules  # else core attention re-runs to rebuild it and its statistics
        if context_kept:
            parts["attention output"] = rows * n * v_dim * a
        if m.attention_output_gate:  # the gate and the output before it, for the product's backward
            parts["attention output gate"] = 2 * rows * n * v_dim * a
        parts.update(self._context_parallel_output(rows * n * v_dim * a))
        if self.shape.quantized_bytes and context_kept:  # the projection's own narrow copy of it
            parts["attention projection input"] = rows * n * v_dim * self.gemm_input
        if context_kept:
            parts.update(self._core_attention(n, kv))
        parts["attention dropout mask"] = norm_rows * h * self.mask
        return parts

    def _mla_down_inputs(self) -> float:
        """What MLA's down projections (Megatron-Core's linear_q_down_proj or linear_q_proj, and linear_kv_down_proj)
        keep of the norm's output they both read: in 16 bits the one tensor; in a narrow format each Transformer
        Engine Linear its own quantized copy (linear.py `inputmat = input_quantizer(inputmat)`, each module with its
        own quantizer: two copies), the query projection's the rank's 16-bit rows where it gathers them in 16 bits
        (`linear_gathered_input`)."""
        mla, rows = self.model.mla, self.norm_rows * self.model.hidden_size
        if not self.shape.quantized_bytes:
            return rows * self.a
        query = self.gemm_input if mla.q_lora_rank else self.linear_gathered_input
        return rows * (self.gemm_input + query)

    def _mla_latents(self) -> float:
        """MLA's latents: each down projection's output and its norm's output, which the up projection keeps
        (Megatron-Core's MLA spec with qk_layernorm makes linear_q_up_proj and linear_kv_up_proj Transformer Engine
        LayerNormLinears: `inputmat`, the 16-bit latent, for the norm's backward, and `ln_out_to_save`, the norm's
        output as the GEMM's weight gradient reads it, `norm_gemm_input` bytes an element, quantized in a narrow
        format). The key-value down projection's output is kept whole, its rotary part too: the up projection's
        input is a view of it. Under DeepSeek sparse attention the key-value latent's up projection is absorbed
        into the attention's products, which read the 16-bit norm output. Each on the down projections' rows: under
        sequence parallelism the rank's share (MLASelfAttention runs the duplicated down projections on s/tp rows,
        and the up projections' modules save their local norm output and all-gather it again for the wgrad,
        layernorm_linear.py `ln_out_needs_gather`), but for sparse attention's key-value norm output, which
        Megatron-Core all-gathers in 16 bits before the attention reads it (AbsorbedMLASelfAttention)."""
        mla, a = self.model.mla, self.a
        local = (mla.kv_lora_rank + mla.qk_rope_head_dim) * a
        gathered = 0.0
        if mla.dsa is None:
            local += mla.kv_lora_rank * self.norm_gemm_input
        else:
            gathered += mla.kv_lora_rank * a
        if mla.q_lora_rank:
            local += mla.q_lora_rank * (a + self.norm_gemm_input)
        return self.norm_rows * local + self.rows * gathered

    def _context_parallel_output(self, output: float) -> dict[str, float]:
        """What Transformer Engine's context-parallel attention keeps beside the output the projection reads (`output`
        bytes): the all-to-all variants the kernel's own, head-split output (AttnFuncWithCPAndQKVOA2A saves it before
        the output's all-to-all); the all-gather the two halves of the output it computes one after the other
        (AttnFuncWithCPAndKVAllGather saves out_per_step, copied into the output it returns). Nothing where core
        attention is recomputed: its checkpoint keeps only its inputs, the kernel's saved tensors re-created."""
        if self.modules & CORE_ATTENTION_MODULES or self.shape.cp == 1:
            return {}
        if self.shape.cp_a2a > 1:
            return {"attention output before the all-to-all": output}
        if self.par.context_parallel_comm == "all_gather" and self.flash:
            return {"attention output halves": output}
        return {}

    def _sparse_attention(self, heads: int) -> dict[str, float]:
        """DeepSeek sparse attention over MLA's MQA form (workload.layer_kernels LayerKernels._sparse_attention): the
        query before its absorption (for that product's weight gradient) and after it, and the attention's latent
        output (for the value up-projection's); the indexer's queries, key and head weights, kept for its loss's
        backward, the selected keys' indices and the loss's fp32 softmax statistics (target and indexer)."""
        mla, a, rows = self.model.mla, self.a, self.rows
        dsa, s = mla.dsa, self.shape.full_seq
        parts = {}
        if "mla_up_proj" not in self.modules:
            absorbed = mla.qk_nope_head_dim + mla.kv_lora_rank + mla.qk_rope_head_dim  # before and after absorption
            parts["absorbed query"] = rows * heads * absorbed * a
        parts["attention latent output"] = rows * heads * mla.kv_lora_rank * a
        parts["indexer query, key, weights"] = rows * (dsa.index_heads * dsa.index_head_dim + dsa.index_head_dim
                                                       + dsa.index_heads) * a
        parts["selected key indices"] = rows * min(dsa.index_topk, s) * INDEX_BYTES
        parts["indexer loss statistics"] = 2 * rows * FP32_BYTES
        return parts

    def _core_attention(self, heads: int, kv_heads: int) -> dict[str, float]:
        """What the attention kernel itself keeps besides Q, K, V and its output."""
        sh = self.shape
        if self.modules & CORE_ATTENTION_MODULES:  # the checkpoint keeps Q, K and V; the kernel re-runs
            return {}
        if self.flash:
            return {"softmax statistics": self.rows * heads * FP32_BYTES}
        scores = sh.batch * heads * sh.seq * sh.full_seq
        dropout = self.model.dropout > 0
        # softmax output; with dropout also its mask and the dropped-out copy P V reads
        return {"attention scores": scores * (self.a * (2 if dropout else 1) + self.mask)}

    def _mlp(self, prefix: str, ffn: int, rows: float, module: str) -> dict[str, float]:
        """A (dense or shared-expert) MLP: its norm (for the dense one), fc1's input, the activation's input
        and fc2's input, and (the dense one's) dropout mask.

        Selective recomputation of the `mlp` module checkpoints `self.mlp` alone (Megatron-Core's
        TransformerLayer._forward_mlp: `tensor_parallel.checkpoint(self.mlp, False, pre_mlp_layernorm_output)`):
        the checkpoint keeps its input, the norm's input where Transformer Engine fuses the norm into fc1
        (LayerNormLinear; pre_mlp_layernorm is then an IdentityOp), and the bias-dropout-add after it (`mlp_bda`)
        runs outside the checkpoint and keeps its mask. `shared_experts` checkpoints the shared experts on the MoE
        layer's norm output, which the router keeps anyway."""
        m, t, a, h = self.model, self.shape.tp, self.a, self.model.hidden_size
        f = ffn // t
        fc1_out = 2 * f if m.gated_mlp else f
        parts: dict[str, float] = {}
        if prefix == "mlp":
            parts["MLP norm input"] = self.norm_rows * h * a
        if module not in self.modules:  # else recomputed from the block's input
            if prefix == "mlp" and "layernorm" not in self.modules:
                parts["MLP GEMM input"] = self.norm_rows * h * self.norm_gemm_input
            if not (prefix == "mlp" and "mlp_in" in self.modules):  # else fc1 and the activation re-run from fc1's
                parts[f"{prefix} activation input"] = rows * fc1_out * a  # input
                parts[f"{prefix} fc2 input"] = rows * f * self.gemm_input
        if prefix == "mlp":
            parts["MLP dropout mask"] = self.norm_rows * h * self.mask
        return parts

    @cached_property
    def routed_rows(self) -> float:
        """Tokens the experts on this rank process per micro-batch: top_k copies of each token, balanced
        over the expert-parallel ranks (a dropless run's average), padded up to the capacity factor if set."""
        return self.shape.balanced_tokens(self.model.moe.top_k) * self.capacity_factor

    def _shared_expert_input(self) -> dict[str, float]:
        """The shared experts' own copy of the MoE norm's output where their fc1 quantizes it: the router saves that
        output 16-bit (Megatron-Core's RouterGatingLinearFunction `ctx.save_for_backward(inp, ...)`: the router is
        no Transformer Engine module), and the shared experts' fc1, a Transformer Engine Linear, saves the copy it
        casts (linear.py `saved_inputmat`, the rank's rows under sequence parallelism, one copy: the row-wise of
        per-tensor fp8 that it gathers, else the column-wise); in 16 bits both keep the one tensor, as where fc1 saves
        the router's 16-bit tensor ungathered for a gather in 16 bits (`sp_16bit_gather`)."""
        if not self.model.moe.num_shared_experts or not self.shape.quantized_bytes or self.sp_16bit_gather:
            return {}
        if "shared_experts" in self.modules:  # recomputed from the checkpoint's (16-bit) input
            return {}
        return {"shared expert GEMM input": self.norm_rows * self.model.hidden_size * self.gemm_input}

    def _moe(self) -> dict[str, float]:
        """An MoE block: its norm's input and output (the router's and the dispatch's input), the router's logits,
        the dispatched tokens, the experts' activation and fc2 inputs, their outputs, the routing, the shared
        experts' (_mlp) and the dropout mask of the bias-dropout-add after the block.

        Selective recomputation of the `moe` module checkpoints the MoE layer (MoELayer.forward, `moe_layer_recompute`):
        the checkpoint keeps its input, the norm's output (a separate norm: the experts fuse none), unless the
        `layernorm` module discards it too; the norm keeps its own input, and the bias-dropout-add after the layer
        (TransformerLayer's `mlp_bda`) runs outside the checkpoint and keeps its mask."""
        m, moe, a, h = self.model, self.model.moe, self.a, self.model.hidden_size
        parts = {"MoE norm input": self.norm_rows * h * a}
        if "moe" in self.modules:
            if "layernorm" not in self.modules:
                parts["MoE checkpoint input"] = self.norm_rows * h * a
            parts["MoE dropout mask"] = self.norm_rows * h * self.mask
            return parts
        if "layernorm" not in self.modules:  # what the router keeps: 16-bit whatever the format (_shared_expert_input)
            parts["MoE router input"] = self.norm_rows * h * a
        parts.update(self._shared_expert_input())
        parts["router logits"] = self.norm_rows * moe.num_experts * FP32_BYTES  # of this rank's own tokens
        routed = self.routed_rows
        parts["dispatched tokens"] = routed * h * self.gemm_input
        fe = moe.expert_ffn_hidden_size or m.ffn_hidden_size
        f = fe // self.shape.expert_tp
        parts["expert activation input"] = routed * (2 * f if m.gated_mlp else f) * a
        if "moe_act" not in self.modules:
            parts["expert fc2 input"] = routed * f * self.gemm_input
        parts["expert outputs"] = routed * h * a
        parts["routing indices and probabilities"] = routed * (INDEX_BYTES + FP32_BYTES)
        if moe.num_shared_experts:
            fs = (moe.shared_expert_ffn_hidden_size or fe) * moe.num_shared_experts
            if "shared_experts" not in self.modules:
                parts.update(self._mlp("shared expert", fs, self.rows, "shared_experts"))
        parts["MoE dropout mask"] = self.norm_rows * h * self.mask
        return parts

    # ---- transients ----

    def _widest(self, kind: LayerKind) -> float:
        """The widest intermediate of a layer: of its MLP fc1's output or its experts' (wider than the attention
        block's in every transformer layer), of an attention layer alone its query, key and value, of a Mamba
        layer in_proj's output with the scan's fp32 chunk states beside it, of DeepSeek sparse attention the
        indexer's scores of a block of queries (INDEXER_QUERY_BLOCK)."""
        m, t = self.model, self.shape.tp
        f = m.ffn_hidden_size // t
        widths = []
        if "mlp" in kind:
            widths.append(self.rows * (2 * f if m.gated_mlp else f) * self.a)
        if "moe" in kind:
            fe = (m.moe.expert_ffn_hidden_size or m.ffn_hidden_size) // self.shape.expert_tp
            widths.append(self.routed_rows * max(fe * (2 if m.gated_mlp else 1), m.hidden_size) * self.a)
        if kind == ("attention",):
            kv = max(m.kv_heads // t, 1)
            widths.append(self.rows * (m.num_heads // t + 2 * kv) * m.head_size * self.a)
        if "mamba" in kind:
            ms = self.mamba_shard
            states = ms.chunks * ms.heads * ms.head_dim * ms.state
            widths.append(ms.scan_tokens * ms.scan_in_proj * self.a + states * FP32_BYTES)
        if "gdn" in kind:  # in_proj's output on the head split, with the states the kernel writes per chunk (16 bits)
            g = self.gdn_shard
            widths.append(g.scan_tokens * g.tp_in_proj // g.cp * self.a
                          + g.chunks * g.heads * g.key_dim * g.value_dim * self.a)
        if "attention" in kind and m.mla is not None and m.mla.dsa is not None:
            sh = self.shape  # the indexer's fp32 scores of one block of the rank's queries against every key
            widths.append(sh.batch * min(sh.seq, INDEXER_QUERY_BLOCK) * sh.full_seq * FP32_BYTES)
        return max(widths)

    def _forward_transient(self, kind: LayerKind) -> float:
        """A forward holds, beyond what it keeps, the GEMM output it is writing (the widest) and, with tensor
        parallelism, a block's whole-sequence input or output beside it: without sequence parallelism the row-parallel
        GEMM's 16-bit output its all-reduce works on in place; under sequence parallelism the column-parallel GEMM's
        input, all-gathered as `sp_gathered_input` bytes an element and freed after the GEMM (Transformer Engine's
        LayerNormLinear and Linear forward: `gather_along_first_dim(ln_out, tp_group, quantizer=quantizer)`, then
        `clear_tensor_data(ln_out_total)`), or, where more, the row-parallel GEMM's 16-bit output of the whole
        sequence with the rank's reduce-scattered share of it (`reduce_scatter_along_first_dim(out, tp_group)`). A
        gather in 16 bits (`sp_16bit_gather`) holds the gathered 16-bit tensor with the quantized copy it is cast into
        before the GEMM runs (gather_along_first_dim's `out = quantizer(out)`)."""
        if self.shape.tp == 1:
            return self._widest(kind)
        h = self.model.hidden_size
        if not self.shape.sp:
            return self._widest(kind) + self.rows * h * self.a
        gathered = self.rows * h * self.sp_gathered_input
        cast = self.rows * h * (self.a + self.sp_gathered_input) if self.sp_16bit_gather else 0.0
        return max(self._widest(kind) + gathered, (self.rows + self.norm_rows) * h * self.a, cast)

    @property
    def sp_gathered_input(self) -> float:
        """Bytes per element of a column-parallel GEMM's input as its forward all-gathers it along the sequence: the
        row-wise quantized copy of a narrow format (Transformer Engine quantizes the rank's rows and gathers the narrow
        data, `quantizer.set_usage(rowwise=True, columnwise=False)` before `gather_along_first_dim`: one byte an
        element of per-tensor fp8, with block scales for a block-scaled format; for a gather in 16 bits the copy
        cast from it, `sp_16bit_gather`), else its 16 bits."""
        return self.shape.quantized_bytes or self.a

    def _backward_transient(self, kind: LayerKind, recreated: float, any_layout: bool = False) -> float:
        """A backward holds the gradient of the widest intermediate and of its input at once, and the 16-bit
        "dummy" weight gradient Megatron-Core and Transformer Engine hand autograd when the real one is
        accumulated straight into the fp32 main_grad (gradient_accumulation_fusion;
        megatron/core/tensor_parallel/layers.py) for the largest weight; under full or selective recomputation
        also what recomputation re-creates for the layer (`recreated`); under sequence parallelism the input of the
        GEMM whose output gradient is the widest, re-gathered for its weight gradient (`_regathered`), on a GPU whose
        FP8 GEMMs read every layout (`any_layout`) or not."""
        return (2 * self._widest(kind) + self.largest_weight(kind) * self.a + recreated
                + self._regathered(kind, any_layout))

    def _regathered(self, kind: LayerKind, any_layout: bool = False) -> float:
        """Under sequence parallelism, the whole-sequence input the backward of the widest GEMM's module re-gathers
        for its weight gradient and holds through its dgrad (Transformer Engine's LayerNormLinear and Linear
        backward: `gather_along_first_dim` of the saved rows, async beside the dgrad GEMM, `ln_out_total` freed
        after the wgrad; `gathered_input` its bytes): fc1's, a mixer's in_proj's, an attention-only layer's QKV.
        None for an MoE layer, whose experts' inputs come from the dispatcher, nor for MLA's attention alone. Per-tensor
        fp8 holds the gathered row-wise data and, on a GPU whose FP8 GEMMs read the TN layout only (Hopper's), the
        transpose `ln_out_total.update_usage(columnwise_usage=True)` makes of it; none where they read every layout
        (`any_layout`, Blackwell's data-center parts: Float8TensorStorage.update_usage keeps the data alone there,
        NumberFormat.copies)."""
        m = self.model
        if not self.shape.sp or "moe" in kind or (kind == ("attention",) and m.mla is not None):
            return 0.0
        return self.gathered_input(m.hidden_size, any_layout)

    def largest_weight(self, kind: LayerKind) -> float:
        """Parameters of the layer's largest GEMM weight on this rank (all local experts' for a grouped GEMM): the
        MLP's or the experts', else the Mamba in_proj's, else the attention's QKV."""
        m, t, h = self.model, self.shape.tp, self.model.hidden_size
        gate = 2 if m.gated_mlp else 1
        if "moe" in kind:
            fe = (m.moe.expert_ffn_hidden_size or m.ffn_hidden_size) // self.shape.expert_tp
            return gate * fe * h * m.moe.num_experts // self.shape.ep
        if "mlp" in kind:
            return gate * m.ffn_hidden_size // t * h
        if "mamba" in kind:
            return m.mamba.in_proj_width // t * h
        if "gdn" in kind:
            return m.gdn.in_proj_width // t * h
        queries = m.num_heads // t * (2 if m.attention_output_gate else 1)
        return (queries + 2 * max(m.kv_heads // t, 1)) * m.head_size * h

    # ---- first and last stage ----

    def embedding(self) -> dict[str, float]:
        """The first stage keeps the token ids and the embedding dropout's mask."""
        return {"token ids": self.rows * INDEX_BYTES,
                "embedding dropout mask": self.norm_rows * self.model.hidden_size * self.mask}

    def head(self) -> dict[str, float]:
        """The last stage keeps the final norm's input, the LM head's input, the logits and what the cross
        entropy keeps, and the LM head's input, logits and loss again for each multi-token-prediction depth:
        Megatron's vocab-parallel loss keeps an fp32 softmax beside the 16-bit logits
        (megatron/core/tensor_parallel/cross_entropy.py); the fused loss (cross_entropy_loss_fusion) writes
        the gradient into the logits."""
        h, a = self.model.hidden_size, self.a
        depths = 1 + self.model.mtp_layers  # each multi-token-prediction depth's logits and loss as well
        logits = depths * self.rows * self.shape.vocab_shard
        parts = {"final norm input": self.norm_rows * h * a, "LM head input": depths * self.norm_rows * h * a,
                 "logits": logits * a}
        if self.train.cross_entropy == "vocab_parallel":
            parts["softmax (fp32)"] = logits * FP32_BYTES
        return parts

    def head_deferred(self) -> float:
        """What the LM head's split backward holds until its W: its input and the logits' gradient, at each
        multi-token-prediction depth (as `deferred`)."""
        depths = 1 + self.model.mtp_layers
        return depths * (self.norm_rows * self.model.hidden_size * self.a + self.rows * self.shape.vocab_shard * self.a)

    def head_transient(self) -> float:
        """The loss's forward works on an fp32 copy of the logits."""
        return self.rows * self.shape.vocab_shard * FP32_BYTES

    def vocabulary_weight_gradient(self) -> float:
        """The 16-bit gradient of the word embedding (or of the LM head: its dummy weight gradient), V/t x h,
        held while it is added to the fp32 main_grad."""
        return self.shape.vocab_shard * self.model.hidden_size * self.a
