"""Measured kernel times from a GPU profile (`kernel_runs` written by `simulon profile gpu`).

A run is keyed on its kernel name, phase, dtype and every shape parameter the kernel carries. A kernel
profiled with exactly its shape takes the median of its runs. Otherwise the profile interpolates between
the measured shapes of the same kernel (same name, phase, dtype and non-numeric parameters): the
analytical model gives the shape dependence, and the measured/analytical ratio of the profiled shapes that share the
most parameters with it is interpolated in log space: along the one parameter they vary in, linearly in the log of the
model's time (so that time rises between two measured times that rise; in log2 of the parameter where the model's
time does not rise along it), between the profiled shapes either side (the nearest one's beyond them), else
averaged with inverse-square-distance weights (distance in log2 of the numeric parameters). So the answer is exact
at a profiled shape and lies between the ratios of the shapes it sits between: a GPT-3 LM head's vocabulary shard
of 6,283, measured at 5.5x the model at m 2,048 and 4,096, had interpolated at m 2,560 to 1.63 ms, below both (3.21
ms measured at 2,048), as the 48 LM-head shapes of other widths, near 1x, outweighed them.
The profiler times each kernel in a short loop (PROFILE_REPEATS runs back to back, 2.5 ms to 0.2 s of work), whose
clock depends on how long it lasts (a loop of light kernels runs near the burst clock, one of large GEMMs reaches the
power limit within tens of milliseconds: compute.fit.CLOCK), while a training step keeps the GPU at its settled
clock: given the model of the profile's conditions (`as_profiled`, at the length of loop a run records where it
records one: config.dc.KernelRun.back_to_back), a measured time is carried to the model's own
conditions by the model's ratio between the two (a compute-bound kernel slows by the clock's fall over the rest of
the way, a memory-bound one not at all).
A run whose params miss a parameter its kernel class needs (a GEMM without dtype_bytes:
config.common.RUN_SHAPE_NEEDS) is refused where the file is read, naming the file and the parameter, as are the types
and sizes of those given (config.dc.KernelRun); a profile built of a GPU made in code checks it again.
A profile is a plain object built per GPU and dtype: nothing is kept between simulations.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ..config.common import DType, missing_run_parameter, run_kind, training_dtype
from ..config.dc import GPUSpec, KernelRun
from ..config.errors import ConfigError
from ..workload.kernels import KernelClass, KernelSpec, Phase
from .analytical import AnalyticalModel

WARMUP, REPETITIONS = 5, 20
"""`simulon profile gpu`'s default untimed and timed runs of each kernel (a choice, not a fit; profiling/timing.py
runs them): defined here, with what a profile's times mean."""
PROFILE_REPEATS = WARMUP + REPETITIONS
"""Runs of each kernel back to back in `simulon profile gpu` at its defaults."""
LOOKUP_PHASE = {Phase.recompute: Phase.fwd}
"""A recomputed forward kernel runs exactly like the forward: looked up as the forward, and a profile's run of the
recompute phase (`simulon profile gpu` plans none: profiling/plan.py) read as a forward run of its shape."""


def loop_length(run: KernelRun, default: float = PROFILE_REPEATS) -> float:
    """Runs of the kernel back to back when `run` was timed, whose length set its clock: what it records
    (KernelRun.back_to_back), else the profiler's defaults (`default`)."""
    return default if run.back_to_back is None else run.back_to_back


def _numeric(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _split(params: dict) -> tuple[tuple, tuple[str, ...], np.ndarray]:
    """(non-numeric items, numeric names, log2 of numeric values) of a parameter dict."""
    names = tuple(sorted(k for k, v in params.items() if _numeric(v)))
    fixed = tuple(sorted((k, str(v)) for k, v in params.items() if not _numeric(v)))
    return fixed, names, np.log2(np.maximum([float(params[k]) for k in names], 1e-30))


def run_class(params: Mapping[str, Any]) -> KernelClass:
    """The kernel class a profiled run's params stand for (a grouped GEMM is a GEMM here)."""
    return KernelClass[run_kind(dict(params))]


def run_shape_error(index: int, params: Mapping[str, Any]) -> str | None:
    """Why a profiled run's params cannot be read as its kernel class's shape ("kernel_runs[3].params.dtype_bytes:
    missing: a GEMM run (one with m) needs m, n, k and dtype_bytes"), or None when they can (the types and sizes of
    those given are checked where the file is read: config.dc.KernelRun, which refuses a timed run missing one too)."""
    problem = missing_run_parameter(dict(params))
    return None if problem is None else f"kernel_runs[{index}].params.{problem[0]}: {problem[1]}"


def check_run_shapes(gpu: GPUSpec, source: str | None = None) -> None:
    """Raise ConfigError naming the first timed run whose params miss what its kernel class needs (run_shape_error):
    a GEMM without dtype_bytes ended a simulation in a KeyError. The message starts with `source`, the file the GPU
    was read from where the caller knows it, else the GPU's name."""
    for index, run in enumerate(gpu.kernel_runs):
        error = run_shape_error(index, run.params) if run.times_ms else None
        if error:
            raise ConfigError(f"{source or f'GPU {gpu.name}'}: {error}")


def spec_from_run(name: str, phase: Phase, params: dict) -> KernelSpec:
    """The kernel spec a profiled run stands for (enough of it for the analytical model)."""
    kclass = run_class(params)
    if kclass == KernelClass.gemm and params.get("groups", 1) > 1:
        kclass = KernelClass.grouped_gemm
    return KernelSpec(name, kclass, phase, 0.0, 0.0, float(params.get("bytes", 0.0)), tuple(params.items()))


def spec_of_run(name: str, params: Mapping[str, Any]) -> KernelSpec:
    """The kernel spec of a profiled run's params as `simulon profile gpu` records them: the shape, with the phase
    (the forward where none is given; an unknown one raises KeyError) and the dtype beside it."""
    shape = {k: v for k, v in params.items() if k not in ("phase", "dtype")}
    return spec_from_run(name, Phase[str(params.get("phase", "fwd"))], shape)


def _along(points: np.ndarray, log_ratios: np.ndarray, log_model: np.ndarray, point: np.ndarray, at: float,
           axis: int) -> tuple[float, bool]:
    """(log ratio interpolated among the shapes differing from `point` in parameter `axis` alone, clamped to the
    nearest beyond them; whether two of them lie either side of it). (nan, False) where none differs in it alone.
    The ratio is linear in the log of the model's time (`log_model` of the shapes, `at` of `point`) where that
    rises along the parameter, so that the time, the model's times that ratio, rises between two measured times
    that rise (linear in log2 of the parameter, it fell by up to 2.0% over the model's flat steps as the ratio fell:
    an H100 profile's fp8 moe_shared_linear2 weight gradient, and 127 other GEMM shapes); else linear in log2 of the
    parameter."""
    others = np.delete(np.arange(point.size), axis)
    on_line = np.all(points[:, others] == point[others], axis=1) & (points[:, axis] != point[axis])
    if not on_line.any():
        return float("nan"), False
    xs, ys, models = points[on_line, axis], log_ratios[on_line], log_model[on_line]
    order = np.argsort(xs, kind="stable")
    bracketed = bool(xs.min() < point[axis] < xs.max())
    if np.all(np.diff(models[order]) > 0):
        return float(np.interp(at, models[order], ys[order])), bracketed
    return float(np.interp(point[axis], xs[order], ys[order])), bracketed


class KernelProfile:
    def __init__(self, gpu: GPUSpec, dtype: DType, model: AnalyticalModel, as_profiled: AnalyticalModel | None = None):
        """Kernel times of `gpu`'s profile for `model`'s conditions; `as_profiled` models the profiler's (None: the
        same conditions, each measured time returned as measured)."""
        self.model = model
        profiled = as_profiled or model
        check_run_shapes(gpu)
        runs: dict[tuple, list[KernelRun]] = defaultdict(list)
        for run in gpu.kernel_runs:
            params = dict(run.params)
            if not run.times_ms or training_dtype(DType(params.pop("dtype", dtype.value))) != dtype:
                continue  # a run's dtype is the training dtype it was timed for: fp4 trains as nvfp4
            label = str(params.pop("phase", "fwd"))
            if label not in Phase.__members__:
                raise ConfigError(f"GPU {gpu.name}: kernel_runs: {run.kernel}: unknown phase {label!r} "
                                  f"(expected one of {', '.join(Phase.__members__)})")
            phase = LOOKUP_PHASE.get(Phase[label], Phase[label])
            fixed, names, point = _split(params)
            runs[(run.kernel, phase, fixed, names, tuple(point))].append(run)
        # (name, phase, fixed, numeric names) -> [(log2 point, seconds here, measured/analytical as profiled)]
        self._shapes: dict[tuple, list[tuple[np.ndarray, float, float]]] = defaultdict(list)
        self._loops: dict[float, AnalyticalModel] = {}  # loop length -> the model of a loop that long
        for (kernel, phase, fixed, names, point), same in sorted(runs.items(), key=lambda kv: repr(kv[0])):
            seconds = statistics.median(t for run in same for t in run.times_ms) * 1e-3
            spec = spec_of_run(kernel, same[0].params)
            ratio = seconds / float(self._timed_as(profiled, same[0]).seconds([spec])[0])
            here = seconds if profiled is model else ratio * float(model.seconds([spec])[0])
            self._shapes[(kernel, phase, fixed, names)].append((np.array(point), here, ratio))

    def _timed_as(self, profiled: AnalyticalModel, run: KernelRun) -> AnalyticalModel:
        """The model of the loop `run` was timed in: `profiled` (the profiler's defaults), or one of the loop length
        the run records (`back_to_back`: a profile taken with --warmup/--epoch-num of its own, whose clock is that
        loop's, was carried to training clocks as if it had run the defaults)."""
        loop = loop_length(run, profiled.repeats)
        if profiled is self.model or loop == profiled.repeats:
            return profiled
        if loop not in self._loops:
            self._loops[loop] = AnalyticalModel(profiled.gpu, profiled.dtype, profiled.calibrations,
                                                profiled.sustained_load, loop)
        return self._loops[loop]

    def __len__(self) -> int:
        return sum(len(v) for v in self._shapes.values())

    def seconds(self, kernel: KernelSpec, exact: bool = True) -> float | None:
        """Measured (or interpolated) seconds of the kernel under the model's conditions, or None if no run of it was
        profiled; `exact=False`: interpolated from the kernel's other shapes as if this one had not been profiled (a
        leave-one-out check: benchmarks/profile_interpolation_holdout.py).

        A cast's run stands for all its `bytes` (the profiler copies them: profiling/recipes.py), transposed copy
        included, which a GPU whose FP8 GEMMs read every layout does not write (KernelSpec.bytes_on): the time found
        for the whole cast is scaled by the model's ratio of what the GPU writes to the whole, so that a transpose
        alone (fp8_params' weight transpose) takes no time there, as the calibrated model times it."""
        if not kernel.transpose_bytes:
            return self._whole_seconds(kernel, exact)
        whole = replace(kernel, transpose_bytes=0.0)
        found = self._whole_seconds(whole, exact)
        if found is None:
            return None
        written, modelled = self.model.seconds([kernel, whole])
        return found * float(written / modelled) if modelled > 0 else 0.0

    def _whole_seconds(self, kernel: KernelSpec, exact: bool) -> float | None:
        """seconds() of a kernel as the profiler ran it."""
        phase = LOOKUP_PHASE.get(kernel.phase, kernel.phase)
        fixed, names, point = _split(dict(kernel.shape))
        measured = self._shapes.get((kernel.name, phase, fixed, names))
        if not measured:
            return None
        distances = np.array([np.linalg.norm(p - point) for p, _, _ in measured])
        at = np.flatnonzero(distances == 0)
        if exact and at.size:
            return measured[int(at[0])][1]
        others = distances > 0
        if not others.any():
            return None
        points = np.array([p for p, _, _ in measured])
        shared = np.sum(points == point, axis=1)  # parameters each profiled shape shares with this one
        near = others & (shared == shared[others].max())
        log_ratios = np.log(np.array([r for _, _, r in measured]))
        log_model = np.log(np.array([here / r for _, here, r in measured]))  # the model's time at each shape
        modelled = float(self.model.seconds([kernel])[0])
        lines = [_along(points[near], log_ratios[near], log_model[near], point, np.log(modelled), axis)
                 for axis in range(point.size)]
        between = [value for value, bracketed in lines if bracketed]
        varied = np.flatnonzero(np.any(points[near] != point, axis=0))
        if between:  # the mean over the parameters along which profiled shapes lie either side of it
            log_ratio = float(np.mean(between))
        elif varied.size == 1:  # along one parameter, all on one side: the nearest one's
            log_ratio = lines[int(varied[0])][0]
        else:
            weights = 1.0 / distances[near]**2
            log_ratio = float(np.sum(weights * log_ratios[near]) / np.sum(weights))
        return modelled * float(np.exp(log_ratio))
