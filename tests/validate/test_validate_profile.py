"""`simulon validate profile`: a GPU's measured kernel_runs against the calibrated compute model: exact when the
profile is the model's own prediction, within a bound on the shipped H100 profile, and bad input refused."""

from __future__ import annotations

import json
import statistics
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import yaml

from helpers import cli
from simulon.compute.analytical import AnalyticalModel
from simulon.compute.profile import spec_of_run
from simulon.config.common import DType
from simulon.config.dc import GPUSpec
from simulon.config.loading import ConfigError
from simulon.profiling.plan import SweepPoint, plan
from simulon.validate.profile import PROFILE_REPEATS, validate_profile
from simulon.workload.kernels import KernelClass

PROFILES = Path(str(resources.files("simulon.compute") / "data" / "profiles"))
LENT_H200 = Path(__file__).resolve().parents[2] / "benchmarks" / "device_runs" / "2026-11-30-h200"
"""What a lent H200 measured, none of it fitted: the weak-scaling GPTs' kernels and their layers looped."""
H100_PROFILE, H200_PROFILE = PROFILES / "h100-sxm5-80gb.yaml", PROFILES / "h200-sxm5-141gb.yaml"
ONE_PASS = ("attn_residual", "mlp_residual", "grad_zero", "grad_check", "grad_check_scale", "optimizer",
            "attn_qkv_cast", "attn_proj_cast", "mlp_linear1_cast", "mlp_gate_cast", "mlp_linear2_cast")
"""Kernels whose stand-in is one pass over HBM, as in training (norms, activations and the loss run unfused)."""


def model_profile(path: Path, dtype: DType) -> int:
    """A GPU YAML whose kernel_runs are what the analytical model predicts for a small MoE model's kernels."""
    gpu = GPUSpec.model_validate({"from": "h100-sxm"})
    model = AnalyticalModel(gpu, dtype, repeats=PROFILE_REPEATS)
    _, planned = plan(SweepPoint({"from": "mixtral-8x7b"}, seq=512, batch=1, dtype=dtype, tp=2, ep=2))
    seconds = model.seconds([p.spec for p in planned])
    runs = [{"kernel": p.spec.name, "params": p.params, "times_ms": [float(s) * 1e3] * 3}
            for p, s in zip(planned, seconds, strict=True)]
    path.write_text(yaml.safe_dump({"from": "h100-sxm", "kernel_runs": runs}))
    return len(runs)


@pytest.mark.parametrize("dtype", [DType.bf16, DType.fp8])
def test_a_profile_of_the_models_own_predictions_is_matched_exactly(tmp_path, dtype):
    count = model_profile(tmp_path / "gpu.yaml", dtype)
    report = validate_profile(GPUSpec.model_validate({"from": str(tmp_path / "gpu.yaml")}))
    assert len(report.rows) == count and not report.skipped
    assert max(abs(r.error_pct) for r in report.rows) < 1e-6
    families = {r.group for r in report.rows}
    assert {f"gemm {dtype.value}", f"grouped gemm {dtype.value}", "attention", "memory"} <= families


def test_a_profile_of_the_models_loop_times_feeds_a_training_step_the_models_sustained_times(tmp_path):
    """The profiler's loops run at their own clock, a training step at the settled one: a profile of what the
    model predicts for the profiler's loops gives a training step exactly what the model predicts under sustained
    load, compute-bound kernels slower than measured, memory-bound ones as measured."""
    from simulon.compute.populate import spec_seconds

    model_profile(tmp_path / "gpu.yaml", DType.fp8)
    profiled = GPUSpec.model_validate({"from": str(tmp_path / "gpu.yaml")})
    _, planned = plan(SweepPoint({"from": "mixtral-8x7b"}, seq=512, batch=1, dtype=DType.fp8, tp=2, ep=2))
    specs = [p.spec for p in planned]
    seconds, measured = spec_seconds(specs, profiled, DType.fp8)
    gpu = GPUSpec.model_validate({"from": "h100-sxm"})
    training = AnalyticalModel(gpu, DType.fp8, sustained_load=True).seconds(specs)
    loop = AnalyticalModel(gpu, DType.fp8, repeats=PROFILE_REPEATS).seconds(specs)
    assert measured == len(specs) and np.allclose(seconds, training, rtol=1e-9)
    compute = [i for i, s in enumerate(specs) if s.kclass in (KernelClass.gemm, KernelClass.attention)]
    memory = [i for i, s in enumerate(specs) if s.kclass == KernelClass.memory]
    assert all(seconds[i] >= loop[i] * (1 - 1e-9) for i in compute)  # never faster than measured
    assert seconds[compute].sum() > 1.05 * loop[compute].sum()  # the clock falls under sustained load
    assert memory and all(seconds[i] == pytest.approx(loop[i]) for i in memory)


def test_the_shipped_h100_profile_holds_the_compute_model_to_its_gemm_bounds():
    """The model, whose GEMMs are fitted on the published kernel tables and whose clock on the profile's loops and
    sustained runs, runs the profile's GEMMs within 10%; attention, whose cuDNN fit the profile feeds, within 11%."""
    report = validate_profile(GPUSpec.model_validate({"from": str(H100_PROFILE)}))
    by_family = report.mape_by("group")
    assert len(report.rows) > 3000 and not report.skipped
    assert by_family["gemm bf16"] < 10.0 and by_family["gemm fp8"] < 10.0 and by_family["grouped gemm bf16"] < 12.0
    assert by_family["attention"] < 11.0


def test_the_shipped_h200_profile_whose_gemms_no_fit_saw_holds_the_compute_model_to_its_bounds():
    """The H200 borrows the H100's GEMM shape response (same chip, same 700 W); only its clock and its cuDNN attention
    are fitted on what the lent H200 measured."""
    report = validate_profile(GPUSpec.model_validate({"from": str(H200_PROFILE)}))
    by_family = report.mape_by("group")
    assert len(report.rows) > 1600 and not report.skipped
    assert by_family["gemm bf16"] < 10.0 and by_family["gemm fp8"] < 12.0 and by_family["attention"] < 16.0


def test_the_weak_scaling_gpts_kernels_measured_on_a_lent_h200_and_never_fitted_are_held_to_the_models_bounds():
    """Megatron-Core's weak-scaling GPTs (1.7B at tp 1 to 462B at tp 8, micro-batches 1 to 4), profiled on an H200
    after every fit: measured 5.0% on their 330 GEMMs and 6.8% on their 30 attention kernels."""
    report = validate_profile(GPUSpec.model_validate({"from": str(LENT_H200 / "weak-scaling-profile.yaml")}))
    by_family = report.mape_by("group")
    assert len(report.rows) == 616 and not report.skipped
    assert by_family["gemm bf16"] < 6.5 and by_family["attention"] < 9.0


@pytest.mark.parametrize("loops", ["layer_loop.json", "layer_loop_fp8.json"])
def test_a_layers_gemms_looped_for_seconds_on_an_h200_take_the_time_the_model_gives_a_training_step(loops):
    """A training step's GEMMs are timed at the GEMM loop's settled clock (sustained_load). Layers looped for 12 s on
    a lent H200 (benchmarks/gpu_layer_loop.py), their GEMMs alone: three weak-scaling GPTs in bf16, the model 3.5% to
    6.1% slow; NeMo's Llama 2 7B and 70B in fp8, 0.4% and 1.2% fast (benchmarks/layer_loop_compare.py)."""
    gpu = GPUSpec.model_validate({"from": "H200-SXM5-141GB"})
    for loop in json.loads((LENT_H200 / loops).read_text()):
        gemms = [e for e in loop["kernels"] if e["gemm"]]
        model = AnalyticalModel(gpu, DType(gemms[0]["params"]["dtype"]), sustained_load=True)
        specs = [spec_of_run(e["kernel"], e["params"]) for e in gemms]
        predicted = float(model.seconds(specs).sum()) * 1e3
        assert abs(predicted / loop["gemms"]["settled_ms"] - 1) < 0.08, loop["model"]


@pytest.mark.parametrize("path", [H100_PROFILE, H200_PROFILE], ids=["h100", "h200"])
def test_a_profiles_gemm_loops_run_at_the_clock_the_model_gives_them_however_long_they_last(path):
    """A profile times each GEMM in a loop of 25 runs, 2.5 ms to 0.2 s of work; the power limit slows the clock within
    tens of milliseconds (compute.fit.CLOCK), so the longer loops run slower. Read at the fitted clock, the aligned
    GEMMs of 1 GFLOP and more err alike at every length from 0.1 ms a kernel up: each band's mean (0.1-0.3 ms, 0.3-1,
    1 ms and more) within 5%, the longest within 5 points of the shortest. A fall over 0.2 s, which read every loop
    near burst, had the H100's from +0.3% to -8.8% in bf16 and -3.4% to -12.3% in fp8, the H200's bf16 to -6.8%."""
    from simulon.validate.profile import aligned

    gpu = GPUSpec.model_validate({"from": str(path)})
    bands: dict[tuple[str, int], list[float]] = {}
    for row in validate_profile(gpu).rows:
        params = gpu.kernel_runs[row.index].params
        dims = [int(params.get(d, 0)) for d in ("m", "n", "k")]
        precision = DType(str(params.get("precision", params.get("dtype"))))
        if not all(dims) or params.get("groups", 1) > 1 or not aligned(tuple(dims), precision) \
                or 2.0 * np.prod(dims, dtype=float) < 1e9 or row.measured < 0.1:
            continue
        band = int(np.searchsorted([0.3, 1.0], row.measured, side="right"))  # 0.1-0.3, 0.3-1, 1 ms and more
        bands.setdefault((precision.value, band), []).append(row.error_pct)
    for precision in ("bf16", "fp8"):
        means = [statistics.fmean(bands[(precision, band)]) for band in range(3)]
        assert all(abs(m) < 5.0 for m in means) and abs(means[2] - means[0]) < 5.0, (precision, means)


def one_pass_kernels(path: Path) -> dict[str, tuple[float, float]]:
    """Measured and predicted milliseconds of the profile's one-pass kernels, by kernel and parameters."""
    gpu = GPUSpec.model_validate({"from": str(path)})
    runs = ((gpu.kernel_runs[r.index], r) for r in validate_profile(gpu).rows)
    return {run.kernel + json.dumps(run.params, sort_keys=True): (r.measured, r.predicted)
            for run, r in runs if run.kernel in ONE_PASS}


def test_one_pass_kernels_run_as_much_faster_on_the_h200_as_its_bandwidth_and_near_the_model_on_both():
    """HBM3e at 4.8 TB/s against HBM3 at 3.35 (1.43x): the same one-pass kernels measured on both lent GPUs run
    1.38x faster on the H200 (median; from kernels of 20 us to those of several ms), the model's ratio (1.43) is
    within 5% of that, and on each GPU the model's assumed fraction of HBM bandwidth (compute/data/architecture.yaml)
    puts them within 12% on average (the H100 reaches a larger fraction of its bandwidth than the H200)."""
    h100, h200 = one_pass_kernels(H100_PROFILE), one_pass_kernels(H200_PROFILE)
    common = sorted(h100.keys() & h200.keys())
    assert len(common) > 200
    measured = statistics.median(h100[k][0] / h200[k][0] for k in common)
    predicted = statistics.median(h100[k][1] / h200[k][1] for k in common)
    assert 1.3 < measured < 1.5 and predicted == pytest.approx(measured, rel=0.05)
    for kernels in (h100, h200):
        assert statistics.fmean(abs(p / m - 1) for m, p in kernels.values()) < 0.12


def test_the_shipped_h100_profile_feeds_a_simulation_as_a_gpu():
    gpu = GPUSpec.model_validate({"from": str(H100_PROFILE)})
    assert gpu.name == "H100-SXM5-80GB" and gpu.peak_flops(DType.bf16) == pytest.approx(989.4e12)
    assert len(gpu.kernel_runs) > 3000


def test_a_gpu_without_kernel_runs_is_bad_input(tmp_path):
    with pytest.raises(ConfigError, match="holds no measured kernels"):
        validate_profile(GPUSpec.model_validate({"from": "h100-sxm"}))
    empty = tmp_path / "bare.yaml"
    empty.write_text("from: h100-sxm\n")
    run = cli("validate", "profile", str(empty))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip() == f"error: {empty}: kernel_runs: the file holds no measured kernels " \
                                 "(write them with `simulon profile gpu`)"
    missing = cli("validate", "profile", str(tmp_path / "none.yaml"))
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"error: {tmp_path / 'none.yaml'}: cannot read: No such file or directory"


def test_a_profile_name_too_long_for_any_file_is_bad_input_not_an_internal_error(tmp_path):
    long = tmp_path / ("x" * 300 + ".yaml")  # pathlib's is_file() raised ENAMETOOLONG: exit 1
    run = cli("validate", "profile", str(long))
    assert run.returncode == 2 and run.stderr.strip() == f"error: {long}: cannot read: File name too long"


@pytest.mark.parametrize(("runs", "problem"), [
    ([], "kernel_runs: the file holds no measured kernels"),
    ([{"kernel": "attn_norm", "params": {"phase": "fwd", "dtype": "bf16"}, "times_ms": [1.0]}],
     "kernel_runs[0].params.bytes: missing"),
    ([{"kernel": "attn_norm", "params": {"phase": "fwd", "dtype": "fp4", "bytes": 1e6}, "times_ms": [1.0]}],
     "kernel_runs: no run could be compared"),
    ([{"kernel": "attn_norm", "params": {"phase": "sideways", "bytes": 1e6}, "times_ms": [1.0]}],
     "kernel_runs[0].params.phase: 'sideways' is no kernel phase"),
])
def test_every_refusal_of_a_profile_starts_with_the_files_path_as_given(tmp_path, runs, problem):
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump({"from": "h100-sxm", "name": "H100-SXM5-80GB", "kernel_runs": runs}))
    run = cli("validate", "profile", str(path))
    assert run.returncode == 2 and run.stderr.startswith(f"error: {path}: {problem}"), run.stderr


@pytest.mark.parametrize(("gpu", "dtype", "said"), [
    ("h100-sxm", "fp4", "dtype fp4, read as nvfp4: GPU H100-SXM5-80GB has no nvfp4 peak"),
    ("a100-sxm-80gb", "fp8", "dtype fp8: GPU H100-SXM5-80GB has no fp8 peak"),
])
def test_a_run_in_a_dtype_the_gpu_has_no_peak_for_is_skipped_naming_the_dtype_as_written(tmp_path, gpu, dtype, said):
    path = tmp_path / "gpu.yaml"
    runs = [{"kernel": "attn_norm", "params": {"phase": "fwd", "dtype": dtype, "bytes": 1e6}, "times_ms": [1.0]}]
    path.write_text(yaml.safe_dump({"from": gpu, "name": "H100-SXM5-80GB", "kernel_runs": runs}))
    run = cli("validate", "profile", str(path))
    assert run.returncode == 2 and f"kernel_runs[0]: {said} (it lists" in run.stderr, run.stderr


def test_the_json_report_lists_every_kernel_with_its_error(tmp_path):
    model_profile(tmp_path / "gpu.yaml", DType.bf16)
    run = cli("validate", "profile", str(tmp_path / "gpu.yaml"), "--json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["mape_pct"] < 1e-6 and "mlp_linear1 fwd bf16" in doc["mape_pct_by_subset"]


def test_a_run_timed_in_a_loop_of_its_own_is_checked_against_the_model_of_that_loop(tmp_path):
    """A profile taken with --warmup/--epoch-num of its own records its loop (back_to_back), whose clock it ran at:
    the model's own prediction for a million-run loop matches exactly, and the same kernel timed in the default loop
    is a row of its own, matched by the default loop's prediction."""
    gpu = GPUSpec.model_validate({"from": "h100-sxm"})
    _, planned = plan(SweepPoint({"from": "mixtral-8x7b"}, seq=512, batch=1, dtype=DType.bf16, tp=2, ep=2))
    first = next(p for p in planned if p.spec.kclass == KernelClass.gemm)
    long, short = (float(AnalyticalModel(gpu, DType.bf16, repeats=loop).seconds([first.spec])[0]) * 1e3
                   for loop in (10**6, PROFILE_REPEATS))
    assert long > short * 1.01  # a long loop has fallen to a lower clock
    runs = [{"kernel": first.spec.name, "params": first.params, "times_ms": [long] * 3, "back_to_back": 10**6},
            {"kernel": first.spec.name, "params": first.params, "times_ms": [short] * 3}]
    (tmp_path / "gpu.yaml").write_text(yaml.safe_dump({"from": "h100-sxm", "kernel_runs": runs}))
    report = validate_profile(GPUSpec.model_validate({"from": str(tmp_path / "gpu.yaml")}))
    assert sorted(r.measured for r in report.rows) == pytest.approx([short, long])
    assert max(abs(r.error_pct) for r in report.rows) < 1e-6
