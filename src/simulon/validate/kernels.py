"""`simulon validate kernels`: the compute model against measured GEMM, grouped-GEMM and attention throughput.

Each row of a table in the format of shared/validation/kernels.csv becomes the kernel spec(s) the simulator
would time on the GPU its `hardware` describes (free text, read by config.resolve), with the measured seconds
recovered through the source's own FLOP convention; rows the model does not cover are skipped with the reason.
A dtype is read in the sources' spellings (DTYPES) or as users write it (config.common.dtype_named: BF16, bfloat16,
torch.bfloat16, half); an attention row's head count comes from its heads column, else its notes; a grouped GEMM's
weight gradient accumulates into fp32 main_grad unless its notes say `main_grad_dtype=bf16` (SimuMax's
test_grouped_gemm_efficiency.py keys every row by it, grad_reduce_in_bf16 runs beside fp32 ones). Columns and
numeric cells are read as report.table_rows and report.bad_cell say.
The same observations feed scripts/fit_compute.py.
"""

from __future__ import annotations

import re

from ..compute.analytical import AnalyticalModel
from ..compute.calibration import Calibrations
from ..compute.fit import Observation, Timing
from ..config.common import DType, dtype_named, kernel_shape_error
from ..config.dc import GPUSpec
from ..config.resolve import Unresolved, resolve_hardware
from ..workload.kernels import (
    FLASH_IMPLEMENTATIONS,
    KernelClass,
    KernelSpec,
    Phase,
    accumulating_into,
    attention,
    attention_impl,
    gemm,
    memory_bound,
)
from .report import (
    Comparison,
    Skipped,
    ValidationReport,
    bad_cell,
    cell_number,
    flag,
    inputs_key,
    number,
    short_row,
    table_rows,
)

DTYPES = {
    "bf16": DType.bf16, "fp16": DType.fp16,
    # the FlashAttention charts: its benchmark script (benchmarks/benchmark_flash_attention.py) times fp16
    "fp16/bf16": DType.fp16, "bf16 out, bf16 in": DType.bf16, "fp32 out, bf16 in": DType.bf16,
    "bf16xbf16->bf16": DType.bf16, "f32xf32->f32": DType.tf32,  # XLA's f32 dot runs on TF32 tensor cores
    "f8e4m3fnxf8e4m3fn->bf16": DType.fp8, "fp8 e4m3fn": DType.fp8,
}
ATTENTION_LIBRARIES = {"[FlashAttention-2]": "flash", "(TE fused attn)": "cudnn", "[FlashAttention]": "flash_v1",
                       "[FlashAttention Triton]": "flash_triton", "[PyTorch]": "pytorch", "[xformers]": "xformers"}
"""The tables' attention kernels -> the flash-attention library they measured (workload.kernels)."""
COLUMNS = ("hardware", "kernel", "dtype", "M")
"""Columns every kernels table has, with one of TIMED; a table without one is bad input. The shape's other columns
are a kernel's own: a GEMM's N and K (its batch blank for one GEMM), an attention's batch and head_dim, so that a table
of GEMMs alone or of attention alone needs only its own, and a row lacking one of its kernel's is skipped naming it."""
INFORMATIONAL = ("source", "subset", "notes", "N", "K", "batch", "head_dim", "heads", "kv_heads", "causal",
                 "kernel_eff_vs_peak", "time_us")
"""Columns read where a row fills them, blank where a table lacks them."""
WHOLE = ("M", "N", "K", "batch", "head_dim", "heads", "kv_heads")
"""Numeric columns: counts and sizes (whole numbers), and measurements (MEASURED); a row whose cell is not one is
skipped."""
MEASURED = ("kernel_tflops", "kernel_eff_vs_peak", "time_us")
"""What a row measured; every other cell describes the kernel (report.inputs_key)."""
TIMED = ("kernel_tflops", "time_us")
"""What a row is compared on: its throughput, else its kernel time in microseconds (a user's profile of kernel
durations), read as the throughput the source's FLOP convention gives it."""
MEDIAN_KERNEL_TIMED = ("XLA dot",)
"""Kernels of a source that reports the median kernel duration, not the time of the operation: XLA's matmul table
(xla/tools/matmul_perf_table_gen.cc: Profile() traces five runs on two argument sets with CUPTI and returns
getMedianKernelTimeNs(), the median over every kernel event). A dot run as one kernel reports that kernel; Hopper's FP8
dot, run as an operand transpose and the GEMM, reports the mean of the two: about half the GEMM's time at large shapes,
which reads as up to 1.3x the dense FP8 peak when taken as the dot's time."""
BACK_TO_BACK = {"SimuMax": {"grouped_gemm": 50, "gemm": 100}}
"""Kernels a source's benchmark loop runs back to back (warm-up included, no pause between), by kernel family: the
clock of the timed runs follows the whole loop's busy time. SimuMax (simu_tools/efficency_test: test_gemm_efficiency.py
times 75 GEMMs after 25 warm-up ones; test_grouped_gemm_efficency.py 40 after 10). A source not named here times each
kernel alone: XLA's table (CUPTI kernel durations), and mamf-finder's best shape, though each of its shapes runs 100
after 50 warm-up: the row is the fastest of a search over thousands of shapes, the one that ran at the highest clock
(read as a 150-kernel loop, its B200 row is 31.5% off and the GPUs lent from its rows, GH200 bf16 and fp8, 14% and
16%; read alone, 24.8%, 11.7% and 6.4%)."""
SHAPE_COLUMNS = {"seq_q": "M", "seq_k": "M", "qk_dim": "head_dim", "v_dim": "head_dim", "m": "M (times batch)",
                 "n": "N", "k": "K", "groups": "batch"}
"""The column a kernel's shape parameter is read from (those not named are the column of the same name)."""
GEMM_FAMILY_MIN_FLOPS = 1e9
"""GEMMs of at least 1 GFLOP are reported apart: below it launch latency, not the GPU, sets the time."""


def validate_kernels(rows: list[dict[str, str]], calibrations: Calibrations | None = None,
                     source: str = "kernels table") -> ValidationReport:
    """Predicted vs measured kernel_tflops for every row the compute model covers."""
    rows = table_rows(rows, source, "a kernels table", COLUMNS, (*INFORMATIONAL, *TIMED), one_of=TIMED)
    cal = calibrations or Calibrations.shipped()
    report = ValidationReport()
    models: dict[tuple[str, DType, int], AnalyticalModel] = {}
    for index, row in enumerate(rows):
        obs = observation(index, row)
        if isinstance(obs, str):
            report.skipped.append(Skipped(index, obs))
            continue
        key = (obs.gpu, obs.dtype, obs.repeats)
        if key not in models:
            models[key] = AnalyticalModel(GPUSpec.model_validate({"from": obs.gpu}), obs.dtype, cal,
                                          repeats=obs.repeats)
        predicted = float(obs.timing.reported(models[key].seconds(obs.specs)))
        report.rows.append(Comparison(index, obs.subset, "kernel_tflops", obs.flops / obs.seconds / 1e12,
                                      obs.flops / predicted / 1e12, f"{obs.gpu} / {family(obs)}",
                                      inputs_key(row, MEASURED)))
    return report


def family(obs: Observation) -> str:
    if obs.family == "gemm":
        name = "gemm fp8" if obs.dtype == DType.fp8 else "gemm"
        return name if obs.flops >= GEMM_FAMILY_MIN_FLOPS else f"{name} <1 GFLOP"
    if obs.family == "attention" and attention_impl(obs.specs[0]) != FLASH_IMPLEMENTATIONS[0]:
        return f"attention {attention_impl(obs.specs[0])}"
    return obs.family


def observations(rows: list[dict[str, str]]) -> list[Observation]:
    """Every row the compute model covers, as an observation for fitting."""
    return [o for o in (observation(i, row) for i, row in enumerate(rows)) if not isinstance(o, str)]


def observation(index: int, row: dict[str, str]) -> Observation | str:
    """The row as kernel specs and measured seconds, or why the model cannot take it."""
    unreadable = short_row(row, COLUMNS) or bad_cell(row, WHOLE, MEASURED)
    if unreadable:
        return unreadable
    try:
        # resolved as the other tables' cells are: a system alone ("p5.48xlarge", "a3-mega") names its GPU
        gpu = resolve_hardware(row.get("hardware", ""), row.get("notes", "")).gpu
    except Unresolved as exc:
        return f"hardware: {exc}"
    dtype = DTYPES.get(row.get("dtype", "")) or dtype_named(row.get("dtype", ""))
    if not isinstance(dtype, DType):  # the sources' own spellings, else as users write them (bf16, BF16, bfloat16)
        return f"dtype {row.get('dtype')!r} is not modelled"
    peak = dense_peak(gpu, dtype)
    if isinstance(peak, str):
        return peak
    tflops, micros = number(row, "kernel_tflops"), number(row, "time_us")
    if not (tflops and tflops > 0) and not (micros and micros > 0):
        return "kernel_tflops and time_us are blank or not positive"
    kernel = row.get("kernel", "")
    try:
        parsed = _attention(kernel, row) if names(kernel, "attention") else _gemm(kernel, row, gpu, dtype)
    except (TypeError, ValueError) as exc:
        return f"cannot read the shape: {exc}"
    if isinstance(parsed, str):
        return parsed
    specs, flops = parsed
    if not (tflops and tflops > 0):
        tflops = flops / (micros * 1e-6) / 1e12  # type: ignore[operator]
    problem = next(filter(None, (kernel_shape_error(dict(spec.shape)) for spec in specs)), None)
    if problem:
        return f"{SHAPE_COLUMNS.get(problem[0], problem[0])}: {problem[1]}"
    kclass = specs[0].kclass
    name = "attention" if kclass == KernelClass.attention else "grouped_gemm" if \
        kclass == KernelClass.grouped_gemm else "gemm"
    if name != "attention" and tflops * 1e12 > peak:
        return f"suspect: {tflops:g} TFLOP/s is above the GPU's dense {dtype.value} peak (the source marks such rows)"
    timing = Timing.median_kernel if names(kernel, *MEDIAN_KERNEL_TIMED) else Timing.total
    loop = next((by_family for word, by_family in BACK_TO_BACK.items() if word in row.get("source", "")), {})
    return Observation(index, gpu, dtype, specs, flops / (tflops * 1e12), flops, row.get("subset", ""), name, timing,
                       loop.get(name, 1))


def names(kernel: str, *words: str) -> bool:
    """Whether a row's kernel description contains any of `words`, in any case ('grouped gemm (fwd)' is the tables'
    'grouped GEMM (fwd)')."""
    return any(word.casefold() in kernel.casefold() for word in words)


def dense_peak(gpu: str, dtype: DType) -> float | str:
    """The GPU's dense peak FLOP/s in `dtype`, or why a row cannot run there: a GPU whose template lists no peak
    for the format has no tensor-core rate for it (an A100 has no fp8, a Hopper no fp4), as a scenario refuses."""
    try:
        return GPUSpec.model_validate({"from": gpu}).peak_flops(dtype)
    except ValueError as exc:
        return f"dtype: {exc}"


def tn_only_fp8(gpu: str) -> bool:
    """Whether the GPU's FP8 tensor-core GEMMs in cuBLASLt take both operands K-major only (the "TN" layout of
    NVIDIA's cuBLAS documentation, cublasLtMatmul FP8 requirements): an NVIDIA GPU whose FP8 GEMMs do not read every
    layout (config.dc.GPUSpec.fp8_any_layout: Hopper, not Blackwell)."""
    spec = GPUSpec.model_validate({"from": gpu})
    return spec.vendor == "nvidia" and not spec.fp8_any_layout


def _dims(row: dict[str, str], *columns: str) -> list[int]:
    values = [number(row, c) for c in columns]
    bad = [c for c, v in zip(columns, values, strict=True) if v is None or v <= 0 or v != int(v)]
    if bad:
        raise ValueError(f"{', '.join(bad)} blank or not a positive integer")
    return [int(v) for v in values]  # type: ignore[arg-type]


def _gemm(kernel: str, row: dict[str, str], gpu: str, dtype: DType) -> tuple[tuple[KernelSpec, ...], float] | str:
    m, n, k = _dims(row, "M", "N", "K")
    out_bytes = 4.0 if row["dtype"] == "f32xf32->f32" else 2.0
    if names(kernel, "grouped GEMM"):
        (groups,) = _dims(row, "batch")
        stage = re.search(r"\((\w+)\)", kernel.casefold())
        orient = {"fwd": (Phase.fwd, m, n, k), "bwd_grad_act": (Phase.bwd_ig, m, k, n),
                  "bwd_grad_w": (Phase.bwd_wg, n, k, m)}.get(stage.group(1) if stage else "")
        if orient is None:
            return f"grouped GEMM stage of {kernel!r} is not fwd, bwd_grad_act or bwd_grad_w"
        phase, gm, gn, gk = orient
        spec = gemm("grouped_gemm", phase, gm * groups, gn, gk, out_bytes, groups)
        main_grad = re.search(r"main_grad_dtype=([\w.]+)", row.get("notes", ""))
        if main_grad:  # SimuMax measured the weight gradient accumulating into fp32 and into bf16 main_grad
            named = dtype_named(main_grad.group(1))
            if not isinstance(named, DType):
                return f"main_grad_dtype {main_grad.group(1)!r} in the notes is not a dtype"
            spec = accumulating_into(spec, named.bytes)
        return (spec,), 2.0 * m * n * k * groups
    if not names(kernel, "GEMM", "XLA dot", "matmul"):
        return f"kernel {kernel!r} is not modelled"
    batch = _dims(row, "batch")[0] if (row.get("batch") or "").strip() else 1
    # the wgrad GEMM of Megatron accumulates into fp32 main_grad: phase bwd_wg carries that traffic
    phase = Phase.bwd_wg if row["dtype"].startswith("fp32 out") else Phase.fwd
    spec = gemm("gemm", phase, m * batch, n, k, out_bytes, batch)
    if batch > 1:  # one batched launch, not a grouped GEMM
        spec = KernelSpec(spec.name, KernelClass.gemm, spec.phase, spec.flops, spec.hw_flops, spec.bytes, spec.shape)
    if names(kernel, "XLA dot") and dtype == DType.fp8 and tn_only_fp8(gpu):
        # XLA's dot takes its right operand K x N; cuBLASLt's FP8 GEMM on Hopper takes it only K-major (TN), so
        # XLA transposes it first: one more pass that reads and writes the operand
        return (spec, memory_bound("fp8_operand_transpose", Phase.fwd, 2.0 * k * n * batch * dtype.bytes,
                                   k * n * batch)), 2.0 * m * n * k * batch
    return (spec,), 2.0 * m * n * k * batch


def _attention(kernel: str, row: dict[str, str]) -> tuple[tuple[KernelSpec, ...], float] | str:
    impl = next((lib for name, lib in ATTENTION_LIBRARIES.items() if names(kernel, name)), None)
    if impl is None:
        return (f"attention implementation {kernel!r} is not modelled (flash-attention 1, 2, Triton, cuDNN, xformers "
                f"and PyTorch's are)")
    seq, batch, head_dim = _dims(row, "M", "batch", "head_dim")
    notes = row.get("notes", "")
    if names(kernel, "TE fused attn"):  # SimuMax: causal; FLOPs count the full score matrix, backward 2.5x
        found = {key: int(v) for key, v in re.findall(r"(heads|kv_heads|v_head_dim)=(\d+)", notes)}
        found.update({c: v for c in ("heads", "kv_heads") if (v := cell_number(row, c, whole=True))})
        if len(found) < 3:
            return "notes do not give heads, kv_heads and v_head_dim"
        heads, kv, v_dim = found["heads"], found["kv_heads"], found["v_head_dim"]
        phase = Phase.bwd_ig if names(kernel, " bwd ") else Phase.fwd
        spec = attention(phase, batch, heads, kv, seq, seq, head_dim, v_dim, True, 2.0, impl)
        base = batch * seq * seq * max(heads, kv) * (head_dim + v_dim)
        return (spec,), (5.0 if phase == Phase.bwd_ig else 2.0) * base
    heads = re.search(r"\((\d+) heads\)", notes)
    h = cell_number(row, "heads", whole=True) or (int(heads.group(1)) if heads else None)
    if h is None:
        return "neither the heads column nor the notes give the number of heads"
    causal = flag(row, "causal")
    if causal is None and (row.get("causal") or "").strip():
        return f"causal: {row['causal'].strip()!r} is not a yes/no flag (yes, true, no or false, any case)"
    causal = bool(causal)  # a blank cell (or no causal column) reads as not causal
    specs = tuple(attention(p, batch, h, h, seq, seq, head_dim, head_dim, causal, 2.0, impl)
                  for p in (Phase.fwd, Phase.bwd_ig))
    # flash-attention's benchmark: forward 4*b*s^2*h*d (halved when causal), backward 2.5x the forward
    forward = 4.0 * batch * seq * seq * h * head_dim / (2.0 if causal else 1.0)
    return specs, 3.5 * forward
