"""`simulon validate profile GPU.yaml`: the calibrated compute model against a GPU's own measured kernels.

A GPU YAML written by `simulon profile gpu` holds `kernel_runs`: every kernel the tracer emits for the profiled
shapes, timed with torch stand-ins (profiling/recipes.py). Each distinct run (kernel, phase, dtype, shape) is
compared, as the median of its times, with what the analytical model (compute/analytical.py, with the shipped
calibrations) predicts for that GPU's spec sheet, never with the profile itself: the profile is what the model is
checked against, not what it returns. A profile none of whose runs could be compared is refused, as a table none of
whose rows could is. The profiler runs each kernel `PROFILE_REPEATS` times back to back (its
default warm-up and timed runs), so the model is asked for a kernel in such a loop; a run that records a loop of its
own (`back_to_back`, from `simulon profile gpu --warmup --epoch-num`) is asked for in that loop, whose clock it ran at,
and is compared apart from runs of the same kernel timed in another loop.

Rows are grouped two ways: by kernel and phase (`mlp_linear1 fwd fp8`: kernel by kernel) and by family (GEMMs of
at least 1 GFLOP per dtype, smaller GEMMs, grouped GEMMs, attention, memory-bound kernels), the families the issue's
bounds are stated for.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from importlib import resources
from pathlib import Path

import yaml

from ..compute.analytical import AnalyticalModel
from ..compute.calibration import Calibrations
from ..compute.fit import PROFILE_GEMMS, Observation, Timing
from ..compute.profile import PROFILE_REPEATS, check_run_shapes, loop_length, spec_of_run
from ..config.common import DType, training_dtype
from ..config.dc import GPUSpec
from ..config.errors import ConfigError
from ..workload.kernels import KernelClass, KernelSpec, Phase, attention, gemm
from .kernels import GEMM_FAMILY_MIN_FLOPS
from .report import REASONS_WHEN_NONE, Comparison, Skipped, ValidationReport

SHIPPED_PROFILES = Path(str(resources.files("simulon.compute") / "data" / "profiles"))
"""GPU profiles measured on lent GPUs (`simulon profile gpu`), one YAML per GPU."""
SUSTAINED_GEMMS = Path(str(resources.files("simulon.compute") / "data" / "sustained_gemm.yaml"))
"""Sustained-GEMM runs on lent GPUs (benchmarks/gpu_sustained_gemm.py)."""


def validate_profile(gpu: GPUSpec, calibrations: Calibrations | None = None,
                     repeats: float = PROFILE_REPEATS, source: str | None = None) -> ValidationReport:
    """Predicted against measured milliseconds of every distinct kernel run in the GPU's profile, each modelled in the
    loop it was timed in (loop_length: its `back_to_back`, else `repeats`). Raises ConfigError
    for a run whose params miss what its kernel class needs (compute.profile.check_run_shapes), and where no run could
    be compared (each of an unknown phase, say), saying why; the message starts with `source`, the file the profile
    was read from (as the file's other problems are named), else the GPU's name."""
    named = source or f"GPU {gpu.name}"
    if not gpu.kernel_runs:
        raise ConfigError(f"{named}: kernel_runs: the file holds no measured kernels (write them with "
                          "`simulon profile gpu`)")
    check_run_shapes(gpu, named)
    cal = calibrations or Calibrations.shipped()
    runs: dict[str, list] = defaultdict(list)
    for index, run in enumerate(gpu.kernel_runs):
        runs[repr((run.kernel, sorted(run.params.items(), key=str), loop_length(run, repeats)))].append((index, run))
    report = ValidationReport()
    models: dict[tuple[DType, float], AnalyticalModel] = {}
    for key in sorted(runs):
        index, run = runs[key][0]
        times = [t for _, same in runs[key] for t in same.times_ms]
        phase = str(run.params.get("phase", "fwd"))  # a GPUSpec's runs have times and known dtypes (KernelRun)
        if phase not in Phase.__members__:
            report.skipped.append(Skipped(index, f"{run.kernel}: unknown phase {phase!r}"))
            continue
        written = DType(str(run.params.get("dtype", "bf16")))
        dtype, loop = training_dtype(written), loop_length(run, repeats)
        spec = spec_of_run(run.kernel, run.params)
        if (dtype, loop) not in models:
            try:
                models[(dtype, loop)] = AnalyticalModel(gpu, dtype, cal, repeats=loop)
            except ValueError as exc:
                read = "" if written == dtype else f", read as {dtype.value}"  # what the user wrote, then why
                report.skipped.append(Skipped(index, f"dtype {written.value}{read}: {exc}"))
                continue
        predicted = float(models[(dtype, loop)].seconds([spec])[0]) * 1e3
        report.rows.append(Comparison(index, f"{run.kernel} {phase} {dtype.value}", "kernel_ms",
                                      statistics.median(times), predicted, family(spec, dtype)))
    if not report.rows:
        reasons = [f"kernel_runs[{s.index}]: {s.reason}" for s in report.skipped]
        more = f"; and {len(reasons) - REASONS_WHEN_NONE} more" if len(reasons) > REASONS_WHEN_NONE else ""
        raise ConfigError(f"{named}: kernel_runs: no run could be compared ({len(reasons)} skipped: "
                          f"{'; '.join(reasons[:REASONS_WHEN_NONE])}{more})")
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


LAUNCH_BOUND_MS = 0.3
"""Shorter profiled kernels are left out of fits, a choice: a kernel the host launches more slowly than the GPU runs
it shows the launch even with the runs queued (tens of microseconds through SDPA's cuDNN path; a free fit on the
first H100 profile, which timed each run after the previous had finished, put it at 42 us), and at 0.3 ms and more
it is a few percent (compute.fit then leaves the launch overhead at its start)."""
PROFILE_INDEX, SUSTAINED_INDEX = 1_000_000, 2_000_000
"""Observation indices of profiled and sustained runs, apart from the kernels table's row numbers."""
SETTLED_AT = 5 / 6
"""Where in a sustained-GEMM run (benchmarks/gpu_sustained_gemm.py) its settled rate, the median of its last third,
is read: at five sixths of the run, its middle. That rate sets how far the clock falls (compute.fit.CLOCK); the
profile's loops set how fast. The median of its first tenth, read at a twentieth of the run (a second), is not fitted:
it is past the fall the loops show (tens of milliseconds) and 3-5% above the settled rate (723.5 against 691.2 TFLOP/s
on the third H100), a slower drift, seconds long, which one time constant cannot hold beside the fall, and which a
training step, seconds at a time under load, has gone through."""


def sustained_observations(path: Path = SUSTAINED_GEMMS) -> list[Observation]:
    """The sustained-GEMM runs (compute/data/sustained_gemm.yaml) as observations: each run's settled rate, read as a
    loop as long as the time it had run by then (SETTLED_AT)."""
    doc = yaml.safe_load(path.read_text())
    found = []
    for i, run in enumerate(doc["runs"]):
        n, dtype = int(run["size"]), DType(run["dtype"])
        flops = 2.0 * n**3
        seconds = flops / (float(run["settled_tflops"]) * 1e12)
        repeats = round(float(run["seconds"]) * SETTLED_AT / seconds)
        found.append(Observation(SUSTAINED_INDEX + i, str(run["gpu"]), dtype,
                                 (gemm("sustained_gemm", Phase.fwd, n, n, n, 2.0),), seconds, flops,
                                 "sustained GEMM", "sustained_gemm", Timing.total, repeats))
    return found


def profile_observations(gpu: GPUSpec, template: str) -> list[Observation]:
    """The profile's attention kernels and GEMMs as observations of `template` (attention_observations,
    gemm_observations), its kernels' medians read once."""
    rows = validate_profile(gpu).rows
    return attention_observations(gpu, template, rows) + gemm_observations(gpu, template, rows)


def attention_observations(gpu: GPUSpec, template: str, rows: list[Comparison] | None = None) -> list[Observation]:
    """The profile's attention kernels as observations of `template` for fitting their library: each the median of
    its runs, in the loop they ran in (loop_length). Kernels whose keys and values have one head size (the layout every
    library supports), of LAUNCH_BOUND_MS or more, timed once: the same kernel profiled again under an fp8 point is
    left out. `rows`: the profile's validate_profile rows, where already read."""
    found: list[Observation] = []
    for row in validate_profile(gpu).rows if rows is None else rows:
        run = gpu.kernel_runs[row.index]
        params = {k: v for k, v in run.params.items() if k not in ("phase", "dtype")}
        if "seq_q" not in params or params["qk_dim"] != params["v_dim"] or run.params.get("dtype") != "bf16" \
                or row.measured < LAUNCH_BOUND_MS:
            continue
        spec = attention(Phase[str(run.params.get("phase", "fwd"))], **params)  # its shape: the constructor's names
        found.append(Observation(PROFILE_INDEX + row.index, template, DType.bf16, (spec,), row.measured * 1e-3,
                                 spec.flops, f"{gpu.name} profile", "attention", Timing.total, loop_length(run)))
    return found


def gemm_observations(gpu: GPUSpec, template: str, rows: list[Comparison] | None = None) -> list[Observation]:
    """The profile's plain GEMMs as observations of `template` in their own precision (family PROFILE_GEMMS, which fits
    how fast the clock falls: compute.fit.CLOCK): each the median of its runs, in the loop they ran in; GEMMs of
    LAUNCH_BOUND_MS or more, each shape and precision once, and none with a dimension that is not aligned
    (ALIGNMENT_BYTES). `rows`: the profile's validate_profile rows, where already read."""
    found: list[Observation] = []
    seen: set[tuple[int, int, int, DType]] = set()
    for row in validate_profile(gpu).rows if rows is None else rows:
        run = gpu.kernel_runs[row.index]
        params = {k: v for k, v in run.params.items() if k not in ("phase", "dtype")}
        if "m" not in params or params.get("groups", 1) > 1 or row.measured < LAUNCH_BOUND_MS:
            continue
        precision = DType(str(params.get("precision", run.params.get("dtype", "bf16"))))
        m, n, k = (int(params[d]) for d in ("m", "n", "k"))
        if (m, n, k, precision) in seen or not aligned((m, n, k), precision):
            continue
        seen.add((m, n, k, precision))
        spec = gemm(run.kernel, Phase.fwd, m, n, k, precision.bytes)
        found.append(Observation(PROFILE_INDEX + row.index, template, precision, (spec,), row.measured * 1e-3,
                                 spec.flops, f"{gpu.name} profile", PROFILE_GEMMS, Timing.total, loop_length(run)))
    return found


ALIGNMENT_BYTES = 16
"""Hopper's cuBLAS GEMMs load their operands with TMA, which needs 16-byte aligned leading dimensions (8 bf16
elements, 16 fp8 ones): the H100 profile's LM heads at GPT-3's unpadded vocabulary (50,257 / tp columns) run at
112-148 TFLOP/s where aligned GEMMs of their size reach 600 and more, on kernels the model does not describe (Megatron
pads the vocabulary to a multiple of 128 x tp, so a training step does not run them)."""


def aligned(dims: tuple[int, ...], precision: DType) -> bool:
    """Whether every dimension of a GEMM in `precision` spans a whole number of ALIGNMENT_BYTES."""
    return all(d * precision.bytes % ALIGNMENT_BYTES == 0 for d in dims)
