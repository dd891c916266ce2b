"""Kernel times for a GPU without a measured profile: the calibrated GEMM and attention models, and
memory-bound kernels at the achievable fraction of HBM bandwidth.

A GEMM in a block-scaled format (MXFP8, NVFP4: config/number_formats.py) runs at that format's dense peak from the
GPU template, with the fitted efficiency of its calibration chain (its own fit, else fp8's on the same GPU: the
block-scaled tensor-core instructions apply the scales inside the main loop, so the fraction of peak a tile
reaches is the narrow format's, not a different curve), and streams its operands with their block scales
(element + scale / block bytes each), which is where the format's extra traffic shows.

A GPU whose template was never fitted borrows the parameters of the nearest fitted GPU (calibration.py);
its own dense peak scales compute-bound work and its own HBM bandwidth memory-bound work. A GPU of the same chip as
fitted ones of no more bandwidth than its own runs each kernel at the fastest of their fits
(Calibrations.bandwidth_lenders), so that more bandwidth is never slower.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..config.common import DType
from ..config.dc import GPUSpec
from ..config.number_formats import number_format
from ..workload.kernels import KernelClass, KernelSpec, attention_impl
from .attention import attention_seconds
from .calibration import Architecture, AttentionParams, Calibrations, MemoryBound
from .gemm import GemmShapes, attention_at_clock, gemm_seconds

GEMM_CLASSES = (KernelClass.gemm, KernelClass.grouped_gemm)


def memory_seconds(memory: MemoryBound, bandwidth: float, moved_bytes: float) -> float:
    """Seconds of a memory-bound kernel moving `moved_bytes` on a GPU of HBM `bandwidth` B/s."""
    return memory.overhead_us * 1e-6 + moved_bytes / (bandwidth * memory.efficiency)


class AnalyticalModel:
    """Seconds of kernels on one GPU for one training dtype, as a microbenchmark times them (each kernel run
    `repeats` times back to back, the clock following that loop's busy time) or under `sustained_load`: back to
    back for seconds, at the clock the power limit allows."""

    def __init__(self, gpu: GPUSpec, dtype: DType, calibrations: Calibrations | None = None,
                 sustained_load: bool = False, repeats: float = 1.0):
        cal = calibrations or Calibrations.shipped()
        self.gpu, self.dtype, self.sustained_load, self.repeats = gpu, dtype, sustained_load, repeats
        self.calibrations = cal
        self.gemm, self.gemm_from = cal.gemm(gpu, dtype)
        self.gemm_arch = cal.architecture(gpu, self.gemm_from)
        self.gemm_peak = gpu.peak_flops(dtype)  # raises for a dtype the GPU has no peak in
        self._attention: dict[str, tuple[AttentionParams, Architecture]] = {}
        self.memory = cal.memory
        attention = number_format(dtype).attention_dtype  # flash attention runs in 16 bits
        if attention == DType.bf16 and DType.bf16 not in gpu.peak_tflops:  # fp16 on a GPU without bf16 (Turing)
            attention = DType.fp16
        self.attention_dtype = attention
        self.attention_peak = gpu.peak_flops(self.attention_dtype)
        self.attention_clock = cal.gemm(gpu, self.attention_dtype)[0]  # the tensor cores' clock behaviour
        self._fastest_of = [AnalyticalModel(gpu, dtype, lenders, sustained_load, repeats)
                            for lenders in cal.bandwidth_lenders(gpu)]

    def seconds(self, specs: Sequence[KernelSpec]) -> np.ndarray:
        """Seconds of each kernel, GEMMs evaluated together."""
        if self._fastest_of:
            return np.min([model.seconds(specs) for model in self._fastest_of], axis=0)
        out = np.empty(len(specs))
        gemms = [i for i, s in enumerate(specs) if s.kclass in GEMM_CLASSES]
        by_dtype: dict[DType, list[int]] = {}
        for i in gemms:
            by_dtype.setdefault(DType(dict(specs[i].shape).get("precision", self.dtype)), []).append(i)
        for dtype, members in by_dtype.items():
            if dtype == self.dtype:
                params, arch, peak = self.gemm, self.gemm_arch, self.gemm_peak
            else:  # a GEMM kept in another precision (an fp8 run's LM head)
                params, donor = self.calibrations.gemm(self.gpu, dtype)
                arch, peak = self.calibrations.architecture(self.gpu, donor), self.gpu.peak_flops(dtype)
            shapes = GemmShapes.of([specs[i] for i in members])
            out[members] = gemm_seconds(params, arch, peak, self.gpu.memory_bandwidth,
                                        number_format(dtype).operand_bytes(), shapes, self.sustained_load,
                                        self.repeats)
        for i, spec in enumerate(specs):
            if spec.kclass == KernelClass.attention:
                out[i] = self._attention_seconds(spec)
            elif spec.kclass == KernelClass.memory:
                moved = spec.bytes_on(self.gpu.fp8_any_layout)
                # a kernel that only writes an fp8 transpose this GPU does not keep does not run at all
                out[i] = 0.0 if spec.transpose_bytes and moved <= 0 else memory_seconds(
                    self.memory, self.gpu.memory_bandwidth, moved)
        return out

    def attention(self, impl: str) -> tuple[AttentionParams, Architecture]:
        """Parameters of attention library `impl` in this model's 16-bit dtype on this GPU (maybe lent) and the
        layout they apply to."""
        if impl not in self._attention:
            params, donor = self.calibrations.attention(self.gpu, impl, self.attention_dtype)
            self._attention[impl] = params, self.calibrations.architecture(self.gpu, donor)
        return self._attention[impl]

    def _attention_seconds(self, spec: KernelSpec) -> float:
        """The fitted attention time is a microbenchmark's timed alone; in a loop or under sustained load its
        tensor-core work runs at that loop's or the sustained clock instead (gemm.attention_at_clock)."""
        params, arch = self.attention(attention_impl(spec))
        alone = attention_seconds(params, arch, self.attention_peak, spec,
                                  bandwidth=self.gpu.memory_bandwidth * self.memory.efficiency)
        return attention_at_clock(alone, params.overhead_us * 1e-6, self.attention_clock, self.repeats,
                                  self.sustained_load)
