"""Settings that would change nothing in the run they describe are refused naming the field and why, as Megatron-Core
refuses most of them (TransformerConfig.__post_init__): a recompute module listed twice or naming a part the model
lacks, full recomputation of more layers than a pipeline rank holds or of none, a shared expert's width without
shared experts, and a layer_freq list that is not one 0 or 1 per layer. A width alone is one shared expert that
wide."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario

MOE = {"num_experts": 4, "top_k": 2}


def scenario(parallelism: dict | None = None, model: dict | None = None, pp: int = 1):
    data = gpt_scenario(layers=8, pp=pp).as_data()
    data["workload"]["parallelism"].update(parallelism or {})
    data["workload"]["model"].update(model or {})
    return parse_scenario(data, "s.yaml")


def refusal(parallelism: dict | None = None, model: dict | None = None, pp: int = 1) -> str:
    with pytest.raises(ConfigError) as exc:
        scenario(parallelism, model, pp)
    return str(exc.value)


def selective(*modules: str) -> dict:
    return {"recompute": "selective", "recompute_modules": list(modules)}


def test_a_recompute_module_listed_twice_is_refused_naming_it():
    assert refusal(selective("mlp", "core_attn", "mlp")) == (
        "s.yaml: workload.parallelism.recompute_modules: lists mlp twice; name each module once")


@pytest.mark.parametrize(("module", "part"), [
    ("mla_up_proj", "multi-latent attention (model.mla)"),
    ("moe", "experts (model.moe)"),
    ("moe_act", "experts (model.moe)"),
    ("shared_experts", "shared experts (model.moe.num_shared_experts)"),
])
def test_a_recompute_module_of_a_part_the_model_lacks_is_refused(module, part):
    assert refusal(selective("core_attn", module)) == (
        f"s.yaml: workload.parallelism.recompute_modules: {module} re-runs the model's {part}, which this model "
        f"has none of; leave it out")


@pytest.mark.parametrize("modules", [("mla_up_proj", "moe_act", "shared_experts"), ("moe_act", "shared_experts",
                                     "mla_up_proj"), ("shared_experts", "mla_up_proj", "moe_act"), ("moe", "moe_act")])
def test_of_several_recompute_modules_the_model_lacks_the_refusal_names_the_first_listed(modules):
    """The same scenario gives the same message whatever PYTHONHASHSEED orders a set of names in."""
    assert refusal(selective("core_attn", *modules)).startswith(
        f"s.yaml: workload.parallelism.recompute_modules: {modules[0]} re-runs the model's ")


def test_shared_experts_recompute_is_refused_on_experts_without_shared_ones_and_kept_with_them():
    assert "shared_experts re-runs" in refusal(selective("shared_experts"), {"moe": MOE})
    sc = scenario(selective("shared_experts", "moe_act"), {"moe": {**MOE, "num_shared_experts": 1}})
    assert sc.workload.parallelism.recomputed_modules == {"shared_experts", "moe_act"}


@pytest.mark.parametrize(("pp", "most"), [(1, 8), (2, 4), (4, 2)])
def test_full_recomputation_of_more_layers_than_a_rank_holds_is_refused(pp, most):
    """Megatron-Core accepts recompute_num_layers from 1 to num_layers_per_pipeline_rank."""
    assert scenario({"recompute": "full", "recompute_num_layers": most}, pp=pp)
    assert refusal({"recompute": "full", "recompute_num_layers": most + 1}, pp=pp) == (
        f"s.yaml: workload.parallelism.recompute_num_layers: {most + 1} is more than the {most} layers a pipeline "
        f"rank holds (8 layers over pp {pp}), which Megatron-Core refuses; full recomputation re-runs at most those: "
        f"leave it out to recompute every layer")


def test_full_recomputation_of_no_layer_is_refused_rather_than_run_as_no_recomputation():
    """recompute_num_layers 0 under recompute: full re-ran nothing: the step was recompute: none's to the
    microsecond, the setting silently ignored (Megatron-Core asks for 1 to the layers a pipeline rank holds)."""
    assert refusal({"recompute": "full", "recompute_num_layers": 0}) == (
        "s.yaml: workload.parallelism.recompute_num_layers: must be at least 1, got 0")
    assert scenario({"recompute": "full", "recompute_num_layers": 1}).workload.parallelism.recompute_num_layers == 1


def test_a_rank_given_more_layers_by_the_split_may_recompute_them_all():
    sc = scenario({"recompute": "full", "recompute_num_layers": 6, "layers_per_stage": [6, 2]}, pp=2)
    assert sc.workload.parallelism.recompute_num_layers == 6


def test_a_shared_experts_width_with_no_shared_experts_is_refused():
    assert refusal(model={"moe": {**MOE, "shared_expert_ffn_hidden_size": 2048, "num_shared_experts": 0}}) == (
        "s.yaml: workload.model.moe.shared_expert_ffn_hidden_size: 2048 sizes shared experts, but "
        "num_shared_experts is 0; leave one of them out")


def test_a_shared_experts_width_alone_is_one_shared_expert_that_wide_as_megatron_reads_it():
    """Megatron-Core's --moe-shared-expert-intermediate-size has no count beside it; the width was dropped."""
    moe = scenario(model={"moe": {**MOE, "shared_expert_ffn_hidden_size": 2048}}).workload.model.moe
    assert (moe.num_shared_experts, moe.shared_expert_ffn_hidden_size) == (1, 2048)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(2, 9), min_size=1, max_size=8))
def test_a_layer_freq_list_of_other_numbers_than_0_and_1_is_refused_in_one_line(values):
    message = refusal(model={"moe": {**MOE, "layer_freq": values}})
    assert message == (f"s.yaml: workload.model.moe.layer_freq: a list gives one 0 (dense) or 1 (MoE) per layer, "
                       f"but item 0 is {values[0]}; for every N-th layer write the number N")
    assert "\n" not in message and "more problems" not in message


@pytest.mark.parametrize("dtype", ["fp4", "nvfp4", "mxfp4", "mxfp8", "tf32"])
def test_gradients_reduced_in_a_format_no_framework_reduces_them_in_are_refused(dtype):
    """fp4 was accepted, and quartered the gradient buffers and their reduction."""
    data = gpt_scenario(layers=8).as_data()
    data["workload"]["training"]["grad_reduce_dtype"] = dtype
    with pytest.raises(ConfigError) as refused:
        parse_scenario(data, "s.yaml")
    assert str(refused.value) == (f"s.yaml: workload.training.grad_reduce_dtype: gradients are reduced in fp32, bf16, "
                                  f"fp16 or fp8, not {dtype}")


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16", "fp8"])
def test_gradients_may_be_reduced_in_the_formats_frameworks_reduce_them_in(dtype):
    data = gpt_scenario(layers=8).as_data()
    data["workload"]["training"]["grad_reduce_dtype"] = dtype
    assert parse_scenario(data, "s.yaml").workload.training.grad_reduce_dtype == dtype


def bucketed(parallelism: dict) -> str:
    data = gpt_scenario(layers=8).as_data()
    data["workload"]["parallelism"].update(parallelism)
    data["workload"]["training"]["grad_bucket_size"] = 1_000_000
    with pytest.raises(ConfigError) as exc:
        parse_scenario(data, "s.yaml")
    return str(exc.value)


@pytest.mark.parametrize("fsdp", ["full_shard", "shard_grad_op"])
def test_a_gradient_bucket_size_under_fsdp_is_refused_as_fsdp_reduces_unit_by_unit(fsdp):
    """FSDP's reduce-scatter runs once a unit, whatever the bucket size: the step was bit-identical with it."""
    assert bucketed({"fsdp": fsdp}) == (
        f"s.yaml: workload.training.grad_bucket_size: has no effect under fsdp {fsdp}, which reduces each unit's "
        "gradients as its backward ends (no buckets); leave it out, or set fsdp: none")


def test_a_gradient_bucket_size_without_the_overlapped_reduction_is_refused_as_each_buffer_is_reduced_whole():
    assert "has no effect without overlap_grad_reduce" in bucketed({"overlap_grad_reduce": False})


def test_a_gradient_bucket_size_with_the_overlapped_reduction_is_read():
    data = gpt_scenario(layers=8).as_data()
    data["workload"]["training"]["grad_bucket_size"] = 1_000_000
    assert parse_scenario(data, "s.yaml").workload.training.grad_bucket_size == 1_000_000
