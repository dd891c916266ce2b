"""A GPU's peak_tflops keyed by data types written as people write them (config.common.dtype_keys): two spellings
of one data type in one mapping are refused naming both, and a key written over a template's replaces it whatever
spelling either uses."""

from __future__ import annotations

import copy

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from helpers import cli, seed_dict
from simulon.config.common import DTYPE_SPELLINGS, DType
from simulon.config.dc import GPUSpec
from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario

SPELLINGS = {d: [d.value, d.value.upper(), *(s for s, named in DTYPE_SPELLINGS.items() if named == d)] for d in DType}
TWO_SPELLINGS = st.sampled_from([d for d, spelt in SPELLINGS.items() if len(spelt) > 1]).flatmap(
    lambda d: st.lists(st.sampled_from(SPELLINGS[d]), min_size=2, max_size=2, unique=True))
PEAK = st.floats(1.0, 1e5, allow_nan=False)


@given(spellings=TWO_SPELLINGS, first=PEAK, second=PEAK)
def test_two_spellings_of_one_dtype_in_peak_tflops_are_refused_naming_both(spellings, first, second):
    """`bf16: 989` beside `bfloat16: 900` kept whichever came last (or the template's position), silently."""
    with pytest.raises(ValidationError) as info:
        GPUSpec.model_validate({"from": "h100-sxm", "peak_tflops": dict(zip(spellings, (first, second),
                                                                            strict=True))})
    message = str(info.value)
    assert f"peak_tflops.{spellings[1]}: {spellings[0]!r} and {spellings[1]!r} both name" in message
    assert "keep one" in message


def test_equal_values_under_two_spellings_are_refused_too_as_a_key_written_twice_is():
    with pytest.raises(ValidationError, match=r"'bf16' and 'BF16' both name bf16 \(both 989\); keep one"):
        GPUSpec.model_validate({"from": "h100-sxm", "peak_tflops": {"bf16": 989, "BF16": 989}})


@given(spelling=st.sampled_from(SPELLINGS[DType.bf16]), peak=PEAK)
def test_a_peak_written_over_a_templates_in_another_spelling_replaces_it(spelling, peak):
    gpu = GPUSpec.model_validate({"from": "h100-sxm", "peak_tflops": {spelling: peak}})
    assert gpu.peak_tflops[DType.bf16] == peak
    assert gpu.peak_tflops[DType.fp8] == GPUSpec.model_validate({"from": "h100-sxm"}).peak_tflops[DType.fp8]


def test_a_template_file_starting_from_another_may_respell_its_peaks(tmp_path):
    (tmp_path / "mine.yaml").write_text("from: h100-sxm\npeak_tflops: {BFloat16: 900}\n")
    gpu = GPUSpec.model_validate({"from": "mine.yaml"}, context={"base_dir": tmp_path})
    assert gpu.peak_tflops[DType.bf16] == 900


def scenario_with_gpu(gpu) -> dict:
    data = copy.deepcopy(seed_dict())
    data["datacenter"]["node"]["gpu"] = gpu
    return data


def test_two_spellings_in_a_scenario_are_bad_input_naming_the_file_and_the_field():
    with pytest.raises(ConfigError) as info:
        parse_scenario(scenario_with_gpu({"from": "h100-sxm", "peak_tflops": {"bf16": 989, "bfloat16": 900}}),
                       "s.yaml")
    assert str(info.value) == ("s.yaml: datacenter.node.gpu.peak_tflops.bfloat16: 'bf16' and 'bfloat16' both name "
                               "bf16 (989 and 900); keep one")


def test_two_spellings_in_a_template_file_are_named_in_that_file(tmp_path):
    (tmp_path / "base.yaml").write_text("from: h100-sxm\npeak_tflops: {FP8: 1979, float8_e4m3fn: 1900}\n")
    (tmp_path / "gpu.yaml").write_text("from: base.yaml\n")
    with pytest.raises(ConfigError, match=r"base\.yaml \(included by .*gpu\.yaml, included by s\.yaml at "
                                          r"datacenter\.node\.gpu\): peak_tflops\.float8_e4m3fn: 'FP8' and "
                                          r"'float8_e4m3fn' both name fp8"):
        parse_scenario(scenario_with_gpu({"from": "gpu.yaml"}), "s.yaml", tmp_path)


def test_the_cli_refuses_two_spellings_with_exit_2_and_no_traceback(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario_with_gpu({"from": "h100-sxm", "peak_tflops": {"BF16": 1, "bf16": 2}})))
    run = cli("memory", str(path))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "datacenter.node.gpu.peak_tflops.bf16: 'BF16' and 'bf16' both name bf16 (1 and 2); keep one" in run.stderr
