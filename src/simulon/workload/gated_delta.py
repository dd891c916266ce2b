"""A gated delta net layer's kernels on one rank (config.hybrid.GatedDeltaNetSpec; Megatron-Core's GatedDeltaNet,
megatron/core/ssm/gated_delta_net/gdn.py and common.py, on flash-linear-attention's chunk_gated_delta_rule, the
version Megatron pins, 0.5.1), in forward order:

- the norm (fused into in_proj by Transformer Engine's LayerNormColumnParallelLinear, counted as its own pass, as
  Mamba's is) and in_proj, column-parallel, from the hidden state to q, k, v, the output gate z, beta and alpha of
  the rank's heads;
- with context parallelism, one all-to-all of that output to a share of the heads over the whole sequence
  (a2a_cp_to_hp, Mamba's scheme) and one of the gated norm's output back (a2a_hp_to_cp);
- the causal depthwise conv1d with its SiLU over q, k and v;
- `gdn_prepare`: q and k L2-normalised at the key heads and repeated to the value heads, the decay
  g = -exp(A_log) softplus(alpha + dt_bias) in fp32 and beta = sigmoid(beta) (_prepare_input_for_gated_delta_rule,
  _compute_gates), so every kernel after runs per value head;
- the chunked delta rule, per value head and chunk of C tokens (key size K, value size V), flash-linear-attention's
  kernels (fla/ops/gated_delta_rule/chunk.py, chunk_fwd.py, wy_fast.py; fla/ops/common/chunk_delta_h.py,
  chunk_o.py): the decay's cumulative sum within each chunk (gdn_cumsum); K K^T with the (I + A)^-1 solve, fused,
  its masked blocks skipped ((C + 16) K + C^2 / 2 FLOPs a token; gdn_kkt_solve); w and u, A times K and V
  (2 C K + 2 C V; gdn_wu); the state passed from chunk to chunk, v_new = u - w h and h's update (4 K V; gdn_state);
  the output, Q h plus the causal Q K^T times v_new, whole tiles masked after (2 K V + 2 C K + 2 C V; gdn_out);
- the gated RMSNorm per head times SiLU(z) (gdn_out_norm), out_proj, row-parallel, and the residual add.

The backward (chunk_gated_delta_rule_bwd) recomputes w, u and the states, then runs the gradients' products: paired
with the forward kernel each belongs to, wy_bwd (10 C K + 4 C V + 4 C^2) with gdn_kkt_solve, the w and u recompute
(2 C K + 2 C V) with gdn_wu, the state recompute and the reverse state-gradient pass (4 K V + 6 K V) with gdn_state,
dv_local and dq/dk/dw (2 C K + 2 C V + 6 K V + 2 C V + 4 C K) with gdn_out: 18 C K + 10 C V + 16 K V + 4 C^2 a token,
2.9 times the forward's (C = 64, K = V = 128). Every product is timed as one batched GEMM of chunk x value-head
problems whose tile has the kernel's output shape and whose inner size gives its FLOPs. Model FLOPs are those
executed less the recomputation of w, u and the states (2 C K + 2 C V + 4 K V a token: hardware FLOPs alone, as
Mamba's recomputed products and every recomputation are; GdnShard.recomputed). Not modelled: the state passes run
their chunks one after another (a chain of T / C steps over a few blocks per head), which a batched GEMM runs side
by side, as Mamba's state passing is timed by its bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from ..config.common import DType
from ..config.hybrid import GatedDeltaNetSpec
from .kernels import KernelSpec, Phase, gemm, gemm_with_backward, memory_bound, memory_pair


class ShardSizes(Protocol):
    """What GdnShard reads of a rank's shard (layer_kernels.ShardShape, which imports this module)."""

    tokens: int
    batch: int
    full_seq: int
    tp: int
    cp: int

FP32 = DType.fp32.bytes
Tile = tuple[int, int]

GDN_PRODUCTS = ("gdn_kkt_solve", "gdn_wu", "gdn_state", "gdn_out")
"""The chunked delta rule's product kernels (GdnShard.products), in forward order."""


@dataclass(frozen=True)
class GdnShard:
    """One rank's share of a gated delta net: tensor parallelism splits its key and value heads (in_proj's output,
    out_proj's input); context parallelism splits them again by all-to-all, each rank then running the whole
    sequence of its share (Megatron-Core's a2a_cp_to_hp)."""

    heads: int          # value heads each kernel runs (q and k repeated to them)
    key_heads: int      # key heads of the convolution's q and k
    key_dim: int
    value_dim: int
    chunk: int
    conv: int
    tokens: int         # the rank's tokens (its share of the sequence): in_proj, out_proj
    scan_tokens: int    # tokens each kernel runs over: the whole sequence with context parallelism
    chunks: int         # (sequence, chunk) pairs
    tp_in_proj: int     # in_proj's output on this tensor-parallel rank
    tp_values: int      # v (and z, and the output) channels on this tensor-parallel rank
    cp: int

    @classmethod
    def of(cls, spec: GatedDeltaNetSpec, shape: ShardSizes) -> GdnShard:
        tp, cp = shape.tp, shape.cp
        return cls(heads=spec.value_heads // tp // cp, key_heads=spec.key_heads // tp // cp,
                   key_dim=spec.key_head_dim, value_dim=spec.value_head_dim, chunk=spec.chunk_size,
                   conv=spec.conv_kernel, tokens=shape.tokens, scan_tokens=shape.tokens * cp,
                   chunks=shape.batch * -(-shape.full_seq // spec.chunk_size), tp_in_proj=spec.in_proj_width // tp,
                   tp_values=spec.v_dim // tp, cp=cp)

    @property
    def conv_channels(self) -> int:
        """q, k and v of each kernel's convolution."""
        return 2 * self.key_heads * self.key_dim + self.heads * self.value_dim

    @property
    def values(self) -> int:
        """Value (and output) channels each kernel runs."""
        return self.heads * self.value_dim

    def all_to_all(self) -> dict[str, float]:
        """Elements one rank sends in each context-parallel all-to-all (of its share of the sequence): in_proj's
        whole output before the convolution, the gated norm's output after."""
        return {"qkvzba": self.tokens * self.tp_in_proj, "o": self.tokens * self.tp_values}

    def recomputed(self) -> dict[str, float]:
        """Of each product kernel's backward FLOPs a token and value head, those that recompute the forward's (w and u,
        and the states before the reverse pass: module docstring)."""
        C, K, V = self.chunk, self.key_dim, self.value_dim
        return dict(zip(GDN_PRODUCTS, (0.0, 2 * C * K + 2 * C * V, 4 * K * V, 0.0), strict=True))

    def products(self) -> dict[str, tuple[tuple[float, Tile], tuple[float, Tile]]]:
        """Each product kernel's (forward, backward) FLOPs a token and value head (module docstring) and the output
        tile, rows x columns, it writes per chunk."""
        C, K, V = self.chunk, self.key_dim, self.value_dim
        return dict(zip(GDN_PRODUCTS, (
            (((C + 16) * K + C * C / 2, (C, C)), (10 * C * K + 4 * C * V + 4 * C * C, (C, K))),  # kkt_solve
            ((2 * C * K + 2 * C * V, (C, K + V)), (2 * C * K + 2 * C * V, (C, K + V))),  # wu
            ((4 * K * V, (K, V)), (10 * K * V, (K, V))),  # state
            ((2 * K * V + 2 * C * K + 2 * C * V, (C, V)), (6 * C * K + 4 * C * V + 6 * K * V, (C, K + V))),  # out
        ), strict=True))


GDN_SCAN = ("gdn_prepare", "gdn_cumsum", *GDN_PRODUCTS, "gdn_out_norm")
"""The kernels between the convolution and the all-to-all back, in forward order."""


def chunk_product(name: str, phase: Phase, shard: GdnShard, per_token: float, rows: int, cols: int,
                  act_bytes: float) -> KernelSpec:
    """One of the chunked delta rule's kernels: chunk x value-head problems of a rows x cols tile, their inner size
    chosen to give `per_token` FLOPs a token and head."""
    problems = shard.chunks * shard.heads
    flops = per_token * shard.scan_tokens * shard.heads
    inner = max(1, round(flops / (2.0 * problems * rows * cols)))
    spec = gemm(name, phase, problems * rows, cols, inner, act_bytes, problems, batched=True)
    return replace(spec, flops=flops, hw_flops=flops)


def gdn_kernels(shard: GdnShard, hidden: int, norm_tokens: int, act_bytes: float,
                residual: tuple[float, float]) -> dict[str, tuple[KernelSpec, ...]]:
    """Name -> (forward, backward) specs of a gated delta net layer (module docstring); `residual`: the bytes per
    hidden element of the residual block's forward and backward (LayerKernels.residual_bytes)."""
    s, db, T = shard, act_bytes, shard.tokens
    ST, H, Hk, K = s.scan_tokens, s.heads, s.key_heads, s.key_dim
    # q and k read at the key heads and written at the value heads, alpha and beta read, g (fp32) and beta written
    prepare = ST * (2 * Hk * K + 2 * H * K) * db + ST * H * (2 * db + FP32 + db)
    kernels: dict[str, tuple[KernelSpec, ...]] = {
        "gdn_norm": memory_pair("gdn_norm", norm_tokens * hidden, 2 * db, 3 * db),
        "gdn_in_proj": gemm_with_backward("gdn_in_proj", T, s.tp_in_proj, hidden, db),
        # read q, k, v, write their SiLU'd convolution | recomputed, then the gradients (Mamba's conv1d's passes)
        "gdn_conv1d": memory_pair("gdn_conv1d", ST * s.conv_channels, 2 * db, 5 * db, 2 * s.conv + 5),
        "gdn_prepare": (memory_bound("gdn_prepare", Phase.fwd, prepare, ST * H * K),
                        memory_bound("gdn_prepare", Phase.bwd_ig, 2 * prepare, ST * H * K)),
        # g in, its cumulative sum out in fp32 | dg's two parts summed and reverse-summed (fp32), dk's two parts
        # summed (read two, write one: chunk_gated_delta_rule_bwd's dk.add_ and dg.add_)
        # (hardware FLOPs, as Mamba's cumsum: the running sum's add and the scale)
        "gdn_cumsum": memory_pair("gdn_cumsum", ST * H, 2 * FP32, 3 * FP32 + 3 * K * db, 2),
    }
    recomputed = s.recomputed()
    for name, ((fwd, (fr, fc)), (bwd, (br, bc))) in s.products().items():
        backward = chunk_product(name, Phase.bwd_ig, s, bwd, br, bc, db)
        again = backward.flops * recomputed[name] / bwd  # of its FLOPs, the forward's recomputed: no model FLOPs
        kernels[name] = (chunk_product(name, Phase.fwd, s, fwd, fr, fc, db),
                         replace(backward, flops=backward.flops - again, hardware_only_flops=again))
    # the gated RMSNorm: square, sum, scale and the SiLU gate (Mamba's out_norm's passes and FLOPs)
    kernels["gdn_out_norm"] = memory_pair("gdn_out_norm", ST * s.values, 4 * db, 8 * db, 8)
    kernels["gdn_out_proj"] = gemm_with_backward("gdn_out_proj", T, hidden, s.tp_values, db)
    kernels["gdn_residual"] = memory_pair("gdn_residual", norm_tokens * hidden, *residual)
    return kernels
