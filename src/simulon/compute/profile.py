"""Measured kernel times from a GPU profile (`kernel_runs` written by `simulon profile gpu`).

A run matches a kernel when its name, phase and every shape parameter the kernel carries agree.
The lookup is a plain object built per GPU, so results never depend on what ran before.
"""

from __future__ import annotations

import statistics

from ..config.dc import GPUSpec
from ..workload.kernels import KernelSpec


def _key(name: str, phase: str, params: dict) -> tuple:
    return (name, phase, tuple(sorted((k, float(v) if isinstance(v, int | float) and not isinstance(v, bool)
                                       else v) for k, v in params.items())))


class KernelProfile:
    def __init__(self, gpu: GPUSpec):
        self._times: dict[tuple, float] = {}
        for run in gpu.kernel_runs:
            if not run.times_ms:
                continue
            params = dict(run.params)
            phase = str(params.pop("phase", "fwd"))
            self._times[_key(run.kernel, phase, params)] = statistics.median(run.times_ms) * 1e-3

    def __len__(self) -> int:
        return len(self._times)

    def seconds(self, kernel: KernelSpec) -> float | None:
        """The median measured time of this exact kernel, or None if it was not profiled."""
        return self._times.get(_key(kernel.name, kernel.phase.name, dict(kernel.shape)))
