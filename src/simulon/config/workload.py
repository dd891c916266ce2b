"""Workload block: the model architecture, the parallel strategy and the training batch."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .common import (
    FLASH_IMPLEMENTATIONS,
    BatchSize,
    CapacityFactor,
    DType,
    ExpertCount,
    FieldError,
    GPUCount,
    HeadCount,
    LaxDType,
    LayerCount,
    MicrobatchCount,
    OptionalExpertCount,
    OptionalLayerCount,
    ParameterCount,
    Probability,
    SequenceLength,
    StrictModel,
    VocabSize,
    Width,
    training_dtype,
)
from .frameworks import workload_defaults, zero_stage
from .hf import file_error, resolve_from_hf
from .hybrid import (
    DENSE_LAYER,
    HYBRID_SYMBOLS,
    MOE_LAYER,
    MTP_BLOCK,
    PIPELINE_MARK,
    GatedDeltaNetSpec,
    LayerKind,
    MambaSpec,
    check_pattern,
    split_mtp,
)
from .number_formats import NUMBER_FORMATS, fp8_recipe_named
from .pipeline_layout import PipelineSplit, idle_virtual_stages, layout_chunks, split_given, virtual_stage_layers
from .resolve import FRAMEWORK_NAMES, refuse_long_numbers, resolve_framework
from .templates import Templated


def _list_as_tuple(value: Any) -> Any:
    """A YAML list kept as a tuple: config blocks are hashable."""
    return tuple(value) if isinstance(value, list) else value


def _two_cp_sizes(value: Any) -> Any:
    """[all-to-all ranks, ring ranks] as a tuple; a list of another length is refused as one problem (pydantic
    named the missing item, or a tuple 'after validation')."""
    if isinstance(value, list | tuple) and len(value) != 2:
        raise ValueError(f"{list(value)}: it takes two entries, [all-to-all ranks, ring ranks], not {len(value)}")
    return _list_as_tuple(value)


CPSizes = Annotated[tuple[GPUCount, GPUCount], BeforeValidator(_two_cp_sizes)]
"""[all-to-all ranks, ring ranks] of hierarchical context parallelism, written as a YAML list."""
LayerFlags = Annotated[tuple[Literal[0, 1], ...], BeforeValidator(_list_as_tuple)]
"""A 0 or 1 per layer, written as a YAML list."""


class MoESpec(StrictModel):
    """Mixture of experts: routed experts (top-k), optional shared experts, dense first layers."""

    num_experts: ExpertCount = Field(description="routed experts per MoE layer")
    top_k: ExpertCount = Field(description="routed experts each token goes to")
    expert_ffn_hidden_size: Width | None = Field(None, description="default: the model's ffn")
    num_shared_experts: OptionalExpertCount = Field(0, description="experts every token goes to, beside the routed")
    shared_expert_ffn_hidden_size: Width | None = Field(None, description="each shared expert's FFN width "
                                                        "(default: a routed expert's); given without "
                                                        "num_shared_experts, one shared expert that wide")
    first_dense_layers: OptionalLayerCount = Field(0, description="leading layers with a dense MLP in place of "
                                                   "experts (DeepSeek-V3: 3)")
    capacity_factor: CapacityFactor | None = Field(
        None, description="expert capacity as a multiple of the balanced load, tokens padded up to it "
        "(Megatron's --moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity); default dropless")
    num_groups: ExpertCount = Field(
        1, description="node-limited routing (DeepSeek-V3, arXiv 2412.19437 section 2.1.2): the routed experts "
        "fall into this many equal groups, in order (HF n_group, Megatron's --moe-router-num-groups)")
    group_topk: ExpertCount = Field(
        1, description="groups each token's top_k experts are chosen among (HF topk_group, Megatron's "
        "--moe-router-group-topk); with num_groups 1, all experts")
    layer_freq: LayerCount | LayerFlags = Field(
        1, description="which layers after the first dense ones are MoE layers (Megatron's --moe-layer-freq): N, "
        "every N-th layer counting from the first (layer i when i % N == 0; the others dense MLPs), or one 0 "
        "(dense) or 1 (MoE) per layer")

    @model_validator(mode="before")
    @classmethod
    def _one_shared_expert_of_the_width_given(cls, data: object) -> object:
        """A shared expert's width without a count is one shared expert that wide, as Megatron-Core reads
        --moe-shared-expert-intermediate-size (it has no count: the width is all the shared experts together)
        and HF's Qwen2-MoE reads shared_expert_intermediate_size."""
        if isinstance(data, dict) and data.get("shared_expert_ffn_hidden_size") is not None \
                and "num_shared_experts" not in data:
            return {**data, "num_shared_experts": 1}
        return data

    @field_validator("layer_freq", mode="before")
    @classmethod
    def _flags_are_flags(cls, value: object) -> object:
        """A list of other numbers than 0 and 1 is refused as one problem (each item was tried as both branches of
        the union and reported as a list of problems)."""
        if isinstance(value, list | tuple):
            for i, item in enumerate(value):
                if isinstance(item, bool) or item not in (0, 1):
                    raise ValueError(f"a list gives one 0 (dense) or 1 (MoE) per layer, but item {i} is {item!r}; "
                                     "for every N-th layer write the number N")
        return value

    @model_validator(mode="after")
    def _top_k_fits(self) -> MoESpec:
        if self.top_k > self.num_experts:
            raise FieldError("top_k", f"{self.top_k} exceeds num_experts ({self.num_experts})")
        if self.num_experts % self.num_groups:
            raise FieldError("num_groups", f"{self.num_groups} does not divide num_experts ({self.num_experts})")
        if self.group_topk > self.num_groups:
            raise FieldError("group_topk", f"{self.group_topk} exceeds num_groups ({self.num_groups})")
        if self.top_k > self.routable_experts:
            raise FieldError("top_k", f"{self.top_k} exceeds the {self.routable_experts} experts of group_topk "
                             f"({self.group_topk}) groups")
        if self.shared_expert_ffn_hidden_size is not None and not self.num_shared_experts:
            raise FieldError("shared_expert_ffn_hidden_size", f"{self.shared_expert_ffn_hidden_size} sizes shared "
                             "experts, but num_shared_experts is 0; leave one of them out")
        return self

    def is_moe_layer(self, layer: int) -> bool:
        """Whether transformer layer `layer` (0-based) holds the experts: past the first dense layers, where
        layer_freq puts one (Megatron's moe_layer_pattern, megatron/core/transformer/transformer_block.py)."""
        if layer < self.first_dense_layers:
            return False
        if isinstance(self.layer_freq, int):
            return layer % self.layer_freq == 0
        return bool(self.layer_freq[layer])

    @property
    def routable_experts(self) -> int:
        """Experts a token's top_k are chosen among once its groups are chosen."""
        return self.group_topk * (self.num_experts // self.num_groups)


class DSASpec(StrictModel):
    """DeepSeek sparse attention (DeepSeek-AI 2025, the DeepSeek-V3.2-Exp report, section 2.1; Megatron-Core's
    experimental_attention_variant "dsa", megatron/core/transformer/experimental_attention_variant/dsa.py): a
    lightning indexer scores every earlier token for each query with a few small heads (ReLU of q_i . k_s per head,
    weighted by the query's own head weights, summed), and the attention reads only the `index_topk` best keys of
    each query, in MLA's MQA form (keys and values the shared latent). HF config.json names: index_n_heads,
    index_head_dim, index_topk; Megatron's: dsa_indexer_n_heads, dsa_indexer_head_dim, dsa_indexer_topk."""

    index_heads: HeadCount = Field(description="the indexer's query heads H_I (DeepSeek-V3.2: 64)")
    index_head_dim: Width = Field(description="the indexer's query and key size d_I (DeepSeek-V3.2: 128)")
    index_topk: SequenceLength = Field(description="keys each query attends to (DeepSeek-V3.2: 2,048)")


class SlidingWindowSpec(StrictModel):
    """Sliding-window attention: a windowed layer's query attends to itself and the size - 1 tokens before it
    (Megatron-Core's window_size, HF sliding_window; GPT-OSS 128). `full_every`: every such-numbered layer, counting
    from 1, attends to the whole causal context instead (Megatron's window_attn_skip_freq; GPT-OSS 2: layers 1, 3, ...
    of 0-based ids are full, HF layer_types alternating from sliding_attention); 0: every layer windowed.

    `chunked`: the window is a chunk instead, Llama 4's chunked attention (HF attention_chunk_size, layer_types
    chunked_attention; Llama 4 8,192 tokens in three layers of four): the sequence cut into chunks of `size` tokens,
    a query attending to the earlier tokens of its own chunk alone (Llama4TextAttention's chunked causal mask), each
    chunk a causal attention of its own."""

    size: SequenceLength = Field(description="tokens a windowed query attends to, itself included (chunked: the "
                                 "chunk's length)")
    full_every: OptionalLayerCount = Field(0, description="every such-numbered layer (from 1) attends to the whole "
                                           "context; 0: every layer windowed")
    chunked: bool = Field(False, description="attention within fixed chunks of `size` tokens (Llama 4's chunked "
                          "attention) in place of a sliding window")

    def windowed(self, layer: int) -> bool:
        """Whether decoder layer `layer` (0-based) attends through the window."""
        return self.full_every == 0 or (layer + 1) % self.full_every != 0


class MLASpec(StrictModel):
    """Multi-head latent attention (DeepSeek-V2/V3): low-rank query and key/value projections."""

    q_lora_rank: Width | None = Field(None, description="rank of the query's down-projection; none: the query "
                                      "projected directly")
    kv_lora_rank: Width = Field(description="rank of the compressed key/value latent")
    qk_nope_head_dim: Width = Field(description="per head, the query and key dimensions without rotary embedding")
    qk_rope_head_dim: Width = Field(description="per head, the query and key dimensions with rotary embedding")
    v_head_dim: Width = Field(description="per head, the value dimension")
    dsa: DSASpec | None = Field(None, description="DeepSeek sparse attention over this MLA (DeepSeek-V3.2); "
                                "none: every query attends to every earlier key")

    @model_validator(mode="after")
    def _indexer_rope_fits(self) -> MLASpec:
        if self.dsa is not None and self.dsa.index_head_dim < self.qk_rope_head_dim:
            raise FieldError("dsa.index_head_dim", f"{self.dsa.index_head_dim} is less than qk_rope_head_dim "
                             f"({self.qk_rope_head_dim}): the indexer's heads carry the rotary part (DSAIndexer "
                             "_apply_rope splits them into it and the rest)")
        return self


class ModelSpec(Templated):
    """A decoder-only transformer. Named models fill unset fields from their template."""

    template_kind: ClassVar[str] = "model"
    other_sources: ClassVar[str] = (
        "`from_hf:` builds the block from a HuggingFace `config.json` (a path to the file, or to a checkpoint folder "
        "holding one): its shape, attention, experts, MLA, Mamba or gated-delta-net layers and sliding windows "
        "(config/hf.py says which keys); any key below overrides the file's, and `from:` beside it is refused. A "
        "model template file may hold it too, its path relative to that file.")

    name: str = Field("custom", description="its name: a shipped template's (`llama-3-70b`) fills the unset keys")
    num_layers: LayerCount = Field(description="decoder layers")
    hidden_size: Width = Field(description="model width (d_model)")
    num_heads: HeadCount = Field(description="attention (query) heads")
    num_kv_heads: HeadCount | None = Field(None, description="GQA groups; default num_heads")
    head_dim: Width | None = Field(None, description="default hidden_size / num_heads")
    ffn_hidden_size: Width = Field(description="the MLP's inner width (each of the gate and up projections' under "
                                   "a gated activation)")
    vocab_size: VocabSize = Field(description="tokens in the vocabulary (before training.make_vocab_size_divisible_by "
                                  "pads it)")
    activation: Literal["gelu", "relu", "squared_relu", "swiglu", "geglu"] = Field(
        "gelu", description="the MLP's activation; swiglu and geglu gate it, three GEMMs in place of two")
    normalization: Literal["layernorm", "rmsnorm"] = Field("layernorm", description="the layers' norm")
    tie_embeddings: bool = Field(False, description="the output layer shares the input embedding's weights")
    dropout: Probability = Field(0.0, description="hidden and attention dropout: with any, each dropout keeps a "
                                 "one-byte mask per element for backward (Megatron's GPT models: 0.1, Llama: 0)")
    position_embedding: Literal["learned", "rope", "alibi", "none"] = Field(
        "learned", description="how attention sees positions: learned absolute positions added to the embedding "
        "(Megatron-LM's default, GPT-2, GPT-3, OPT), rotary embeddings applied to each layer's queries and keys "
        "(Llama, Mistral, Qwen, Gemma: one fused kernel over each, forward and backward), ALiBi biases inside the "
        "attention kernel (BLOOM, MPT), or none (Nemotron-H)")
    nope_every: OptionalLayerCount = Field(
        0, description="with rotary embeddings, every such-numbered layer (counting from 1) rotates nothing, a NoPE "
        "layer (Llama 4: every 4th, HF no_rope_layers and no_rope_layer_interval, its layers whose attention sees the "
        "whole context); 0: every layer rotates")
    moe: MoESpec | None = Field(None, description="mixture of experts in place of the dense MLP; none: dense")
    mla: MLASpec | None = Field(None, description="multi-head latent attention in place of (GQA) attention")
    mamba: MambaSpec | None = Field(None, description="the Mamba-2 mixer of the hybrid pattern's M layers")
    gdn: GatedDeltaNetSpec | None = Field(None, description="the gated delta net of the hybrid pattern's G layers")
    sliding_window: SlidingWindowSpec | None = Field(
        None, description="sliding-window attention of some or all layers (Megatron-Core's window_size and "
        "window_attn_skip_freq; HF sliding_window and layer_types): {size: tokens, full_every: N}")
    attention_output_gate: bool = Field(False, description="each attention head's output multiplied by the sigmoid "
                                        "of a gate its query projection also makes (Megatron-Core's "
                                        "attention_output_gate; Qwen3-Next's and Qwen3.5's gated attention)")
    hybrid_pattern: Annotated[str, AfterValidator(check_pattern)] | None = Field(
        None, description="a hybrid model's layers, one symbol each (Megatron's --hybrid-override-pattern, HF "
        "hybrid_override_pattern): M Mamba, G gated delta net, * attention, - MLP, E mixture of experts; its length "
        "is num_layers; after '/', each multi-token-prediction depth's blocks (Megatron's unified pattern, "
        "'M*M-/*E'). Default: every layer a transformer layer (attention, then MLP or MoE)")
    mtp_layers: OptionalLayerCount = Field(
        0, description="multi-token-prediction depths after the decoder (Megatron-Core's mtp_num_layers, HF "
        "num_nextn_predict_layers; DeepSeek-V3: 1): each a projection of the hidden state with the embedding of the "
        "token one further ahead, a transformer layer like the decoder's last (a hybrid's: the blocks its pattern "
        "gives after '/'), and one more pass of the output head and loss")

    @model_validator(mode="before")
    @classmethod
    def _from_hf(cls, data: Any, info: ValidationInfo) -> Any:
        """`from_hf: config.json` builds the block from a HuggingFace config (config/hf.py)."""
        if not (isinstance(data, dict) and "from_hf" in data):
            return data
        read = resolve_from_hf(data, (info.context or {}).get("base_dir"))
        try:  # the file's own keys named where they disagree, not the fields they became
            cls.model_validate(read.merged, context=info.context)
        except ValidationError as exc:
            first = sorted(exc.errors(include_url=False), key=lambda e: e["type"] == "missing")[0]
            found = file_error(read, first)
            if found is not None:
                raise found from None
        return read.merged

    @classmethod
    def _from_file(cls, doc: dict[str, Any], folder: Path) -> dict[str, Any]:
        """A model template file's from_hf read as a scenario's is, its path relative to the file."""
        return resolve_from_hf(doc, folder).merged if "from_hf" in doc else doc

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_heads

    @property
    def head_size(self) -> int:
        return self.head_dim or self.hidden_size // self.num_heads

    @property
    def gated_mlp(self) -> bool:
        return self.activation in ("swiglu", "geglu")

    @model_validator(mode="after")
    def _shapes_agree(self) -> ModelSpec:
        if self.head_dim is None and self.mla is None and self.hidden_size % self.num_heads:  # MLA sizes its own
            raise FieldError("num_heads", f"{self.num_heads} does not divide hidden_size "
                             f"{self.hidden_size}; give head_dim explicitly")
        if self.num_heads % self.kv_heads:
            raise FieldError("num_kv_heads", f"{self.kv_heads} does not divide num_heads {self.num_heads}")
        if self.moe and self.moe.first_dense_layers > self.num_layers:
            raise FieldError("moe.first_dense_layers", f"{self.moe.first_dense_layers} exceeds "
                             f"num_layers ({self.num_layers})")
        if self.moe and isinstance(self.moe.layer_freq, tuple) and len(self.moe.layer_freq) != self.num_layers:
            raise FieldError("moe.layer_freq", f"has {len(self.moe.layer_freq)} entries, one per layer, but "
                             f"num_layers is {self.num_layers}")
        if self.moe and not any(self.moe.is_moe_layer(i) for i in range(self.num_layers)) and \
                self.hybrid_pattern is None:
            raise FieldError("moe", "no layer is a mixture-of-experts layer (first_dense_layers and layer_freq "
                             "leave none)")
        self._check_hybrid()
        if self.attention_output_gate and self.mla is not None:
            raise FieldError("attention_output_gate", "with multi-head latent attention (mla) is not modelled")
        if self.sliding_window is not None and self.mla is not None:
            raise FieldError("sliding_window", "with multi-head latent attention (mla) is not modelled")
        if self.nope_every and self.position_embedding != "rope":
            raise FieldError("nope_every", f"is {self.nope_every}, but position_embedding is "
                             f"{self.position_embedding}: NoPE layers are the layers of a rotary model that do not "
                             "rotate")
        return self

    def rotates(self, layer: int) -> bool:
        """Whether layer `layer` (0-based; a multi-token-prediction layer as the decoder's last) rotates its queries
        and keys: a rotary model's layers but its NoPE ones (nope_every)."""
        if self.position_embedding != "rope":
            return False
        return self.nope_every == 0 or (min(layer, self.num_layers - 1) + 1) % self.nope_every != 0

    def _check_hybrid_mtp(self) -> None:
        """A hybrid's multi-token-prediction layers are the depths its pattern gives after '/' (Megatron's unified
        pattern), mtp_layers of them, or none where mtp_layers is 0 (the model trained without them)."""
        depths = split_mtp(self.hybrid_pattern or "")[2]
        if self.mtp_layers and not depths:
            raise FieldError("mtp_layers", f"is {self.mtp_layers}, but a hybrid model's multi-token-prediction layers "
                             "need their blocks: give them after '/' in hybrid_pattern, one depth each (Megatron's "
                             "unified pattern, 'M*M-/*E' for one depth of attention then experts)")
        if depths and self.mtp_layers not in (0, depths):
            raise FieldError("mtp_layers", f"is {self.mtp_layers}, but hybrid_pattern gives {depths} "
                             f"multi-token-prediction depth{'s' * (depths > 1)} after '/'")
        if depths and "mtp_layers" not in self.model_fields_set:
            raise FieldError("mtp_layers", f"is needed with hybrid_pattern's {depths} multi-token-prediction "
                             f"depth{'s' * (depths > 1)} after '/': {depths} to train them, 0 to leave them out")

    def _check_hybrid(self) -> None:
        """A hybrid pattern has a symbol per layer and the blocks its symbols name; a Mamba mixer needs M layers."""
        if self.hybrid_pattern is None:
            for block, symbol in (("mamba", "M"), ("gdn", "G")):
                if getattr(self, block) is not None:
                    raise FieldError("hybrid_pattern",
                                     f"is needed with {block}: it says which layers ({symbol}) run it")
            return
        self._check_hybrid_mtp()
        pattern = self.layer_symbols
        if len(pattern) != self.num_layers:
            raise FieldError("hybrid_pattern", self._length_problem(len(pattern)))
        for symbol, block, needs in (("M", "mamba", self.mamba), ("G", "gdn", self.gdn), ("E", "moe", self.moe)):
            if symbol in pattern + self.mtp_symbols and needs is None:
                raise FieldError("hybrid_pattern", f"has {symbol} layers but the model has no {block} block")
        if self.mamba is not None and "M" not in pattern:
            raise FieldError("mamba", "is given but no layer of hybrid_pattern is a Mamba layer (M)")
        if self.gdn is not None and "G" not in pattern:
            raise FieldError("gdn", "is given but no layer of hybrid_pattern is a gated delta net layer (G)")
        if self.moe is not None and "E" not in pattern:
            raise FieldError("moe", "is given but no layer of hybrid_pattern is a mixture-of-experts layer (E)")
        if self.moe is not None and (self.moe.first_dense_layers or self.moe.layer_freq != 1):
            field = "first_dense_layers" if self.moe.first_dense_layers else "layer_freq"
            raise FieldError(f"moe.{field}", "does not apply to a hybrid model: its pattern says which layers are "
                             "MLP (-) and which mixture-of-experts (E) layers")

    def _length_problem(self, symbols: int) -> str:
        """Why a hybrid pattern of `symbols` layer symbols does not fit num_layers, and how to change the depth: the
        pattern lays out every layer, so num_layers alone cannot (a template's or a file's pattern stays as it is)."""
        paired = ""
        if self.gdn is not None:  # Qwen3-Next's and Qwen3.5's layers, mixer then MLP, are single blocks here
            paired = (f"; a layer as HuggingFace counts a gated-delta-net model's (mixer, then MLP or experts) is two "
                      f"symbols here, so its {symbols // 2} layers are {symbols}")
        return (f"has {symbols} layer symbols, one per layer, but num_layers is {self.num_layers}: the pattern lays "
                f"out every layer, so to change the depth give both, num_layers: N and a hybrid_pattern of N symbols"
                f"{paired}")

    @cached_property
    def layer_symbols(self) -> str:
        """The hybrid pattern's symbols, one per decoder layer (its pipeline marks and its multi-token-prediction
        depths left out)."""
        return split_mtp(self.hybrid_pattern or "")[0].replace(PIPELINE_MARK, "")

    @property
    def mtp_symbols(self) -> str:
        """The blocks of a hybrid's multi-token-prediction layer, after its MTP block: the symbols of one depth its
        pattern gives after '/' (blank: none given)."""
        return split_mtp(self.hybrid_pattern or "")[1]

    @property
    def pattern_segments(self) -> tuple[int, ...] | None:
        """Layers of each virtual pipeline stage the hybrid pattern's `|` marks cut it into (None: no marks)."""
        decoder = split_mtp(self.hybrid_pattern or "")[0]
        if PIPELINE_MARK not in decoder:
            return None
        return tuple(len(segment) for segment in decoder.split(PIPELINE_MARK))

    def stage_layers(self, par: PipelineSplit, mtp: bool = True) -> tuple[int, ...]:
        """Layers of every virtual stage under `par` (config.pipeline_layout.virtual_stage_layers): by the hybrid
        pattern's `|` segments where it has them, the multi-token-prediction layers counted where they run (`mtp`).
        A pattern with Mamba layers is Megatron's hybrid model, whose pipeline takes vpp only from `|` marks; one of
        gated delta nets and attention alone (Qwen3-Next, Qwen3.5) Megatron-Bridge builds as a GPTModel of per-layer
        specs (qwen3_next_bridge.py), which interleaves as any GPT does."""
        return virtual_stage_layers(par, self.num_layers, self.pattern_segments, self.mtp_layers if mtp else 0,
                                    hybrid=self.mamba is not None)

    @property
    def all_layers(self) -> int:
        """The decoder's layers and the multi-token-prediction layers after them, which take the ids num_layers
        onwards."""
        return self.num_layers + self.mtp_layers

    def is_mtp_layer(self, layer: int) -> bool:
        return layer >= self.num_layers

    def windows_bind(self, seq: int) -> bool:
        """Whether a sliding window (or Llama 4's chunk) is shorter than a sequence of `seq` tokens: where it is not,
        every layer is plain causal attention (LayerKernels' attention core), as context parallelism's ring runs it."""
        return self.sliding_window is not None and self.sliding_window.size < seq

    def windowed(self, layer: int) -> bool:
        """Whether layer `layer` attends through a sliding window (a multi-token-prediction layer as the decoder's
        last)."""
        if self.sliding_window is None:
            return False
        return self.sliding_window.windowed(min(layer, self.num_layers - 1))

    def layer_blocks(self, layer: int) -> LayerKind:
        """The blocks of layer `layer` (0-based) in forward order (config/hybrid.py); a multi-token-prediction
        layer (ids from num_layers) is the MTP block and a transformer layer of the decoder's last layer's kind,
        as Megatron-Core builds it (and counts it: num_floating_point_operations's last_layer_is_moe)."""
        if 0 <= layer < self.all_layers:
            return self.all_layer_blocks[layer]
        return self._blocks_of(layer)

    @cached_property
    def all_layer_blocks(self) -> tuple[LayerKind, ...]:
        """Every layer's blocks (layer_blocks), worked out once: the memory model and the estimate ask per layer,
        per strategy a search weighs."""
        return tuple(self._blocks_of(layer) for layer in range(self.all_layers))

    def _blocks_of(self, layer: int) -> LayerKind:
        if self.is_mtp_layer(layer) and self.hybrid_pattern is not None:  # the blocks of its depth's pattern
            return (MTP_BLOCK, *(block for symbol in self.mtp_symbols for block in HYBRID_SYMBOLS[symbol]))
        if self.is_mtp_layer(layer):
            return (MTP_BLOCK, *self._blocks_of(self.num_layers - 1))
        if self.hybrid_pattern is not None:
            return HYBRID_SYMBOLS[self.layer_symbols[layer]]
        return MOE_LAYER if self.moe is not None and self.moe.is_moe_layer(layer) else DENSE_LAYER

    @cached_property
    def layer_kinds(self) -> tuple[LayerKind, ...]:
        """The distinct kinds of layer of the model, in order of first appearance."""
        return tuple(dict.fromkeys(self.all_layer_blocks))

    @property
    def has_attention(self) -> bool:
        return any("attention" in kind for kind in self.layer_kinds)


RecomputeModule = Literal["core_attn", "context", "mlp", "mlp_in", "moe_act", "layernorm", "mla_up_proj", "moe",
                          "shared_experts"]
"""Megatron-Core's selective-recompute modules (megatron/core/transformer/transformer_config.py,
`recompute_modules`), and two that JAX's remat policies give, which keep the tensors they name and re-run the rest:
`context`, core attention's output not kept either (MaxText's checkpoint name for it): core attention re-runs to
rebuild the output projection's input, where Megatron's `core_attn` keeps that output (the projection holds it);
`mlp_in`, the MLP's input projections and activation (MaxText's `mlpwi`). fc2 is not re-run: its backward needs
its input, not its output, and JAX drops what no gradient needs (jax.checkpoint's dead-code elimination), where
Megatron's `mlp` checkpoint re-runs the whole MLP."""
RECOMPUTE_MODULES: tuple[str, ...] = get_args(RecomputeModule)
RECOMPUTED_PARTS: dict[str, tuple[str, Callable[[ModelSpec], bool]]] = {
    "mla_up_proj": ("multi-latent attention (model.mla)", lambda model: model.mla is not None),
    "moe": ("experts (model.moe)", lambda model: model.moe is not None),
    "moe_act": ("experts (model.moe)", lambda model: model.moe is not None),
    "shared_experts": ("shared experts (model.moe.num_shared_experts)",
                       lambda model: model.moe is not None and model.moe.num_shared_experts > 0),
}
"""The recompute modules that re-run a part not every model has: what they re-run, and whether a model has it.
Megatron-Core refuses mla_up_proj without multi-latent attention and moe_act without grouped experts
(TransformerConfig.__post_init__); listed on a model without the part, any of them would re-run nothing."""
CORE_ATTENTION_MODULES = frozenset({"core_attn", "context"})
"""The modules that re-run core attention itself (the tracer re-runs it in place); the others name the forward
kernels they re-run (workload.layer_kernels LayerKernels.recomputed)."""


ScheduleName = Literal["1f1b", "interleaved_1f1b", "zb_h1", "zb_v", "dualpipe", "dualpipev"]
"""The pipeline schedules simulon builds (workload/schedule.py)."""
ContextParallelComm = Literal["p2p", "all_gather", "a2a", "a2a+p2p"]
"""How context-parallel ranks exchange keys and values (ParallelismSpec.context_parallel_comm)."""

SCHEDULE_CHUNKS = {"zb_h1": 1, "zb_v": 2, "dualpipev": 2, "dualpipe": 1}
"""vpp each schedule with a fixed placement needs: ZB-H1 one model chunk per rank; ZB-V and DualPipeV the two
chunks of a V; DualPipe the model cut into pp stages (each rank then holds its own and the mirrored one)."""


def with_schedule_named(par: ParallelismSpec) -> ParallelismSpec:
    """`par` with interleaved_1f1b named where vpp > 1 runs it by default (no schedule given)."""
    if par.vpp > 1 and par.pipeline_schedule == "1f1b" and "pipeline_schedule" not in par.model_fields_set:
        return par.model_copy(update={"pipeline_schedule": "interleaved_1f1b"})
    return par


def check_one_chunk(par: ParallelismSpec) -> None:
    """1F1B named with vpp > 1 (the default schedule runs interleaved there; naming 1f1b says otherwise)."""
    if par.pipeline_schedule == "1f1b" and par.vpp > 1:
        raise FieldError("workload.parallelism.pipeline_schedule", f"1f1b runs one model chunk per rank, not vpp = "
                         f"{par.vpp}; interleaved_1f1b is the schedule for vpp > 1 (zb_v and dualpipev run vpp = 2)")


def check_schedule(par: ParallelismSpec, microbatches: int) -> None:
    """The preconditions of the zero-bubble and DualPipe schedules: their placement (check_schedule_placement), and
    what the references assert of the micro-batches: DualPipeV at least 2 pp (`DualPipeV.step`: num_chunks >=
    num_ranks * 2); DualPipe an even number, at least 2 pp (`DualPipe.step`). ZB-V's greedy scheduler takes any
    number. FieldError names the field."""
    check_schedule_placement(par)
    name = par.pipeline_schedule
    if name not in ("dualpipe", "dualpipev"):
        return
    field = "workload.parallelism.num_microbatches"
    least = 2 * par.pp
    if name == "dualpipe" and microbatches % 2:
        raise FieldError(field, f"{microbatches} micro-batches: dualpipe splits them evenly between its two "
                         "directions, so they must be even")
    if microbatches < least:
        raise FieldError(field, f"{microbatches} micro-batches: pipeline_schedule {name} needs at least 2 * pp = "
                         f"{least}")


def check_schedule_placement(par: ParallelismSpec) -> None:
    """What the zero-bubble and DualPipe schedules need whatever the micro-batches: their number of model chunks per
    rank, a pipeline to place them on, and for DualPipe an even number of ranks (`DualPipe.step`). FieldError names
    the field."""
    name = par.pipeline_schedule
    field = "workload.parallelism."
    if name not in SCHEDULE_CHUNKS:
        return
    if par.vpp != SCHEDULE_CHUNKS[name]:
        chunks = "one model chunk per rank" if SCHEDULE_CHUNKS[name] == 1 else "two model chunks per rank as a V"
        raise FieldError(field + "pipeline_schedule", f"{name} runs {chunks}, not vpp = {par.vpp}")
    if name == "zb_h1":
        return
    if par.pp < 2:
        raise FieldError(field + "pp", f"pipeline_schedule {name} needs pipeline parallelism (pp >= 2), not {par.pp}")
    if name == "dualpipe" and par.pp % 2:
        raise FieldError(field + "pp", f"pipeline_schedule dualpipe needs an even pp (ranks pair up with their "
                         f"mirror), not {par.pp}")


def microbatch_steps(par: ParallelismSpec) -> tuple[int, int]:
    """(step, least): the micro-batch counts a pipeline's schedule accepts are the multiples of `step` from `least`
    (check_schedule; Megatron's interleaved schedule runs whole groups of microbatch_group_size, by default pp; a
    remainder of pp or more would do too, but whole groups are what every count of a step keeps)."""
    if par.pipeline_schedule == "dualpipe":
        return 2, 2 * par.pp
    if par.pipeline_schedule == "dualpipev":
        return 1, 2 * par.pp
    if par.interleaved:
        return par.microbatch_group, par.microbatch_group
    return 1, 1


RECOMPUTE_MODE_SETTINGS = {"selective": "recompute_modules", "full": "recompute_num_layers"}
"""The setting that belongs to each recomputation mode alone (ParallelismSpec refuses it under another mode)."""


def without_other_recompute_settings(parallelism: dict[str, Any], keep: Iterable[str] = ()) -> None:
    """Drop from a raw `parallelism` block (in place) the recompute settings of modes other than its `recompute`,
    except those named in `keep`: what a search or a sweep does when it changes the mode a scenario gave them for."""
    mode = parallelism.get("recompute", "none")
    for owner, key in RECOMPUTE_MODE_SETTINGS.items():
        if owner != mode and key not in keep:
            parallelism.pop(key, None)


class ParallelismSpec(StrictModel):
    """Megatron-Core parallel strategy. Ranks are ordered tp, cp, dp, pp; EP is carved out of dp*cp."""

    tp: GPUCount = Field(1, description="tensor parallelism: ranks splitting each layer's GEMMs and heads")
    pp: GPUCount = Field(1, description="pipeline parallelism: stages the layers are split into")
    dp: GPUCount | None = Field(None, description="derived from num_gpus if omitted")
    cp: GPUCount = Field(1, description="context parallelism: ranks splitting each sequence (exchanging keys "
                         "and values as context_parallel_comm says)")
    ep: GPUCount = Field(1, description="expert parallelism: ranks the experts are spread over, carved out of "
                         "dp x cp (must divide it and num_experts)")
    expert_tensor_parallel: GPUCount | None = Field(
        None, description="ranks splitting each expert's FFN (Megatron-Core's expert_tensor_parallel_size); default "
        "tp. Below tp, expert parallelism spans tensor-parallel ranks too (MoE parallel folding): ep x this must "
        "divide tp*cp*dp")
    vpp: LayerCount = Field(1, description="model chunks per pipeline rank; > 1 runs interleaved 1F1B")
    num_microbatches: MicrobatchCount | None = Field(None, description="derived from the batch if omitted")
    pipeline_schedule: ScheduleName = Field(
        "1f1b", description="1f1b, interleaved_1f1b (vpp > 1), zb_h1 (zero-bubble: weight gradients deferred "
        "into the cool-down bubble; vpp = 1), zb_v (zero-bubble V: two chunks per rank as a V, vpp = 2), dualpipe "
        "(DeepSeek-V3: micro-batches from both ends, each rank also holding the mirrored stage, parameters twice; "
        "vpp = 1, even pp) or dualpipev (DualPipe cut in half onto a V; vpp = 2); the DualPipes need at least "
        "2 pp micro-batches")
    microbatch_group_size: MicrobatchCount | None = Field(
        None, description="interleaved 1F1B: micro-batches each model chunk runs in a row before the next chunk "
        "(Megatron-Core's --microbatch-group-size-per-virtual-pipeline-stage; the Llama 3 paper's N), from pp to the "
        "micro-batch count, whose remainder over it must be 0 or at least pp; default pp. A larger group warms up "
        "with more micro-batches, keeping more activations, for the same ideal bubble, and leaves the sends between "
        "chunks time to arrive")
    sequence_parallel: bool = Field(False, description="split the norms' and dropouts' activations over tp, the "
                                    "all-reduces becoming all-gathers and reduce-scatters (no effect at tp 1); "
                                    "default on for an MoE model at tp > 1 under framework megatron, which "
                                    "Megatron-Core trains only so")
    tp_comm_overlap: bool = Field(False, description="pipeline tensor-parallel all-gathers and reduce-scatters "
                                  "with their GEMMs (Transformer Engine userbuffers; needs sequence_parallel)")
    overlap_moe_expert_parallel_comm: bool = Field(
        False, description="run each steady-state forward and backward as one combined step, layer by layer, each "
        "one's token dispatch and combine all-to-alls beside the other's computation (Megatron-Core's "
        "--overlap-moe-expert-parallel-comm, Megatron-Bridge's moe_a2a_overlap; combined_1f1b.py); needs ep > 1, "
        "vpp > 1 where pp > 1, no full recomputation, a bf16 or fp16 model, and one more warm-up forward runs; "
        "under dualpipe and dualpipev, their overlapped forward-backward pairs run so")
    context_parallel_comm: ContextParallelComm = Field(
        "p2p", description="how context-parallel ranks exchange keys and values: p2p passes them around a ring "
        "overlapped with attention blocks (Megatron's default --cp-comm-type p2p, Transformer Engine's "
        "AttnFuncWithCPAndKVP2P); all_gather gathers them all before attention (--cp-comm-type all_gather); a2a "
        "trades the sequence split for a head split with all-to-alls of Q, K and V before attention and of its "
        "output after (DeepSpeed-Ulysses, --cp-comm-type a2a, AttnFuncWithCPAndQKVOA2A); a2a+p2p does that "
        "within groups of hierarchical_context_parallel_sizes[0] ranks and passes the ring between the groups")
    hierarchical_context_parallel_sizes: CPSizes | None = Field(
        None, description="a2a+p2p: [all-to-all ranks, ring ranks], their product cp (Megatron's "
        "--hierarchical-context-parallel-sizes); the all-to-all groups are consecutive context-parallel ranks")
    distributed_optimizer: bool = Field(False, description="shard the optimizer states over dp x cp (ZeRO-1, "
                                        "Megatron's --use-distributed-optimizer): gradients reduce-scattered, "
                                        "parameters all-gathered")
    fsdp: Literal["none", "full_shard", "shard_grad_op"] = Field(
        "none", description="ZeRO-3 (full_shard) or ZeRO-2 (shard_grad_op) sharding over data parallelism")
    fsdp_size: GPUCount | None = Field(None, description="ranks a parameter is sharded over (HSDP); "
                                          "default every data-parallel rank")
    overlap_grad_reduce: bool = Field(
        True, description="reduce each gradient bucket as soon as the last micro-batch's backward has filled it "
        "(Megatron's --overlap-grad-reduce); false: every bucket after the whole backward")
    overlap_param_gather: bool | None = Field(
        None, description="distributed optimizer: all-gather each bucket's updated parameters overlapped with the "
        "next step's forward (Megatron's --overlap-param-gather); false: all of them right after the optimizer step; "
        "default: as overlap_grad_reduce (Megatron overlaps the gather only when it overlaps the reduction)")
    average_in_collective: bool = Field(
        False, description="the gradient reduction averages over the data-parallel ranks (Megatron's "
        "--ddp-average-in-collective); false: each bucket is first scaled by 1/dp, a pass over its gradients")
    pipeline_send: Literal["full", "partitioned"] = Field(
        "full", description="full: every tensor-parallel rank sends the whole activation to the next stage "
        "(Megatron-Core); partitioned: each sends its 1/tp share, all-gathered over tp on arrival (DeepSpeed's "
        "PipelineEngine, pipe_partitioned and grad_partitioned, on by default with model parallelism)")
    recompute: Literal["none", "selective", "full"] = Field(
        "none", description="activation recomputation: selective re-runs core attention, full every layer")
    recompute_modules: list[RecomputeModule] | None = Field(
        None, description="selective recomputation by module, as Megatron-Core's --recompute-modules "
        "(default: core_attn)")
    recompute_num_layers: LayerCount | None = Field(
        None, description="full recomputation: the layers of each model chunk that recompute (Megatron's "
        "'block' method), at least 1 (0 would recompute nothing; Megatron-Core's TransformerConfig asks for 1 "
        "to the layers a pipeline rank holds); default every layer ('uniform', one layer per checkpoint)")
    layers_per_stage: list[OptionalLayerCount] | None = Field(
        None, description="transformer layers of each pipeline stage (pp entries, each split evenly over its vpp "
        "chunks) or of each virtual stage (pp*vpp entries in the order the layers run through them: chunk c of stage "
        "s at c*pp+s, or under a V schedule, zb_v and dualpipev, chunk 1 of stage s at 2*pp-1-s)")
    first_stage_layers: OptionalLayerCount | None = Field(
        None, description="layers of the first stage, the other stages splitting the rest evenly (Megatron's "
        "--decoder-first-pipeline-num-layers)")
    last_stage_layers: OptionalLayerCount | None = Field(
        None, description="layers of the last stage (Megatron's --decoder-last-pipeline-num-layers)")
    account_for_embedding_in_pipeline_split: bool = Field(
        False, description="the embedding counts as one layer of the first virtual stage (Megatron's flag)")
    account_for_loss_in_pipeline_split: bool = Field(
        False, description="the loss counts as one layer of the last virtual stage (Megatron's flag)")
    pipeline_layout: str | None = Field(
        None, description="Megatron's --pipeline-model-parallel-layout: virtual stages separated by '|' of E "
        "(embedding), t (transformer layer) and L (loss), e.g. 'Et*3|(tt|)*29,t|L'; sets vpp when vpp is not given")

    @model_validator(mode="before")
    @classmethod
    def _chunks_from_layout(cls, data: object) -> object:
        """vpp from the layout string's virtual stages where vpp is not given, as Megatron derives it."""
        if not isinstance(data, dict) or not isinstance(data.get("pipeline_layout"), str) or "vpp" in data:
            return data
        pp = data.get("pp", 1)
        try:
            chunks = layout_chunks(data["pipeline_layout"], pp if isinstance(pp, int) and pp > 0 else 1)
        except ValueError:
            return data  # the split reports it, naming the field
        return {**data, "vpp": chunks}

    @model_validator(mode="after")
    def _modules_listed(self) -> ParallelismSpec:
        """An empty module list is no default: read as Megatron's default (core_attn), it re-ran what was asked not
        to be."""
        if self.recompute_modules is not None and not self.recompute_modules:
            raise FieldError("recompute_modules", "lists no module; leave it out for the default (core_attn), or "
                             "set recompute: none to recompute nothing")
        twice = [m for m, n in Counter(self.recompute_modules or ()).items() if n > 1]
        if twice:
            raise FieldError("recompute_modules", f"lists {twice[0]} twice; name each module once")
        return self

    @model_validator(mode="after")
    def _recompute_settings_apply(self) -> ParallelismSpec:
        """Module lists are selective recomputation's and a layer count full recomputation's: given with the other
        (or none) they meant something the run would silently not do (Megatron-Core's TransformerConfig refuses
        recompute_num_layers under selective granularity)."""
        for mode, key in RECOMPUTE_MODE_SETTINGS.items():
            if getattr(self, key) is not None and self.recompute != mode:
                raise FieldError(key, f"applies to recompute: {mode} only, but recompute is '{self.recompute}'; set "
                                 f"recompute: {mode} or leave {key} out")
        return self

    @model_validator(mode="after")
    def _interleaving_named(self) -> ParallelismSpec:
        """vpp > 1 without a schedule named runs interleaved 1F1B, and says so (`interleaved_1f1b`), so that the
        block written back out (ScenarioConfig.as_data) reads the same; `1f1b` named with vpp > 1 is refused with
        the rest of the pipeline's checks (config.scenario)."""
        return with_schedule_named(self)

    @property
    def vpp_named_by(self) -> str:
        """The field that sets vpp, for a message about it: the layout string where one is given (its virtual stages
        over pp are vpp, whether or not vpp is written too), else vpp."""
        return "pipeline_layout" if self.pipeline_layout is not None else "vpp"

    @property
    def interleaved(self) -> bool:
        """Megatron's interleaved 1F1B (the V and DualPipe schedules place their chunks their own way)."""
        return self.pipeline_schedule not in SCHEDULE_CHUNKS and (self.vpp > 1 or
                                                                   self.pipeline_schedule == "interleaved_1f1b")

    def data_parallel(self, num_gpus: int) -> int:
        """The data-parallel size on `num_gpus` GPUs: what tensor, context and pipeline parallelism leave (ranks are
        ordered tp, cp, dp, pp)."""
        return num_gpus // (self.tp * self.cp * self.pp)

    @property
    def microbatch_group(self) -> int:
        """The micro-batches the interleaved schedule runs through each model chunk in a row: microbatch_group_size,
        by default pp (Megatron-Core's microbatch_group_size_per_vp_stage)."""
        return self.microbatch_group_size or self.pp

    @property
    def gathers_overlapped(self) -> bool:
        """Whether the distributed optimizer's parameter all-gather overlaps the next step's forward."""
        return self.overlap_grad_reduce if self.overlap_param_gather is None else self.overlap_param_gather

    @property
    def cp_a2a(self) -> int:
        """Context-parallel ranks that split the heads by all-to-all (1: none, the sequence split throughout)."""
        if self.context_parallel_comm == "a2a":
            return self.cp
        if self.context_parallel_comm == "a2a+p2p" and self.hierarchical_context_parallel_sizes:
            return self.hierarchical_context_parallel_sizes[0]
        return 1

    @property
    def cp_ring_size(self) -> int:
        """Context-parallel ranks the keys and values pass around as a ring (1: no ring)."""
        return self.cp // self.cp_a2a if self.context_parallel_comm in ("p2p", "a2a+p2p") else 1

    @property
    def etp(self) -> int:
        """Expert tensor parallelism: tp unless set."""
        return self.expert_tensor_parallel or self.tp

    def recomputes_layer(self, position: int) -> bool:
        """Whether full recomputation re-runs the layer at `position` (0-based) within its model chunk."""
        return self.recompute == "full" and (self.recompute_num_layers is None or position < self.recompute_num_layers)

    @property
    def recomputed_modules(self) -> frozenset[str]:
        """Modules selective recomputation re-runs (none unless recompute is selective)."""
        if self.recompute != "selective":
            return frozenset()
        return frozenset(self.recompute_modules or ("core_attn",))

    @property
    def recomputes_core_attention(self) -> bool:
        """Whether core attention re-runs in the backward: for its internals (core_attn) or its output (context)."""
        return bool(self.recomputed_modules & CORE_ATTENTION_MODULES)

    @property
    def recomputed_kernel_modules(self) -> list[str]:
        """The recomputed modules other than core attention's, in a fixed order: those whose kernels re-run by name."""
        return sorted(self.recomputed_modules - CORE_ATTENTION_MODULES)


TrainingDType = Annotated[LaxDType, AfterValidator(training_dtype)]
"""A training run's dtype: a bare fp4 (or float4) trains as NVFP4 (config.common.training_dtype)."""

def dtype_among(allowed: tuple[DType, ...], what: str) -> Callable[[DType], DType]:
    """A check that a dtype is one of `allowed`, its message saying which `what` are kept in."""
    kept = ", ".join(d.value for d in allowed[:-1]) + f" or {allowed[-1].value}"

    def check(value: DType) -> DType:
        if value not in allowed:
            raise ValueError(f"{what} in {kept}, not {value.value}")
        return value

    return check


OPTIMIZER_STATE_DTYPES = (DType.fp32, DType.bf16, DType.fp16)
OptimizerDType = Annotated[LaxDType, AfterValidator(dtype_among(OPTIMIZER_STATE_DTYPES, "optimizer states are kept"))]

GRAD_REDUCE_DTYPES = (DType.fp32, DType.bf16, DType.fp16, DType.fp8)
"""Element types gradients are reduced in: fp32, bf16 or fp16 (Megatron-Core's --grad-reduce-in-bf16, its fp32
default, fp16 training's own), or fp8 (FP8-LM's FP8 gradients with a scale per tensor, MS-AMP; arXiv 2310.18313).
No framework reduces gradients in a block-scaled or 4-bit format, nor in tf32, a GEMM mode stored as fp32."""
GradReduceDType = Annotated[LaxDType, AfterValidator(dtype_among(GRAD_REDUCE_DTYPES, "gradients are reduced"))]


class TrainingSpec(StrictModel):
    """The batch, the number format and how the kernels run."""

    num_gpus: GPUCount | None = Field(None, description="default: every GPU of the datacenter")
    global_batch_size: BatchSize = Field(description="sequences per step, over every data-parallel replica")
    micro_batch_size: BatchSize = Field(1, description="sequences per micro-batch; global_batch_size must be a "
                                        "multiple of it times dp")
    sequence_length: SequenceLength = Field(description="tokens per sequence")
    dtype: TrainingDType = Field(
        DType.bf16, description="the GEMMs' number format: fp32, tf32, fp16, bf16, fp8 (Transformer Engine's "
        "per-tensor scaling), mxfp8, mxfp4 or nvfp4 (block-scaled, config/number_formats.py); a bare fp4 is NVFP4, "
        "Transformer Engine's 4-bit recipe, as tables write it")
    grad_reduce_dtype: GradReduceDType | None = Field(
        None, description="gradient element type in data-parallel reductions; fp32 unless training in fp16")
    make_vocab_size_divisible_by: VocabSize | None = Field(
        None, description="the vocabulary padded to a multiple of this times tp, as Megatron-LM builds its embedding "
        "and output layer (--make-vocab-size-divisible-by, default 128: arguments.py, _vocab_size_with_padding); "
        "unset, to a multiple of tp only, the vocabulary as the model gives it (Megatron-Bridge's HF models: "
        "should_pad_vocab False)")
    attention: Literal[(*FLASH_IMPLEMENTATIONS, "unfused")] = Field(
        "flash", description="flash: FlashAttention-2 (written for Ampere's mma.sync, which runs at half the "
        "dense tensor rate on Hopper and a quarter on Blackwell); cudnn: cuDNN's fused attention (Transformer "
        "Engine's FusedAttention, its choice on Hopper and Blackwell); flash_v1: FlashAttention 1; "
        "flash_triton: the Triton FlashAttention of 2022; xformers: xformers' memory-efficient attention (SDPA's "
        "efficient backend); pytorch: PyTorch's attention as one fitted kernel (SDPA's math backend); unfused: "
        "kernels that materialise the score matrix")
    elementwise: Literal["fused", "eager"] = Field(
        "fused", description="fused: bias-GELU, softmax and bias-dropout-add as single kernels (Megatron, "
        "Transformer Engine); eager: every PyTorch op its own kernel over whole tensors (HuggingFace models)")
    autocast: bool | None = Field(
        None, description="torch.autocast over fp32 parameters (PyTorch AMP, how HuggingFace's Trainer and PyTorch "
        "Lightning train in 16 bits): each weight cast to 16 bits before its GEMM and its gradient added to the fp32 "
        "one after it, at every micro-batch; unset: on for eager elementwise work in 16 bits")
    cross_entropy: Literal["vocab_parallel", "fused"] = Field(
        "vocab_parallel", description="vocab_parallel: Megatron's fp32 cross entropy, one pass per operation; "
        "fused: one kernel each way (flash-attention's or apex's, Megatron-Core's cross_entropy_loss_fusion)")
    adam_moments_dtype: OptimizerDType = Field(
        DType.fp32, description="Adam's two moments: fp32, or bf16 with Megatron's precision-aware optimizer "
        "(--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16)")
    master_weights_dtype: OptimizerDType = Field(
        DType.fp32, description="the optimizer's own copy of the weights: fp32, or 16-bit with Apex's "
        "DistributedFusedAdam at dtype bf16 (NeMo's optim.dtype: bf16, which keeps Adam's moments in bf16 too) or "
        "Megatron's precision-aware optimizer (--main-params-dtype fp16); none in fp32 training")
    fp8_params: bool = Field(
        False, description="fp8, mxfp8 and nvfp4 runs (no framework keeps MXFP4 weights): keep the GEMM weights "
        "only in the narrow type, with the transpose the "
        "backward reads where the GPU's FP8 GEMMs need one (not a B200, B300, GB200 or GB300 in per-tensor fp8: "
        "GPUSpec.fp8_any_layout) (Megatron's --fp8-param-gather, Transformer Engine's fp8_model_init; under "
        "framework megatron with the distributed optimizer or FSDP, as Megatron asserts); otherwise they stay 16-bit "
        "and are cast each step")
    fp8_recipe: Annotated[Literal["delayed", "current"], BeforeValidator(fp8_recipe_named)] | None = Field(
        None, description="per-tensor fp8 scaling (dtype fp8 only): delayed (Transformer Engine's DelayedScaling, "
        "the default) or current (Float8CurrentScaling, Megatron's --fp8-recipe tensorwise, also read as "
        "tensorwise: an amax pass before each cast); mxfp8, mxfp4 and nvfp4 are dtypes of their own")
    bf16_first_layers: OptionalLayerCount | None = Field(
        None, description="narrow formats: transformer layers from the first whose GEMMs stay bf16 (Megatron's "
        "--num-layers-at-start-in-bf16); default the format's recipe (config/number_formats.py)")
    bf16_last_layers: OptionalLayerCount | None = Field(
        None, description="the same from the last layer (--num-layers-at-end-in-bf16)")
    moe_dispatcher: Literal["alltoall", "deepep"] = Field(
        "alltoall", description="how MoE tokens reach their experts: alltoall, Megatron's all-to-all token "
        "dispatcher (one copy per chosen expert, NCCL send/receive to every expert-parallel peer); deepep, "
        "DeepEP's internode dispatch and combine (Megatron's --moe-token-dispatcher-type flex "
        "--moe-enable-deepep): a token crosses the scale-out fabric once per node it goes to, on its own rail, and "
        "NVLink takes it on to its experts' GPUs there (collective algorithm deepep)")
    expandable_segments: bool = Field(
        False, description="PyTorch's caching allocator with expandable segments (PYTORCH_CUDA_ALLOC_CONF="
        "expandable_segments:True, which Megatron-Bridge's recipes and launch templates set): reserved memory is "
        "taken as what is allocated, without the excess fixed-size segments leave to fragmentation "
        "(memory/runtime.py)")
    peft: Literal["none", "lora"] = Field(
        "none", description="lora: base weights frozen, so no weight gradients, gradient sync or optimizer for them")
    grad_bucket_size: ParameterCount | None = Field(
        None, description="parameters per DP gradient bucket of the overlapped reduction (overlap_grad_reduce; not "
        "under FSDP, which reduces unit by unit); Megatron-Core's max(40M, 1M*dp) if omitted")
    stage_groups: list[int | list[int]] | None = Field(
        None, description="heterogeneous datacenters: the node group (index into datacenter.node_groups) of each "
        "pipeline stage, or a list of dp groups, one per data-parallel replica of the stage; default: ranks fill "
        "the groups in order")
    dp_shares: list[MicrobatchCount] | None = Field(
        None, description="micro-batches of each data-parallel replica (dp entries, in data-parallel order, summing "
        "to global_batch_size / micro_batch_size), so that replicas on faster GPUs take more of the global batch and "
        "all reach the gradient reduction together (Whale, HetPipe, Cephalo); a replica's pipeline stages all run "
        "its count, each a count its pipeline schedule accepts; not with expert parallelism or FSDP, whose "
        "collectives join replicas every micro-batch. Default: every replica global_batch_size / (micro_batch_size "
        "x dp)")

    @property
    def uses_autocast(self) -> bool:
        """Whether the run trains under torch.autocast over fp32 parameters (`autocast`, else eager work)."""
        return self.elementwise == "eager" if self.autocast is None else self.autocast

    @property
    def fp32_parameters(self) -> bool:
        """Whether the run keeps its parameters in fp32: an fp32 or tf32 run's, or torch.autocast's over them."""
        return self.dtype in (DType.fp32, DType.tf32) or self.uses_autocast

    def replica_microbatches(self, dp: int) -> list[int]:
        """Micro-batches each of the `dp` data-parallel replicas runs in one step: dp_shares, or the even split."""
        if self.dp_shares is not None:
            return list(self.dp_shares)
        return [self.global_batch_size // (self.micro_batch_size * dp)] * dp


FSDP_UNREAD = (("training", "grad_bucket_size"),)
"""(block, key) of the workload settings FSDP reads none of, which the scenario refuses beside it
(MegatronWorkload._gradient_buckets_are_used): a change to FSDP drops them (memory.remedies, search.run.apply)."""

UNOVERLAPPED_UNREAD = (("training", "grad_bucket_size"),)
"""(block, key) of the workload settings that a gradient reduction without overlap_grad_reduce does not read, which
the scenario refuses beside it (MegatronWorkload._gradient_buckets_are_used): a sweep that turns the overlap off drops
them (sweep.points)."""

CP_EXCHANGE_SETTINGS = {"a2a+p2p": "hierarchical_context_parallel_sizes"}
"""The parallelism setting that belongs to each context-parallel exchange alone (the scenario refuses it beside
another: config.scenario's context-parallel checks)."""

Engine = Literal["megatron", "deepspeed"]
ENGINE_NAMES = get_args(Engine)
"""The pipeline engines `framework` names; anything else is a framework by name (config.frameworks)."""


class MegatronWorkload(StrictModel):
    """A training run: the model, its parallel strategy and its batch, run by a Megatron-style pipeline."""

    framework: Engine = Field(
        "megatron", description="what runs the pipeline: megatron (Megatron-Core's 1F1B, each send issued as its "
        "data is ready) or deepspeed (DeepSpeed's PipelineEngine TrainSchedule: 1F1B in lock-step steps whose "
        "sends and receives block the stage, a transfer starting once both sides reach it; vpp 1); the rest of "
        "the workload as given (DeepSpeed's partitioned sends are parallelism.pipeline_send)")
    model: ModelSpec = Field(description="the model: a template name (`llama-3-70b`) or a block (ModelSpec)")
    parallelism: ParallelismSpec = Field(ParallelismSpec(), description="how the model is split over the GPUs")
    training: TrainingSpec = Field(description="batch, sequence, number format, kernels")

    @model_validator(mode="before")
    @classmethod
    def _framework_named(cls, data: Any) -> Any:
        """`framework: "NeMo 24.07"` (or Megatron-Core r0.8, Megatron-Bridge, Megatron-LM v2.5, DeepSpeed 0.14, ...):
        the framework's pipeline engine, and its defaults where the scenario leaves a setting out
        (config.frameworks)."""
        if not isinstance(data, dict) or not isinstance(data.get("framework"), str):
            return data
        if data["framework"].strip().lower() in ENGINE_NAMES:  # the engine, in any case ("Megatron" too)
            return {**data, "framework": data["framework"].strip().lower()}
        try:
            refuse_long_numbers(data["framework"])
        except ValueError as exc:
            raise FieldError("framework", str(exc)) from None
        if resolve_framework(data["framework"]) is None:
            raise FieldError("framework", f"{data['framework']!r} names no framework simulon knows: write megatron or "
                             "deepspeed (the pipeline engine), or a framework by name, with its version if it matters "
                             f"({', '.join(name for name, _ in FRAMEWORK_NAMES)})")
        parallelism, training = data.get("parallelism", {}), data.get("training")
        if not isinstance(parallelism, dict) or not isinstance(training, dict):
            return data
        engine, parallelism, training = workload_defaults(data["framework"], parallelism, training)
        return {**data, "framework": engine, "parallelism": parallelism, "training": training}

    @model_validator(mode="after")
    def _chunks_from_pattern(self) -> MegatronWorkload:
        """vpp from a hybrid pattern's pipeline segments where vpp is not given: segments over pp, as Megatron
        derives it (a count pp does not divide is left to the split to refuse, naming the pattern; without
        pipeline parallelism the marks split nothing)."""
        segments, par = self.model.pattern_segments, self.parallelism
        if (segments is None or "vpp" in par.model_fields_set or par.pp == 1 or len(segments) % par.pp
                or len(segments) == par.pp):
            return self
        parallelism = with_schedule_named(par.model_copy(update={"vpp": len(segments) // par.pp}))
        return self.model_copy(update={"parallelism": parallelism})

    @model_validator(mode="after")
    def _experts_with_tensor_parallelism_split_the_sequence(self) -> MegatronWorkload:
        """Megatron-Core trains an MoE layer over tp > 1 only with sequence parallelism: MoELayer.forward raises
        "performance may degrade if MoE and tensor parallelism are enabled without also enabling sequence
        parallelism" when training with an attention tp group of more than one rank and sequence_parallel off
        (megatron/core/transformer/moe/moe_layer.py). So such a run left unset gets it, and one setting it off is
        refused. DeepSpeed's MoE has no such check."""
        par = self.parallelism
        if self.framework != "megatron" or self.model.moe is None or par.tp == 1 or par.sequence_parallel:
            return self
        if "sequence_parallel" in par.model_fields_set:
            raise FieldError("parallelism.sequence_parallel", f"false with an MoE model at tp {par.tp}: the MoE layer "
                             "of Megatron-Core, which framework megatron runs, refuses to train over tp > 1 without "
                             "sequence parallelism (MoELayer.forward); set it true, tp 1, or framework deepspeed")
        return self.model_copy(update={"parallelism": par.model_copy(update={"sequence_parallel": True})})

    @model_validator(mode="after")
    def _every_model_chunk_runs_something(self) -> MegatronWorkload:
        """More model chunks (pp*vpp virtual stages) than the automatic split can fill are refused: Megatron's
        interleaved schedule needs num_layers divisible by pp*vpp (TransformerConfig; get_num_layers_to_build), and
        simulon's balanced split where it does not divide gives every virtual stage a layer, the embedding or the
        loss only while num_layers >= pp*vpp - 2. A split the parallelism names (pipeline_layout, layers_per_stage,
        first/last stage layers, the accounting flags) or a hybrid pattern's '|' marks place empty stages on
        purpose and are checked by the split itself (config.pipeline_layout)."""
        par, layers = self.parallelism, self.model.num_layers
        virtual = par.pp * par.vpp
        idle = idle_virtual_stages(layers, virtual)
        if not idle or split_given(par) or self.model.pattern_segments is not None:
            return self
        most_vpp = (layers + 2) // par.pp
        if most_vpp >= 1:
            field, fits = "parallelism.vpp", f"vpp = {most_vpp} at most fits them"
        else:
            field = "parallelism.pp"
            fits = f"pp = {layers + 2} at most{' with vpp = 1' if par.vpp > 1 else ''} fits them"
        raise FieldError(field, f"pp*vpp = {par.pp}*{par.vpp} = {virtual} model chunks for the model's {layers} "
                         f"layers leave {idle} of them with no layer to run (Megatron needs num_layers divisible by "
                         f"pp*vpp); {fits}, or place the stages on purpose with pipeline_layout or layers_per_stage")

    @model_validator(mode="after")
    def _recomputed_parts_exist(self) -> MegatronWorkload:
        listed = self.parallelism.recompute_modules if self.parallelism.recompute == "selective" else None
        for module in (m for m in listed or () if m in RECOMPUTED_PARTS):  # the first listed: the same every run
            part, has = RECOMPUTED_PARTS[module]
            if not has(self.model):
                raise FieldError("parallelism.recompute_modules", f"{module} re-runs the model's {part}, which this "
                                 "model has none of; leave it out")
        return self

    @model_validator(mode="after")
    def _deepspeed_pipeline(self) -> MegatronWorkload:
        par = self.parallelism
        if self.framework == "deepspeed" and (par.vpp > 1 or par.pipeline_schedule != "1f1b"):
            raise FieldError("framework", "deepspeed's PipelineEngine runs plain 1F1B (vpp 1, pipeline_schedule "
                             f"1f1b), not {par.pipeline_schedule} with vpp {par.vpp}")
        if self.framework == "deepspeed" and par.pp > 1 and par.fsdp != "none":
            raise FieldError("parallelism.fsdp", f"deepspeed's PipelineEngine (pp {par.pp}) runs ZeRO stage 0 or 1 "
                             "alone (it asserts 'ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism'); "
                             f"{par.fsdp} is ZeRO-{zero_stage(par.fsdp, False)}: use distributed_optimizer (ZeRO-1), "
                             "or pp 1")
        if self.framework == "deepspeed" and self.model.mtp_layers:
            raise FieldError("model.mtp_layers", "multi-token prediction is Megatron-Core's (mtp_num_layers); "
                             "framework deepspeed has none")
        return self

    @model_validator(mode="after")
    def _sparse_attention_context_by_all_gather(self) -> MegatronWorkload:
        mla, par = self.model.mla, self.parallelism
        if mla is not None and mla.dsa is not None and par.cp > 1 and par.context_parallel_comm != "all_gather":
            raise FieldError("parallelism.context_parallel_comm", f"{par.context_parallel_comm!r} with DeepSeek sparse "
                             "attention (model.mla.dsa): Megatron-Core's DSAttention splits the context by all-gather "
                             "only; set it to all_gather, or cp to 1")
        return self

    @model_validator(mode="after")
    def _windows_with_context_parallelism_by_all_to_all(self) -> MegatronWorkload:
        """A sliding window with cp > 1 only by all-to-all (a2a: each rank attends the whole sequence for a share of
        the heads, the window as without cp; Megatron-Bridge's GPT-OSS recipes set cp_comm_type a2a, which Transformer
        Engine's attention with learnable softmax needs); simulon's ring and gathers exchange the whole context. A
        window no shorter than the sequence (Llama 4's 8,192-token chunks at 8,192 tokens) is causal attention, which
        they run."""
        par = self.parallelism
        if self.model.windows_bind(self.training.sequence_length) and par.cp > 1 and par.cp_a2a < par.cp:
            raise FieldError("parallelism.context_parallel_comm", f"{par.context_parallel_comm!r} with a sliding "
                             "window (model.sliding_window) is not modelled: simulon's ring and gathers exchange the "
                             "whole context; set it to a2a (the heads split, each rank attending the whole sequence "
                             "through the window), or cp to 1")
        return self

    @model_validator(mode="after")
    def _expert_overlap_runs(self) -> MegatronWorkload:
        problem = self.expert_overlap_problem()
        if self.parallelism.overlap_moe_expert_parallel_comm and problem:
            raise FieldError("parallelism.overlap_moe_expert_parallel_comm", problem)
        return self

    def expert_overlap_problem(self) -> str | None:
        """Why Megatron-Core would refuse overlap_moe_expert_parallel_comm on this workload, or None
        (TransformerConfig.__post_init__): it needs expert parallelism, the interleaved schedule where the pipeline
        has more than one stage, no full recomputation and no `moe` module recomputed, at most one
        multi-token-prediction layer, and a bf16 or fp16 model (fp8 and fp4 runs keep bf16 parameters)."""
        par = self.parallelism
        if self.model.moe is None or par.ep == 1:
            return "it overlaps expert-parallel all-to-alls: it needs an MoE model and ep > 1"
        if par.pipeline_schedule in ("zb_h1", "zb_v") or (
                par.pipeline_schedule in ("1f1b", "interleaved_1f1b") and par.pp > 1 and par.vpp == 1):
            return (f"Megatron-Core combines forward and backward on its 1F1B schedules only, with vpp > 1 where pp "
                    f"> 1, and DualPipe its overlapped pairs (here pp {par.pp}, vpp {par.vpp}, pipeline_schedule "
                    f"{par.pipeline_schedule})")
        if par.recompute == "full" or "moe" in par.recomputed_modules:
            return "Megatron-Core refuses it with full recomputation or the moe module recomputed"
        if self.model.mtp_layers > 1:
            return f"Megatron-Core runs it with at most one multi-token-prediction layer, not {self.model.mtp_layers}"
        if self.training.fp32_parameters:
            kept = "torch.autocast over fp32 parameters" if self.training.uses_autocast else \
                f"dtype {self.training.dtype.value}"
            return f"Megatron-Core runs it on a bf16 or fp16 model only, not {kept}"
        if self.framework == "deepspeed":
            return "it is Megatron-Core's schedule; framework deepspeed has none"
        return None

    @model_validator(mode="after")
    def _param_gather_overlap_has_an_optimizer_and_a_reduction(self) -> MegatronWorkload:
        par = self.parallelism
        if par.overlap_param_gather and not par.distributed_optimizer:
            raise FieldError("parallelism.overlap_param_gather", "overlaps the distributed optimizer's parameter "
                             "all-gather, and there is none here: set distributed_optimizer too, or leave it out "
                             "(Megatron asserts --overlap-param-gather needs --use-distributed-optimizer)")
        if par.overlap_param_gather and not par.overlap_grad_reduce:
            raise FieldError("parallelism.overlap_param_gather", "Megatron overlaps the parameter all-gather only "
                             "together with the gradient reduction: set overlap_grad_reduce too, or leave it out")
        return self

    @model_validator(mode="after")
    def _gradient_buckets_are_used(self) -> MegatronWorkload:
        """grad_bucket_size sizes the buckets of Megatron's overlapped gradient reduction (workload.data_parallel):
        FSDP reduces each unit's gradients as its backward ends, whatever the bucket size, and without
        overlap_grad_reduce Megatron-Core reduces each buffer whole (DistributedDataParallel sets no bucket size),
        so a size given there would be ignored without a word."""
        par = self.parallelism
        if self.training.grad_bucket_size is None:
            return self
        if par.fsdp != "none":
            raise FieldError("training.grad_bucket_size", f"has no effect under fsdp {par.fsdp}, which reduces each "
                             "unit's gradients as its backward ends (no buckets); leave it out, or set fsdp: none")
        if not par.overlap_grad_reduce:
            raise FieldError("training.grad_bucket_size", "has no effect without overlap_grad_reduce: Megatron-Core "
                             "then reduces each gradient buffer whole after the backward; set "
                             "parallelism.overlap_grad_reduce: true, or leave it out")
        return self

    @model_validator(mode="after")
    def _number_format_fits(self) -> MegatronWorkload:
        """The narrow-format settings fit the dtype and the model: fp8_recipe for per-tensor fp8 only; fp8_params
        and layers kept in bf16 for a narrow (quantized) dtype only, which a 16- or 32-bit run has none of, and
        fp8_params under Megatron with a sharded optimizer only (megatron/training/arguments.py); the
        layers kept in bf16 from the first and from the last at most the model's together (Megatron-Core's
        is_first_last_bf16_layer keeps layer i in bf16 where i < start or i >= num_layers - end: a sum equal to
        num_layers keeps every layer in bf16, one above it counts layers twice)."""
        train, layers = self.training, self.model.num_layers
        dtype = train.dtype.value
        if train.fp8_recipe is not None and train.dtype != DType.fp8:
            raise FieldError("training.fp8_recipe", f"{train.fp8_recipe!r} applies to dtype fp8 only, not "
                             f"{dtype} (mxfp8, mxfp4 and nvfp4 scale per block)")
        narrow = ", ".join(d.value for d, fmt in NUMBER_FORMATS.items() if fmt.quantized)
        if train.fp8_params and not NUMBER_FORMATS[train.dtype].quantized:
            raise FieldError("training.fp8_params", f"true applies to the narrow dtypes only ({narrow}), not "
                             f"{dtype}, whose GEMM weights are {dtype} already; leave it out, or set a narrow dtype")
        if train.fp8_params and not NUMBER_FORMATS[train.dtype].keeps_narrow_weights:
            kept = ", ".join(d.value for d, fmt in NUMBER_FORMATS.items() if fmt.quantized and fmt.keeps_narrow_weights
                             and d != DType.fp4)
            raise FieldError("training.fp8_params", f"true keeps the GEMM weights in {dtype}, which no framework does "
                             "(Megatron-Core's --fp4-param-gather keeps NVFP4 weights only; its custom fp4 recipe, "
                             "which MXFP4 runs as, cannot make parameters of its quantized tensors): leave it out "
                             f"(16-bit weights cast each step), or set a dtype whose weights are kept narrow ({kept})")
        par = self.parallelism
        if train.fp8_params and self.framework == "megatron" and not par.distributed_optimizer and par.fsdp == "none":
            raise FieldError("training.fp8_params", "true gathers the weights kept narrow, which Megatron does with "
                             "the distributed optimizer or FSDP only (it asserts '--fp8-param-gather only supported "
                             "with distributed optimizer, torch fsdp2, megatron fsdp'); set "
                             "parallelism.distributed_optimizer or parallelism.fsdp, or leave it out")
        for name in ("bf16_first_layers", "bf16_last_layers"):
            value = getattr(train, name)
            if value and not NUMBER_FORMATS[train.dtype].quantized:
                raise FieldError(f"training.{name}", f"{value} applies to the narrow dtypes only ({narrow}), not "
                                 f"{dtype}, which runs no layer in a narrow format; leave it out, or set a narrow "
                                 "dtype")
            if value is not None and value > layers:
                raise FieldError(f"training.{name}", f"{value} is more than the model's {layers} layers")
        if train.fp32_parameters and train.master_weights_dtype != DType.fp32:
            kept = "torch.autocast over fp32 parameters" if train.uses_autocast else f"{dtype} training"
            raise FieldError("training.master_weights_dtype", f"{train.master_weights_dtype.value} is the master copy "
                             f"16-bit and narrower training keeps beside its weights; {kept} updates its fp32 "
                             "weights in place and keeps none: leave it out")
        first, last = train.bf16_first_layers or 0, train.bf16_last_layers or 0
        if first + last > layers:
            raise FieldError("training.bf16_last_layers", f"{last} with bf16_first_layers {first} is {first + last} "
                             f"layers kept in bf16, more than the model's {layers}; together they may be at most "
                             f"{layers} (every layer in bf16)")
        return self
