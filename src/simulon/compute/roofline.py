"""First-order kernel timing: a roofline with per-GPU efficiencies fitted to measured kernels.

time = max(executed FLOPs / (dense peak x efficiency), bytes moved / (HBM bandwidth x efficiency)).
Efficiencies live in data/roofline.yaml (see scripts/fit_roofline.py for how they were fitted).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

from ..config.common import DType
from ..config.dc import GPUSpec
from ..config.templates import template_stem
from ..workload.kernels import KernelClass, KernelSpec


@cache
def _fitted() -> dict:
    return yaml.safe_load((resources.files("simulon.compute") / "data" / "roofline.yaml").read_text())


@dataclass(frozen=True)
class Roofline:
    gpu: GPUSpec
    dtype: DType
    gemm_efficiency: float
    attention_efficiency: float
    memory_efficiency: float

    @classmethod
    def for_gpu(cls, gpu: GPUSpec, dtype: DType) -> Roofline:
        data = _fitted()
        key = template_stem("gpu", gpu.name)  # efficiencies are fitted per shipped template
        gemm = data["gemm"].get(key, data["gemm"]["default"])
        attention = data["attention"].get(key, data["attention"]["default"])
        return cls(gpu, dtype, gemm, attention, data["memory_bound"])

    def seconds(self, kernel: KernelSpec) -> float:
        memory = kernel.bytes / (self.gpu.memory_bandwidth * self.memory_efficiency)
        if kernel.kclass == KernelClass.memory:
            return memory
        if kernel.kclass == KernelClass.attention:  # flash attention runs in bf16/fp16 even in fp8 training
            peak = self.gpu.peak_flops(self.dtype if self.dtype in (DType.fp16, DType.bf16) else DType.bf16)
            compute = kernel.hw_flops / (peak * self.attention_efficiency)
        else:
            compute = kernel.hw_flops / (self.gpu.peak_flops(self.dtype) * self.gemm_efficiency)
        return max(compute, memory)
