"""GEMM time from its shape: output tiles run in waves over the SMs, each tile streams K, and the
kernel can be bound by HBM traffic instead; a long kernel runs at a power-limited clock.

Evaluated on arrays of shapes at once, so that fitting hundreds of measurements stays fast. The
library picks its tile and split-K; the model takes the fastest candidate, as a tuned library does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..config.common import DType
from ..workload.kernels import KernelClass, KernelSpec, Phase
from .calibration import Architecture, GemmParams

MAIN_GRAD_BYTES = DType.fp32.bytes
"""Megatron fuses weight-gradient accumulation into the fp32 main_grad: every output element is read
and written back in fp32 (a spec made by workload.kernels.accumulating_into names another main_grad dtype)."""
PARTIAL_BYTES = 2 * DType.fp32.bytes
"""Split-K writes fp32 partial tiles and reads them back to reduce them."""


@dataclass(frozen=True)
class GemmShapes:
    """Columns of GEMM problems. m counts the rows of all groups; each group is m/groups x n x k. A GEMM run in
    `chunks` launches one after the other (workload.kernels.chunked: Transformer Engine's communication overlap) is
    described by one chunk, m its rows."""

    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    groups: np.ndarray
    out_bytes: np.ndarray   # bytes moved per output element (read too when accumulating)
    grouped: np.ndarray     # one launch per group (grouped GEMM), not one batched launch
    chunks: np.ndarray | None = None  # launches of this shape one after the other (None: one each)

    @classmethod
    def of(cls, specs: Sequence[KernelSpec]) -> GemmShapes:
        def column(values) -> np.ndarray:
            return np.array(list(values), dtype=float)

        shapes = [dict(s.shape) for s in specs]
        chunks = column(s.get("chunks", 1) for s in shapes)
        return cls(column(s["m"] for s in shapes) / chunks, column(s["n"] for s in shapes),
                   column(s["k"] for s in shapes), column(s.get("groups", 1) for s in shapes),
                   column(2.0 * s.get("main_grad_bytes", MAIN_GRAD_BYTES) if spec.phase == Phase.bwd_wg
                          else s["dtype_bytes"]
                          for spec, s in zip(specs, shapes, strict=True)),
                   np.array([spec.kclass == KernelClass.grouped_gemm for spec in specs], dtype=bool),
                   chunks if (chunks > 1).any() else None)


def tile_speed(tm: int, tn: int, tile_intensity: float) -> float:
    """Relative main-loop speed of a tm x tn tile: its operand reuse (FLOPs per loaded element)
    against the intensity at which it runs at half speed."""
    reuse = tm * tn / (tm + tn)
    return reuse / (reuse + tile_intensity)


def clock_fraction(busy: np.ndarray, p: GemmParams) -> np.ndarray:
    """Clock relative to burst for a GPU kept busy this long: 1 when short, sustained when long."""
    tau = p.throttle_ms * 1e-3
    return p.sustained_clock + (1.0 - p.sustained_clock) * tau / (tau + busy)


def attention_at_clock(alone: float, overhead_s: float, p: GemmParams, repeats: float = 1.0,
                       sustained_load: bool = False) -> float:
    """Seconds of an attention kernel that takes `alone` timed alone (its fitted time: the clock a kernel of its
    length keeps, clock_fraction of its busy time) when run `repeats` times back to back (the clock following the
    loop's busy time) or under sustained load (the sustained clock): its tensor-core work rescaled by the clocks'
    ratio, its launch overhead not. `p` holds the GPU's clock behaviour (its GEMM parameters in that dtype)."""
    busy = alone - overhead_s
    if sustained_load:
        clock = p.sustained_clock
    elif repeats > 1:
        clock = float(clock_fraction(np.array(busy * repeats), p))
    else:
        return alone
    return overhead_s + busy * float(clock_fraction(np.array(busy), p)) / clock


def benchmark_clock(burst: np.ndarray, repeats: float | np.ndarray, p: GemmParams) -> np.ndarray:
    """Clock relative to burst of GEMMs a microbenchmark times: one timed alone (repeats 1: each run synchronised,
    the GPU idle between runs; the tables' GEMMs last microseconds to a few milliseconds) runs at the burst clock; a
    loop of `repeats` kernels back to back follows the loop's busy time. So only a source that loops shows how far and
    how fast a GPU throttles (compute.fit.shows_throttling). Read with the kernel's own busy time instead, XLA's
    alone-timed GEMMs of 0.1 to 1.4 ms are throttled by whatever throttle_ms the fit starts from, and the efficiency
    that compensates carries into training (H100 fp8 under sustained load: 0.83 of peak so read from a 1 ms start,
    0.72 read at burst). Attention keeps its own busy time (AnalyticalModel): SimuMax's rows of 131,072 tokens
    last hundreds of milliseconds."""
    return np.where(np.asarray(repeats) > 1, clock_fraction(burst * repeats, p), 1.0)


def gemm_seconds(p: GemmParams, arch: Architecture, peak: float, bandwidth: float, in_bytes: float,
                 s: GemmShapes, sustained_load: bool = False, repeats: float | np.ndarray = 1.0) -> np.ndarray:
    """Seconds of each GEMM at `peak` dense FLOP/s and `bandwidth` B/s with operands of in_bytes: in a
    microbenchmark that times it alone (`repeats` 1: the burst clock) or runs it `repeats` times back to back (burst
    clock until the loop has run long enough to throttle: the clock follows the loop's busy time), or under
    `sustained_load` (a training step keeps the GPU busy for seconds: the power-limited clock throughout). The power
    limit slows the SMs, not HBM (its clock is fixed): a memory-bound candidate keeps its time."""
    candidates = list(candidate_seconds(p, arch, peak, bandwidth, in_bytes, s))
    burst = np.min([np.maximum(compute, memory) for compute, memory in candidates], axis=0)
    clock = p.sustained_clock if sustained_load else benchmark_clock(burst, repeats, p)
    best = np.min([np.maximum(compute / clock, memory) for compute, memory in candidates], axis=0)
    launches = p.overhead_us + np.where(s.grouped, s.groups - 1, 0) * p.group_overhead_us
    return (launches * 1e-6 + best) * (1.0 if s.chunks is None else s.chunks)


def candidate_seconds(p: GemmParams, arch: Architecture, peak: float, bandwidth: float, in_bytes: float,
                      s: GemmShapes) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(main-loop seconds at burst clock, HBM seconds) of each GEMM for every tile shape and split-K the library
    can choose."""
    rows = np.ceil(s.m / s.groups)
    fastest = max(tile_speed(tm, tn, p.tile_intensity) for tm, tn in arch.gemm_tiles)
    operands = in_bytes * s.groups * (rows * s.k + s.k * s.n) + s.out_bytes * s.m * s.n
    for tm, tn in arch.gemm_tiles:
        sm_rate = peak * p.efficiency * tile_speed(tm, tn, p.tile_intensity) / fastest / arch.sm_count
        tiles = np.ceil(rows / tm) * np.ceil(s.n / tn) * s.groups
        for split in arch.gemm_splits:
            waves = np.ceil(tiles * split / arch.sm_count)
            compute = (waves * (np.ceil(s.k / split) + p.k_overhead) + p.ramp_k) * 2.0 * tm * tn / sm_rate
            traffic = operands + (split > 1) * PARTIAL_BYTES * s.m * s.n * split
            yield compute, traffic / (bandwidth * p.memory_efficiency)
