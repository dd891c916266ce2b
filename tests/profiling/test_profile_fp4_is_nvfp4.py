"""A bare fp4 trains as NVFP4 (config.common.training_dtype), and a profile's runs read their dtype the same way:
`simulon profile gpu --dtype fp4` wrote runs of `dtype: fp4`, which no simulation looked up (a scenario of dtype fp4
trains, and looks its kernels up, in nvfp4), so a B200 profile of 72 such runs was left unused (step 89.7 ms by the
calibrated model where the profile said 156.7 ms)."""

from __future__ import annotations

import pytest

from simulon.cli.profile import dtypes
from simulon.compute.analytical import AnalyticalModel
from simulon.compute.profile import KernelProfile
from simulon.config.common import DType
from simulon.config.dc import GPUSpec
from simulon.profiling.plan import SweepPoint, plan
from simulon.validate.profile import validate_profile
from simulon.workload.kernels import Phase, gemm


def profile_of(dtype: str) -> GPUSpec:
    params = {"m": 4096, "n": 4096, "k": 4096, "groups": 1, "dtype_bytes": 2.0, "phase": "fwd", "dtype": dtype}
    return GPUSpec.model_validate({"from": "b200", "kernel_runs": [{"kernel": "mlp", "params": params,
                                                                     "times_ms": [7.0]}]})


@pytest.mark.parametrize("written", ["fp4", "nvfp4"])
def test_a_run_of_dtype_fp4_times_the_kernels_of_an_nvfp4_step(written):
    gpu = profile_of(written)
    profile = KernelProfile(gpu, DType.nvfp4, AnalyticalModel(gpu, DType.nvfp4))
    assert profile.seconds(gemm("mlp", Phase.fwd, 4096, 4096, 4096, 2.0)) == pytest.approx(7e-3)


def test_the_profiler_records_a_bare_fp4_as_the_nvfp4_its_workload_trains_in():
    assert dtypes("fp4,bf16") == [DType.nvfp4, DType.bf16]
    point = SweepPoint.of_shape(hidden=64, heads=4, ffn=128, seq=32, batch=1, vocab=256, dtype=DType.fp4, tp=1)
    _, planned = plan(point)
    assert {item.params["dtype"] for item in planned} == {"nvfp4"}


def test_validate_profile_models_a_run_of_dtype_fp4_as_nvfp4_training():
    as_fp4, as_nvfp4 = (validate_profile(profile_of(d)).rows[0] for d in ("fp4", "nvfp4"))
    assert as_fp4 == as_nvfp4  # its kernel, family ("gemm nvfp4") and prediction
