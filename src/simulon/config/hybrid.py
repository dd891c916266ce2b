"""What each layer of a model is made of: transformer layers, or the single-block layers of a hybrid model.

A transformer layer is an attention block then an MLP block (or a mixture-of-experts block after the model's
first dense layers); a multi-token-prediction layer after the decoder is the MTP block then a transformer layer
like the decoder's last (MTP_BLOCK). Megatron-Core's hybrid models (megatron/core/models/mamba/mamba_model.py, built by
`allocate_layers` in megatron/core/ssm/mamba_hybrid_layer_allocation.py from `--hybrid-override-pattern`; the
HuggingFace `hybrid_override_pattern` of NemotronH configs) make every layer one block, named by one symbol:

    M  a Mamba-2 mixer (MambaLayer: norm, in_proj, causal conv1d, SSD scan gated by z, group RMSNorm, out_proj)
    G  a gated delta net (GatedDeltaNet: norm, in_proj, causal conv1d, the chunked gated delta rule, gated
       RMSNorm, out_proj; Qwen3-Next's and Qwen3.5's linear attention)
    *  self-attention alone (TransformerLayer with only input_layernorm and self_attention)
    -  an MLP alone (TransformerLayer with only pre_mlp_layernorm and mlp)
    E  a mixture of experts alone (the MLP slot holding a MoE block)

so a Nemotron-H layer count is the length of its pattern, and the pipeline splits those layers like any others;
`|` marks split the pattern into virtual pipeline stages where the parallelism gives no split of its own. Megatron's
unified pattern gives the multi-token-prediction depths after the decoder's, each after a `/` ("M*M-/*E": one depth
of attention then experts; hybrid_layer_allocation.py `parse_hybrid_pattern`, every depth the same pattern; HF
NemotronH's mtp_hybrid_override_pattern, Qwen3-Next's and Qwen3.5's MTP layer a full-attention layer): a hybrid's MTP
layer is the MTP block then the layers of its depth's pattern.
A block is one of BLOCKS; a layer's kind is its tuple of blocks in forward order, which every stage reads (the
tracer's kernels, the parameters, the activation memory, the search's estimate) from `ModelSpec.layer_blocks`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .common import FieldError, HeadCount, StrictModel, Width

Block = Literal["attention", "mlp", "moe", "mamba", "gdn", "mtp"]
LayerKind = tuple[Block, ...]
"""A layer's blocks in forward order."""

MTP_BLOCK: Block = "mtp"
"""What a multi-token-prediction layer runs before its transformer layer (Megatron-Core's
MultiTokenPredictionLayer, megatron/core/transformer/multi_token_prediction.py; DeepSeek-V3, arXiv 2412.19437,
section 2.2): the shared embedding of the tokens one further ahead, a norm of it and of the hidden state (enorm,
hnorm), their concatenation projected from 2h back to h (eh_proj, column-parallel, its output gathered over tp);
its final norm, and its logits through the shared output head, run at the loss (ModelSpec.mtp_layers)."""

MIXERS: tuple[Block, ...] = ("mamba", "gdn")
"""Blocks that are sequence mixers, run alike: a norm, in_proj, a scan over a head split (all-to-all under context
parallelism), out_proj (workload.megatron mixer_forward)."""

DENSE_LAYER: LayerKind = ("attention", "mlp")
MOE_LAYER: LayerKind = ("attention", "moe")

HYBRID_SYMBOLS: dict[str, LayerKind] = {"M": ("mamba",), "G": ("gdn",), "*": ("attention",), "-": ("mlp",),
                                        "E": ("moe",)}
"""Megatron-Core's hybrid layer symbols (hybrid_layer_allocation.py `Symbols`: MAMBA 'M', GDN 'G', ATTENTION '*',
MLP '-', MOE 'E')."""

PIPELINE_MARK = "|"
"""Megatron's pipeline separator in a hybrid pattern (hybrid_layer_allocation.py `select_pipeline_segment`): the
layers between two marks are one virtual pipeline stage, segment c * pp + s on stage s's chunk c."""

MAX_PATTERN = 10_000
"""Symbols of a hybrid pattern: one per layer (config.common.MAX_LAYERS)."""


MTP_SEPARATOR = "/"
"""Megatron's separator before each multi-token-prediction depth's pattern in a unified hybrid pattern
(hybrid_layer_allocation.py `Symbols.MTP_SEPARATOR`)."""


def split_mtp(pattern: str) -> tuple[str, str, int]:
    """(the decoder's pattern, one multi-token-prediction depth's pattern, the depths) of a unified hybrid pattern:
    "M*M-/*E/*E" is ("M*M-", "*E", 2)."""
    decoder, *depths = pattern.split(MTP_SEPARATOR)
    return decoder, depths[0] if depths else "", len(depths)


def check_pattern(pattern: str) -> str:
    """The pattern, or ValueError naming what is not a hybrid layer symbol."""
    decoder, mtp, depths = split_mtp(pattern)
    if depths:
        _check_mtp_pattern(pattern, mtp)
    segments = decoder.split(PIPELINE_MARK)
    if len(segments) > 1 and not all(segments):
        raise ValueError(f"has an empty pipeline segment between {PIPELINE_MARK!r}s; each segment holds one layer "
                         "at least")
    unknown = sorted(set(pattern) - set(HYBRID_SYMBOLS) - {PIPELINE_MARK, MTP_SEPARATOR})
    if unknown:
        raise ValueError(f"{pattern[:60]!r}{'...' if len(pattern) > 60 else ''} has "
                         f"{', '.join(map(repr, unknown))}; a hybrid pattern is one symbol per layer: M (Mamba), "
                         "G (gated delta net), * (attention), - (MLP), E (mixture of experts), with | between "
                         "pipeline stages and / before each multi-token-prediction depth; Megatron's D (DeepSeek "
                         "sparse attention) and + (MLA) layers beside * ones are not modelled (a model's attention is "
                         "one kind: give mla, and its dsa, for all of it)")
    if len(pattern) > MAX_PATTERN:
        raise ValueError(f"{len(pattern):,} symbols, more than the {MAX_PATTERN:,} layers a model may have")
    return pattern


def _check_mtp_pattern(pattern: str, mtp: str) -> None:
    """ValueError where the multi-token-prediction depths after '/' are not one pattern each, alike (Megatron's
    parse_hybrid_pattern), of distinct blocks (a depth's layer is one MTP layer of its blocks here)."""
    depths = pattern.split(MTP_SEPARATOR)[1:]
    if not all(depths) or any(depth != mtp for depth in depths):
        raise ValueError(f"has multi-token-prediction depths {depths!r} after '/': each depth is the same non-empty "
                         "pattern (Megatron's unified pattern, 'M*M-/*E/*E' for two depths of attention then experts)")
    if PIPELINE_MARK in mtp:
        raise ValueError(f"has {PIPELINE_MARK!r} in the multi-token-prediction pattern {mtp!r}: the MTP layers follow "
                         "the decoder on its last stage, marks split the decoder's pattern alone")
    if len(set(mtp)) != len(mtp):
        raise ValueError(f"repeats a block in the multi-token-prediction pattern {mtp!r}, which is not modelled: give "
                         "each of its blocks once ('*E': attention then experts)")


def divides(block: StrictModel, divisor: str, field: str) -> StrictModel:
    """The block, or FieldError at `divisor` where its value does not divide `field`'s."""
    small, big = getattr(block, divisor), getattr(block, field)
    if big % small:
        raise FieldError(divisor, f"{small} does not divide {field} ({big})")
    return block


class MambaSpec(StrictModel):
    """A Mamba-2 mixer (Dao and Gu, "Transformers are SSMs", arXiv 2405.21060; Megatron-Core's MambaMixer):
    d_inner = num_heads x head_dim channels, each head a state of state_size per channel, B and C shared by the
    heads of each of num_groups groups. HuggingFace NemotronH names: mamba_num_heads, mamba_head_dim,
    ssm_state_size, n_groups, conv_kernel, chunk_size."""

    num_heads: HeadCount = Field(description="SSM heads (mamba_num_heads)")
    head_dim: Width = Field(description="channels per head (mamba_head_dim)")
    # the defaults are Megatron-Core's: TransformerConfig mamba_state_dim 128 and mamba_num_groups 8, MambaMixer
    # d_conv 4 and chunk_size 128 (megatron/core/ssm/mamba_mixer.py), as every Nemotron-H config sets them
    state_size: Width = Field(128, description="d_state, N")
    num_groups: HeadCount = Field(8, description="groups sharing B and C; must divide num_heads")
    conv_kernel: Width = Field(4, description="width of the causal depthwise convolution (d_conv)")
    chunk_size: Width = Field(128, description="the SSD scan's chunk length Q")

    @model_validator(mode="after")
    def _groups_divide_heads(self) -> MambaSpec:
        return divides(self, "num_groups", "num_heads")

    @property
    def inner(self) -> int:
        """d_inner: the mixer's channels."""
        return self.num_heads * self.head_dim

    @property
    def conv_channels(self) -> int:
        """Channels of the causal convolution: x, B and C (d_inner + 2 G N)."""
        return mixer_widths(self.num_heads, self.head_dim, self.num_groups, self.state_size)[0]

    @property
    def in_proj_width(self) -> int:
        """in_proj's output: z, x, B, C and dt (2 d_inner + 2 G N + heads)."""
        return mixer_widths(self.num_heads, self.head_dim, self.num_groups, self.state_size)[1]


class GatedDeltaNetSpec(StrictModel):
    """A gated delta net (Yang, Kautz and Hatamizadeh, "Gated Delta Networks", arXiv 2412.06464; Megatron-Core's
    GatedDeltaNet, megatron/core/ssm/gated_delta_net/; HF Qwen3NextGatedDeltaNet): per value head a key_head_dim x
    value_head_dim state, written by the delta rule and decayed by a per-head gate; the query and key heads are
    shared by value_heads / key_heads value heads each (repeated to them before the kernel). HF names (Qwen3-Next,
    Qwen3.5): linear_num_key_heads, linear_num_value_heads, linear_key_head_dim, linear_value_head_dim,
    linear_conv_kernel_dim."""

    key_heads: HeadCount = Field(description="query and key heads (linear_num_key_heads)")
    value_heads: HeadCount = Field(description="value heads, each with its own state (linear_num_value_heads)")
    key_head_dim: Width = Field(description="per head, the query and key dimension (linear_key_head_dim)")
    value_head_dim: Width = Field(description="per head, the value dimension (linear_value_head_dim)")
    conv_kernel: Width = Field(4, description="width of the causal depthwise convolution over q, k and v")
    chunk_size: Width = Field(64, description="the chunked delta rule's chunk length (flash-linear-attention's "
                              "chunk_gated_delta_rule, BT 64, Megatron-Core's GatedDeltaNet chunk_size)")

    @property
    def qk_dim(self) -> int:
        """Channels of the queries (and of the keys): key_heads x key_head_dim."""
        return self.key_heads * self.key_head_dim

    @property
    def v_dim(self) -> int:
        """Channels of the values (and of the output gate z): value_heads x value_head_dim."""
        return self.value_heads * self.value_head_dim

    @property
    def in_proj_width(self) -> int:
        """in_proj's output: q, k, v, z, beta and alpha (2 qk_dim + 2 v_dim + 2 value_heads)."""
        return 2 * self.qk_dim + 2 * self.v_dim + 2 * self.value_heads

    @model_validator(mode="after")
    def _key_heads_divide_value_heads(self) -> GatedDeltaNetSpec:
        return divides(self, "key_heads", "value_heads")


def mixer_widths(heads: int, head_dim: int, groups: int, state: int) -> tuple[int, int]:
    """(convolution channels: x, B and C; in_proj's output: z, x, B, C and dt) of a Mamba-2 mixer or a rank's
    share of one."""
    conv = heads * head_dim + 2 * groups * state
    return conv, heads * head_dim + conv + heads
