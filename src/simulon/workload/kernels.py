"""What one rank computes: kernels with their shapes, FLOPs and bytes, GPU-agnostic.

`flops` follows the model-FLOPs convention of Narayanan et al. (SC'21): dense attention scores,
backward = 2x forward, so that the per-kernel sum equals the closed form; `hardware_only_flops` is work a kernel
executes that is no model FLOP (a capacity factor's padded rows, a backward's own recomputation of what its forward
did not keep), which the hardware-FLOPs utilisation counts beside the recomputation kernels. `hw_flops` is what the
GPU actually executes (a causal flash-attention kernel skips the masked half; its backward
recomputes the scores), and is what kernel timing and hardware-FLOPs utilisation use.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import IntEnum

from ..config.common import FLASH_IMPLEMENTATIONS

INDEX_BYTES = 8.0
"""Token ids, routing indices and top-k indices are int64 (torch.topk's)."""
MASK_BYTES = 1.0
"""A dropout mask is one byte per element (torch's bool mask; Megatron's fused bias-dropout-add)."""


class Phase(IntEnum):
    fwd = 0
    bwd_ig = 1
    bwd_wg = 2
    step = 3       # once per iteration: optimizer
    recompute = 4  # a forward kernel re-run before its backward (activation recomputation)


class KernelClass(IntEnum):
    """How a kernel spends its time; picks the timing model."""

    gemm = 0
    grouped_gemm = 1
    attention = 2
    memory = 3  # bandwidth-bound elementwise, norm, gather/scatter, optimizer


@dataclass(frozen=True)
class KernelSpec:
    """One kernel launch on one rank. `shape` is everything that changes its duration."""

    name: str
    kclass: KernelClass
    phase: Phase
    flops: float
    hw_flops: float
    bytes: float
    shape: tuple[tuple[str, int | float | bool | str], ...] = field(default=())
    transpose_bytes: float = 0.0  # of `bytes`, a per-tensor fp8 cast's transposed copy: written only on GPUs whose
    #                               FP8 GEMMs read the TN layout alone (config.number_formats.NumberFormat.copies)
    hardware_only_flops: float = 0.0  # hardware FLOPs beside `flops`, not model FLOPs: a padded expert GEMM's on
    #                                   the rows beyond its top_k tokens' (LayerKernels.table), a backward scan's
    #                                   recomputation of its forward's products (Mamba's SSD, the gated delta rule)

    def param(self, key: str) -> int | float | bool | str:
        return dict(self.shape)[key]

    def bytes_on(self, fp8_any_layout: bool) -> float:
        """Bytes the kernel moves on a GPU whose FP8 GEMMs read every layout (config.dc.GPUSpec.fp8_any_layout:
        Transformer Engine writes no transposed fp8 copy there) or not. The transpose stays out of `shape`, so that a
        profile measured on either kind of GPU times the same cast."""
        return self.bytes - self.transpose_bytes if fp8_any_layout else self.bytes


def gemm(name: str, phase: Phase, m: int, n: int, k: int, dtype_bytes: float, groups: int = 1,
         batched: bool = False, precision: str | None = None) -> KernelSpec:
    """C[m,n] = A[m,k] @ B[k,n], summed over `groups` experts for a grouped GEMM (m is their total), or
    over `groups` equal problems of one batched launch (attention scores) when `batched`. `precision`
    names the dtype the GEMM runs in when it is not the training dtype (an fp8 run's LM head)."""
    flops = 2.0 * m * n * k
    moved = dtype_bytes * (m * k + k * n * groups + m * n)
    kclass = KernelClass.grouped_gemm if groups > 1 and not batched else KernelClass.gemm
    shape = (("m", m), ("n", n), ("k", k), ("groups", groups), ("dtype_bytes", dtype_bytes))
    if precision is not None:
        shape += (("precision", precision),)
    return KernelSpec(name, kclass, phase, flops, flops, moved, shape)


def narrow_operands(spec: KernelSpec, operand_bytes: float, weight_bytes: float) -> KernelSpec:
    """A GEMM spec (shaped as `gemm`) whose inputs are quantized copies (Transformer Engine's fp8 or fp4 operands,
    block scales included): `operand_bytes` an element of an activation or gradient operand, `weight_bytes` one of
    the weight (the forward's and the input gradient's second operand; the weight gradient multiplies two
    activations), its output still in its 16 bits. Its bytes are what it moves, as the GEMM timing model reads its
    operands (compute.gemm), so that its arithmetic intensity is the narrow kernel's: counted in 16 bits, an MXFP8
    expert GEMM of GPT-OSS 120B fell under a GB200's ridge point and was called memory-bound."""
    m, n, k, groups = (spec.param(key) for key in ("m", "n", "k", "groups"))
    second = operand_bytes if spec.phase == Phase.bwd_wg else weight_bytes
    moved = operand_bytes * m * k + second * k * n * groups + spec.param("dtype_bytes") * m * n
    return replace(spec, bytes=moved)


def chunked(spec: KernelSpec, chunks: int) -> KernelSpec:
    """A GEMM run as `chunks` launches of m / chunks rows one after the other (its FLOPs and bytes unchanged): what
    Transformer Engine's communication overlap makes of a GEMM it pipelines with a collective
    (LayerKernels.ub_chunks)."""
    if chunks <= 1 or spec.kclass != KernelClass.gemm:
        return spec
    return replace(spec, shape=(*spec.shape, ("chunks", chunks)))


def accumulating_into(spec: KernelSpec, main_grad_bytes: float) -> KernelSpec:
    """A weight-gradient GEMM (phase bwd_wg) accumulating into a main_grad buffer of `main_grad_bytes` an element
    instead of Megatron's fp32 (compute.gemm.MAIN_GRAD_BYTES): Megatron-Core keeps main_grad in the parameters' dtype
    when gradients are reduced in bf16 (distributed/distributed_data_parallel.py: `grad_dtype = torch.float if
    ddp_config.grad_reduce_in_fp32 else param.dtype`), and its weight-gradient GEMM reads and writes that buffer."""
    if spec.phase != Phase.bwd_wg or spec.kclass not in (KernelClass.gemm, KernelClass.grouped_gemm):
        return spec
    return replace(spec, shape=(*spec.shape, ("main_grad_bytes", main_grad_bytes)))


def in_precision(spec: KernelSpec, precision: str) -> KernelSpec:
    """A GEMM spec run in `precision` instead of the training dtype (shaped as `gemm(..., precision=...)`)."""
    if spec.kclass not in (KernelClass.gemm, KernelClass.grouped_gemm) or "precision" in dict(spec.shape):
        return spec
    return replace(spec, shape=(*spec.shape, ("precision", precision)))


GemmTriple = tuple[KernelSpec, KernelSpec, KernelSpec]
"""A GEMM's forward, input-gradient and weight-gradient specs."""


def gemm_with_backward(name: str, m: int, n: int, k: int, dtype_bytes: float, groups: int = 1,
                       precision: str | None = None, batched: bool = False) -> GemmTriple:
    """Forward Y=XW, input gradient dX=dY W^T, weight gradient dW=X^T dY: same FLOPs, other shapes. Over `groups`
    (experts of a grouped GEMM, whose m rows they share; or, `batched`, equal problems of one launch, a per-head
    einsum against per-head weights) each group's weight gradient is its own k x n from its own rows: k * groups rows
    in all (m always counts every group's rows), each from m / groups."""
    inner = m // groups if m % groups == 0 else m / groups
    return (gemm(name, Phase.fwd, m, n, k, dtype_bytes, groups, batched, precision),
            gemm(name, Phase.bwd_ig, m, k, n, dtype_bytes, groups, batched, precision),
            gemm(name, Phase.bwd_wg, k * groups, n, inner, dtype_bytes, groups, batched, precision))


def memory_bound(name: str, phase: Phase, moved_bytes: float, elements: float,
                 flops_per_element: float = 0.0, transpose_bytes: float = 0.0) -> KernelSpec:
    """A kernel limited by HBM bandwidth; its few FLOPs are not model FLOPs. `transpose_bytes`: of `moved_bytes`,
    an fp8 transpose only some GPUs write (KernelSpec.bytes_on)."""
    hw = elements * flops_per_element
    return KernelSpec(name, KernelClass.memory, phase, 0.0, hw, moved_bytes,
                      (("bytes", round(moved_bytes)),), transpose_bytes)


def memory_pair(name: str, elements: float, fwd: float, bwd: float,
                flops_per_element: float = 0.0) -> tuple[KernelSpec, KernelSpec]:
    """A bandwidth-bound kernel's forward and backward, moving `fwd` (`bwd`) bytes per element; its FLOPs are
    hardware FLOPs only: its time is its bytes'."""
    return (memory_bound(name, Phase.fwd, fwd * elements, elements, flops_per_element),
            memory_bound(name, Phase.bwd_ig, bwd * elements, elements, flops_per_element))


FULL_MATRIX_LIBRARIES = ("pytorch",)
"""Libraries that compute the whole score matrix and mask it afterwards (PyTorch's math attention: matmul, masked
softmax, matmul), so a causal mask saves them no work but costs one more pass over the scores in the forward (the
mask added to the score matrix before the softmax: flash-attention's benchmarks/benchmark_causal.py attention_pytorch,
`scores + triu(-10000)`), an elementwise read and write of every score like the softmax's own pass, whose cost per
score the fitted softmax_dims is; the backward of the addition passes the gradient through. The tiled kernels skip
the blocks above the diagonal."""

WARP_MMA_LIBRARIES = ("flash", "flash_v1", "flash_triton", "xformers")
"""Libraries whose kernels were written for Ampere's warp-level tensor-core instruction, mma.sync: FlashAttention 1
and 2, the 2022 Triton FlashAttention (Triton before its Hopper backend: MosaicML's triton_pre_mlir) and xformers'
CUTLASS sm80 kernels. On a later chip they run their matmuls at that instruction's rate, whatever the chip's own
(wgmma, tcgen05) reaches, with their own grid (one query tile per forward CTA); cuDNN's fused attention and PyTorch's
attention (cuBLAS GEMMs) issue the chip's own. Where such a library was never measured on a chip, it runs like itself
measured on another chip before like a library of the chip's own instruction measured there (compute.calibration
Calibrations.attention), at its own instruction's rate either way (compute.attention)."""


def attention(phase: Phase, batch: int, heads: int, kv_heads: int, seq_q: int, seq_k: int,
              qk_dim: int, v_dim: int, causal: bool, dtype_bytes: float, impl: str = "flash",
              window: int = 0) -> KernelSpec:
    """Flash attention over one micro-batch. Model FLOPs count the full score matrix (`seq_k` keys a query). `impl`
    names the kernel library when it is not the default one (FLASH_IMPLEMENTATIONS). `window`: a sliding window of
    that many keys, whose band `seq_k` then gives as the mean keys a query attends (not causal: the band is the
    mask), kept in the shape for the compute model to count the key blocks a tiled kernel walks."""
    fwd_flops = 2.0 * batch * heads * seq_q * seq_k * (qk_dim + v_dim)
    # a causal mask skips half the score blocks (on average over context-parallel ranks, which are
    # load-balanced by pairing early and late sequence chunks)
    executed_fwd = fwd_flops * (0.5 if causal else 1.0)
    io = dtype_bytes * batch * (heads * seq_q * (qk_dim + v_dim) + kv_heads * seq_k * (qk_dim + v_dim))
    if phase == Phase.fwd:
        flops, hw, moved = fwd_flops, executed_fwd, io
    else:  # backward recomputes QK^T: five matmuls against the forward's two
        flops, hw, moved = 2.0 * fwd_flops, 2.5 * executed_fwd, 2.0 * io
    shape = (("batch", batch), ("heads", heads), ("kv_heads", kv_heads), ("seq_q", seq_q),
             ("seq_k", seq_k), ("qk_dim", qk_dim), ("v_dim", v_dim), ("causal", causal),
             ("dtype_bytes", dtype_bytes))
    if impl != FLASH_IMPLEMENTATIONS[0]:
        shape += (("impl", impl),)
    if window:
        shape += (("window", window),)
    return KernelSpec("attn_flash", KernelClass.attention, phase, flops, hw, moved, shape)


def attention_impl(spec: KernelSpec) -> str:
    """The library of an attention kernel spec (FLASH_IMPLEMENTATIONS)."""
    return str(dict(spec.shape).get("impl", FLASH_IMPLEMENTATIONS[0]))


def as_recompute(kernel: KernelSpec) -> KernelSpec:
    """The same forward kernel re-run for activation recomputation (its FLOPs count as hardware FLOPs,
    not model FLOPs)."""
    return replace(kernel, phase=Phase.recompute)
