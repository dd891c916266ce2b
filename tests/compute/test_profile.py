"""Measured profiles: exact matches, interpolation between measured shapes, keys, and no shared state."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.compute.analytical import AnalyticalModel
from simulon.compute.populate import kernel_seconds
from simulon.compute.profile import PROFILE_REPEATS, KernelProfile
from simulon.config.common import DType
from simulon.config.dc import GPUSpec
from simulon.config.loading import ConfigError
from simulon.pipeline import build_dag
from simulon.workload.kernels import Phase, as_recompute, gemm


def run(kernel: str, m: int, ms: list[float], phase: str = "fwd", dtype: str | None = "bf16") -> dict:
    params = {"m": m, "n": 4096, "k": 4096, "groups": 1, "dtype_bytes": 2.0, "phase": phase}
    if dtype:
        params["dtype"] = dtype
    return {"kernel": kernel, "params": params, "times_ms": ms}


def profiled(*runs: dict) -> GPUSpec:
    return GPUSpec.model_validate({"from": "h100-sxm", "kernel_runs": list(runs)})


def lookup(gpu: GPUSpec, m: int, phase: Phase = Phase.fwd, dtype: DType = DType.bf16) -> float | None:
    return KernelProfile(gpu, dtype, AnalyticalModel(gpu, dtype)).seconds(gemm("mlp", phase, m, 4096, 4096, 2.0))


def test_an_exact_shape_takes_the_median_of_its_runs():
    gpu = profiled(run("mlp", 2048, [1.0, 3.0, 2.0]), run("mlp", 8192, [9.0]))
    assert lookup(gpu, 2048) == pytest.approx(2e-3)
    assert lookup(gpu, 2048, Phase.bwd_ig) is None  # another phase was not profiled
    assert lookup(gpu, 2048, dtype=DType.fp8) is None  # nor another dtype
    spec = gemm("mlp", Phase.fwd, 2048, 4096, 4096, 2.0)
    recompute = as_recompute(spec)
    assert KernelProfile(gpu, DType.bf16, AnalyticalModel(gpu, DType.bf16)).seconds(recompute) == pytest.approx(2e-3)


def test_a_profiled_recompute_run_is_read_as_a_forward_run_of_its_shape_not_left_unused():
    """A run of phase recompute was loaded but never looked up (lookups map recompute to fwd): a profile holding one
    gave no time for the shape (None, the analytical fallback); it is now a forward run, pooled with the forward's."""
    alone = profiled(run("mlp", 2048, [2.0], phase="recompute"))
    assert lookup(alone, 2048) == pytest.approx(2e-3)
    assert lookup(alone, 2048, Phase.recompute) == pytest.approx(2e-3)
    pooled = profiled(run("mlp", 2048, [1.0, 5.0]), run("mlp", 2048, [3.0], phase="recompute"))
    assert lookup(pooled, 2048) == pytest.approx(3e-3)  # the median of 1, 3 and 5 ms


def test_between_measured_shapes_the_measured_over_model_ratio_is_interpolated():
    model_gpu = profiled()
    model = AnalyticalModel(model_gpu, DType.bf16)
    analytical = {m: float(model.seconds([gemm("mlp", Phase.fwd, m, 4096, 4096, 2.0)])[0]) for m in (1024, 2048, 4096)}
    # measured 2x the model at 1024 and 4x at 4096: the log ratio is linear in the log of the model's time between
    gpu = profiled(run("mlp", 1024, [2e3 * analytical[1024]]), run("mlp", 4096, [4e3 * analytical[4096]]))
    along = math.log(analytical[2048] / analytical[1024]) / math.log(analytical[4096] / analytical[1024])
    assert lookup(gpu, 2048) == pytest.approx(2 * 2**along * analytical[2048])
    # beyond the measured range, the nearest shape's ratio
    far = lookup(gpu, 1 << 20)
    far_model = float(model.seconds([gemm("mlp", Phase.fwd, 1 << 20, 4096, 4096, 2.0)])[0])
    assert far / far_model == pytest.approx(4.0)


def test_an_interpolation_between_two_shapes_of_one_width_is_not_pulled_outside_them_by_other_widths():
    """The shipped H100 profile measured a GPT-3 LM head of vocabulary shard 6,283 at 5.5x the model at m 2,048 and
    4,096, and 48 LM-head shapes of other widths near 1x: m 2,560 interpolated to 1.44 ms, below both (2.82 ms)."""
    model = AnalyticalModel(profiled(), DType.bf16)

    def shape(m: int, n: int, ratio: float) -> dict:
        params = {"m": m, "n": n, "k": 12288, "groups": 1, "dtype_bytes": 2.0, "phase": "fwd", "dtype": "bf16"}
        spec = gemm("lm_head", Phase.fwd, m, n, 12288, 2.0)
        return {"kernel": "lm_head", "params": params, "times_ms": [ratio * float(model.seconds([spec])[0]) * 1e3]}

    odd = [shape(2048, 6283, 5.5), shape(4096, 6283, 5.5)]
    aligned = [shape(m, n, 1.0) for m in (1024, 2048, 4096, 8192) for n in (4096, 6144, 8192, 12288, 16384)]
    gpu = profiled(*odd, *aligned)
    spec = gemm("lm_head", Phase.fwd, 2560, 6283, 12288, 2.0)
    answer = KernelProfile(gpu, DType.bf16, AnalyticalModel(gpu, DType.bf16)).seconds(spec)
    assert answer / float(model.seconds([spec])[0]) == pytest.approx(5.5)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(7, 16), st.floats(0.2, 5.0)), min_size=1, max_size=5, unique_by=lambda t: t[0]),
       st.integers(6, 18))
def test_interpolated_ratio_stays_within_the_measured_ratios(points, query):
    model_gpu = profiled()
    model = AnalyticalModel(model_gpu, DType.bf16)

    def analytical(m: int) -> float:
        return float(model.seconds([gemm("mlp", Phase.fwd, m, 4096, 4096, 2.0)])[0])

    gpu = profiled(*(run("mlp", 1 << e, [r * analytical(1 << e) * 1e3]) for e, r in points))
    ratio = lookup(gpu, 1 << query) / analytical(1 << query)
    ratios = [r for _, r in points]
    assert min(ratios) * (1 - 1e-9) <= ratio <= max(ratios) * (1 + 1e-9)


def test_a_run_with_an_unknown_phase_is_bad_input():
    gpu = profiled(run("mlp", 2048, [1.0]))
    gpu.kernel_runs[0].params["phase"] = "backward"  # a GPU made in code: a file's is refused where it is read
    with pytest.raises(ConfigError, match="kernel_runs: mlp: unknown phase 'backward'"):
        lookup(gpu, 2048)


def test_runs_without_a_dtype_apply_to_any_dtype_and_profiles_do_not_share_state():
    legacy = profiled(run("mlp", 2048, [5.0], dtype=None))
    assert lookup(legacy, 2048, dtype=DType.fp8) == pytest.approx(5e-3)
    other = profiled(run("mlp", 2048, [7.0]))
    assert lookup(other, 2048) == pytest.approx(7e-3) and lookup(legacy, 2048) == pytest.approx(5e-3)


def test_populate_counts_the_kernels_the_profile_timed():
    sc = gpt_scenario(layers=2, hidden=1024, heads=16, seq=512)
    dag, _, _ = build_dag(sc)
    gpu = sc.datacenter.node.gpu
    first = next(s for s in dag.kernel_specs if s.name == "mlp_linear1" and s.phase == Phase.fwd)
    runs = [{"kernel": first.name, "params": {**dict(first.shape), "phase": "fwd", "dtype": "bf16"},
             "times_ms": [123.0]}]
    with_profile = gpu.model_copy(update={"kernel_runs": GPUSpec.model_validate(
        {"from": "h100-sxm", "kernel_runs": runs}).kernel_runs})
    plain, none = kernel_seconds(dag, gpu, DType.bf16)
    timed, measured = kernel_seconds(dag, with_profile, DType.bf16)
    assert none == 0 and measured >= 1
    i = dag.kernel_specs.index(first)
    # measured in the profiler's loop, carried to a training step's sustained clock by the model's ratio
    loop = AnalyticalModel(gpu, DType.bf16, repeats=PROFILE_REPEATS).seconds([first])[0]
    assert timed[i] == pytest.approx(0.123 * plain[i] / loop) and plain[i] != pytest.approx(0.123)


def test_a_run_timed_in_a_longer_loop_is_carried_from_that_loops_clock_not_the_defaults():
    """A large GEMM timed over 25 runs (the profiler's defaults) ran near its burst clock, and a training step runs
    it slower; timed over a million runs back to back it ran at the sustained clock already, so its measured time
    is the step's. Before, every run was carried as if it had run the defaults."""
    short = run("mlp", 8192, [2.0])
    long = {**short, "back_to_back": 10**6}
    gpu_short, gpu_long = profiled(short), profiled(long)
    assert gpu_long.kernel_runs[0].back_to_back == 10**6

    def in_a_step(gpu: GPUSpec) -> float:
        step, defaults = (AnalyticalModel(gpu, DType.bf16, sustained_load=True),
                          AnalyticalModel(gpu, DType.bf16, repeats=PROFILE_REPEATS))
        return KernelProfile(gpu, DType.bf16, step, defaults).seconds(gemm("mlp", Phase.fwd, 8192, 4096, 4096, 2.0))

    carried = [in_a_step(g) for g in (gpu_short, gpu_long)]
    assert carried[0] > 2.0e-3 * 1.01  # the short loop's clock was higher than the step's
    assert carried[1] == pytest.approx(2.0e-3, rel=1e-3)  # the long loop's was the step's
    assert in_a_step(profiled({**short, "back_to_back": PROFILE_REPEATS})) == carried[0]


@pytest.mark.parametrize("loop", [0, -3, 1.5, "many"])
def test_a_loop_length_that_is_no_count_of_runs_is_refused(loop):
    with pytest.raises(ValueError, match="back_to_back"):
        profiled({**run("mlp", 8192, [2.0]), "back_to_back": loop})


@settings(max_examples=10, deadline=None)
@given(st.integers(512, 4096), st.floats(1.0, 8.0), st.floats(0.3, 3.0))
def test_between_two_measured_shapes_the_time_rises_with_the_flops_where_the_measured_times_do(low, wider, fall):
    """The ratio linear in log2 of m fell across the model's flat steps (its waves of tiles): time fell by up to 2.0%
    as m rose, 0.6355 -> 0.6254 ms from m 5,939 to 6,086 on the shipped H100 profile's mlp_linear2 weight gradient."""
    model = AnalyticalModel(profiled(), DType.bf16)
    high = int(low * (1 + wider))

    def analytical(m: int) -> float:
        return float(model.seconds([gemm("mlp", Phase.fwd, m, 4096, 4096, 2.0)])[0])

    measured_high = max(fall * analytical(high), analytical(low))  # a measured time at least the lower shape's
    gpu = profiled(run("mlp", low, [analytical(low) * 1e3]), run("mlp", high, [measured_high * 1e3]))
    profile = KernelProfile(gpu, DType.bf16, AnalyticalModel(gpu, DType.bf16))
    times = [profile.seconds(gemm("mlp", Phase.fwd, m, 4096, 4096, 2.0))
             for m in range(low, high + 1, max((high - low) // 60, 1))]
    assert all(b >= a * (1 - 1e-12) for a, b in itertools.pairwise(times))
