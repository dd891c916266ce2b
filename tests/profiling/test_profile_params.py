"""A profiled kernel run's shape parameters are sizes and counts: a negative or non-finite one is refused naming the
run and the parameter (a run of -5 bytes was timed as a 0.002 ms kernel and compared with its measurement)."""

from __future__ import annotations

import math

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from helpers import cli
from simulon.config.dc import GPUSpec


def gpu_with(params: dict) -> dict:
    return {"from": "h100-sxm", "kernel_runs": [{"kernel": "attn_norm", "times_ms": [0.06],
                                                 "params": {"dtype": "bf16", "phase": "fwd", **params}}]}


@given(bad=st.one_of(st.floats(max_value=-1e-9), st.integers(max_value=-1), st.just(math.inf), st.just(math.nan)),
       key=st.sampled_from(["bytes", "m", "seq_q"]))
def test_a_negative_or_non_finite_shape_parameter_is_refused_naming_it(bad, key):
    with pytest.raises(ValidationError) as caught:
        GPUSpec.model_validate(gpu_with({key: bad}))
    error = caught.value.errors()[0]
    assert error["loc"] == ("kernel_runs", 0, "params")
    assert f"{key} = {bad!r} is no size or count" in error["msg"]


@pytest.mark.parametrize("params", [{"bytes": 0}, {"bytes": 134217728},
                                    {"m": 4096, "n": 4096, "k": 4096, "dtype_bytes": 2}])
def test_sizes_of_zero_or_more_are_accepted(params):
    assert GPUSpec.model_validate(gpu_with(params)).kernel_runs[0].params["phase"] == "fwd"


def test_validate_profile_refuses_the_file_in_one_line(tmp_path):
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(gpu_with({"bytes": -5})))
    run = cli("validate", "profile", str(path))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip() == (f"error: {path}: kernel_runs[0].params: bytes = -5 is no size or count (a finite "
                                  "number, 0 or more)")


@pytest.mark.parametrize("model", ["deepseek-v3.2", "glm-5", "llama-3-8b", "deepseek-v3", "nemotron-h-56b",
                                   "qwen3-next-80b-a3b", "gpt-oss-120b"])
def test_every_kernel_the_profiler_plans_is_a_run_its_file_reads_back(model):
    """DeepSeek Sparse Attention's indexer kernels (v_dim 0: scores without values) were written to the profile and
    then refused when the file was read."""
    from simulon.config.common import DType
    from simulon.profiling.plan import SweepPoint, plan

    _, planned = plan(SweepPoint({"from": model}, 4096, 2, DType.bf16, 1))
    runs = [{"kernel": k.spec.name, "params": k.params, "times_ms": [1.0]} for k in planned]
    gpu = GPUSpec.model_validate({"from": "h100-sxm", "kernel_runs": runs})
    assert len(gpu.kernel_runs) == len(planned) > 10
