"""Kernel times for a GPU without a measured profile: the calibrated GEMM and attention models, and
memory-bound kernels at the achievable fraction of HBM bandwidth.

A GPU whose template was never fitted borrows the parameters of the nearest fitted GPU (calibration.py);
its own dense peak scales compute-bound work and its own HBM bandwidth memory-bound work.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..config.common import DType
from ..config.dc import GPUSpec
from ..workload.kernels import KernelClass, KernelSpec
from .attention import attention_seconds
from .calibration import Calibrations
from .gemm import GemmShapes, gemm_seconds

ATTENTION_DTYPES = (DType.fp16, DType.bf16)
"""Flash attention runs in 16-bit even when the GEMMs run in fp8, fp4 or tf32."""
GEMM_CLASSES = (KernelClass.gemm, KernelClass.grouped_gemm)


class AnalyticalModel:
    """Seconds of kernels on one GPU for one training dtype."""

    def __init__(self, gpu: GPUSpec, dtype: DType, calibrations: Calibrations | None = None):
        cal = calibrations or Calibrations.shipped()
        self.gpu, self.dtype = gpu, dtype
        self.gemm, self.gemm_from = cal.gemm(gpu, dtype)
        self.gemm_arch = cal.architecture(gpu, self.gemm_from)
        self.attention_from = cal.nearest(gpu, lambda c: c.attention is not None)
        self.attention = cal.gpus[self.attention_from].attention if self.attention_from else None
        self.attention_arch = cal.architecture(gpu, self.attention_from) if self.attention_from else None
        self.memory = cal.memory
        self.gemm_peak = gpu.peak_flops(dtype)
        self.attention_peak = gpu.peak_flops(dtype if dtype in ATTENTION_DTYPES else DType.bf16)

    def seconds(self, specs: Sequence[KernelSpec]) -> np.ndarray:
        """Seconds of each kernel, GEMMs evaluated together."""
        out = np.empty(len(specs))
        gemms = [i for i, s in enumerate(specs) if s.kclass in GEMM_CLASSES]
        if gemms:
            shapes = GemmShapes.of([specs[i] for i in gemms])
            out[gemms] = gemm_seconds(self.gemm, self.gemm_arch, self.gemm_peak, self.gpu.memory_bandwidth,
                                      self.dtype.bytes, shapes)
        for i, spec in enumerate(specs):
            if spec.kclass == KernelClass.attention:
                if self.attention is None:
                    raise ValueError("no attention calibration on any GPU")
                out[i] = attention_seconds(self.attention, self.attention_arch, self.attention_peak, spec)
            elif spec.kclass == KernelClass.memory:
                out[i] = self.memory.overhead_us * 1e-6 + spec.bytes / (
                    self.gpu.memory_bandwidth * self.memory.efficiency)
        return out
