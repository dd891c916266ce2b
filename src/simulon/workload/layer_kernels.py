"""The kernels one rank runs for one micro-batch: shapes, FLOPs and bytes of every transformer part.

Built once per workload and shared by every layer and micro-batch (so a 96-layer model does not
create 96 copies), and by every phase: name -> {fwd, bwd_ig, bwd_wg, recompute} -> KernelSpec.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

from ..config.common import DType
from ..config.hybrid import MIXERS, Block, LayerKind, MambaSpec, mixer_widths
from ..config.number_formats import HIGH_PRECISION_GEMMS, TrainingFormat
from ..config.workload import MegatronWorkload, ModelSpec
from .gated_delta import GDN_PRODUCTS, GdnShard, gdn_kernels
from .kernels import (
    FLASH_IMPLEMENTATIONS,
    FULL_MATRIX_LIBRARIES,
    INDEX_BYTES,
    MASK_BYTES,
    KernelClass,
    KernelSpec,
    Phase,
    as_recompute,
    attention,
    gemm,
    gemm_with_backward,
    in_precision,
    memory_bound,
    memory_pair,
    narrow_operands,
)

SPARSE_ATTENTION_FIT = "cudnn"
"""The attention fit DeepSeek sparse attention's kernels are timed with, whatever the run's attention library:
Megatron-Core runs its own DSA kernels (tilelang's or cuDNN's, dsa_kernel_backend) and DeepSeek FlashMLA's, both
issuing the chip's own tensor-core instruction, so cuDNN's fused attention's fit (compute/attention.py), not
FlashAttention-2's mma.sync rate. No sparse kernel is in the tables; FlashMLA's README publishes its sparse prefill (MQA
form, 128 heads, 576/512 dims, top-2048) at up to 640 TFLOP/s forward on an H800 SXM5 and 1,450 on a B200, where this
fit gives 665-686 and 1,445-1,464 at 4K-64K queries (benchmarks/bench_sparse_attention.py)."""

RING_BLOCK = "attn_flash_ring"
"""The attention kernel of one received block of the context-parallel ring (cp - 1 per layer and pass)."""
DOWN_PROJECTIONS = ("attn_q_down", "attn_kv_down")
"""MLA's low-rank down projections, Transformer Engine Linears in Megatron-Core's parallel_mode 'duplicated'
(multi_latent_attention.py MLASelfAttention.__init__): every tensor-parallel rank holds the whole weight and runs
it on the input it has, the whole sequence without sequence parallelism (copies: a model FLOP counted once over the
group, as the estimate's count at tp 1 does, the copies only as time), the rank's share of it (s/tp rows,
`q_compressed: [s / TP, b, q_lora_rank]`) with it, each rank's rows its own model FLOPs."""
LATENT_NORMS = ("attn_q_latent_norm", "attn_kv_latent_norm")
"""MLA's norms of the query and key-value latents (q_layernorm, kv_layernorm; in Megatron-Core's spec fused into
the up projections' TELayerNormColumnParallelLinear), on the down projections' rows: under sequence parallelism the
rank's share, normed before the module all-gathers its output."""


@dataclass(frozen=True)
class Latent:
    """What MLA all-gathers along the sequence between its down and its up projections under sequence parallelism
    (MLASelfAttention.get_query_key_value_tensors): `width` elements a token; `gemm` the column-parallel GEMM whose
    Transformer Engine module gathers it (in the run's narrow format where it quantizes before the gather), None
    where Megatron-Core gathers it itself in 16 bits (gather_from_sequence_parallel_region: the key's rotary part,
    and under sparse attention the key-value latent); `norm` the latent norm run on the rank's rows before."""

    label: str
    width: int
    gemm: str | None
    norm: str | None


@dataclass(frozen=True)
class ColumnGroup:
    """Column-parallel GEMMs of a block whose backward runs beside two collectives (LayerKernels.column_groups):
    their input's re-gather for the wgrads beside the dgrads (`regather` bytes, sequence parallelism alone) and the
    input gradient's reduction beside the wgrads (`reduction` bytes)."""

    gemms: tuple[str, ...]
    regather: float
    reduction: float


UNDEFERRED_WEIGHT_GRADIENTS = ("moe_route",)
"""Weight gradients a split backward (ZB-H1, ZB-V, DualPipe) computes in B, not in W: the MoE router's, which is no
Transformer Engine module and has no WeightGradStore (Megatron-Core's RouterGatingLinearFunction.backward returns
grad_weight beside grad_input, moe/moe_utils.py; MoELayer.backward_dw runs the experts', the shared experts' and the
latent projections' delayed weight gradients, not the router's)."""
INDEXER = ("attn_index_q", "attn_index_k", "attn_index_weights", "attn_index_rope", "attn_index_logits",
           "attn_index_topk", "attn_index_kl")
"""DeepSeek sparse attention's lightning indexer, which every tensor-parallel rank runs whole (LayerKernels.
_sparse_attention); its loss's target is over the rank's own heads."""
QKV_GRAD_CAT = "attn_qkv_grad_cat"
"""The backward-only copy of a rotary model's query, key and value gradients into the fused QKV output's gradient
(rotates_split_qkv), or of any layer's whose query, key or value is copied (copies_query, te_layout_copies: its
gradient comes back in a buffer of its own): a read and a write of each element (torch.cat), QKV_GRAD_CAT_PASSES."""
QKV_GRAD_CAT_PASSES = 2
LAYOUT_COPY = "attn_layout_copy"
"""The forward-only copies Transformer Engine's attention makes of the query, key and value views it cannot take
as they lie (te_layout_copies) before it reads them: get_qkv_layout (attention/dot_product_attention/utils.py) finds
no layout of its for their strides and offsets and makes all three contiguous (x.contiguous(): a read and a write of
each that is not already; one kernel here for the two or three); its backward passes the gradients through. The
attention saves the copies in place of the views, which frees the QKV output: the layer keeps as much as with none
(memory/activations.py)."""
QUERY_COPY = "attn_query_copy"
"""The forward-only copy of a grouped-query layer's query out of the fused QKV output (copies_query): a read and a
write of each of the rank's query elements (and of its output gate's, reshaped alike); its backward is a view."""
TE_ATTENTION_BACKENDS = ("cudnn", "flash")
"""The attention implementations Transformer Engine's DotProductAttention runs (FusedAttention on cuDNN,
FlashAttention), whose layout check makes LAYOUT_COPY."""


def rotates_split_qkv(model: ModelSpec, elementwise: str) -> bool:
    """Whether a layer's rotary embedding turns Megatron-Core's views of the fused QKV output into new tensors.
    get_query_key_value_tensors splits linear_qkv's output into query, key and value views (Transformer Engine's
    SplitAlongDim); apply_rotary_pos_emb (Transformer Engine's fused RoPE) writes the rotated query and key apart
    (fused_single_qkv_rope, off by default in TransformerConfig, is not modelled). So the split's backward gets the
    query's and key's gradients apart from the value's and concatenates them (SplitAlongDim backward: a view only
    where all three lie in one buffer, as Transformer Engine's fused attention writes them for the unrotated
    interleaved layout): QKV_GRAD_CAT. What the layer keeps for backward does not change: the rotary kernel saves only
    its cosine and sine table (FusedRoPEFunc), the core attention the rotated query and key in place of the views.
    Not in HuggingFace's eager models (elementwise eager), which project q_proj, k_proj and v_proj apart, nor in MLA,
    which rotates only a slice of its heads (LayerKernels._mla_rope)."""
    return model.position_embedding == "rope" and model.mla is None and elementwise == "fused"


def te_layout_copies(tensors: dict[str, float], rotated: bool, heads: int, groups: int) -> float:
    """Elements of a Megatron-Core layer's query, key and value (`tensors`, LayerKernels.attention_tensors; `heads`
    query heads in `groups` key/value groups on the rank) that Transformer Engine's get_qkv_layout copies
    (LAYOUT_COPY). Multi-head and unrotated, the split's views interleave at the head (sbh3d): none. Rotated
    (rotates_split_qkv), the query and key are the rotary kernel's contiguous outputs, the value a view whose strides
    are not the key's: the value. Grouped and unrotated, the key and value views lie apart in each group
    ([q1 q2 k1 v1 | q3 q4 k2 v2], no sbhd_sbh2d offsets nor sbhd_sbhd_sbhd ones): the key and value, and the query
    too where the rank holds one group (its reshape was a view, strided; copies_query copied it otherwise)."""
    if rotated:
        return tensors["v"]
    if heads <= groups:
        return 0.0
    return tensors["k"] + tensors["v"] + (tensors["q"] if groups == 1 else 0.0)


def copies_query(model: ModelSpec, elementwise: str, heads: int, groups: int) -> bool:
    """Whether Megatron-Core's get_query_key_value_tensors copies a rank's query (QUERY_COPY), `heads` query heads
    in `groups` key/value groups on the rank (LayerKernels.attention_heads). It views linear_qkv's output as
    [sq, b, ng, (np/ng + 2) hn] and splits off the query [sq, b, ng, np/ng hn], whose group stride keeps the group's
    key and value between; its reshape to [sq, b, np, hn] can be a view only where the group or the heads within it
    are one (merging ng with np/ng needs a group stride of np/ng hn), so with several groups of several heads it
    copies (torch reshape), rotated or not; its backward reshapes the contiguous gradient back, a view. Under
    tp > num_query_groups Megatron-Core gathers one whole group a rank (one group: no copy; simulon gives such a
    rank one group too). Megatron's layers only (elementwise fused, as rotates_split_qkv), not MLA's."""
    return model.mla is None and elementwise == "fused" and groups > 1 and heads > groups


REPLICATED = DOWN_PROJECTIONS + INDEXER
"""Kernels every tensor-parallel rank runs whole (the down projections only without sequence parallelism): their
model FLOPs are counted once over the group (a rank's copy counts 1/tp), the copies only as hardware FLOPs and time.
The indexer's counted on each rank made a small DSA model's model FLOPs a token 17.6% higher at tp 8 than at tp 1."""


def padded_vocabulary(vocab: int, tp: int, divisible_by: int | None) -> int:
    """The vocabulary the embedding and output layer hold: rounded up to a multiple of divisible_by x tp, as
    Megatron-LM pads its tokenizer's (megatron/training/tokenizer: _vocab_size_with_padding), or of tp alone (each
    rank's vocabulary-parallel shard the same size) where nothing pads it."""
    multiple = tp * (divisible_by or 1)
    return -(-vocab // multiple) * multiple


@dataclass(frozen=True)
class ShardShape:
    """Per-rank tensor sizes of one micro-batch."""

    tokens: int          # b * s / cp: rows of every GEMM
    seq: int             # the rank's share of the sequence (its queries)
    full_seq: int        # keys every query attends to (the whole sequence under context parallelism)
    batch: int
    tp: int
    cp: int
    sp: bool
    ep: int
    act_bytes: float     # activation / weight element size
    grad_bytes: float    # gradient element size in data-parallel reductions
    vocab_shard: int     # vocabulary entries of this rank's embedding, LM head and loss (padded_vocabulary / tp)
    quantized_bytes: float | None = None  # bytes per element of a narrow GEMM operand copy (its block scales
    #                                       included), None for 16-bit GEMMs
    etp: int | None = None  # expert tensor parallelism (default tp)
    cp_ring: bool = False   # context parallelism passes keys and values around a ring instead of gathering them
    cp_a2a: int = 1         # context-parallel ranks that trade the sequence split for a head split by all-to-all
    number_format: TrainingFormat | None = None  # the run's narrow format (None: 16-bit GEMMs)
    capacity_factor: float = 1.0  # experts' inputs padded to this multiple of the balanced load (1: dropless)

    @classmethod
    def of(cls, workload: MegatronWorkload) -> ShardShape:
        par, train = workload.parallelism, workload.training
        dtype = train.dtype
        fmt = TrainingFormat.of_workload(workload)
        quantized = fmt.format.quantized
        act_bytes = 2.0 if quantized else dtype.bytes  # narrow GEMMs keep bf16 activations
        default_grad = DType.fp16 if dtype == DType.fp16 else DType.fp32
        seq = train.sequence_length // par.cp
        return cls(tokens=train.micro_batch_size * seq, seq=seq, full_seq=train.sequence_length,
                   batch=train.micro_batch_size, tp=par.tp, cp=par.cp, sp=par.sequence_parallel and par.tp > 1,
                   ep=par.ep, act_bytes=act_bytes, grad_bytes=(train.grad_reduce_dtype or default_grad).bytes,
                   quantized_bytes=fmt.format.operand_bytes() if quantized else None, etp=par.etp,
                   cp_ring=par.cp_ring_size > 1, cp_a2a=par.cp_a2a, number_format=fmt if quantized else None,
                   vocab_shard=padded_vocabulary(workload.model.vocab_size, par.tp,
                                                 train.make_vocab_size_divisible_by) // par.tp,
                   capacity_factor=(moe.capacity_factor or 1.0) if (moe := workload.model.moe) else 1.0)

    def in_bf16(self) -> ShardShape:
        """The same shard with 16-bit GEMMs: a layer the format's recipe keeps in bf16."""
        return replace(self, quantized_bytes=None, number_format=None)

    def one_sequence(self) -> ShardShape:
        """The same shard running one whole sequence (micro-batch 1, no context parallelism): its GEMMs have the
        same weights, so it counts the same parameters (LayerKernels.weights_of)."""
        return replace(self, tokens=self.full_seq, seq=self.full_seq, batch=1, cp=1, cp_ring=False, cp_a2a=1)

    @property
    def expert_tp(self) -> int:
        return self.etp or self.tp

    @property
    def ring_size(self) -> int:
        """Ranks the keys and values pass around (1: no ring)."""
        return self.cp // self.cp_a2a if self.cp_ring else 1

    @property
    def attention_seq(self) -> int:
        """Queries of one attention kernel: the rank's share of the sequence, times the all-to-all group that
        gathers the sequence for a share of the heads."""
        return self.seq * self.cp_a2a

    def balanced_tokens(self, top_k: int) -> int:
        """Token copies the experts on one rank get per micro-batch, balanced: top_k per token, the tokens of the
        tp ranks shared out over the expert-tensor-parallel ones (all of them when etp = tp)."""
        return self.tokens * top_k * self.expert_tp // self.tp

    def routed_tokens(self, top_k: int) -> int:
        """Token copies the experts on one rank process per micro-batch: the balanced load, padded up to (or, below
        1, cut down to) the capacity factor's multiple of it where one is set: Megatron-Core's capacity
        ceil(tokens x top_k / experts x factor) per expert, every expert's input padded to it
        (--moe-pad-expert-input-to-capacity; moe_utils.get_capacity, token_dispatcher.py). Rounded up over the
        rank's experts together (padded), where Megatron rounds each: at most a token an expert fewer."""
        return self.padded(self.balanced_tokens(top_k))

    def padded(self, tokens: int) -> int:
        """A balanced token count at the capacity factor (unchanged without one)."""
        return tokens if self.capacity_factor == 1.0 else math.ceil(tokens * self.capacity_factor)

    def dispatched_tokens(self, top_k: int) -> int:
        """Token copies one rank sends in the expert-parallel dispatch (and gets back in the combine), balanced and
        padded to the capacity factor (routed_tokens): the dispatcher pads each expert's slot before the all-to-all.
        Under sequence parallelism a rank routes its own share of the sequence, top_k copies per token, and the
        copies are gathered across the expert-tensor-parallel group only once they have arrived: Megatron-Core's
        alltoall dispatcher runs the all-to-all over ep, then the all-gather over expert tp (token_dispatcher.py,
        MoEAlltoAllTokenDispatcher: all_to_all, then gather_from_sequence_parallel_region). Without it every tp
        rank holds every token and sends the share its expert-tensor-parallel rank takes (routed_tokens)."""
        return self.padded(self.norm_tokens * top_k) if self.sp else self.routed_tokens(top_k)

    @property
    def gathers_routed_tokens(self) -> bool:
        """Whether the routed tokens are all-gathered over the expert-tensor-parallel group after the dispatch (and
        their expert outputs reduce-scattered before the combine): sequence parallelism with expert tp above 1."""
        return self.sp and self.expert_tp > 1

    @property
    def norm_tokens(self) -> int:
        """Rows of elementwise kernels: sequence parallelism splits them across the TP group."""
        return self.tokens // self.tp if self.sp else self.tokens


BLOCK_PREFIXES: dict[Block, tuple[str, tuple[str, ...]]] = {
    "attention": ("attn_", ()),
    "mlp": ("mlp_", ()),
    "moe": ("moe_", ("mlp_norm", "mlp_residual")),  # the MLP slot's norm and residual around the experts
    "mamba": ("mamba_", ()),
    "gdn": ("gdn_", ()),
    "mtp": ("mtp_", ()),
}
"""Each block's kernels: those whose names start with its prefix, and the ones named."""


@dataclass(frozen=True)
class MambaShard:
    """One rank's share of a Mamba-2 mixer. Tensor parallelism splits its heads and B/C groups (in_proj's output
    and out_proj's input: tp_inner channels); context parallelism splits them again, by all-to-all, each rank then
    scanning the whole sequence of its share (Megatron-Core's MambaContextParallel,
    megatron/core/ssm/mamba_context_parallel.py: z, x, B, C and dt sent before the convolution, the scan's output
    back after it; B and C repeated first where a rank would hold less than one group)."""

    heads: int          # heads each scan runs
    groups: int         # B/C groups each scan runs (at least one: repeated)
    model_groups: float  # the groups of the model this rank accounts for: tp's share over cp
    head_dim: int
    state: int
    chunk: int
    conv: int
    tokens: int         # the rank's tokens (its share of the sequence): in_proj, the output norm, out_proj
    scan_tokens: int    # tokens each scan runs over: the whole sequence with context parallelism
    chunks: int         # (sequence, chunk) pairs of a scan
    tp_inner: int       # in_proj's z and x, and out_proj's input, on this tensor-parallel rank
    tp_in_proj: int     # in_proj's output on this tensor-parallel rank
    cp: int
    sequences: int = 1  # sequences a scan runs (the micro-batch)
    length: int = 0     # tokens of each (the whole sequence)

    @classmethod
    def of(cls, spec: MambaSpec, shape: ShardShape) -> MambaShard:
        t, cp = shape.tp, shape.cp
        tp_groups = spec.num_groups // t
        return cls(heads=spec.num_heads // t // cp, groups=max(tp_groups // cp, 1), model_groups=tp_groups / cp,
                   head_dim=spec.head_dim, state=spec.state_size, chunk=spec.chunk_size, conv=spec.conv_kernel,
                   tokens=shape.tokens, scan_tokens=shape.tokens * cp,
                   chunks=shape.batch * -(-shape.full_seq // spec.chunk_size), tp_inner=spec.inner // t,
                   tp_in_proj=spec.in_proj_width // t, cp=cp, sequences=shape.batch, length=shape.full_seq)

    @property
    def chunk_squares(self) -> int:
        """Sum over a scan's chunks of their tokens squared: a sequence's last chunk holds what is left of it (the
        model's work in the Q x Q products; the kernels run it padded to Q)."""
        whole, left = divmod(self.length, self.chunk)
        return self.sequences * (whole * self.chunk ** 2 + left ** 2)

    @property
    def inner(self) -> int:
        """Channels each scan runs (its heads' x)."""
        return self.heads * self.head_dim

    @property
    def conv_channels(self) -> int:
        """x, B and C of each scan's convolution."""
        return mixer_widths(self.heads, self.head_dim, self.groups, self.state)[0]

    @property
    def scan_in_proj(self) -> int:
        """Channels of in_proj's output each scan reads (z, x, B, C, dt)."""
        return mixer_widths(self.heads, self.head_dim, self.groups, self.state)[1]

    def all_to_all(self) -> dict[str, float]:
        """Elements of each tensor one rank sends in the context-parallel all-to-alls (of its share of the sequence,
        B and C already repeated to a group a rank): z, x, B, C and dt before the scan, its output after."""
        inner, shared = self.tokens * self.tp_inner, self.tokens * self.groups * self.cp * self.state
        return {"z": inner, "x": inner, "B": shared, "C": shared, "dt": self.tokens * self.heads * self.cp,
                "y": inner}


Passes = tuple[tuple[float, float], tuple[float, float]]
"""Forward and backward of a bandwidth-bound op, per element: (16-bit tensors read + written, fp32 bytes)."""


def pass_pair(name: str, elements: float, passes: Passes, act_bytes: float,
              flops_per_element: tuple[float, float]) -> tuple[KernelSpec, KernelSpec]:
    """The forward and input-gradient kernels of an op that streams `passes` over `elements`."""
    return tuple(memory_bound(name, phase, elements * (tensors * act_bytes + fp32), elements, flops)
                 for phase, (tensors, fp32), flops in zip((Phase.fwd, Phase.bwd_ig), passes, flops_per_element,
                                                          strict=True))


SOFTMAX_ROW_ELEMENTS = 1024
"""PyTorch's softmax holds a row of up to 1,024 fp32 elements in registers and reads it once; a longer row is
read three times forward (max, sum, normalise) and twice per input backward (the dot product, then the
gradient): aten/src/ATen/native/cuda/SoftMax.cu, the persistent-softmax limit, before shared-memory
caching came in PyTorch 2.1."""


@dataclass(frozen=True)
class ElementwisePasses:
    """Tensor passes (reads + writes of a whole activation) of the layer's elementwise work, (fwd, bwd)."""

    residual: tuple[float, float]           # dropout and residual add, per hidden element
    activation: tuple[float, float]         # GELU-like, per FFN element
    gated_activation: tuple[float, float]   # act(gate) * up, per FFN element
    softmax: Passes                         # unfused attention, per score
    softmax_long_rows: Passes | None = None  # the same over rows too long for one read of each (None: same)
    autocast_activation: tuple[float, float] | None = None  # `activation` with 16-bit tensors under autocast
    residual_mask: float = 0.0  # bytes per hidden element of a dropout's mask beyond `residual`'s passes
    # a rotary embedding, per query and key element: Megatron-Core's Attention rotates each (apply_rotary_pos_emb; with
    # apply_rope_fusion, on unless --no-rope-fusion in Megatron-LM's arguments.py and in NeMo's Llama recipes,
    # Transformer Engine's fused RoPE kernel, one launch a tensor), reading it and writing the rotated copy, and reads
    # the gradient and writes its inverse rotation backward; the cosine and sine table stays in cache
    rope: tuple[float, float] = (2, 2)

    def activation_passes(self, gated: bool, autocast: bool) -> tuple[float, float]:
        """The MLP activation's passes (in passes of a tensor of the run's activation width), under 16-bit
        autocast or not."""
        if gated:
            return self.gated_activation
        return self.autocast_activation if autocast and self.autocast_activation else self.activation

    def softmax_passes(self, keys: int) -> Passes:
        """The softmax block's passes over rows of `keys` scores."""
        long_rows = keys > SOFTMAX_ROW_ELEMENTS and self.softmax_long_rows
        return long_rows or self.softmax


FUSED_PASSES = ElementwisePasses(
    # bias-dropout-add: read 2, write 1 | read dy, write dx; with dropout the same kernels also write the mask
    # forward and read it backward (Megatron's bias_dropout_add_fused_train, jit-fused: the mask is dropout's only
    # extra tensor, one byte an element whatever the width; its random draws hide behind the bandwidth in a
    # bandwidth-bound kernel, Tri Dao in Dao-AILab/flash-attention issue #56)
    residual=(3, 2),
    residual_mask=MASK_BYTES,
    activation=(2, 3),               # bias-GELU
    gated_activation=(3, 5),
    # Megatron's fused scale-mask-softmax (read, write) then dropout (read, write; 1-byte mask) | dropout's
    # backward (read the gradient and the mask, write), then softmax's (read the gradient and the output, write)
    softmax=((4, 1), (5, 1)),
)
"""Megatron, Transformer Engine and the flash-attention repo: one fused kernel per elementwise block."""
EAGER_PASSES = ElementwisePasses(
    residual=(5.5, 2.5),             # dropout (read, write, 1-byte mask: half a 16-bit pass) then add (read 2, write)
    # GPT-2's tanh GELU as eight PyTorch ops (pow, scale, add, scale, tanh, add, multiply, halve: 18 passes);
    # autograd runs a backward kernel per op and sums the two paths into x (about 24)
    activation=(18, 24),
    # The same under 16-bit autocast (torch.autocast, how HuggingFace models train in mixed precision): pow is
    # on autocast's fp32 list (torch/csrc/autograd/autocast_mode.cpp, CUDA "fp32" ops), so x**3 comes out in fp32
    # and every op after it promotes to fp32: in passes of a 16-bit tensor (a fp32 one is two), halve x (read,
    # write: 2), pow (autocast's cast of x up: 1, 2; then 2, 2), scale (2, 2), add x (1 + 2, 2), scale (2, 2),
    # tanh (2, 2), add 1 (2, 2), multiply (1 + 2, 2), then the next GEMM's autocast cast down (2, 1): 38.
    # Backward, per op in reverse: the cast (1, 2), the product's two gradients (its 16-bit side cast down:
    # 2 + 2, 2, then 2, 1; the fp32 side 2 + 1, 2), tanh's (2 + 2, 2), the scales' (2, 2 each), the add's into x
    # cast down (2, 1), pow's 3x^2 g (1, 2; 2, 2; 2 + 2, 2; cast down 2, 1), the halving's (1, 1), and the three
    # paths summed into x's gradient (two adds, 1 + 1, 1 each): 58.
    autocast_activation=(38, 58),
    gated_activation=(5, 9),         # F.silu(gate) * up: two kernels | their backward
    # Forward: scale and mask (read, write each), cast up for softmax, which autocast runs in fp32 (read;
    # write 4), softmax (read 4, write 4), cast down (read 4; write), dropout (read, write; 1-byte mask).
    # Backward, each in reverse: dropout (read, write; mask), cast (read; write 4), softmax (read the
    # gradient and the output, 8; write 4), cast (read 4; write), mask and scale (read, write each).
    softmax=((8, 17), (8, 21)),
    softmax_long_rows=((8, 25), (8, 29)),
    # HuggingFace's apply_rotary_pos_emb, q * cos + rotate_half(q) * sin: the product by cos (read, write),
    # rotate_half's negated half (half a read and a write) and its cat (read, write), the product by sin (read,
    # write), the sum (read 2, write). Backward: the two products' gradients (read, write each), the negation's (half
    # each way), the halves put back together (read, write) and the two paths summed into the input's gradient.
    rope=(10, 10),
)
"""PyTorch run eagerly (HuggingFace models): every op of the layer is its own kernel over whole tensors."""


CROSS_ENTROPY_PASSES: dict[str, Passes] = {
    # Megatron's vocab-parallel cross entropy, one fp32 pass over the logits per operation. Forward: cast up
    # (read db, write 4), max (read), subtract (read, write), exp (read, write), sum (read), normalise to the
    # softmax kept for backward (read, write). Backward: scale by the loss gradient (read, write), cast down
    # for the LM head's GEMMs (read 4, write db).
    "vocab_parallel": ((1, 36), (1, 12)),
    # one kernel each way (flash-attention's and apex's cross entropy, Megatron-Core's loss fusion): read the
    # logits and keep only the log-sum-exp | read the logits again and write their gradient in place
    "fused": ((1, 0), (2, 0)),
}
"""Per logit, the passes of each cross-entropy implementation."""


@dataclass(frozen=True)
class SparseKeys:
    """The keys DeepSeek sparse attention reads per query of a sequence: query i attends its min(i + 1, top-k) best
    earlier keys (DSAIndexer's top-k over the causal scores, topk = min(index_topk, seq)). Where the sequence is no
    longer than top-k that is every earlier key, dense causal attention; else the mean over the queries,
    (k(k + 1)/2 + (s - k) k) / s, each query a full row of them (no causal mask left to skip). Under context
    parallelism each rank's queries are two balanced chunks (Megatron's zigzag order), whose mean is the sequence's.

    Model FLOPs count top-k keys a query (`model_keys`), the way a dense layer's count every key of the sequence
    whatever the causal mask skips (Narayanan et al.'s full score matrix): continuous where top-k reaches the
    sequence. Counting the band's mean there halved a layer's attention model FLOPs between a window of s and one
    of s - 1 (MFU 8.26% and 7.88% at the same step time)."""

    keys: int
    causal: bool
    model_keys: int

    @classmethod
    def of(cls, seq: int, topk: int) -> SparseKeys:
        if seq <= topk:
            return cls(seq, True, seq)
        return cls(round((topk * (topk + 1) / 2 + (seq - topk) * topk) / seq), False, topk)

    @property
    def model_share(self) -> float:
        """The model FLOPs of the keys read (`keys`, each a full row) that count as model FLOPs."""
        return self.model_keys / self.keys


class LayerKernels:
    """Every kernel spec of the workload, and the parameters each part holds on one rank."""

    def __init__(self, model: ModelSpec, shape: ShardShape, attention_impl: str = "flash",
                 elementwise: str = "fused", cross_entropy: str = "vocab_parallel", autocast: bool = False,
                 all_bf16: bool = False, window: int = 0, nope: bool = False):
        self.model, self.shape, self.attention_impl = model, shape, attention_impl
        self.window = window  # a sliding-window layer's (model.sliding_window), 0: the whole causal context
        # the layer rotates its queries and keys: a rotary model's, but for a NoPE layer (model.nope_every)
        self.rotary = model.position_embedding == "rope" and not nope
        self.cross_entropy, self.elementwise = cross_entropy, elementwise
        # torch.autocast over fp32 parameters, which only 16-bit activations make a mixed precision
        self.autocast = autocast and shape.act_bytes < 4
        self.passes = EAGER_PASSES if elementwise == "eager" else FUSED_PASSES
        self.all_bf16 = all_bf16  # every GEMM in bf16: a layer a narrow format's recipe keeps in 16 bits
        self._layer_params: dict[LayerKind, tuple[float, float]] = {}
        self._twins: dict[tuple[bool, int, bool], LayerKernels] = {}
        self._weight_casts: dict[str, KernelSpec] = {}

    @classmethod
    def of(cls, workload: MegatronWorkload) -> LayerKernels:
        """The kernels of a workload as its training block asks them to run."""
        return cls(*_arguments(workload, ShardShape.of(workload)))

    @classmethod
    def shared(cls, workload: MegatronWorkload) -> LayerKernels:
        """LayerKernels.of(workload), one table per model, shard shape and kernel choices (the last SHARED_TABLES
        kept): strategies that differ only in what the table does not depend on (recomputation, sharding, data
        parallelism, the pipeline) share it; a strategy search times thousands of strategies."""
        return _shared_table(*_arguments(workload, ShardShape.of(workload)))

    @classmethod
    def weights_of(cls, workload: MegatronWorkload, shape: ShardShape | None = None) -> LayerKernels:
        """A shared table to count the workload's parameters on (layer_params, vocab_params): that of one whole
        sequence per rank (ShardShape.one_sequence), the same for every micro-batch and context-parallel size.
        `shape`: the workload's ShardShape.of where the caller has it."""
        return _shared_table(*_arguments(workload, (shape or ShardShape.of(workload)).one_sequence()))

    def at(self, layer: int) -> LayerKernels:
        """The kernels transformer layer `layer` runs: these, or their twin where the run's number format keeps the
        layer in bf16 (config/number_formats.py; same shapes, GEMMs at the bf16 rate, no casts) or the layer attends
        through a sliding window (model.sliding_window: its attention over the window's keys) or is a rotary model's
        NoPE layer (model.nope_every: no rotary kernels), or several of these."""
        return self.variant(*self.variant_of(layer))

    def variant_of(self, layer: int) -> tuple[bool, int, bool]:
        """(kept in bf16, sliding window or 0, NoPE) of transformer layer `layer`: which of the twins it runs."""
        fmt = self.shape.number_format
        bf16 = fmt is not None and fmt.layer_in_bf16(layer)
        window = self.model.sliding_window.size if self.model.windowed(layer) else 0  # type: ignore[union-attr]
        return bf16, window, self.model.position_embedding == "rope" and not self.model.rotates(layer)

    def variant(self, bf16: bool, window: int, nope: bool = False) -> LayerKernels:
        """These kernels, or their twin with every GEMM in bf16, attention through `window` and/or no rotary
        embedding (`nope`; LayerKernels.at)."""
        if not bf16 and not window and not nope:
            return self
        if (bf16, window, nope) not in self._twins:
            self._twins[bf16, window, nope] = LayerKernels(
                self.model, self.shape.in_bf16() if bf16 else self.shape, self.attention_impl, self.elementwise,
                self.cross_entropy, self.autocast, all_bf16=bf16, window=window, nope=nope)
        return self._twins[bf16, window, nope]

    def __getitem__(self, name: str) -> dict[Phase, KernelSpec]:
        return self.table[name]

    def __contains__(self, name: str) -> bool:
        return name in self.table

    @cached_property
    def residual_bytes(self) -> tuple[float, float]:
        """Bytes per hidden element of a block's dropout and residual add, forward and backward: its passes at the
        activations' width, and where the model drops out (model.dropout) the mask the forward writes and the
        backward reads (ElementwisePasses.residual_mask; memory/activations.py keeps it between them)."""
        db, passes = self.shape.act_bytes, self.passes
        mask = passes.residual_mask if self.model.dropout > 0 else 0.0
        return passes.residual[0] * db + mask, passes.residual[1] * db + mask

    @cached_property
    def table(self) -> dict[str, dict[Phase, KernelSpec]]:
        m, sh = self.model, self.shape
        T, t, h, db = sh.tokens, sh.tp, m.hidden_size, sh.act_bytes
        k: dict[str, tuple[KernelSpec, ...]] = {}

        def elementwise(name: str, rows: int, width: int, fwd_tensors: float, bwd_tensors: float,
                        flops_per_element: float = 0.0) -> None:
            elems = rows * width
            k[name] = (memory_bound(name, Phase.fwd, fwd_tensors * elems * db, elems, flops_per_element),
                       memory_bound(name, Phase.bwd_ig, bwd_tensors * elems * db, elems, flops_per_element))

        Tn = sh.norm_tokens
        for name in ("attn_norm", "mlp_norm"):
            elementwise(name, Tn, h, 2, 3)           # read x, write y | read x, dy, write dx
        for name in ("attn_residual", "mlp_residual"):
            k[name] = memory_pair(name, Tn * h, *self.residual_bytes)
        for name, shape in self._attention_projections().items():
            k[name] = gemm_with_backward(name, Tn if name in DOWN_PROJECTIONS else T, *shape, db)
        for latent in self.latents:
            if latent.norm is not None:  # read x, write y | read x, dy, write dx
                elementwise(latent.norm, Tn, latent.width, 2, 3)
        k.update(self._attention_core())
        heads, groups = self.attention_heads()[:2] if m.has_attention else (0, 0)
        tensors = self.attention_tensors() if m.has_attention else {}
        query_copied = copies_query(m, self.elementwise, heads, groups)
        if query_copied:  # the query (and output gate) reshaped out of the grouped QKV output
            queries = tensors["q"] * (2 if m.attention_output_gate else 1)
            k[QUERY_COPY] = (memory_bound(QUERY_COPY, Phase.fwd, 2 * queries * db, queries),)
        if self.rotary and m.mla is None:  # MLA rotates a slice of its heads (_mla_rope, below)
            k["attn_rope"] = memory_pair("attn_rope", tensors["q"] + tensors["k"], *(p * db for p in self.passes.rope))
        elif self.rotary and self.sparse is None and self.elementwise == "fused":
            k["attn_rope"] = self._mla_rope()
        rotated_split = self.rotary and rotates_split_qkv(m, self.elementwise)
        copied = 0.0
        if self.attention_impl in TE_ATTENTION_BACKENDS and m.mla is None and self.elementwise == "fused":
            copied = te_layout_copies(tensors, rotated_split, heads, groups)
        if rotated_split or query_copied or copied:  # dq, dk or dv apart from the rest: all into one gradient
            qkv = tensors["q"] + tensors["k"] + tensors["v"]
            k[QKV_GRAD_CAT] = (memory_bound(QKV_GRAD_CAT, Phase.bwd_ig, qkv * QKV_GRAD_CAT_PASSES * db, qkv),)
        if copied:  # read and write each copied tensor
            k[LAYOUT_COPY] = (memory_bound(LAYOUT_COPY, Phase.fwd, 2 * copied * db, copied),)
        if self.sparse is not None:
            k.update(self._sparse_attention())
        for name in REPLICATED if t > 1 else ():
            # run whole on every tensor-parallel rank: the copies are hardware work, not model FLOPs
            if name in k and not (sh.sp and name in DOWN_PROJECTIONS):
                k[name] = tuple(replace(spec, flops=spec.flops / t) for spec in k[name])
        if m.mla is None and m.kv_heads < t:  # each rank projects a whole key/value head that ranks share
            k["attn_qkv"] = tuple(_model_share(spec, self._qkv_model_share) for spec in k["attn_qkv"])
        n, v_dim = m.num_heads // t, (m.mla.v_head_dim if m.mla else m.head_size)
        k["attn_proj"] = gemm_with_backward("attn_proj", T, h, n * v_dim, db)
        self._mlp(k, "mlp", T, m.ffn_hidden_size // t, groups=1)
        if m.moe is not None:
            moe = m.moe
            # the router scores this rank's own tokens (its sequence share under sequence parallelism); without
            # it every tensor-parallel rank scores them all, copies that are hardware work, not model FLOPs
            k["moe_route"] = tuple(replace(spec, flops=spec.flops * T / (t * Tn))
                                   for spec in gemm_with_backward("moe_route", Tn, moe.num_experts, h, db))
            routed = sh.routed_tokens(moe.top_k)
            elementwise("moe_permute", routed, h, 2, 2)
            elementwise("moe_unpermute", routed, h, 2, 2)
            fe = (moe.expert_ffn_hidden_size or m.ffn_hidden_size) // sh.expert_tp
            self._mlp(k, "moe_expert", routed, fe, groups=moe.num_experts // sh.ep)
            balanced = sh.balanced_tokens(moe.top_k)
            if routed != balanced:  # capacity padding is hardware work, not model FLOPs (Megatron counts top_k's)
                for name in (*self.mlp_inputs("moe_expert"), "moe_expert_linear2"):
                    k[name] = tuple(replace(spec, flops=spec.flops * balanced / routed,
                                            hardware_only_flops=spec.flops * (routed - balanced) / routed)
                                    for spec in k[name])
            if moe.num_shared_experts:
                fs = (moe.shared_expert_ffn_hidden_size or fe * sh.expert_tp) * moe.num_shared_experts // t
                self._mlp(k, "moe_shared", T, fs, groups=1)
        if m.mamba is not None:
            k.update(self._mamba())
        if m.gdn is not None:
            k.update(gdn_kernels(self.gdn_shard, m.hidden_size, Tn, db, self.residual_bytes))
        if m.attention_output_gate:  # out * sigmoid(gate): read both, write | read the gradient, both; write two
            n, hd = m.num_heads // t, m.head_size  # 5 hardware FLOPs an element: the sigmoid's four and the product
            elementwise("attn_gate", T, n * hd, 3, 5, 5)
        V = self.vocab_shard
        k["embedding"] = self.embedding_specs
        elementwise("final_norm", Tn, h, 2, 3)
        if m.mtp_layers:
            self._mtp(k, elementwise)
        k["lm_head"] = gemm_with_backward("lm_head", T, V, h, db)
        k["loss"] = pass_pair("loss", T * V, CROSS_ENTROPY_PASSES[self.cross_entropy], db, (5, 2))
        # what Transformer Engine leaves in 16-bit when the layers' GEMMs run narrow (router and LM head), or
        # every GEMM of a layer the recipe keeps in bf16
        for name in (k if self.all_bf16 else HIGH_PRECISION_GEMMS if sh.quantized_bytes else ()):
            if name in k:
                k[name] = tuple(in_precision(spec, DType.bf16.value) for spec in k[name])
        if sh.quantized_bytes:
            self._quantize_casts(k)
        elif self.autocast:
            self._autocast_casts(k)
        table = {name: {spec.phase: spec for spec in specs} for name, specs in k.items()}
        for phases in table.values():
            if Phase.fwd in phases:
                phases[Phase.recompute] = as_recompute(phases[Phase.fwd])
        return table

    def _mtp(self, k: dict[str, tuple[KernelSpec, ...]], elementwise: Callable[..., None]) -> None:
        """A multi-token-prediction layer's own kernels (config.hybrid.MTP_BLOCK; MultiTokenPredictionLayer): the
        embedding lookup of the shifted tokens, enorm and hnorm, eh_proj from the two concatenated (2h) to this
        rank's h/t columns (column-parallel), and its final norm; its transformer layer runs the decoder's kernels
        and its logits the LM head's."""
        sh, h = self.shape, self.model.hidden_size
        k["mtp_embedding"] = tuple(replace(spec, name="mtp_embedding") for spec in self.embedding_specs)
        for name in ("mtp_enorm", "mtp_hnorm", "mtp_final_norm"):
            elementwise(name, sh.norm_tokens, h, 2, 3)  # the table's: read x, write y | read x, dy, write dx
        k["mtp_eh_proj"] = gemm_with_backward("mtp_eh_proj", sh.tokens, h // sh.tp, 2 * h, sh.act_bytes)

    @property
    def embedding_specs(self) -> tuple[KernelSpec, KernelSpec]:
        """The word embedding's lookup (a gather of this rank's rows) and its weight gradient, a dense table
        (EMBEDDING_GRAD_ROW_BYTES and EMBEDDING_GRAD_TABLE_BYTES)."""
        sh, h = self.shape, self.model.hidden_size
        Tn, db = sh.norm_tokens, sh.act_bytes
        rows, table = EMBEDDING_GRAD_ROW_BYTES, EMBEDDING_GRAD_TABLE_BYTES
        moved = Tn * h * (rows[0] * db + rows[1]) + sh.vocab_shard * h * (table[0] * db + table[1] * sh.grad_bytes)
        return (memory_bound("embedding", Phase.fwd, 2 * Tn * h * db, Tn * h),
                memory_bound("embedding", Phase.bwd_wg, moved, Tn * h))

    def _quantize_casts(self, k: dict[str, tuple[KernelSpec, ...]]) -> None:
        """Narrow GEMMs take operands that Transformer Engine quantizes from the 16-bit tensors, row-wise and
        column-wise (config/number_formats.py): a `<gemm>_cast` kernel before the forward GEMM (once per input
        that several GEMMs share) and before the input-gradient GEMM (its output gradient), each moving
        NumberFormat.cast_bytes (an amax pass first under current scaling and NVFP4, and NVFP4's Hadamard-transformed
        column-wise copy; per-tensor fp8's column-wise copy, a transpose, written only on GPUs whose FP8 GEMMs read
        the TN layout alone: _cast); and a `<gemm>_weight_cast` of the 16-bit weight (weight_casts), or where the
        weights are kept narrow (fp8_params) in per-tensor fp8 or NVFP4, the `<gemm>_weight_transpose` of the narrow
        weight, in MXFP8 gathered 16-bit, the `<gemm>_weight_requantize` of the gathered weight (neither where the
        narrow weights are frozen, LoRA's: TrainingFormat.frozen_weights)."""
        fmt = self.shape.number_format
        # a GLU's gate and up projections are one GEMM in Transformer Engine (fc1), one cast; every attention input
        # GEMM casts its own, MLA's two down projections too (each a Linear with a quantizer of its own, linear.py
        # `inputmat = input_quantizer(inputmat)`), though both read the one norm output
        shared = self.fused_inputs
        for name, specs in list(k.items()):
            fwd = specs[0]
            if fwd.kclass not in (KernelClass.gemm, KernelClass.grouped_gemm) or "precision" in dict(fwd.shape):
                continue
            weights = fmt.format.operand_bytes() if name in self.weightless_gemms else fmt.format.weight_operand_bytes
            k[name] = tuple(narrow_operands(spec, fmt.format.operand_bytes(), weights) for spec in specs)
            k.update(self._operand_casts(name, name in shared, fwd))
            if name in self.weightless_gemms:
                continue
            if not fmt.narrow_weights:
                self._weight_casts[name] = self._cast(f"{name}_weight_cast", Phase.fwd, weight_elements(fwd), True)
            elif fmt.frozen_weights:  # made once before training: nothing a step
                continue
            elif fmt.format.block is None or fmt.format.transposes_gathered_weights:
                self._weight_casts[name] = self._weight_transpose(name, weight_elements(fwd))
            elif fmt.quantize_after_gather:
                self._weight_casts[name] = self._weight_requantize(name, weight_elements(fwd))

    @property
    def fused_inputs(self) -> set[str]:
        """The GEMMs of a GLU beside its first (the gate beside the up projection): one GEMM in Transformer Engine
        (fc1), with one input cast and one set of quantizers."""
        return {*self.mlp_inputs("mlp")[1:], *self.mlp_inputs("moe_expert")[1:], *self.mlp_inputs("moe_shared")[1:]}

    def scaled_gemms(self, kind: LayerKind) -> int:
        """How many GEMMs of a layer of `kind` (in this table: the layer's twin where it is kept in bf16) Transformer
        Engine runs narrow, each with its own quantizers (a module's fp8_meta holds num_gemms of them): every narrow
        GEMM with a weight, a GLU's gate and up projections one (fused_inputs), a grouped GEMM one per expert
        (GroupedLinear's num_gemms); 0 in a 16-bit run."""
        if self.shape.number_format is None:
            return 0
        count = 0
        for name in (n for block in kind for n in self.block_kernels(block)):
            fwd = self[name].get(Phase.fwd)
            if (fwd is not None and fwd.kclass in (KernelClass.gemm, KernelClass.grouped_gemm)
                    and "precision" not in dict(fwd.shape) and name not in self.weightless_gemms
                    and name not in self.fused_inputs):
                count += int(fwd.param("groups"))
        return count

    def _operand_casts(self, name: str, shared: bool, fwd: KernelSpec) -> dict[str, tuple[KernelSpec, ...]]:
        """The casts of narrow GEMM `name`'s activation operands (its forward `fwd`): its input before the forward
        (none where `shared`) and its output gradient before the dgrad (`<name>_cast`). Under sequence parallelism,
        where Transformer Engine's module all-gathers one of them (gathered_gemm_inputs), it quantizes this rank's
        share before the gather (`<name>_gather_cast`, tp times fewer rows: _gather_cast), and per-tensor fp8 makes
        the transpose from the gathered tensor (`<name>_cast` in the phase that reads it: _gathered_transpose), the
        input's for the wgrad after its re-gather (linear.py and layernorm_linear.py backward:
        `update_usage(columnwise_usage=True)`), the output gradient's right after its gather (_all_gather_fp8). A
        format whose inputs are not quantized before the gather (NumberFormat.quantized_sp_gather: a custom recipe)
        is gathered in 16 bits and cast after, the whole sequence: _cast_after_16bit_gather."""
        rows, cols, inner = fwd.param("m"), fwd.param("n"), fwd.param("k")
        elements = {Phase.fwd: 0.0 if shared else rows * inner, Phase.bwd_ig: rows * cols}
        inputs, gradients = self.gathered_gemm_inputs() if self.shape.sp else (set(), set())
        gathered = {Phase.fwd: name in inputs, Phase.bwd_ig: name in gradients}
        if not self.shape.number_format.format.quantized_sp_gather:
            return self._cast_after_16bit_gather(name, elements, gathered[Phase.fwd])
        casts = [self._cast(f"{name}_cast", phase, n) for phase, n in elements.items() if n and not gathered[phase]]
        before = [self._gather_cast(f"{name}_gather_cast", phase, n / self.shape.tp)
                  for phase, n in elements.items() if n and gathered[phase]]
        if self.shape.number_format.format.block is None:  # transposed once gathered, where it is read
            after = {Phase.bwd_wg: elements[Phase.fwd], Phase.bwd_ig: elements[Phase.bwd_ig]}
            casts += [self._gathered_transpose(f"{name}_cast", phase, after[phase])
                      for phase, reads in ((Phase.bwd_wg, Phase.fwd), (Phase.bwd_ig, Phase.bwd_ig))
                      if after[phase] and gathered[reads]]
        return {f"{name}_cast": tuple(casts), **({f"{name}_gather_cast": tuple(before)} if before else {})}

    def _cast_after_16bit_gather(self, name: str, elements: dict[Phase, float],
                                 gathered_input: bool) -> dict[str, tuple[KernelSpec, ...]]:
        """The casts of a GEMM's operands where sequence parallelism gathers them in 16 bits (a custom recipe's,
        MXFP4's: LayerNormLinear and Linear hand its quantizer no input before the gather, and
        gather_along_first_dim gathers the 16-bit tensor and quantizes the whole sequence after, its "High-precision
        communication for quantized tensors"): each before the GEMM that reads it, as without a gather (`elements`
        of each phase), the forward's in the row-wise copy alone (`quantizer.set_usage(rowwise=True,
        columnwise=False)` before the gather), and, where the input is gathered (`gathered_input`), its 16-bit rows
        gathered again for the wgrad and cast into the column-wise copy (set_quantizer_usage_for_wgrad_all_gather)."""
        fmt = self.shape.number_format
        one_copy = fmt.format.operand_bytes()

        def cast(phase: Phase, n: float, copies: int) -> KernelSpec:
            reads = self.shape.act_bytes * (1 + int(fmt.amax_pass) + int(fmt.format.hadamard_columnwise))
            return memory_bound(f"{name}_cast", phase, n * (reads + copies * one_copy), n)

        fwd, grad = elements[Phase.fwd], elements[Phase.bwd_ig]
        casts = [self._cast(f"{name}_cast", Phase.bwd_ig, grad)] if grad else []
        if fwd:
            casts.insert(0, cast(Phase.fwd, fwd, 1) if gathered_input else self._cast(f"{name}_cast", Phase.fwd, fwd))
            if gathered_input:
                casts.append(cast(Phase.bwd_wg, fwd, 1))
        return {f"{name}_cast": tuple(casts)}

    def _gather_cast(self, name: str, phase: Phase, elements: float) -> KernelSpec:
        """The quantization of `elements` of this rank's share of a tensor before a sequence-parallel all-gather
        (Transformer Engine's quantizer on the local rows: layernorm_linear.py and linear.py forward,
        grad_output_preprocess): both copies of a block-scaled format, per-tensor fp8's row-wise data alone (its
        all-gather carries no transpose: Float8Quantizer.supports_only_rowwise_all_gather), as cast_bytes counts a
        GPU reading any layout."""
        fmt = self.shape.number_format
        return memory_bound(name, phase, fmt.format.cast_bytes(elements, self.shape.act_bytes, fmt.amax_pass,
                                                               any_layout=True), elements)

    def _gathered_transpose(self, name: str, phase: Phase, elements: float) -> KernelSpec:
        """Per-tensor fp8's transpose of a gathered tensor of `elements` (Float8TensorStorage._create_transpose: read
        the row-wise data, write the column-wise), all of it transpose_bytes: run only on a GPU whose FP8 GEMMs read
        the TN layout alone."""
        moved = 2 * elements * self.shape.number_format.format.operand_bytes()
        return memory_bound(name, phase, moved, elements, transpose_bytes=moved)

    def _weight_transpose(self, name: str, elements: float) -> KernelSpec:
        """The transpose of a weight kept narrow (fp8_params) each time its data changes, read whole and written
        whole: for per-tensor fp8, Transformer Engine's Float8TensorStorage._create_transpose, which Megatron's
        distributed optimizer calls after the parameter all-gather (transformer_engine/pytorch/tensor/utils.py
        post_all_gather_processing) and the module's update_usage otherwise, where the GPU's FP8 GEMMs read the TN
        layout alone (all of it `transpose_bytes`: none of it runs where the GEMMs read every layout); for a format
        that `transposes_gathered_weights` (NVFP4), its column-wise copy made from the gathered row-wise data and
        scales on every GPU (post_all_gather_processing: _nvfp4_2d_multi_tensor_transpose)."""
        fmt = self.shape.number_format.format
        moved = 2 * elements * fmt.weight_operand_bytes
        return memory_bound(f"{name}_weight_transpose", Phase.fwd, moved, elements,
                            transpose_bytes=moved if fmt.block is None else 0.0)

    def _weight_requantize(self, name: str, elements: float) -> KernelSpec:
        """The quantization of a weight kept narrow that Megatron's distributed optimizer all-gathers in 16 bits
        (TrainingFormat.quantize_after_gather, MXFP8): _ParamAndGradBucketGroup._post_param_sync casts each gathered
        16-bit weight into both its quantized copies (copy_tensors_to_quantized_params), then zeroes the gathered
        16-bit data in the gradient buffer it borrowed (`bucket.param_data.zero_()`, one write more an element;
        megatron/core/distributed/param_and_grad_buffer.py): once each time the weights are gathered."""
        cast = self._cast(f"{name}_weight_requantize", Phase.fwd, elements, True)
        zeroed = elements * self.shape.act_bytes
        return memory_bound(cast.name, Phase.fwd, cast.bytes + zeroed, elements, transpose_bytes=cast.transpose_bytes)

    def _cast(self, name: str, phase: Phase, elements: float, weight: bool = False) -> KernelSpec:
        """A cast of `elements` 16-bit values to the run's narrow format (NumberFormat.cast_bytes; a weight's in its
        weights' scale blocks), the transpose it writes on a GPU whose FP8 GEMMs read the TN layout alone marked as
        such (NumberFormat.transpose_bytes): the trace is the same on every GPU, which times it by its own layout
        (KernelSpec.bytes_on)."""
        fmt = self.shape.number_format
        block = fmt.format.weight_block if weight else None
        moved = fmt.format.cast_bytes(elements, self.shape.act_bytes, fmt.amax_pass, block, weight=weight)
        return memory_bound(name, phase, moved, elements, transpose_bytes=fmt.format.transpose_bytes(elements, block))

    def _autocast_casts(self, k: dict[str, tuple[KernelSpec, ...]]) -> None:
        """torch.autocast keeps the parameters in fp32 and casts each weight a GEMM reads to 16 bits when the
        forward reaches it: a `<gemm>_cast` of the weight (read 4 bytes, write 2) before every forward, at every
        micro-batch, because autocast empties its cast cache when its context exits (torch.autocast.__exit__,
        torch.clear_autocast_cache) and the training loop enters it once per forward. Autograd takes the 16-bit
        weight gradient back through the cast (read 2, write 4) and accumulates it into the fp32 .grad (read 4 + 4,
        write 4): 18 bytes per parameter after each weight-gradient GEMM, counted at every micro-batch (the first
        of a step only stores it: 6)."""
        master, half = DType.fp32.bytes, self.shape.act_bytes
        cast, accumulate = master + half, half + master + 3 * master  # per weight element: 6 and 18 bytes
        for name, specs in list(k.items()):
            fwd = specs[0]
            if fwd.kclass not in (KernelClass.gemm, KernelClass.grouped_gemm) or name in self.weightless_gemms:
                continue
            weights = weight_elements(fwd)
            k[f"{name}_cast"] = (memory_bound(f"{name}_cast", Phase.fwd, cast * weights, weights),
                                 memory_bound(f"{name}_cast", Phase.bwd_wg, accumulate * weights, weights))

    def weight_cast(self, name: str, microbatch: int) -> KernelSpec | None:
        """The kernel quantizing GEMM `name`'s 16-bit weight before its forward at `microbatch`, if it runs then:
        at the first micro-batch of the step where Transformer Engine caches the quantized weight, at every one
        where it does not (config/number_formats.py TrainingFormat.of_workload). Kept out of `table`, whose
        kernels run at every micro-batch (the search's estimate leaves this once-a-step cost out)."""
        spec, fmt = self.weight_casts.get(name), self.shape.number_format
        if spec is None or (fmt.weight_cache and microbatch > 0):
            return None
        return spec

    @property
    def weight_casts(self) -> dict[str, KernelSpec]:
        """GEMM name -> the kernel quantizing its 16-bit weight (none unless the run is narrow), or transposing its
        per-tensor fp8 weight where the run keeps the weights in fp8 (fp8_params: _weight_transpose), or quantizing
        the 16-bit weight gathered for a format kept narrow that gathers in 16 bits (_weight_requantize)."""
        _ = self.table  # built with it
        return self._weight_casts

    @property
    def vocab_shard(self) -> int:
        return self.shape.vocab_shard

    @property
    def _qkv_model_share(self) -> float:
        """The share of the query/key/value projection's FLOPs that are model FLOPs where fewer key/value heads than
        tensor-parallel ranks make each rank project a whole head (as Megatron-Core refuses and simulon allows):
        the rank's kv_heads / tp of the keys and values, with its queries."""
        m, t = self.model, self.shape.tp
        queries = m.num_heads // t * (2 if m.attention_output_gate else 1)
        return (queries + 2 * m.kv_heads / t) / (queries + 2 * max(m.kv_heads // t, 1))

    def _attention_projections(self) -> dict[str, tuple[int, int]]:
        """name -> (n, k) of the GEMMs from the hidden state to queries, keys and values."""
        m, t, h = self.model, self.shape.tp, self.model.hidden_size
        n = m.num_heads // t
        if m.mla is None:  # with an output gate, the query projection makes each head's gate too
            kv, queries = max(m.kv_heads // t, 1), n * (2 if m.attention_output_gate else 1)
            return {"attn_qkv": ((queries + 2 * kv) * m.head_size, h)}
        a = m.mla
        qk_dim = a.qk_nope_head_dim + a.qk_rope_head_dim
        # the low-rank down projections (DOWN_PROJECTIONS) are duplicated across the tensor-parallel group
        shapes = ({"attn_q_down": (a.q_lora_rank, h), "attn_q_up": (n * qk_dim, a.q_lora_rank)}
                  if a.q_lora_rank else {"attn_q": (n * qk_dim, h)})
        shapes["attn_kv_down"] = (a.kv_lora_rank + a.qk_rope_head_dim, h)
        if a.dsa is None:  # absorbed into the query and the output instead (sparse_attention)
            shapes["attn_kv_up"] = (n * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank)
        return shapes

    def _mla_rope(self) -> tuple[KernelSpec, KernelSpec]:
        """MLA's rotary slice as Megatron-Core applies it with apply_rope_fusion (on unless --no-rope-fusion in
        Megatron-LM's arguments.py; MLASelfAttention qkv_up_proj_and_rope_apply): only the last qk_rope_head_dim of
        each query head and the key's rotary part k_pe, one per token shared by the heads, rotate. Two Triton kernels
        (megatron/core/fusions/fused_mla_yarn_rope_apply.py): fused_apply_mla_rope_for_q rotates the query's rotary
        slice in place (reads and writes it; its backward the gradient's the same way), and fused_apply_mla_rope_for_kv
        reads linear_kv_up_proj's output and k_pe and writes the key (each head's nope part and the rotated k_pe) and
        the value apart (its backward reads their gradients and writes the up projection's and k_pe's, summed over
        the heads). Per token: n heads of qk_nope_head_dim k, qk_rope_head_dim r and v_head_dim v, 2nr for the query
        and n(k + v) + r read, n(k + r) + nv written for the key and value, each way; the cosine and sine table stays
        in cache. MLA's absorbed (sparse attention) form is not modelled here."""
        mla, sh = self.model.mla, self.shape
        n, k, r, v = self.model.num_heads // sh.tp, mla.qk_nope_head_dim, mla.qk_rope_head_dim, mla.v_head_dim
        moved = sh.tokens * (2 * n * r + n * (k + v) + r + n * (k + r) + n * v)
        return memory_pair("attn_rope", moved, sh.act_bytes, sh.act_bytes)  # every element moved once each way

    @property
    def attention_inputs(self) -> list[str]:
        return list(self._attention_projections())

    @property
    def down_projections(self) -> list[str]:
        """MLA's GEMMs on the rank's own rows of the hidden state (DOWN_PROJECTIONS), in forward order."""
        return [name for name in DOWN_PROJECTIONS if name in self._attention_projections()]

    @cached_property
    def latents(self) -> list[Latent]:
        """MLA's inputs of its up projections and of its attention that sequence parallelism all-gathers, in forward
        order (none without MLA): the key's rotary part, split from the key-value down projection's output and
        gathered by Megatron-Core; the query latent, normed and gathered by linear_q_up_proj (without a query
        latent, linear_q_proj's input, the hidden state, gathered by that column-parallel Linear); the key-value
        latent, normed and gathered by linear_kv_up_proj, or under sparse attention by Megatron-Core
        (AbsorbedMLASelfAttention: `kv_compressed = gather_from_sequence_parallel_region(kv_compressed)`)."""
        mla = self.model.mla
        if mla is None:
            return []
        q_norm, kv_norm = LATENT_NORMS
        query = (Latent("attn_q_gather", mla.q_lora_rank, "attn_q_up", q_norm) if mla.q_lora_rank
                 else Latent("attn_q_gather", self.model.hidden_size, "attn_q", None))
        kv_up = "attn_kv_up" if mla.dsa is None else None
        return [Latent("attn_rope_gather", mla.qk_rope_head_dim, None, None), query,
                Latent("attn_kv_gather", mla.kv_lora_rank, kv_up, kv_norm)]

    def latent_bytes(self, latent: Latent, phase: Phase = Phase.fwd) -> float:
        """Bytes of `latent` over the whole sequence of the rank's micro-batch as its all-gather in `phase` moves it
        (the forward's, or the wgrad's re-gather: narrow_gather_bytes where Transformer Engine's module gathers it
        quantized), or in the backward (Phase.bwd_ig) as its gradient's reduction moves it, in 16 bits."""
        narrow = (self.narrow_gather_bytes(latent.gemm, phase)
                  if latent.gemm is not None and phase != Phase.bwd_ig else None)
        return self.shape.tokens * latent.width * self.shape.act_bytes if narrow is None else narrow

    def block_input_gathers(self, block: Block) -> list[float]:
        """Bytes of each sequence-parallel all-gather of a block's column-parallel inputs in the forward: MLA's
        latents, or the block's one input (block_gather_bytes)."""
        if block == "attention" and self.latents:
            return [self.latent_bytes(latent) for latent in self.latents]
        return [self.block_gather_bytes(block)[0]]

    def column_groups(self, block: Block) -> list[ColumnGroup]:
        """A block's column-parallel GEMMs in the groups whose backward collectives run beside them (workload.megatron
        column_block_backward): MLA's up projections each with its latent's re-gather and gradient reduction, and
        under sequence parallelism the reductions of the latents Megatron-Core gathered itself, beside no GEMM; or
        the GEMMs reading the block's input, with its re-gather (block_gather_bytes) and the hidden state's gradient.
        Reductions are reduce-scatters under sequence parallelism, all-reduces without; re-gathers only under it."""
        if block == "attention" and self.latents:
            return [ColumnGroup((latent.gemm,) if latent.gemm else (),
                                self.latent_bytes(latent, Phase.bwd_wg) if latent.gemm else 0.0,
                                self.latent_bytes(latent, Phase.bwd_ig))
                    for latent in self.latents if latent.gemm is not None or self.shape.sp]
        gemms = {"attention": self.attention_inputs, "mlp": self.mlp_inputs("mlp"), "moe": ["moe_route"],
                 "mtp": ["mtp_eh_proj"]}.get(block, [f"{block}_in_proj"])
        return [ColumnGroup(tuple(name for name in gemms if name in self), self.block_gather_bytes(block)[0],
                            self.shape.tokens * self.model.hidden_size * self.shape.act_bytes)]

    def attention_heads(self) -> tuple[int, int, int, int]:
        """(query heads, key/value heads, query-key size, value size) of one tensor-parallel rank, before any
        context-parallel all-to-all splits the heads."""
        m, sh = self.model, self.shape
        n = m.num_heads // sh.tp
        if m.mla is None:
            return n, max(m.kv_heads // sh.tp, 1), m.head_size, m.head_size
        if m.mla.dsa is not None:  # MLA's MQA form: one key, the latent with its rotary part; the latent as value
            return n, 1, m.mla.kv_lora_rank + m.mla.qk_rope_head_dim, m.mla.kv_lora_rank
        return n, n, m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim, m.mla.v_head_dim

    def attention_tensors(self) -> dict[str, float]:
        """Elements of Q, K, V and the attention output one rank holds of its share of the sequence (what a
        context-parallel all-to-all redistributes)."""
        n, kv, qk_dim, v_dim = self.attention_heads()
        tokens = self.shape.tokens
        return {"q": tokens * n * qk_dim, "k": tokens * kv * qk_dim, "v": tokens * kv * v_dim,
                "out": tokens * n * v_dim}

    def _attention_core(self) -> dict[str, tuple[KernelSpec, ...]]:
        sh = self.shape
        n, kv, qk_dim, v_dim = self.attention_heads()
        n, kv = n // sh.cp_a2a, kv // sh.cp_a2a  # an all-to-all group splits the heads, gathers the sequence
        b, sq, sk, db = sh.batch, sh.attention_seq, sh.full_seq, sh.act_bytes
        if self.sparse is not None:  # each query's selected keys, of the whole sequence
            return {"attn_flash": tuple(_model_share(attention(phase, b, n, kv, sq, self.sparse.keys, qk_dim, v_dim,
                                                               self.sparse.causal, db, SPARSE_ATTENTION_FIT),
                                                     self.sparse.model_share)
                                        for phase in (Phase.fwd, Phase.bwd_ig))}
        if sh.ring_size > 1 and self.attention_impl in FLASH_IMPLEMENTATIONS:
            # the ring's blocks, the rank's queries against one rank's keys: its own (causal) and each received
            # one, of which the load balancing over 2*cp chunks leaves half to compute (half the queries or half
            # the keys), as much as the causal block: the model FLOPs of a full block each, half of them executed
            block = tuple(attention(phase, b, n, kv, sq, sq, qk_dim, v_dim, True, db, self.attention_impl)
                          for phase in (Phase.fwd, Phase.bwd_ig))
            return {"attn_flash": block, RING_BLOCK: block}
        tiled = self.attention_impl in FLASH_IMPLEMENTATIONS and self.attention_impl not in FULL_MATRIX_LIBRARIES
        if tiled and self.window and self.window < sk and self.chunked:  # a batch of chunks, each causal
            return {"attn_flash": self._chunked_core(b, n, kv, sk, qk_dim, v_dim, db)}
        if tiled and self.window and self.window < sk:
            # a sliding window: query i attends its min(i + 1, window) latest keys, the band DeepSeek's sparse
            # attention's top-k makes too (SparseKeys), each query a row of their mean count; the tiled kernels
            # walk the key blocks the band straddles (compute.attention), PyTorch's math attention masks the whole
            # matrix, as it does for causality
            keys = SparseKeys.of(sk, self.window)
            return {"attn_flash": tuple(_model_share(attention(phase, b, n, kv, sq, keys.keys, qk_dim, v_dim, False,
                                                               db, self.attention_impl, self.window),
                                                     keys.model_share)
                                        for phase in (Phase.fwd, Phase.bwd_ig))}
        # a library that computes the whole matrix under a window (PyTorch's math attention, or unfused GEMMs)
        # takes the whole matrix's time, but the model's FLOPs are the window's, whatever runs them
        band = self.window_keys(sk) / sk if self.window and self.window < sk else 1.0
        if self.attention_impl in FLASH_IMPLEMENTATIONS:
            return {"attn_flash": tuple(_model_share(attention(phase, b, n, kv, sq, sk, qk_dim, v_dim, True, db,
                                                               self.attention_impl), band)
                                        for phase in (Phase.fwd, Phase.bwd_ig))}
        return {name: tuple(_model_share(k, band) for k in kernels)
                for name, kernels in self._unfused(b, n, sq, sk, qk_dim, v_dim, db).items()}

    @property
    def chunked(self) -> bool:
        """Whether the layer's window is a chunk (model.sliding_window.chunked: Llama 4's chunked attention)."""
        return self.model.sliding_window is not None and self.model.sliding_window.chunked

    def _chunked_core(self, b: int, n: int, kv: int, sk: int, qk_dim: int, v_dim: int,
                      db: float) -> tuple[KernelSpec, ...]:
        """Chunked attention over a sequence of `sk` tokens (the whole sequence: context parallelism only by
        all-to-all, as a sliding window's): each chunk of `window` tokens a causal attention of its own, timed as
        one kernel over the batch of chunks, the last and shorter chunk as a whole one; model FLOPs count each
        query's chunk as a dense layer counts its sequence (the chunk's whole score matrix), the last chunk its own."""
        chunk = self.window
        chunks = -(-sk // chunk)
        share = self.window_keys(sk) * sk / (chunks * chunk ** 2)
        return tuple(_model_share(attention(phase, b * chunks, n, kv, chunk, chunk, qk_dim, v_dim, True, db,
                                            self.attention_impl), share)
                     for phase in (Phase.fwd, Phase.bwd_ig))

    def window_keys(self, sk: int) -> float:
        """Keys a query of this windowed layer counts in model FLOPs over a sequence of `sk` tokens, as a dense
        layer's counts all `sk` (Narayanan et al.'s whole score matrix): the window's (SparseKeys.model_keys), or
        under chunked attention its chunk's, the last chunk's its own length, on average over the queries."""
        chunk = self.window
        if not self.chunked:
            return chunk
        last = sk - (-(-sk // chunk) - 1) * chunk
        return ((sk - last) * chunk + last * last) / sk

    def _unfused(self, b: int, n: int, sq: int, sk: int, qk_dim: int, v_dim: int,
                 db: float) -> dict[str, tuple[KernelSpec, ...]]:
        """Unfused attention: scores Q K^T and context P V as batched GEMMs over b*heads (m counts the rows of all
        of them), the full score matrix materialised in between (scale, mask, softmax, dropout: the passes of
        ElementwisePasses.softmax). Each backward is two GEMMs of the forward's size."""
        batches, scores = b * n, b * n * sq * sk
        return {
            "attn_scores": (gemm("attn_scores", Phase.fwd, batches * sq, sk, qk_dim, db, batches, batched=True),
                            gemm("attn_scores", Phase.bwd_ig, 2 * batches * sq, qk_dim, sk, db, 2 * batches,
                                 batched=True)),
            "attn_softmax": pass_pair("attn_softmax", scores, self.passes.softmax_passes(sk), db, (5, 5)),
            "attn_context": (gemm("attn_context", Phase.fwd, batches * sq, v_dim, sk, db, batches, batched=True),
                             gemm("attn_context", Phase.bwd_ig, 2 * batches * sq, v_dim, sk, db, 2 * batches,
                                  batched=True)),
        }

    @cached_property
    def sparse(self) -> SparseKeys | None:
        """The keys DeepSeek sparse attention reads per query (None: the model's attention is dense)."""
        mla = self.model.mla
        return None if mla is None or mla.dsa is None else SparseKeys.of(self.shape.full_seq, mla.dsa.index_topk)

    def _sparse_attention(self) -> dict[str, tuple[KernelSpec, ...]]:
        """DeepSeek sparse attention's kernels besides the attention itself (config.workload.DSASpec), as
        Megatron-Core runs them (AbsorbedMLASelfAttention with DSAttention, experimental_attention_variant/):

        - MLA in its MQA form: the key up-projection absorbed into each head's query (attn_q_absorb, q_nope of
          qk_nope_head_dim -> kv_lora_rank per head) and the value up-projection applied to each head's latent
          output (attn_v_up, kv_lora_rank -> v_head_dim): per-head einsums against the weights of MLA's kv_up, its
          FLOPs, in two batched products;
        - the lightning indexer (DSAIndexer), on the whole sequence on every tensor-parallel rank (its projections
          are duplicated, its inputs all-gathered under sequence parallelism and detached, so only its weight
          gradients run): its queries from the query latent (attn_index_q: q_lora_rank -> H_I x d_I), its single
          key and its per-head weights from the hidden state (attn_index_k, attn_index_weights); the key's
          LayerNorm, the rotary embedding and the Hadamard rotation of both (attn_index_rope); the scores of every
          earlier key, ReLU and weighted sum over heads fused in (attn_index_logits: d_I x H_I per score, the causal
          half executed; model FLOPs count the whole matrix, as attention's do); the top-k selection over them
          (attn_index_topk: read the fp32 scores, write the indices);
        - the indexer's KL loss on the selected keys (the sparse loss, dsa_indexer_use_sparse_loss; DeepSeek-V3.2's
          sparse training stage): the main attention's probabilities there, summed over this rank's heads
          (attn_index_target, an attention pass without values; then all-reduced over tp) and the indexer's own
          scores and their log-softmax (attn_index_kl), whose backward is the only one the indexer has.

        Every attention-like part is timed with cuDNN's fit (SPARSE_ATTENTION_FIT)."""
        m, sh, db = self.model, self.shape, self.shape.act_bytes
        mla, dsa, keys = m.mla, m.mla.dsa, self.sparse
        n, h, T, b, s = m.num_heads // sh.tp, m.hidden_size, sh.tokens, sh.batch, sh.seq
        heads, dim, full = dsa.index_heads, dsa.index_head_dim, sh.full_seq
        k: dict[str, tuple[KernelSpec, ...]] = {
            "attn_q_absorb": gemm_with_backward("attn_q_absorb", n * T, mla.kv_lora_rank, mla.qk_nope_head_dim, db,
                                                n, batched=True),
            "attn_v_up": gemm_with_backward("attn_v_up", n * T, mla.v_head_dim, mla.kv_lora_rank, db, n, batched=True),
        }
        for name, cols, inner in (("attn_index_q", heads * dim, mla.q_lora_rank or h),
                                  ("attn_index_k", dim, h), ("attn_index_weights", heads, h)):
            fwd, _, weight_grad = gemm_with_backward(name, T, cols, inner, db)
            k[name] = (fwd, weight_grad)
        k["attn_index_rope"] = memory_pair("attn_index_rope", T * (heads + 1) * dim, 2 * db, 3 * db)
        causal_keys = (full + 1) // 2  # per query on average (context-parallel ranks hold balanced chunks)
        logits = gemm("attn_index_logits", Phase.fwd, T, causal_keys, heads * dim, db, b, batched=True)
        k["attn_index_logits"] = (replace(logits, flops=2.0 * T * full * heads * dim),)
        scores, selected = T * causal_keys, T * min(dsa.index_topk, full)
        k["attn_index_topk"] = (memory_bound("attn_index_topk", Phase.fwd,
                                             DType.fp32.bytes * scores + INDEX_BYTES * selected, scores),)
        target = attention(Phase.fwd, b, n, 1, s, keys.keys, mla.kv_lora_rank + mla.qk_rope_head_dim, 0,
                           keys.causal, db, SPARSE_ATTENTION_FIT)
        k["attn_index_target"] = (_model_share(replace(target, name="attn_index_target"), keys.model_share),)
        k["attn_index_kl"] = tuple(_model_share(replace(attention(phase, b, heads, 1, s, keys.keys, dim, 0, keys.causal,
                                                                  db, SPARSE_ATTENTION_FIT), name="attn_index_kl"),
                                                keys.model_share)
                                   for phase in (Phase.fwd, Phase.bwd_ig))
        return k

    @property
    def indexer_gemms(self) -> list[str]:
        """The lightning indexer's projections (weights duplicated across tensor parallelism), in forward order."""
        return ["attn_index_q", "attn_index_k", "attn_index_weights"] if self.sparse is not None else []

    @property
    def indexer_input_bytes(self) -> float:
        """The hidden state and the query latent the indexer all-gathers over tp under sequence parallelism (whole)."""
        m, sh = self.model, self.shape
        return sh.tokens * (m.hidden_size + (m.mla.q_lora_rank or m.hidden_size)) * sh.act_bytes

    @property
    def indexer_target_bytes(self) -> float:
        """The indexer loss's target, fp32 per query and selected key, all-reduced over tp (its heads' sums)."""
        return DType.fp32.bytes * self.shape.tokens * min(self.model.mla.dsa.index_topk, self.shape.full_seq)

    @property
    def latent_key_bytes(self) -> float:
        """MLA's MQA-form key of this rank's share of the sequence, the latent and its rotary part (the latent is the
        value as well): what context parallelism all-gathers for sparse attention (DSAttention, cp_comm_type
        allgather)."""
        mla = self.model.mla
        return self.shape.tokens * (mla.kv_lora_rank + mla.qk_rope_head_dim) * self.shape.act_bytes

    @property
    def indexer_key_bytes(self) -> float:
        """The indexer's keys of this rank's share of the sequence, which context parallelism all-gathers (and
        reduce-scatters their gradients back)."""
        return self.shape.tokens * self.model.mla.dsa.index_head_dim * self.shape.act_bytes

    @property
    def indexer_params(self) -> float:
        """Parameters of one layer's lightning indexer: its projections and its key's LayerNorm (weight and bias)."""
        return self.weights(self.indexer_gemms) + 2 * self.model.mla.dsa.index_head_dim if self.sparse else 0.0

    def _mamba(self) -> dict[str, tuple[KernelSpec, ...]]:
        """A Mamba-2 layer on one rank (Megatron-Core's MambaLayer and MambaMixer on mamba_ssm's memory-efficient
        path, `mamba_split_conv1d_scan_combined`, ssd_combined.py), in forward order: the norm; in_proj,
        column-parallel, from the hidden state to z, x, B, C and dt of the rank's heads and groups
        (config/hybrid.py MambaSpec); with context parallelism, all-to-alls to the rank's share of the heads over the
        whole sequence (MambaShard); the causal depthwise conv1d with its SiLU over x, B and C; the SSD scan over
        chunks of Q tokens (Dao and Gu, arXiv 2405.21060, section 6), five kernels: the cumulative decay of each
        chunk (chunk_cumsum), each chunk's final state B^T X per head (chunk_state: N x P from k = Q), the states
        passed from chunk to chunk (state_passing, fp32, sequential over chunks), C B^T per group (bmm_chunk: Q x Q
        from k = N, the whole square) and the output per head, C times the entering state plus the decay-masked
        C B^T times X (chunk_scan: Q x P from k = N + Q, the Q x Q part causal, so that it executes about
        k = N + Q/2), gated by silu(z) in the same kernel; then, back on the sequence split, the RMSNorm within each
        group (no communication) and out_proj, row-parallel; the residual add. The scan's matrix products are
        Triton `tl.dot` tiles, timed as batched GEMMs. Backward (`_mamba_chunk_scan_combined_bwd`) recomputes what
        the forward did not keep (cumsum, C B^T, the chunk states and their passing), then runs each product's
        gradients: three sets of each forward product's size, of which two are model FLOPs (chunk_state:
        recomputed, dstates, dB; bmm_chunk: recomputed, two bmm_chunk_bwd; chunk_scan: dx, dC and the dCB and ddA
        products); and the convolution is re-run before its gradient."""
        m, sh, db = self.model, self.shape, self.shape.act_bytes
        ms, h = self.mamba_shard, m.hidden_size
        T, Tn = sh.tokens, sh.norm_tokens
        N, P, Q = ms.state, ms.head_dim, ms.chunk

        # bandwidth-bound kernels (memory_pair) whose FLOPs per element are counted from their operations: the
        # filter's multiply-adds and SiLU's five for the convolution, softplus, exp and the running sum for cumsum, a
        # decay's multiply-add for the state passing, square, sum, scale and gate for the norm
        def scan_gemm(name: str, problems: int, rows: int, cols: int, inner_run: int,
                      model: float) -> tuple[KernelSpec, ...]:
            """`problems` (rows x cols) products of one launch, executing inner_run of the inner dimension, padded to
            whole chunks; the backward runs three such sets, two of them model FLOPs and the recomputed one
            hardware FLOPs alone (`model` a forward's: the chunks as long as the sequence leaves them, and where
            context parallelism repeats B and C for ranks that would hold less than a group, the model's groups)."""
            fwd = gemm(name, Phase.fwd, problems * rows, cols, inner_run, db, problems, batched=True)
            bwd = gemm(name, Phase.bwd_ig, 3 * problems * rows, cols, inner_run, db, 3 * problems, batched=True)
            return replace(fwd, flops=model), replace(bwd, flops=2 * model, hardware_only_flops=model)

        # the model's work in the products, per head (per group for C B^T), over the scan's tokens L and its chunks
        # q_c: B^T X 2 N P L, C B^T 2 N sum q_c^2, C S + (C B^T) X 2 P (N L + sum q_c^2)
        tokens, squares = ms.sequences * ms.length, ms.chunk_squares

        return {
            "mamba_norm": memory_pair("mamba_norm", Tn * h, 2 * db, 3 * db),
            "mamba_in_proj": gemm_with_backward("mamba_in_proj", T, ms.tp_in_proj, h, db),
            # read x, B, C and write the SiLU of their convolution | the forward re-run (2), then read x and the
            # output gradient and write the input gradient (3), the filter's gradient reduced on the way
            "mamba_conv1d": memory_pair("mamba_conv1d", ms.scan_tokens * ms.conv_channels, 2 * db, 5 * db,
                                     2 * ms.conv + 5),
            # dt (16-bit) in, its softplus and the cumulative decay out in fp32 | recomputed, then their gradients
            "mamba_ssd_cumsum": memory_pair("mamba_ssd_cumsum", ms.scan_tokens * ms.heads, db + 8, 3 * (db + 8), 6),
            "mamba_ssd_chunk_state": scan_gemm("mamba_ssd_chunk_state", ms.chunks * ms.heads, N, P, Q,
                                               2.0 * ms.heads * N * P * tokens),
            # each chunk's final state read in fp32 and the entering state written | recomputed, then the gradients
            "mamba_ssd_state_passing": memory_pair("mamba_ssd_state_passing", ms.chunks * ms.heads * P * N, 4 + db,
                                                3 * (4 + db), 2),
            "mamba_ssd_bmm": scan_gemm("mamba_ssd_bmm", ms.chunks * ms.groups, Q, Q, N,
                                       2.0 * ms.model_groups * N * squares),
            "mamba_ssd_scan": scan_gemm("mamba_ssd_scan", ms.chunks * ms.heads, Q, P, N + Q // 2,
                                        2.0 * ms.heads * P * (N * tokens + squares)),
            # the group RMSNorm over the gated output (read, write | read it and the gradient, write), with the
            # gate chunk_scan fuses counted here (read z, write the gated output beside the plain one | read the
            # gradient, z and the plain output, write both gradients)
            "mamba_out_norm": memory_pair("mamba_out_norm", T * ms.tp_inner, 4 * db, 8 * db, 8),
            "mamba_out_proj": gemm_with_backward("mamba_out_proj", T, h, ms.tp_inner, db),
            "mamba_residual": memory_pair("mamba_residual", Tn * h, *self.residual_bytes),
        }

    @cached_property
    def mamba_shard(self) -> MambaShard:
        return MambaShard.of(self.model.mamba, self.shape)

    def mixer_shard(self, block: str) -> MambaShard | GdnShard:
        """The rank's share of a sequence mixer block (mamba or gdn), which says what its all-to-alls carry."""
        return self.mamba_shard if block == "mamba" else self.gdn_shard

    @cached_property
    def gdn_shard(self) -> GdnShard:
        return GdnShard.of(self.model.gdn, self.shape)

    @property
    def weightless_gemms(self) -> set[str]:
        """Matrix products of activations by activations (unfused attention's, the Mamba scan's, the sparse attention
        indexer's scores): no weight to cast."""
        return {*self.attention_core, *self.mamba_scan, *(["attn_index_logits"] if self.sparse is not None else []),
                *(GDN_PRODUCTS if self.model.gdn is not None else ())}

    @property
    def mamba_scan(self) -> list[str]:
        """The kernels between the convolution and the output's norm, in forward order: the SSD scan."""
        return ["mamba_ssd_cumsum", "mamba_ssd_chunk_state", "mamba_ssd_state_passing", "mamba_ssd_bmm",
                "mamba_ssd_scan"]

    @property
    def moe_output_reduced(self) -> bool:
        """Whether an MoE layer's output is reduced across tp: without sequence parallelism every tp rank holds
        partial sums of every token; with it, only the shared expert (an ordinary tensor-parallel MLP, which also
        all-gathers its input) has any, and the routed experts' outputs come back whole over the all-to-all."""
        return "moe_shared_linear1" in self.table or not self.shape.sp

    @property
    def gathers_kv(self) -> bool:
        """Context parallelism by an all-gather of every rank's keys and values before attention: neither a ring
        (all_gather, or p2p with an attention that has no ring kernel) nor an all-to-all."""
        return self.shape.cp > 1 and RING_BLOCK not in self and self.shape.cp_a2a == 1

    @property
    def attention_core(self) -> list[str]:
        return list(self._attention_core())

    def repeats(self, name: str) -> int:
        """How many times a layer's forward (and backward) runs the kernel: cp - 1 received blocks of the
        context-parallel ring, once every other kernel."""
        return self.shape.ring_size - 1 if name == RING_BLOCK else 1

    def _mlp(self, k: dict, prefix: str, rows: int, ffn: int, groups: int) -> None:
        m, db = self.model, self.shape.act_bytes
        h = m.hidden_size
        for name in self.mlp_inputs(prefix):
            k[name] = gemm_with_backward(name, rows, ffn, h, db, groups)
        elems = rows * ffn
        fwd, bwd = self.passes.activation_passes(m.gated_mlp, self.autocast)
        k[f"{prefix}_act"] = (memory_bound(f"{prefix}_act", Phase.fwd, fwd * elems * db, elems, 8),
                              memory_bound(f"{prefix}_act", Phase.bwd_ig, bwd * elems * db, elems, 8))
        k[f"{prefix}_linear2"] = gemm_with_backward(f"{prefix}_linear2", rows, h, ffn, db, groups)

    def recomputed(self, module: str, kind: LayerKind) -> list[str]:
        """The forward kernels selective recomputation of a Megatron-Core module re-runs in a layer of `kind` (none
        where the layer lacks the module); core attention is re-run in place by the tracer, not listed here."""
        def mlp(block: str) -> list[str]:
            return [*self.mlp_inputs(block), f"{block}_act", f"{block}_linear2"]

        moe_layer = "moe" in kind
        shared = mlp("moe_shared") if "moe_shared_linear1" in self else []
        norms = ["attn_norm"] if "attention" in kind else []
        norms += ["mlp_norm"] if "mlp" in kind or moe_layer else []
        kernels = {
            "layernorm": norms,
            "mlp": mlp("mlp") if "mlp" in kind else [],
            "mlp_in": mlp("mlp")[:-1] if "mlp" in kind else [],
            "moe_act": ["moe_expert_act"] if moe_layer else [],
            "shared_experts": shared if moe_layer else [],
            "moe": ["moe_route", "moe_permute", *mlp("moe_expert"), "moe_unpermute", *shared] if moe_layer else [],
            # each up projection's module with its latent's norm (workload.megatron mla_up_recompute)
            "mla_up_proj": [name for latent in self.latents if latent.gemm and "attention" in kind
                            for name in (latent.norm, latent.gemm) if name] + (
                                ["attn_q_absorb", "attn_rope"] if "attention" in kind and self.latents else []),
        }.get(module, [])
        return [name for name in kernels if name in self]

    @property
    def absorbed(self) -> list[str]:
        """MLA's up-projections in its MQA form, around the attention (sparse attention): none for dense MLA."""
        return ["attn_q_absorb", "attn_v_up"] if self.sparse is not None else []

    def ub_chunks(self, name: str, phase: Phase) -> int:
        """Launches Transformer Engine's tensor-parallel communication overlap (userbuffers, Megatron's
        --tp-comm-overlap with sequence parallelism) splits GEMM `name`'s `phase` into, one after the other beside
        its collective's pieces: its default methods (transformer_engine/pytorch/module/base.py initialize_ub) run
        qkv_fprop, fc1_fprop, proj_dgrad and fc2_dgrad as a ring exchange, one chunk of the rows per tensor-parallel
        rank, and proj_fprop and fc2_fprop as a pipeline of num_splits 4; the other GEMMs overlap a whole collective
        (bulk) and run whole. Its buffers are those of Megatron-Core's attention (qkv, proj), MLP (fc1, fc2) and
        Mamba and gated-delta mixers (in_proj as fc1, out_proj as fc2): not multi-latent attention's projections,
        the experts' or the LM head's. 1 without tensor or sequence parallelism."""
        return self._ub_chunks.get((name, phase), 1)

    @cached_property
    def _ub_chunks(self) -> dict[tuple[str, Phase], int]:
        """ub_chunks of every GEMM it splits (worked out once: the tracer asks for every kernel it runs)."""
        tp = self.shape.tp
        if tp == 1 or not self.shape.sp:
            return {}
        gathered, reduced = self._sequence_gathered_inputs(), self._sequence_gathered_gradients()
        return {**{(name, Phase.fwd): tp for name in gathered},
                **{(name, Phase.fwd): UB_PIPELINE_SPLITS for name in reduced},
                **{(name, Phase.bwd_ig): tp for name in reduced}}

    def _sequence_gathered_inputs(self) -> list[str]:
        """The column-parallel GEMMs of Transformer Engine's modules that read an input Megatron-Core's layers leave
        to the module to all-gather along the sequence (sequence parallelism; LayerNormColumnParallelLinear's and
        ColumnParallelLinear's `with_input_all_gather`): attention's query-key-value projection (not multi-latent
        attention's projections), the MLP's first and the mixers' in_proj; the multi-token-prediction eh_proj
        and MLA's up projections (Latent.gemm) are ones too, outside userbuffers' buffers (gathered_gemm_inputs)."""
        return ([*self.attention_inputs] if self.model.mla is None else []) + self.mlp_inputs("mlp") + [
            f"{block}_in_proj" for block in MIXERS]

    @staticmethod
    def _sequence_gathered_gradients() -> list[str]:
        """The row-parallel GEMMs of Transformer Engine's modules whose output gradient the module all-gathers along
        the sequence for its dgrad and wgrad (sequence parallelism; TransformerEngineBaseModule.
        grad_output_preprocess): attention's output projection, the MLP's second and the mixers' out_proj."""
        return ["attn_proj", "mlp_linear2"] + [f"{block}_out_proj" for block in MIXERS]

    def gathered_gemm_inputs(self) -> tuple[set[str], set[str]]:
        """(GEMMs whose input, GEMMs whose output gradient) Transformer Engine's modules all-gather along the
        sequence, of those in the table's layer kinds (with the multi-token-prediction eh_proj and MLA's up
        projections among the first)."""
        inputs = [*self._sequence_gathered_inputs(), "mtp_eh_proj", *(latent.gemm for latent in self.latents)]
        return {name for name in inputs if name}, set(self._sequence_gathered_gradients())

    def narrow_gather_bytes(self, name: str, phase: Phase) -> float | None:
        """Bytes of the sequence-parallel all-gather that GEMM `name`'s `phase` reads where it is narrow and
        Transformer Engine's module gathers it (gathered_gemm_inputs): its input in the forward (and a
        recomputation) and for its wgrad, or in its dgrad (Phase.bwd_ig) a row-parallel GEMM's output gradient,
        each element NumberFormat.gathered_operand_bytes; None for a 16-bit gather (the caller's size)."""
        inputs, gradients = self.gathered_gemm_inputs()
        grad = phase == Phase.bwd_ig
        if name not in (gradients if grad else inputs) or f"{name}_gather_cast" not in self:
            return None
        fwd = self[name][Phase.fwd]
        elements = fwd.param("m") * fwd.param("n" if grad else "k")
        return elements * self.shape.number_format.format.gathered_operand_bytes(both_usages=grad)

    def parallel_gemms(self, block: Block) -> tuple[str, str] | None:
        """(the first column-parallel GEMM reading its input, the row-parallel GEMM writing its output) of a block
        whose Transformer Engine modules gather and reduce along the sequence themselves (workload.megatron
        attention_forward, mlp_forward, mixer_forward): attention, the dense MLP and the mixers; None for the mixture
        of experts, whose gathers and reduction are Megatron's own."""
        if block == "attention":
            return self.attention_inputs[0], "attn_proj"
        if block == "mlp" or block in MIXERS:
            return ("mlp_linear1", "mlp_linear2") if block == "mlp" else (f"{block}_in_proj", f"{block}_out_proj")
        return None

    def block_gather_bytes(self, block: Block) -> tuple[float, float]:
        """(input, output gradient) bytes of a block's sequence-parallel all-gathers, as the tracer emits them
        (workload.megatron gemm_gather): its column-parallel input's in the forward and again for the wgrads, its
        row-parallel output's gradient in the dgrad; narrow_gather_bytes where Transformer Engine gathers them
        quantized, else the 16-bit hidden state (the mixture of experts' gathers are Megatron's own)."""
        hidden = self.shape.tokens * self.model.hidden_size * self.shape.act_bytes
        pair = self.parallel_gemms(block)
        if pair is None:
            return hidden, hidden
        column, row = pair
        sizes = (self.narrow_gather_bytes(column, Phase.fwd), self.narrow_gather_bytes(row, Phase.bwd_ig))
        return tuple(hidden if size is None else size for size in sizes)

    def mlp_inputs(self, block: str) -> list[str]:
        """The GEMMs from the hidden state into an MLP-like block: one, or up and gate for GLUs."""
        return [f"{block}_linear1"] + ([f"{block}_gate"] if self.model.gated_mlp else [])

    # ---- parameters held by one rank ----

    def weights(self, names: list[str]) -> float:
        """Parameters of GEMMs: the weight-gradient GEMM's output is the weight, m x n (m counting every group's
        rows: gemm_with_backward)."""
        return sum(self[n][Phase.bwd_wg].param("m") * self[n][Phase.bwd_wg].param("n") for n in names)

    def blocks(self, layer: int) -> LayerKind:
        """The blocks of transformer layer `layer` in forward order (config/hybrid.py)."""
        return self.model.layer_blocks(layer)

    def block_kernels(self, block: Block) -> list[str]:
        """The kernels of one block of a layer in the table (its casts included), in table order."""
        prefix, shared = BLOCK_PREFIXES[block]
        return [name for name in self.table if name.startswith(prefix) or name in shared]

    def layer_params(self, kind: LayerKind) -> tuple[float, float]:
        """(dense, expert) parameters of one layer of `kind`: norms and GEMM weights (worked out once per kind)."""
        if kind not in self._layer_params:
            counts = [self._block_params(block) for block in kind]
            self._layer_params[kind] = sum(c[0] for c in counts), sum(c[1] for c in counts)
        return self._layer_params[kind]

    def narrow_params(self, kind: LayerKind) -> tuple[float, float]:
        """(dense, expert) parameters of one layer of `kind` whose GEMMs run in the run's narrow format, the weights
        _quantize_casts quantizes: its GEMM weights but those every recipe leaves in 16 bits (HIGH_PRECISION_GEMMS:
        the router, absorbed MLA's up-projections); not its norms, convolutions or per-head scan parameters, nor the
        word embedding a multi-token-prediction layer's stage holds (ModelParameters.of), which are no GEMM weights
        Transformer Engine quantizes. None in a 16-bit run."""
        if not self.shape.quantized_bytes:
            return 0.0, 0.0
        gemms = [self._block_gemms(block) for block in kind]
        return tuple(self.weights([n for names in part for n in names if n not in HIGH_PRECISION_GEMMS])
                     for part in zip(*gemms, strict=True))

    def _block_gemms(self, block: Block) -> tuple[list[str], list[str]]:
        """(dense, expert) GEMMs whose weights one block holds."""
        if block == "attention":
            return [*self.attention_inputs, *self.absorbed, "attn_proj", *self.indexer_gemms], []
        if block == "moe":
            dense = ["moe_route"]
            if "moe_shared_linear1" in self:
                dense += [*self.mlp_inputs("moe_shared"), "moe_shared_linear2"]
            return dense, [*self.mlp_inputs("moe_expert"), "moe_expert_linear2"]
        return {"mlp": [*self.mlp_inputs("mlp"), "mlp_linear2"], "mtp": ["mtp_eh_proj"],
                "gdn": ["gdn_in_proj", "gdn_out_proj"], "mamba": ["mamba_in_proj", "mamba_out_proj"]}[block], []

    def _block_params(self, block: Block) -> tuple[float, float]:
        """(dense, expert) parameters of one block with its norm: its GEMMs' weights (_block_gemms) and the rest."""
        h = self.model.hidden_size
        dense, expert = (self.weights(names) for names in self._block_gemms(block))
        if block == "attention":  # the indexer's key LayerNorm (weight and bias)
            return dense + h + (2 * self.model.mla.dsa.index_head_dim if self.sparse else 0.0), 0.0
        if block == "mtp":  # enorm, hnorm and the final norm beside eh_proj
            return dense + 3 * h, 0.0
        if block == "gdn":
            gd, t = self.model.gdn, self.shape.tp
            # conv1d's filter per q, k and v channel (no bias), A_log and dt_bias per value head, the gated norm's
            # weight (one per value channel of a head, shared by the heads)
            conv = (2 * gd.qk_dim + gd.v_dim) // t * gd.conv_kernel
            return dense + h + conv + 2 * gd.value_heads // t + gd.value_head_dim, 0.0
        if block == "mamba":
            mb, t = self.model.mamba, self.shape.tp
            # conv1d's filter and bias per channel; dt_bias, A_log and D per head; the output norm's weight
            extra = mb.conv_channels // t * (mb.conv_kernel + 1) + 3 * mb.num_heads // t + mb.inner // t
            return dense + h + extra, 0.0
        return dense + h, expert  # mlp, moe: the norm

    @property
    def vocab_params(self) -> float:
        return self.vocab_shard * self.model.hidden_size


def weight_elements(gemm: KernelSpec) -> float:
    """The weight a GEMM's forward multiplies by: inner x columns per group."""
    return gemm.param("k") * gemm.param("n") * gemm.param("groups")


def _arguments(workload: MegatronWorkload, shape: ShardShape) -> tuple[ModelSpec, ShardShape, str, str, str, bool]:
    """LayerKernels' arguments for a workload's model and kernel choices on `shape`."""
    train = workload.training
    return workload.model, shape, train.attention, train.elementwise, train.cross_entropy, train.uses_autocast


EMBEDDING_GRAD_ROW_BYTES = (2, 8)
"""Bytes per element of the tokens' output gradient in the word embedding's weight gradient, (per activation byte,
fixed): PyTorch's embedding_dense_backward (aten/src/ATen/native/cuda/EmbeddingBackwardKernel.cu,
embedding_backward_cuda_kernel), which Megatron's VocabParallelEmbedding reaches through F.embedding, reads the
gradient rows and writes their fp32 partial sums (compute_grad_weight), then reads those and writes each summed row
into the table (sum_and_scatter)."""
EMBEDDING_GRAD_TABLE_BYTES = (2, 2)
"""Bytes per element of the rank's whole embedding table in its weight gradient, (per activation byte, per gradient
byte): embedding_dense_backward returns a dense table it first zeroes (at::zeros of num_weights rows, in the
activations' dtype), and the gradient is then added to the gradient buffer, a read of the table and a read and a
write of the buffer (Megatron-Core's DistributedDataParallel parameter hook, `param.main_grad.add_(param.grad.data)`,
as at core_r0.8.0; PyTorch's own accumulation where a framework keeps no buffer). A scatter-add of the rows alone
missed the table: 3.2 GB a step for Megatron-Core's GPT-1.7B (131,072 x 2,048, fp32 gradients)."""


UB_PIPELINE_SPLITS = 4
"""Chunks of a GEMM whose output Transformer Engine's userbuffers reduce-scatter as a pipeline (add_ub's num_splits
default; proj_fprop and fc2_fprop)."""


SHARED_TABLES = 256
"""Kernel tables LayerKernels.shared keeps, the most recently used: a choice, not a fit. A table of DeepSeek-V3
holds about 48 kB (tracemalloc over 20 built); its search on 2,048 GPUs times 3,171 shard shapes, each (tp, pp,
vpp) over every micro-batch, context- and expert-parallel size, and its estimator asks for a table only where it
has not timed that shape yet."""


@lru_cache(maxsize=SHARED_TABLES)
def _shared_table(model: ModelSpec, shape: ShardShape, attention: str, elementwise: str,
                  cross_entropy: str, autocast: bool) -> LayerKernels:
    return LayerKernels(model, shape, attention, elementwise, cross_entropy, autocast)


def _model_share(kernel: KernelSpec, share: float) -> KernelSpec:
    """The kernel with `share` of its model FLOPs: its hardware FLOPs, and so its time, kept (a sliding window's
    band of a matrix computed whole)."""
    return kernel if share == 1.0 else replace(kernel, flops=kernel.flops * share)
