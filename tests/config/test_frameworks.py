"""config.frameworks: a scenario naming its framework as people write it ("NeMo 24.07") runs on that framework's
pipeline engine with its published defaults wherever the scenario leaves a setting out."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulon.config.errors import ConfigError
from simulon.config.frameworks import (
    MEGATRON_LM_2021,
    MEGATRON_LM_WITH_TE,
    NEMO_RECIPES,
    WELL_KNOWN_SHARDINGS,
    framework_defaults,
    sharding_named,
)
from simulon.config.loading import parse_scenario


def scenario(framework: str, parallelism: dict | None = None, **training):
    return parse_scenario({
        "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 2}},
        "workload": {"framework": framework, "model": "llama-3-8b",
                     "parallelism": {"tp": 4, "pp": 2, "dp": 2, **(parallelism or {})},
                     "training": {"global_batch_size": 16, "sequence_length": 4096, **training}}}, "s.yaml")


def test_nemo_named_with_its_version_runs_megatrons_schedule_with_nemos_recipe_defaults():
    sc = scenario("NeMo 24.07")
    par, train = sc.workload.parallelism, sc.workload.training
    assert sc.workload.framework == "megatron"
    assert (par.sequence_parallel, par.tp_comm_overlap, par.distributed_optimizer) == (True, True, True)
    assert (train.attention, train.grad_reduce_dtype.value) == (NEMO_RECIPES.attention, "bf16")


def test_what_the_scenario_gives_is_kept_and_the_defaults_that_depend_on_it_follow():
    par = scenario("NeMo 24.07", {"sequence_parallel": False}, attention="flash").workload
    assert (par.parallelism.sequence_parallel, par.parallelism.tp_comm_overlap) == (False, False)
    assert par.training.attention == "flash"
    assert not scenario("NeMo", {"tp": 1, "pp": 2, "dp": 8}).workload.parallelism.sequence_parallel  # tp 1


def test_a_named_framework_is_the_engine_plus_its_defaults_written_out():
    named = scenario("Megatron-Core r0.8.0")
    written = scenario("megatron", {"sequence_parallel": True, "tp_comm_overlap": True, "distributed_optimizer": True},
                       attention="cudnn", make_vocab_size_divisible_by=128)
    assert named == written


def test_megatron_lm_bare_is_todays_in_a_scenario_and_the_2020_22_code_in_a_table_row():
    assert framework_defaults("Megatron-LM", bare_is_current=True) == MEGATRON_LM_WITH_TE
    assert framework_defaults("Megatron-LM") == MEGATRON_LM_2021
    assert framework_defaults("Megatron-LM v2.5", bare_is_current=True) == MEGATRON_LM_2021
    assert scenario("Megatron-LM v2.5").workload.training.attention == "unfused"


@pytest.mark.parametrize("framework, divisor", [
    ("Megatron-LM", 128), ("Megatron-Core r0.8.0", 128), ("Megatron-LM v2.5", 128), ("Megatron-Bridge", None),
    ("NeMo 25.04", None), ("torchtitan", None), ("megatron", None)])
def test_megatron_lm_pads_the_vocabulary_to_128_times_tp_and_frameworks_that_build_hf_models_do_not(framework,
                                                                                                  divisor):
    assert scenario(framework).workload.training.make_vocab_size_divisible_by == divisor


def test_deepspeed_named_runs_deepspeeds_pipeline_engine():
    assert scenario("DeepSpeed 0.14", {"vpp": 1}).workload.framework == "deepspeed"


@pytest.mark.parametrize("written", ["Megatron-DeepSpeed", "DeepSpeed-Megatron", "megatron_deepspeed", "Megatron-DS"])
def test_megatron_deepspeed_runs_deepspeeds_pipeline_engine_whichever_way_round_it_is_written(written):
    assert scenario(written, {"vpp": 1}).workload.framework == "deepspeed"


@pytest.mark.parametrize("written", ["Megatron", "MEGATRON", " megatron ", "DeepSpeed"])
def test_the_engine_written_in_any_case_is_the_engine_without_a_frameworks_defaults(written):
    assert scenario(written) == scenario(written.strip().lower())


@given(st.sampled_from(["NeMo 24.12", "nemo", "Megatron-Bridge", "megatron_core", "LLM Foundry", "MaxText",
                        "torchtitan", "DeepSpeed"]))
def test_every_framework_simulon_names_makes_a_scenario_that_validates(name):
    assert scenario(name).workload.framework in ("megatron", "deepspeed")


def test_a_framework_nobody_ships_is_refused_naming_the_ones_known():
    with pytest.raises(ConfigError, match=r"s.yaml: workload.framework: 'jaxformer' names no framework simulon "
                                          r"knows.*nemo, megatron-lm"):
        scenario("jaxformer")


def test_torchtitan_shards_fsdp2_over_data_parallel_ranks_and_its_tensor_parallel_plan_is_sequence_parallel():
    par = scenario("torchtitan", {"pp": 1, "dp": 4}).workload.parallelism
    assert (par.fsdp, par.sequence_parallel) == ("full_shard", True)
    assert not scenario("torchtitan", {"tp": 1, "pp": 1, "dp": 16}).workload.parallelism.sequence_parallel


@pytest.mark.parametrize(("framework", "fsdp", "distributed_optimizer"), [
    ("DeepSpeed ZeRO-3", "full_shard", False), ("DeepSpeed (ZeRO stage 2)", "shard_grad_op", False),
    ("deepspeed zero_1", "none", True), ("Hugging Face Accelerate, FSDP", "full_shard", False),
    ("torchtitan FULL_SHARD", "full_shard", False), ("Megatron-LM, distributed optimizer", "none", True),
    ("DeepSpeed 0.14", "none", False), ("NeMo 24.07", "none", True)])
def test_a_sharding_the_framework_names_is_the_runs_sharding_where_the_scenario_sets_none(framework, fsdp,
                                                                                          distributed_optimizer):
    """'DeepSpeed ZeRO-3' dropped its stage: a 149 GiB 'does not fit' where fsdp: full_shard gives 35 GiB. One
    pipeline stage: DeepSpeed's PipelineEngine refuses ZeRO-2 and ZeRO-3 (config.workload)."""
    par = scenario(framework, {"vpp": 1, "pp": 1, "dp": 4}).workload.parallelism
    assert (par.fsdp, par.distributed_optimizer) == (fsdp, distributed_optimizer)
    stated = scenario(framework, {"vpp": 1, "fsdp": "none", "distributed_optimizer": False}).workload.parallelism
    assert (stated.fsdp, stated.distributed_optimizer) == ("none", False)  # what the scenario writes wins


@given(st.sampled_from(["ZeRO", "zero", "Zero"]), st.sampled_from(["-", "_", " ", "", " stage ", "-stage-"]),
       st.integers(0, 3), st.sampled_from(["DeepSpeed ", "Megatron-DeepSpeed (", ""]))
def test_a_zero_stage_is_read_however_it_is_spelled(zero, sep, stage, before):
    assert sharding_named(f"{before}{zero}{sep}{stage}") == WELL_KNOWN_SHARDINGS[f"zero-{stage}"]


@pytest.mark.parametrize(("written", "as_written"), [
    ("MegatronLM v2.5", "Megatron-LM v2.5"),       # was refused: "names no framework simulon knows"
    ("MegatronCore 0.12", "Megatron-Core 0.12"),
    ("MegatronBridge", "Megatron-Bridge"),
    ("LLMFoundry", "LLM Foundry"),
    ("MegatronDeepSpeed", "Megatron-DeepSpeed"),
])
def test_a_frameworks_name_written_without_its_separator_is_the_framework(written, as_written):
    assert scenario(written) == scenario(as_written)


@pytest.mark.parametrize("framework", ["torchtitan", "MaxText", "llm-foundry", "DeepSpeed ZeRO-3",
                                       "Hugging Face Accelerate, FSDP"])
def test_a_scenario_setting_the_distributed_optimizer_keeps_it_whatever_sharding_the_framework_defaults_to(framework):
    """torchtitan (FSDP by default) with distributed_optimizer: true was refused naming fsdp, which the scenario never
    wrote ('workload.parallelism.fsdp: FSDP already shards the optimizer'); the description's own sharding already
    gave way to a scenario setting fsdp, not to one setting distributed_optimizer."""
    par = scenario(framework, {"vpp": 1, "distributed_optimizer": True}).workload.parallelism
    assert (par.fsdp, par.distributed_optimizer) == ("none", True)
