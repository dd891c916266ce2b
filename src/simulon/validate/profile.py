"""`simulon validate profile GPU.yaml`: the calibrated compute model against a GPU's own measured kernels.

A GPU YAML written by `simulon profile gpu` holds `kernel_runs`: every kernel the tracer emits for the profiled
shapes, timed with torch stand-ins (profiling/recipes.py). Each distinct run (kernel, phase, dtype, shape) is
compared, as the median of its times, with what the analytical model (compute/analytical.py, with the shipped
calibrations) predicts for that GPU's spec sheet, never with the profile itself: the profile is what the model is
checked against, not what it returns. The profiler runs each kernel `PROFILE_REPEATS` times back to back (its
default warm-up and timed runs), so the model is asked for a kernel in such a loop.

Rows are grouped two ways: by kernel and phase (`mlp_linear1 fwd fp8`: kernel by kernel) and by family (GEMMs of
at least 1 GFLOP per dtype, smaller GEMMs, grouped GEMMs, attention, memory-bound kernels), the families the issue's
bounds are stated for.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from ..compute.analytical import AnalyticalModel
from ..compute.calibration import Calibrations
from ..compute.profile import spec_from_run
from ..config.common import DType
from ..config.dc import GPUSpec
from ..config.errors import ConfigError
from ..workload.kernels import KernelClass, KernelSpec, Phase
from .kernels import GEMM_FAMILY_MIN_FLOPS
from .report import Comparison, Skipped, ValidationReport

PROFILE_REPEATS = 25
"""Runs of each kernel back to back in `simulon profile gpu` at its defaults: 5 warm-up and 20 timed."""


def validate_profile(gpu: GPUSpec, calibrations: Calibrations | None = None,
                     repeats: float = PROFILE_REPEATS) -> ValidationReport:
    """Predicted against measured milliseconds of every distinct kernel run in the GPU's profile."""
    if not gpu.kernel_runs:
        raise ConfigError(f"GPU {gpu.name}: kernel_runs: the file holds no measured kernels (write them with "
                          "`simulon profile gpu`)")
    cal = calibrations or Calibrations.shipped()
    runs: dict[str, list] = defaultdict(list)
    for index, run in enumerate(gpu.kernel_runs):
        runs[repr((run.kernel, sorted(run.params.items(), key=str)))].append((index, run))
    report = ValidationReport()
    models: dict[DType, AnalyticalModel] = {}
    for key in sorted(runs):
        index, run = runs[key][0]
        params = dict(run.params)
        times = [t for _, same in runs[key] for t in same.times_ms]
        dtype, phase = DType(str(params.pop("dtype", "bf16"))), str(params.pop("phase", "fwd"))
        if not times or phase not in Phase.__members__:
            report.skipped.append(Skipped(index, f"{run.kernel}: no times" if not times else
                                          f"{run.kernel}: unknown phase {phase!r}"))
            continue
        spec = spec_from_run(run.kernel, Phase[phase], params)
        if dtype not in models:
            try:
                models[dtype] = AnalyticalModel(gpu, dtype, cal, repeats=repeats)
            except ValueError as exc:
                report.skipped.append(Skipped(index, f"{dtype.value}: {exc}"))
                continue
        predicted = float(models[dtype].seconds([spec])[0]) * 1e3
        report.rows.append(Comparison(index, f"{run.kernel} {phase} {dtype.value}", "kernel_ms",
                                      statistics.median(times), predicted, family(spec, dtype)))
    return report


def family(spec: KernelSpec, dtype: DType) -> str:
    """The kernel's family: GEMMs by their own precision and size, grouped GEMMs, attention or memory-bound."""
    shape = dict(spec.shape)
    if spec.kclass in (KernelClass.gemm, KernelClass.grouped_gemm):
        precision = str(shape.get("precision", dtype.value))
        if spec.kclass == KernelClass.grouped_gemm:
            return f"grouped gemm {precision}"
        flops = 2.0 * shape["m"] * shape["n"] * shape["k"]
        return f"gemm {precision}" + ("" if flops >= GEMM_FAMILY_MIN_FLOPS else " <1 GFLOP")
    return "attention" if spec.kclass == KernelClass.attention else "memory"
