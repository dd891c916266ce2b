"""Flash-attention time from its shape: one CTA per (batch, head, query block) walks the key blocks it
needs (all of them, or the causal triangle's share), and the SMs take the CTAs as the library hands them out
(dispatch.py: a launch grid's order, to whichever SM frees up first, for FlashAttention-2 and the other libraries
written for Ampere; a persistent kernel's static round-robin, heaviest first, for cuDNN; a grid longest first, a
section of heads at a time, for cuDNN's Blackwell backward: architecture.yaml, attention_longest_first).

The backward is parallel over key blocks instead, which has the same spread of work per CTA. PyTorch's
attention without a fused kernel is timed the same way, its fitted block rate standing for the passes over
the materialised score matrix, and it computes every block whatever the mask. Per block
the forward multiplies Q K^T and P V (qk_dim + v_dim per score); the backward recomputes the scores and
forms dV, dP, dQ and dK (3 qk_dim + 2 v_dim per score). Softmax work per score counts as extra dims. FlashAttention 1
walks the key blocks outside its query rows and so streams each row's running output (its query gradient, backward)
through HBM once a key block (flash_v1_reread_bytes): that traffic, at the chip's HBM bandwidth, adds to each block,
and its softmax, between its matmuls, is held at one exponential per score (serial_softmax_dims); the libraries that
borrow its fit run the fit of its rows made without the traffic (compute/fit.py, LENT_WITHOUT_TRAFFIC).

Between chips, the matmuls run at the rate of the tensor-core instruction the library issues: the chip's dense
peak, or for a library written for Ampere's warp-level mma.sync (WARP_MMA_LIBRARIES) that instruction's rate,
Ampere's per SM and clock, which Hopper's wgmma doubles and Blackwell's tcgen05 doubles again
(compute/data/architecture.yaml, warp_mma_fraction). The softmax runs beside the tensor cores, on special-function
and FMA units whose rate per SM and clock is the same on Ampere, Hopper and Blackwell (16 exponentials per SM and
clock: the H100 SXM5's 3.9 TFLOP/s of them against its 989 of matmul, Shah et al. 2024, FlashAttention-3 §3.1), so
it scales with the SMs' rate, not the peak; Blackwell Ultra (B300, GB300) issues twice as many
(architecture.yaml, special_function_rate). A library of the chip's own instruction fitted on a chip whose tensor
cores do less per SM and clock runs its blocks no faster per SM and clock than it did there (sm_bound: what its
exponentials and shared-memory traffic allow, Zadouri et al. 2026, FlashAttention-4), a CTA's fixed cost at the fit's
rate here; its forward, bound by the exponentials there, takes its matmuls at this chip's rate and one exponential per
score beside them, not hidden under them (exponential_dims), where that is less. On a chip whose tensor cores
multiply into tensor memory (Blackwell's 512 columns an SM), a fused backward whose accumulators need more
(head dimension 192: backward_accumulator_columns) shares columns between them and takes one exponential per score
beside its matmuls (exposed_exponential_dims). Each fit is kept in its own chip's
units (its efficiency of that chip's dense peak), and a fit runs unchanged on the chip and library it was fitted on.
"""

from __future__ import annotations

import math

import numpy as np

from ..workload.kernels import FULL_MATRIX_LIBRARIES, WARP_MMA_LIBRARIES, KernelSpec, Phase, attention_impl
from .calibration import Architecture, AttentionParams, tensor_flop_per_sm_clock
from .dispatch import Order, makespan

BACKWARD_PHASES = (Phase.bwd_ig, Phase.bwd_wg)
OTHER_INSTRUCTION_LIBRARIES = frozenset((*WARP_MMA_LIBRARIES, *FULL_MATRIX_LIBRARIES))
"""Attention libraries not of the chip's own tensor-core instruction: those written for mma.sync, and PyTorch's, which
multiplies in cuBLAS GEMMs with its softmax apart."""


def matmul_rate(warp_mma_fraction: float, library: str) -> float:
    """The rate `library`'s attention matmuls run at, as a fraction of the dense peak of a chip whose SMs issue
    Ampere's tensor rate at `warp_mma_fraction` of it (mma.sync's rate, at most the peak, or the peak itself)."""
    return min(warp_mma_fraction, 1.0) if library in WARP_MMA_LIBRARIES else 1.0


def sm_bound(arch: Architecture) -> float:
    """How many times its fitted share of the dense peak a fused attention kernel of the chip's own tensor-core
    instruction (cuDNN's) takes for its matmuls here: where it was fitted on a chip whose tensor cores do less per SM
    and clock (Hopper's wgmma for a Blackwell chip, whose tcgen05 does twice as much), the fitted chip's
    warp_mma_fraction over this one's, so that it runs no faster per SM and clock than it ran there; 1 where the
    tensor cores here do no more per SM and clock (their rate sets the time, as fitted).

    The work beside the matmuls does not speed up with the tensor cores: the softmax's exponentials (16 per SM and
    clock) and the operands' shared-memory traffic (128 bytes per SM and clock) are the same on Hopper and
    Blackwell, and on the B200 they, not the tensor cores, bound a fused attention kernel (Zadouri et al. 2026,
    FlashAttention-4: its forward by the exponential units, its backward by shared memory). A fit on the slower
    tensor cores cannot tell how long that work took, hidden behind the matmuls there (the H100's and H200's cuDNN
    fits put a softmax of 0 to 17 head dimensions beside them, the B200's 93 in its forward), so the kernel is taken
    to be as bound by it as by the tensor cores there: a bound, not a fit. Holding the B200 out, cuDNN's kernels
    there lent the Hopper fits at the B200's tensor rate came out 39.1% too fast (bias +38.8%); at this bound 29.2%
    too slow (bias -28.6%; forward -25.0%, backward -32.3%: the B200 runs them 1.3-1.5x as fast per SM and clock as
    the Hopper chips do; benchmarks/attention_gpu_holdout.py). The forward takes the lesser of this and its
    exponentials beside its matmuls at this chip's rate (exponential_dims): 22.1% (forward 18.0%, bias -15.5%;
    backward 26.2%, bias -25.1%).

    The bound is on the blocks, the work a CTA does per score. A CTA's fixed cost (block_overhead: loading the tiles
    it keeps, storing what it accumulated, filling and draining its pipeline) is no per-score work of the exponential
    units or of the operands' shared-memory traffic, so attention_seconds takes it at the fit's rate here, unbound.
    The fits say as much: the B200's own cuDNN backward takes 3.3 us a 128 x 128 block (head dimension 128), 0.91 of
    the H200's 3.65, about the same per SM and clock as this bound has it, but 4.7 us of fixed cost a CTA against the
    H200's 25.8 and the H100's 36.1 (calibration.yaml; bound with the blocks, the H200's came to 25.4 us on the B200,
    unbound 12.7). Held out, the B200 then comes to 15.8% (forward 15.5%, bias -12.2%; backward 16.0%, bias -14.6%),
    in sample as before (an own fit is never bound)."""
    return max(1.0, arch.tensor_rate_ratio)


EXPONENTIALS_PER_SM_CLOCK = 16.0
"""Exponentials (MUFU.EX2) an SM issues per clock on Ampere, Hopper and Blackwell: the H100 SXM5's 3.9 TFLOP/s of
special functions over 132 SMs at 1.83 GHz (Shah et al. 2024, FlashAttention-3, section 3.1), and the B200's MUFU at
16 operations per SM and clock (Zadouri et al. 2026, FlashAttention-4); Blackwell Ultra issues more
(architecture.yaml, special_function_rate). A spec value, not a fit."""


def exponential_dims(arch: Architecture) -> float:
    """One exponential per score at this chip's special-function rate, counted as the head dimensions (two FLOP each
    per score) its tensor cores multiply at their dense peak in that time: 64 on Ampere, 128 on Hopper, 256 on
    Blackwell, 128 on Blackwell Ultra, whose special-function units issue twice as many.

    On the B200 a forward's exponentials take as long as its two matmuls at the peak, head dimension 128
    (FlashAttention-4's feeds and speeds: 8,192 FLOP against 16 exponentials per SM and clock), where on Hopper they
    took half as long and a fit hides them (Shah et al. 2024, FlashAttention-3: ping-pong scheduling overlaps one
    warpgroup's softmax with the other's matmuls; the H100's and H200's cuDNN forward fits put 7 and 0.4 head
    dimensions of softmax beside their matmuls). A fit on the slower tensor cores cannot tell whether the kernel still
    hides them where the matmuls take half the time, so attention_seconds takes them as not hidden: the most a kernel
    of the fitted matmul efficiency can take. cuDNN's B200 forward through Transformer Engine (SimuMax's rows) is about
    that: its 131,072-token row spends 2,040 SM clocks a block (28,367 blocks an SM in 31.2 ms at the 1.86 GHz of the
    2.25 PFLOP/s dense peak), against 1,024 of matmul at the peak and 1,024 of exponentials; FlashAttention-4
    overlaps them, up to 1.3x faster than cuDNN 9.13."""
    return tensor_flop_per_sm_clock(arch.warp_mma_fraction) / (
        2.0 * EXPONENTIALS_PER_SM_CLOCK * arch.special_function_rate)


def backward_accumulator_columns(block: int, qk_dim: int, v_dim: int) -> int:
    """The 32-bit tensor-memory columns a fused backward's accumulators take on a chip whose tensor cores multiply into
    tensor memory (tcgen05): the scores S (P over them) and their gradient dP (dS over it), `block` columns each, and
    the key block's dV and dK, `v_dim` and `qk_dim` columns (dQ shares dP's). FlashAttention-4's SM100 backward lays
    them out so (flash_attn/cute/flash_bwd_sm100.py: S at 0, dV at block, dP after dV, dK after dP): 512 at head
    dimension 128, all an SM holds."""
    return 2 * block + qk_dim + v_dim


def exposed_exponential_dims(arch: Architecture, block: int, qk_dim: int, v_dim: int) -> float:
    """Head dimensions (exponential_dims) of a fused backward's softmax no longer hidden under its matmuls, because
    its accumulators (backward_accumulator_columns) exceed the SM's tensor memory: then some share columns, and a
    matmul writing into columns the softmax still reads waits for it. FlashAttention-4's backward at head dimension
    192 (values 128; 576 columns) requires two-CTA MMAs and overlaps S with dP and dP with dQ
    (flash_attn/cute/flash_bwd_sm100.py: tmem_dP_offset = 512 - tile_m, tmem_dQ_offset = 512 - tile_hdim // 2), so
    the dP matmul waits for the exponentials of S, which at head dimension 128 ran beside it. Taken as one exponential
    per score at this chip's special-function rate, not hidden: cuDNN's B200 backward is not public; its fit to
    SimuMax's B200 rows takes 3.34 us a block at head dimension 128 and 5.23 us at 192, 1.57x where the matmuls are
    1.30x (832 / 640 dims), and one exponential a score unhidden at the fit's 0.415 of the peak makes it 1.47x.
    Refitted so (scripts/fit_compute.py's observations and settings, the B200's cuDNN entry alone), those rows at
    head dimension 192 come within -0.0..+7.6% where they were +10..+21%, the B200 backward 4.6% in sample (8.7%).
    0 on a chip without tensor memory or where the accumulators fit."""
    columns = backward_accumulator_columns(block, qk_dim, v_dim)
    if not arch.tensor_memory_columns or columns <= arch.tensor_memory_columns:
        return 0.0
    return exponential_dims(arch)


def issue_order(library: str, backward: bool, longest_first: frozenset[tuple[str, str]] = frozenset()) -> Order:
    """How `library` hands its CTAs to the SMs (dispatch.py): a launch grid longest first where its kernels for the
    chip's instruction do (`longest_first`: Architecture.longest_first, cuDNN's Blackwell backward); a grid in
    FlashAttention-2's order (a forward's lightest query block first, a backward's heaviest key block) for the
    libraries written for Ampere, taken for FlashAttention 1, the 2022 Triton kernel and xformers' CUTLASS kernels,
    whose grids also put the block index fastest; a persistent kernel's static schedule, heaviest first, for the
    others (cuDNN's; PyTorch's attention gives every block the same work, so its order does not matter). A library
    timed with its stand-in's fit (calibration.py) runs as the stand-in does, as its fit was made: cuDNN's on an
    A100, where Transformer Engine picks FlashAttention-2, as FlashAttention-2."""
    if (library, "backward" if backward else "forward") in longest_first:
        return Order.longest_first
    if library not in WARP_MMA_LIBRARIES:
        return Order.static_heaviest_first
    return Order.heavy_first if backward else Order.light_first


FLASH_V1 = "flash_v1"
"""FlashAttention 1 (workload.kernels.FLASH_IMPLEMENTATIONS), the one library here that keeps its running output in
HBM between key blocks (flash_v1_reread_bytes). The 2022 Triton kernel (query blocks outside, its accumulators in
registers: MosaicML's triton_pre_mlir, after Tillet's fused-attention tutorial) and xformers' CUTLASS kernels (a query
block per CTA) do not, and run its fit, where they borrow it, without it."""

SERIAL_SOFTMAX_LIBRARIES = (FLASH_V1,)
"""Libraries whose softmax the fit holds at one exponential per score beside the matmuls (serial_softmax_dims), not
free. FlashAttention 1's CTA splits a block's keys between its warps, so every key block it runs Q K^T, exchanges the
row maxima through shared memory, exponentiates, sums, and only then multiplies P V, whose partial outputs its warps
add through shared memory behind a __syncthreads (v1.0.9 fmha_fprop_kernel_1xN.h: gemm_q_k, softmax.reduce_max,
scale_apply_exp, reduce_sum_before_sync_, gemm_cl, smem_o.store): its exponentials wait for one matmul and hold up
the next (Dao 2023, FlashAttention-2, sections 3.1 and 3.3: the non-matmul work and the split of K and V across warps
are what FlashAttention-2 removes). Fitted freely beside its HBM traffic (flash_v1_reread_bytes), the softmax took 202
and 549 head dimensions on the A100 and H100 at an efficiency of 1.0 and 0.95 of the dense peak, where mma.sync
reaches 1.0 and 0.5 (commit 745fffa): it stood for work the chart rows cannot tell from the matmuls' rate."""


def serial_softmax_dims(arch: Architecture, library: str) -> float:
    """The softmax_dims (head dimensions of work per score, at the fitted efficiency) of one exponential per score
    run at the share of the special-function rate that the matmuls reach of their instruction's: exponential_dims at
    `library`'s matmul rate (matmul_rate), 64 for a library of mma.sync on Ampere, Hopper and Blackwell alike, whose
    SMs issue 1,024 of its FMA (NVIDIA A100 whitepaper) to 16 exponentials (EXPONENTIALS_PER_SM_CLOCK) a clock. The
    kernel runs its matmuls and its exponentials one after the other (SERIAL_SOFTMAX_LIBRARIES), each at the share of
    its unit's rate the fitted efficiency gives; the rest of the softmax (its maxima, sums and rescaling on the FMA
    units) is left to that efficiency and the CTA's fixed cost."""
    return exponential_dims(arch) * matmul_rate(arch.warp_mma_fraction, library)


def flash_v1_key_block(qk_dim: int, seq_k: int) -> int:
    """Keys a FlashAttention 1 CTA holds at a time, forward and backward: 256 for head dimensions up to 64, 128 above
    (fmha_api.cpp: blocksize_c = head_size > 64 ? 128 : 256), and 128 where the keys are no more than 128
    (fmha_{fwd,bwd}_hdim{32,64}.cu: seqlen_k == 128). Dao et al. 2022 (arXiv 2205.14135, Algorithm 1) size the key
    block from the SRAM M as ceil(M / 4d): the larger the head dimension, the fewer keys a block. FlashAttention 1
    runs head dimensions up to 128; one past that is taken at 128. From the source (v1.0.9), not a fit."""
    return 128 if qk_dim > 64 or seq_k <= 128 else 256


def flash_v1_reread_bytes(qk_dim: int, v_dim: int, seq_k: int, backward: bool) -> float:
    """HBM bytes FlashAttention 1 moves per score beyond reading its operands and writing its results once: its CTAs
    walk the key blocks outside and their query rows inside (Dao et al. 2022, Algorithm 1: HBM traffic
    Theta(N^2 d^2 / M)), so every key block after the first re-reads each row's query (16-bit) and its running output
    in 32 bits, and every one before the last writes that output back (v1.0.9 fmha_fprop_kernel_1xN.h: gmem_q.load,
    gmem_o_tmp.load unless Is_first, o_tmp stored unless Is_last): 2 qk_dim + 8 v_dim bytes a row and key block. The
    backward, one key block per CTA walking the query rows, re-reads each row's query and output gradient and reads
    and writes its query gradient in 32 bits for every key block (fmha_dgrad_kernel_1xN_loop.h: gmem_q, gmem_do,
    gmem_dq_tmp, or its atomicAdd into dq_accum when split over the keys): 2 qk_dim + 2 v_dim + 8 qk_dim bytes. Per
    score, over the key block (flash_v1_key_block) and the share (K - 1) / K of the K key blocks that re-read; a
    causal walk, whose rows near the start walk fewer blocks, is taken alike. 0 with one key block (fmha_api.cpp:
    no loop)."""
    block = flash_v1_key_block(qk_dim, seq_k)
    blocks = math.ceil(seq_k / block)
    per_row = (10 * qk_dim + 2 * v_dim) if backward else (2 * qk_dim + 8 * v_dim)
    return per_row / block * (blocks - 1) / blocks


L2_SECTION_BYTES = 50 * 2**20
"""The L2 a longest-first grid fills with one section of heads' K and V (cuDNN's SM100 prefill engine and
FlashAttention's SingleTileLPTScheduler: size_l2 = 50 MiB). A value from the source, not a fit."""


def l2_section(copies: int, seq_k: int, qk_dim: int, v_dim: int) -> int:
    """The (batch, head) pairs a longest-first grid takes at a time: the largest power of two of heads whose 16-bit K
    and V fit in L2_SECTION_BYTES, at least one and at most `copies` (cudnn-frontend,
    include/cudnn_frontend/experimental/sm100_sdpa_prefill_engine.h)."""
    heads = L2_SECTION_BYTES // max(1, seq_k * (qk_dim + v_dim) * 2)
    return max(1, min(copies, 1 << (int(heads).bit_length() - 1) if heads else 1))


def attention_seconds(p: AttentionParams, arch: Architecture, peak: float, spec: KernelSpec,
                      compiled: bool | None = None, bandwidth: float = math.inf) -> float:
    """Seconds of one flash-attention kernel at `peak` dense FLOP/s. Parameters fitted on another chip, or another
    library, run their matmuls at this library's rate here over theirs there, and their softmax at this chip's
    rate per SM over that chip's (both as fractions of the dense peak); a library of the chip's own instruction runs
    its matmuls no faster per SM than there (sm_bound). `compiled`: how the CTAs' dispatch is computed
    (dispatch.makespan). `bandwidth`: the HBM B/s the kernel streams at, every SM at once, for the traffic of a
    kernel that re-reads its running output between key blocks (FlashAttention 1: flash_v1_reread_bytes), added to
    each block's time beside its matmuls, not hidden under them; unlimited, none."""
    s = dict(spec.shape)
    backward = spec.phase in BACKWARD_PHASES
    phase = p.bwd if backward else p.fwd
    dims = (3 * s["qk_dim"] + 2 * s["v_dim"]) if backward else (s["qk_dim"] + s["v_dim"])
    impl = attention_impl(spec)
    full_matrix = impl in FULL_MATRIX_LIBRARIES
    passes = 2 if full_matrix and bool(s["causal"]) and not backward else 1  # the softmax's, and the mask's
    block = arch.attention_block
    matmuls = matmul_rate(arch.fitted_warp_mma_fraction, p.library or impl) / matmul_rate(
        arch.warp_mma_fraction, impl)
    softmax = (arch.fitted_warp_mma_fraction * arch.fitted_special_function_rate) / (
        arch.warp_mma_fraction * arch.special_function_rate)

    def block_seconds_at(matmul_factor: float, unhidden_dims: float = 0.0) -> float:
        """Seconds of one block: its matmuls and fitted softmax at the fitted efficiency, plus `unhidden_dims` head
        dimensions of work at the dense peak."""
        return 2.0 * block * block * ((dims * matmul_factor + passes * phase.softmax_dims * softmax)
                                      / phase.efficiency + unhidden_dims) / (peak / arch.sm_count)

    # FlashAttention 1's running output, re-read and re-written in HBM for every key block, the SMs streaming at once:
    # the traffic of the kernel that runs, whatever fit it runs (its stand-ins, which keep their output on chip, run
    # its fit without it; FlashAttention 1 on another library's fit adds it)
    reread = block * block * (flash_v1_reread_bytes(s["qk_dim"], s["v_dim"], s["seq_k"], backward)
                              if impl == FLASH_V1 else 0.0) / (bandwidth / arch.sm_count)
    unbound = block_seconds_at(matmuls) + reread
    # a fused kernel of the chip's own instruction; PyTorch's attention multiplies in cuBLAS GEMMs, its softmax apart
    own = impl not in OTHER_INSTRUCTION_LIBRARIES
    exposed = exposed_exponential_dims(arch, block, s["qk_dim"], s["v_dim"]) if own and backward else 0.0
    block_seconds = block_seconds_at(matmuls, exposed)
    if sm_bound(arch) > 1.0 and own and p.library not in OTHER_INSTRUCTION_LIBRARIES:
        # the bound (the fitted chip's time per SM and clock) has room for the exposed exponentials: there the
        # matmuls took sm_bound times as long, their softmax no longer (exposed_exponential_dims)
        block_seconds = max(block_seconds_at(max(matmuls, sm_bound(arch))), block_seconds)
        if not backward:  # the forward's exponentials beside matmuls at this chip's rate (exponential_dims)
            block_seconds = min(block_seconds, block_seconds_at(matmuls, exponential_dims(arch)))
    block_seconds += reread
    # the CTA's fixed cost (in blocks) at the fit's rate here: sm_bound and exposed exponentials are per-block work
    overhead = phase.block_overhead * (unbound / block_seconds)
    # a library written for mma.sync keeps one query tile per CTA (FlashAttention-2's grid), whatever the chip's own
    # libraries do there (architecture.yaml, attention_query_tiles), even where it runs another library's fit
    tiles = 1 if backward or impl in WARP_MMA_LIBRARIES else arch.attention_query_tiles
    window = int(s.get("window", 0))  # a sliding window's band: the causal range, each tile's walk capped
    copies = s["batch"] * s["heads"]
    # the kernel that runs here issues its CTAs as its own library does for this chip, whatever fit it runs
    order = issue_order(impl, backward, arch.longest_first)
    if order != Order.longest_first:
        order = issue_order(p.library or impl, backward)
    blocks = critical_blocks(copies, math.ceil(s["seq_q"] / (block * tiles)),
                             math.ceil((s["seq_q"] if window else s["seq_k"]) / block),
                             (bool(s["causal"]) or bool(window)) and not full_matrix, overhead,
                             arch.sm_count, tiles, math.ceil((window + block - 1) / block) if window else 0,
                             order, compiled, l2_section(copies, s["seq_k"], s["qk_dim"], s["v_dim"]))
    return p.overhead_us * 1e-6 + blocks * block_seconds


def critical_blocks(copies: int, q_blocks: int, k_blocks: int, causal: bool, overhead: float, sm_count: int,
                    q_tiles: int = 1, band: int = 0, order: Order = Order.static_heaviest_first,
                    compiled: bool | None = None, section: int = 0) -> float:
    """Blocks on the busiest SM when `copies` x `q_blocks` CTAs, each walking its key blocks (`q_tiles` query tiles
    at a time) plus `overhead`, are handed to sm_count SMs in `order` (dispatch.makespan). `band`: a sliding
    window's key blocks, at most what one query tile walks (the blocks a window of w keys straddles:
    ceil((w + block - 1) / block)). `section`: the copies a longest-first grid takes at a time (dispatch.py)."""
    i = np.arange(q_blocks, 0, -1)  # heaviest first
    walked = np.ceil(i * k_blocks / q_blocks) if causal else np.full(q_blocks, float(k_blocks))
    work = q_tiles * (np.minimum(walked, band) if band else walked)
    return makespan(work + overhead, copies, order, sm_count, compiled, section)
