"""Narrow-format settings that conflict with the dtype or the model, or mean nothing with it, are refused with a
message naming the field and what to do, as fp8_recipe with bf16 is; Megatron's name for current scaling is read."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.cli.app import app
from simulon.cli.errors import run_reporting_errors
from simulon.config.common import DType
from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario
from simulon.config.number_formats import NUMBER_FORMATS, fp8_recipe_named

LAYERS = 8


def scenario(**training):
    data = gpt_scenario(layers=LAYERS).as_data()
    data["datacenter"]["node"]["gpu"] = "B200"  # a peak for every narrow format
    data["workload"]["training"].update(training)
    data["workload"]["parallelism"]["distributed_optimizer"] = True  # which Megatron's fp8_params needs
    return parse_scenario(data, "s.yaml")


def refusal(**training) -> str:
    with pytest.raises(ConfigError) as exc:
        scenario(**training)
    return str(exc.value)


WIDE = [d.value for d, fmt in NUMBER_FORMATS.items() if not fmt.quantized]
NARROW = [d.value for d, fmt in NUMBER_FORMATS.items() if fmt.quantized]
KEPT_NARROW = [d for d in NARROW if d != "mxfp4"]  # no framework keeps MXFP4 weights (fp8_params)


@pytest.mark.parametrize("dtype", WIDE)
def test_fp8_params_with_a_dtype_of_16_or_32_bits_is_refused(dtype):
    message = refusal(dtype=dtype, fp8_params=True)
    assert "workload.training.fp8_params" in message
    assert f"not {dtype}" in message and "leave it out, or set a narrow dtype" in message
    assert scenario(dtype=dtype, fp8_params=False).workload.training.fp8_params is False


@pytest.mark.parametrize("dtype", KEPT_NARROW)
def test_fp8_params_with_a_narrow_dtype_is_taken(dtype):
    assert scenario(dtype=dtype, fp8_params=True).workload.training.fp8_params


@pytest.mark.parametrize("dtype", KEPT_NARROW)
def test_fp8_params_without_a_sharded_optimizer_is_refused_under_megatron_as_its_arguments_assert(dtype):
    """megatron/training/arguments.py: '--fp8-param-gather only supported with distributed optimizer, torch fsdp2,
    megatron fsdp'; plain data parallelism gathers no weights."""
    data = gpt_scenario(layers=LAYERS).as_data()
    data["datacenter"]["node"]["gpu"] = "B200"
    data["workload"]["training"].update(dtype=dtype, fp8_params=True)
    with pytest.raises(ConfigError) as exc:
        parse_scenario(data, "s.yaml")
    assert "workload.training.fp8_params" in str(exc.value) and "distributed_optimizer" in str(exc.value)
    data["workload"]["parallelism"]["fsdp"] = "full_shard"
    assert parse_scenario(data, "s.yaml").workload.training.fp8_params


@pytest.mark.parametrize("fsdp", ["none", "full_shard"])
def test_fp8_params_with_mxfp4_is_refused_as_no_framework_keeps_mxfp4_weights(fsdp):
    """Megatron-Core's --fp4-param-gather keeps NVFP4 weights only, and the custom fp4 recipe MXFP4 runs as cannot
    make parameters of Transformer Engine's reference MXFP4 tensors; simulon took the combination and modelled
    MXFP4 weights kept narrow (B200, 4 layers of 1024: 0.17 GiB of weights for 0.22 without fp8_params)."""
    data = gpt_scenario(layers=LAYERS).as_data()
    data["datacenter"]["node"]["gpu"] = "B200"
    data["workload"]["training"].update(dtype="mxfp4", fp8_params=True)
    data["workload"]["parallelism"].update(distributed_optimizer=fsdp == "none", fsdp=fsdp)
    with pytest.raises(ConfigError) as exc:
        parse_scenario(data, "s.yaml")
    message = str(exc.value)
    assert "s.yaml: workload.training.fp8_params" in message and "mxfp4, which no framework does" in message
    assert "leave it out" in message and "(fp8, mxfp8, nvfp4)" in message
    data["workload"]["training"]["fp8_params"] = False
    assert parse_scenario(data, "s.yaml").workload.training.dtype is DType.mxfp4


@pytest.mark.parametrize("field", ["bf16_first_layers", "bf16_last_layers"])
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_layers_kept_in_bf16_with_a_dtype_without_narrow_layers_are_refused(field, dtype):
    message = refusal(dtype=dtype, **{field: 1})
    assert f"workload.training.{field}" in message and f"not {dtype}" in message
    assert "narrow dtypes only" in message
    assert scenario(dtype=dtype, **{field: 0}).workload.training.dtype.value == dtype  # none kept: nothing to say


@settings(max_examples=25, deadline=None)
@given(st.integers(0, LAYERS), st.integers(0, LAYERS))
def test_layers_kept_in_bf16_from_both_ends_at_most_the_models_together(first, last):
    if first + last <= LAYERS:  # equal: every layer in bf16, as Megatron-Core's is_first_last_bf16_layer reads it
        train = scenario(dtype="nvfp4", bf16_first_layers=first, bf16_last_layers=last).workload.training
        assert (train.bf16_first_layers, train.bf16_last_layers) == (first, last)
    else:
        message = refusal(dtype="nvfp4", bf16_first_layers=first, bf16_last_layers=last)
        assert "workload.training.bf16_last_layers" in message
        assert f"{first + last} layers kept in bf16, more than the model's {LAYERS}" in message


@pytest.mark.parametrize("spelling", ["tensorwise", "Tensorwise", "current-scaling", "Float8CurrentScaling"])
def test_megatrons_tensorwise_is_current_scaling(spelling):
    assert fp8_recipe_named(spelling) == "current"
    assert scenario(dtype="fp8", fp8_recipe=spelling).workload.training.fp8_recipe == "current"


def test_an_unknown_fp8_recipe_is_still_refused_with_the_choices():
    message = refusal(dtype="fp8", fp8_recipe="hourly")
    assert "workload.training.fp8_recipe" in message and "'delayed' or 'current'" in message


@pytest.mark.parametrize(("dtype", "recipe", "words"), [
    ("fp8", "mxfp8", "is dtype mxfp8 here: set training.dtype: mxfp8 and leave fp8_recipe out"),
    ("mxfp8", "MXFP8", "is dtype mxfp8 here"),  # both written, as a Megatron command writes them
    ("fp8", "blockwise", "Float8BlockScaling, 1 x 128 and 128 x 128 blocks) is not modelled"),
])
def test_megatrons_other_fp8_recipes_say_what_to_write_instead(dtype, recipe, words):
    """Megatron's --fp8-recipe mxfp8 and blockwise were refused as 'expected delayed or current', which did not
    say that MXFP8 is a dtype here, nor that block-wise scaling is not modelled."""
    message = refusal(dtype=dtype, fp8_recipe=recipe)
    assert "workload.training.fp8_recipe: Megatron's --fp8-recipe" in message and words in message, message


def test_the_cli_refuses_a_conflict_with_one_line_and_exit_status_2(tmp_path):
    data = gpt_scenario(layers=LAYERS).as_data()
    data["workload"]["training"].update(dtype="bf16", fp8_params=True)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(json.loads(json.dumps(data, default=str))))
    out, err, code = io.StringIO(), io.StringIO(), 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            run_reporting_errors(lambda: app(["memory", str(path)], prog_name="simulon", standalone_mode=False),
                                 ["memory", str(path)])
        except SystemExit as exc:
            code = exc.code
    lines = err.getvalue().strip().splitlines()
    assert code == 2 and len(lines) == 1, err.getvalue()
    assert lines[0].startswith("error: ") and "workload.training.fp8_params: true applies to the narrow" in lines[0]


@pytest.mark.parametrize(("training", "kept"), [
    ({"dtype": "fp32", "master_weights_dtype": "bf16"}, "fp32 training"),
    ({"dtype": "tf32", "master_weights_dtype": "fp16"}, "tf32 training"),
    ({"dtype": "bf16", "elementwise": "eager", "master_weights_dtype": "bf16"}, "torch.autocast over fp32 parameters"),
])
def test_a_master_copy_with_fp32_weights_is_refused_as_meaning_nothing(training, kept):
    """fp32 training (and torch.autocast over fp32 parameters) keeps no master copy: a 16-bit one was taken and
    left out silently, the optimizer states as without it (8 bytes a parameter)."""
    message = refusal(**training)
    assert "workload.training.master_weights_dtype" in message and kept in message
    assert "keeps none: leave it out" in message
    assert scenario(dtype="bf16", master_weights_dtype="bf16").workload.training.master_weights_dtype.value == "bf16"


@pytest.mark.parametrize(("gpu", "dtype", "words"), [
    ("MI355X", "fp4", "no nvfp4 peak (it lists fp32, bf16, fp16, fp8, fp4, mxfp4, mxfp8); a bare fp4 trains as nvfp4; "
                      "the narrow formats it trains in: fp8, mxfp8, mxfp4"),
    ("H100", "mxfp8", "no mxfp8 peak (it lists fp32, tf32, bf16, fp16, fp8); the narrow formats it trains in: fp8"),
    ("A100-SXM-80GB", "fp8", "no fp8 peak (it lists fp32, tf32, bf16, fp16)"),
])
def test_a_narrow_dtype_the_gpu_cannot_run_is_refused_naming_the_formats_it_can(gpu, dtype, words):
    """A bare fp4 on an MI355X was refused as 'no nvfp4 peak (it lists ..., fp4, mxfp4, ...)': the fp4 written was
    listed, and nothing said that fp4 reads as NVFP4 nor that mxfp4 is the 4-bit format the GPU trains in."""
    data = gpt_scenario(layers=LAYERS).as_data()
    data["datacenter"]["node"]["gpu"] = gpu
    data["workload"]["training"]["dtype"] = dtype
    with pytest.raises(ConfigError) as exc:
        parse_scenario(data, "s.yaml")
    assert str(exc.value).startswith("s.yaml: workload.training.dtype: GPU ")
    assert str(exc.value).endswith(words), str(exc.value)
