"""Scenario config: the seed scenario, shipped templates, `from:` references and consistency checks."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from helpers import ROOT, SEED_SCENARIO
from simulon.config import (
    ConfigError,
    DatacenterConfig,
    DType,
    GPUSpec,
    ModelSpec,
    NICSpec,
    ScenarioConfig,
    SwitchSpec,
    load_scenario,
)
from simulon.config.loading import parse_scenario
from simulon.config.scenario import scenario_argument
from simulon.config.templates import find_template, template_names, template_stem, template_stem_loose
from simulon.search.run import scenario_for
from simulon.search.space import Strategy

SEED_PATH = SEED_SCENARIO
SEED = yaml.safe_load(SEED_PATH.read_text())

KIND_MODELS = {"gpu": GPUSpec, "nic": NICSpec, "switch": SwitchSpec, "model": ModelSpec}
ALL_KINDS = ("gpu", "nic", "switch", "model", "datacenter")


def seed() -> dict:
    return copy.deepcopy(SEED)


def write(tmp_path: Path, name: str, data) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def load_error(tmp_path: Path, name: str, data) -> tuple[Path, str]:
    path = write(tmp_path, name, data)
    with pytest.raises(ConfigError) as info:
        load_scenario(path)
    return path, str(info.value)


# --- the seed scenario ------------------------------------------------------------------------------

def test_seed_validates_as_in_the_readme():
    sc = ScenarioConfig.model_validate(yaml.safe_load(SEED_PATH.read_text()))
    assert sc.datacenter.num_gpus == 4
    assert sc.datacenter.datacenter.name == "my-cluster"
    assert sc.workload is not None
    assert (sc.workload.parallelism.tp, sc.workload.parallelism.pp) == (2, 2)
    assert sc.workload.parallelism.num_microbatches == 4
    assert sc.workload.training.num_gpus == 4
    assert sc.workload.training.dtype is DType.bf16
    assert sc.collective.algorithm == "ring"
    assert sc.datacenter.network.scale_up.switch.port_speed == pytest.approx(360e9)  # 2880Gbps
    assert sc.datacenter.network.scale_up.switch.latency == pytest.approx(2.5e-8)   # 0.000025ms
    assert sc.datacenter.network.scale_out.nic.speed == pytest.approx(50e9)         # 400Gbps
    assert sc.datacenter.network.scale_out.nic.latency == pytest.approx(5e-6)       # 0.005ms
    assert sc.datacenter.scale_up_bandwidth == pytest.approx(360e9)


def test_seed_loads_the_same_through_load_scenario():
    assert load_scenario(SEED_PATH) == ScenarioConfig.model_validate(SEED)


def test_seed_gpu_resolves_to_h100_template_keeping_user_fields():
    gpu = ScenarioConfig.model_validate(seed()).datacenter.node.gpu
    assert gpu.name == "H100"                       # the user's name wins over "H100-SXM5-80GB"
    assert gpu.memory_capacity_gb == 80.0
    assert gpu.memory_bandwidth == pytest.approx(3.35e12)
    assert gpu.peak_tflops[DType.bf16] == pytest.approx(989.4)
    assert gpu.peak_tflops[DType.fp8] == pytest.approx(1978.9)
    assert gpu.nvlink_bandwidth == pytest.approx(450e9)
    assert gpu.peak_flops(DType.bf16) == pytest.approx(989.4e12)


def test_user_memory_capacity_overrides_the_template():
    data = seed()
    data["datacenter"]["node"]["gpu"]["memory_capacity_gb"] = 94.5
    gpu = ScenarioConfig.model_validate(data).datacenter.node.gpu
    assert gpu.memory_capacity_gb == 94.5
    assert gpu.memory_bandwidth == pytest.approx(3.35e12)   # the rest still from the template


def test_seed_model_picks_up_llama_2_7b_template():
    model = ScenarioConfig.model_validate(seed()).workload.model
    assert model.name == "llama-7b"
    assert model.activation == "swiglu"          # only in the template
    assert model.normalization == "rmsnorm"
    assert model.num_kv_heads == 32
    assert model.gated_mlp
    assert (model.num_layers, model.hidden_size, model.num_heads) == (32, 4096, 32)


def test_explicit_model_fields_win_over_template():
    data = seed()
    data["workload"]["model"].update(ffn_hidden_size=11264, activation="gelu", vocab_size=32768)
    model = ScenarioConfig.model_validate(data).workload.model
    assert model.ffn_hidden_size == 11264
    assert model.activation == "gelu"
    assert model.vocab_size == 32768
    assert model.normalization == "rmsnorm"      # not overridden: from the template


def test_model_without_template_name_gets_defaults_not_template_values():
    data = seed()
    data["workload"]["model"]["name"] = "my-own-model"
    model = ScenarioConfig.model_validate(data).workload.model
    assert model.activation == "gelu"
    assert model.normalization == "layernorm"


# --- shipped templates ------------------------------------------------------------------------------

def test_every_kind_ships_templates():
    for kind in ALL_KINDS:
        assert template_names(kind), kind
    assert {"h100-sxm", "a100-sxm-80gb"} <= set(template_names("gpu"))
    assert {"llama-2-7b", "gpt3-175b"} <= set(template_names("model"))
    assert "dgx-h100" in template_names("datacenter")


@pytest.mark.parametrize(("kind", "name"), [(k, n) for k in KIND_MODELS for n in template_names(k)])
def test_shipped_template_validates(kind, name):
    model_cls = KIND_MODELS[kind]
    direct = model_cls.model_validate(find_template(kind, name))
    via_from = model_cls.model_validate({"from": name})
    assert direct == via_from
    if kind == "gpu":
        assert direct.memory_capacity_gb > 0 and direct.memory_bandwidth > 0
        assert direct.peak_tflops.get(DType.bf16, direct.peak_tflops[DType.fp16]) > 0  # Turing: no bf16
        if direct.nvlink_bandwidth is None:  # a GeForce/TITAN card's 2-way bridge belongs to its system template
            assert name in {"rtx-3090", "rtx-2080-ti", "titan-rtx"}
        else:
            assert direct.nvlink_bandwidth > 0
    elif kind == "nic":
        assert direct.speed > 0
    elif kind == "switch":
        assert direct.port_speed and direct.port_speed > 0
    else:
        assert direct.num_layers > 0 and direct.head_size > 0
        assert direct.num_heads % direct.kv_heads == 0


@pytest.mark.parametrize("name", template_names("datacenter"))
def test_shipped_datacenter_template_validates(name):
    dc = DatacenterConfig.model_validate({"from": name, "cluster": {"num_nodes": 2}})
    assert dc.num_gpus == 2 * dc.node.gpus_per_node
    assert dc.network.scale_out.nic is not None and dc.network.scale_out.nic.speed > 0
    assert dc.scale_up_bandwidth is not None and dc.scale_up_bandwidth > 0
    assert template_stem("gpu", dc.node.gpu.name) is not None   # its GPU is a shipped one
    same = DatacenterConfig.model_validate({**find_template("datacenter", name), "cluster": {"num_nodes": 2}})
    assert same == dc


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_template_names_and_aliases_resolve_to_their_own_file(kind):
    """No alias or display name of one template silently resolves to another template."""
    from importlib import resources

    for stem in template_names(kind):
        doc = yaml.safe_load((resources.files("simulon.templates") / kind / f"{stem}.yaml").read_text())
        for name in [stem, doc.get("name"), *doc.get("aliases", [])]:
            if name:
                assert template_stem(kind, str(name)) == stem, (kind, name)
                assert template_stem(kind, f" {str(name).upper()} ") == stem, (kind, name)
                assert template_stem_loose(kind, str(name).replace("-", " ")) == stem, (kind, name)


GPT3_PAPER = re.compile(r"^gpt3-(\d+(?:\.\d+)?)b$")          # Brown et al. 2020, Table 2.1
MEGATRON_GPT = re.compile(r"^gpt-(\d+(?:\.\d+)?)(b|t)$")      # Narayanan et al. 2021, Table 1


def _named_sizes(pattern: re.Pattern) -> list[tuple[str, float]]:
    out = []
    for name in template_names("model"):
        match = pattern.match(name)
        if match:
            scale = 1e12 if match.groups()[-1] == "t" else 1e9
            out.append((name, float(match.group(1)) * scale))
    return out


def test_gpt3_paper_templates_are_all_found():
    names = {n for n, _ in _named_sizes(GPT3_PAPER)}
    assert names >= {"gpt3-1.3b", "gpt3-2.7b", "gpt3-6.7b", "gpt3-13b", "gpt3-175b"}
    assert len(_named_sizes(MEGATRON_GPT)) >= 5


@pytest.mark.parametrize(("name", "size"), _named_sizes(GPT3_PAPER) + _named_sizes(MEGATRON_GPT))
def test_dense_gpt_parameter_count_matches_its_name(name, size):
    model = ModelSpec.model_validate({"from": name})
    assert model.moe is None
    assert model.ffn_hidden_size == 4 * model.hidden_size
    assert model.activation == "gelu"
    params = 12 * model.num_layers * model.hidden_size**2 + model.vocab_size * model.hidden_size
    assert params == pytest.approx(size, rel=0.05), f"{name}: {params / 1e9:.2f}B parameters"


def test_gpt3_175b_shape():
    model = ModelSpec.model_validate({"from": "gpt3-175b"})
    assert (model.num_layers, model.hidden_size, model.num_heads) == (96, 12288, 96)
    assert model.head_size == 128


# --- `from:` references -----------------------------------------------------------------------------

def test_from_file_relative_to_scenario_file(tmp_path, monkeypatch):
    (tmp_path / "hw").mkdir()
    write(tmp_path / "hw", "my-gpu.yaml", {
        "name": "MyGPU", "aliases": ["ignored"], "source": "a datasheet",
        "memory_capacity_gb": 48, "memory_bandwidth": "1.2TBps",
        "peak_tflops": {"bf16": 400, "fp32": 50}, "nvlink_bandwidth": "200GBps",
    })
    data = seed()
    data["datacenter"]["node"]["gpu"] = {"from": "hw/my-gpu.yaml", "memory_capacity_gb": 40}
    scenario = write(tmp_path, "scenario.yaml", data)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)        # resolution must not depend on the working directory
    gpu = load_scenario(scenario).datacenter.node.gpu
    assert gpu.name == "MyGPU"
    assert gpu.memory_capacity_gb == 40                # the block's own key wins
    assert gpu.memory_bandwidth == pytest.approx(1.2e12)
    assert gpu.peak_tflops == {DType.bf16: 400, DType.fp32: 50}
    assert gpu.nvlink_bandwidth == pytest.approx(200e9)


def test_from_file_that_does_not_exist(tmp_path):
    data = seed()
    data["datacenter"]["node"]["gpu"] = {"from": "nowhere/gpu.yaml"}
    path, message = load_error(tmp_path, "scen.yaml", data)
    assert message.startswith(f"{path}: datacenter.node.gpu: ")
    assert "cannot read template file" in message
    assert str(tmp_path / "nowhere" / "gpu.yaml") in message


def test_from_file_holding_a_list(tmp_path):
    (tmp_path / "gpu.yaml").write_text("- a\n- b\n")
    data = seed()
    data["datacenter"]["node"]["gpu"] = {"from": "gpu.yaml"}
    path, message = load_error(tmp_path, "scen.yaml", data)
    assert message.startswith(f"{path}: datacenter.node.gpu: ")
    assert "does not hold a mapping" in message


@pytest.mark.parametrize(("block", "kind", "field"), [
    (("datacenter", "node", "gpu"), "gpu", "datacenter.node.gpu"),
    (("datacenter", "network", "scale_out", "nic"), "nic", "datacenter.network.scale_out.nic"),
    (("datacenter", "network", "scale_up", "switch"), "switch", "datacenter.network.scale_up.switch"),
    (("workload", "model"), "model", "workload.model"),
])
def test_unknown_template_name_lists_shipped_names(tmp_path, block, kind, field):
    data = seed()
    target = data
    for key in block[:-1]:
        target = target[key]
    target[block[-1]] = {"from": "no-such-thing-9000"}
    path, message = load_error(tmp_path, "scen.yaml", data)
    assert message.startswith(f"{path}: {field}: ")
    assert f"unknown {kind} template 'no-such-thing-9000'" in message
    for name in template_names(kind):
        assert name in message
    assert "\n" not in message


@pytest.mark.parametrize(("block", "ref"), [
    (("datacenter", "node", "gpu"), "gpt " + "x" * 5000),           # also read as a description, which names it
    (("datacenter", "node", "gpu"), "H100 " + "x" * 5000),
    (("workload", "model"), "x" * 5000),
    (("datacenter", "network", "scale_out", "nic"), "x" * 5000),
])
def test_an_unknown_template_name_thousands_of_characters_long_is_quoted_once_by_its_start_and_length(
        tmp_path, block, ref):
    data = seed()
    target = data
    for key in block[:-1]:
        target = target[key]
    target[block[-1]] = {"from": ref}
    _, message = load_error(tmp_path, "scen.yaml", data)
    assert f"{len(ref) + 2:,} characters" in message and "x" * 100 not in message
    assert len(message) < 2000 and "\n" not in message


def test_unknown_datacenter_template(tmp_path):
    path, message = load_error(tmp_path, "scen.yaml", {"datacenter": {"from": "dgx-z900", "cluster": {"num_nodes": 1}}})
    assert message.startswith(f"{path}: datacenter: unknown datacenter template 'dgx-z900'")
    assert all(name in message for name in template_names("datacenter"))


def test_from_must_be_a_string(tmp_path):
    data = seed()
    data["datacenter"]["node"]["gpu"] = {"from": 42}
    path, message = load_error(tmp_path, "scen.yaml", data)
    assert message.startswith(f"{path}: datacenter.node.gpu: ")
    assert "'from' must be a template name or file path" in message


def test_block_given_as_a_template_name_string():
    data = seed()
    data["datacenter"]["node"]["gpu"] = "a100-sxm-80gb"
    gpu = ScenarioConfig.model_validate(data).datacenter.node.gpu
    assert gpu.name == "A100-SXM4-80GB"
    assert gpu.peak_tflops[DType.bf16] == 312


def test_datacenter_template_with_user_overrides():
    sc = ScenarioConfig.model_validate({
        "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 3}, "node": {"gpu": {"memory_capacity_gb": 96}}},
    })
    assert sc.datacenter.num_gpus == 24
    assert sc.datacenter.node.gpu.name == "H100-SXM5-80GB"
    assert sc.datacenter.node.gpu.memory_capacity_gb == 96
    assert sc.datacenter.scale_up_bandwidth == pytest.approx(450e9)
    assert sc.workload is None


def test_a_gpu_put_on_a_faster_switch_than_its_own_nvlink_moves_data_at_its_own_nvlink_rate():
    """An A100 (NVLink 3, 300 GB/s a direction) in a DGX H100 whose NVSwitch ports run 450: its ports run at 300."""
    sc = ScenarioConfig.model_validate({
        "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}, "node": {"gpu": {"from": "A100 80GB"}}}})
    assert sc.datacenter.scale_up_bandwidth == pytest.approx(300e9)


# --- consistency checks: each scenario violates exactly one ----------------------------------------

def _set(data: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        data = data[key]
    if value is _DELETE:
        del data[last]
    else:
        data[last] = value


_DELETE = object()

CUSTOM_MODEL = {"name": "custom-test-model", "num_layers": 32, "hidden_size": 4096, "num_heads": 32,
                "ffn_hidden_size": 11008, "vocab_size": 32000}
NO_NMB = ("workload.parallelism.num_microbatches", _DELETE)
# tp1 x pp2 on 4 GPUs: dp = 2, so expert parallelism has room
DP2 = [("workload.parallelism.tp", 1), NO_NMB]

CHECKS = {
    "tp*cp*pp*dp != num_gpus": (
        [("workload.parallelism.dp", 2)],
        "workload.parallelism", ["tp*cp*pp*dp = 2*1*2*2 = 8", "num_gpus is 4"]),
    "tp*cp*pp does not divide num_gpus": (
        [("workload.parallelism.tp", 1), ("workload.parallelism.pp", 3), NO_NMB],
        "workload.parallelism", ["tp*cp*pp = 3", "does not divide num_gpus 4"]),
    "more GPUs than the datacenter": (
        [("workload.training.num_gpus", 8)],
        "workload.training.num_gpus", ["8 GPUs requested", "datacenter has 4"]),
    "heads not divisible by tp": (
        [("workload.model", {**CUSTOM_MODEL, "num_heads": 33, "hidden_size": 33 * 128})],
        "workload.parallelism.tp", ["2 does not divide num_heads 33"]),
    "kv heads and tp do not divide one another": (
        [("workload.model", {**CUSTOM_MODEL, "num_heads": 30, "num_kv_heads": 3, "hidden_size": 30 * 128})],
        "workload.parallelism.tp", ["num_kv_heads 3", "must divide one another"]),
    "ffn not divisible by tp": (
        [("workload.model.ffn_hidden_size", 11007)],
        "workload.parallelism.tp", ["2 does not divide ffn_hidden_size 11007"]),
    "layout places the wrong number of layers": (
        [("workload.parallelism.pipeline_layout", "Et*15|t*16L")],
        "workload.parallelism.pipeline_layout", ["places 31 transformer layers", "has 32"]),
    "layout with multi-token prediction the model does not have": (
        [("workload.parallelism.pipeline_layout", "Et*16|t*16mL")],
        "workload.parallelism.pipeline_layout", ["places 1 multi-token-prediction", "has 0", "mtp_layers"]),
    "multi-token prediction on the first pipeline rank": (
        [("workload.model.mtp_layers", 1), ("workload.parallelism.vpp", 2),
         ("workload.parallelism.pipeline_layout", "Et*8|t*8|t*16m|L")],
        "workload.parallelism.pipeline_layout", ["virtual stage 2, on the first pipeline rank"]),
    "a transformer layer after multi-token prediction": (
        [("workload.model.mtp_layers", 1), ("workload.parallelism.pipeline_layout", "Et*16|t*15mtL")],
        "workload.parallelism.pipeline_layout", ["after a multi-token-prediction layer"]),
    "multi-token prediction split over virtual stages": (
        [("workload.model.mtp_layers", 2), ("workload.parallelism.vpp", 2),
         ("workload.parallelism.pipeline_layout", "Et*8|t*8|t*8m|t*8mL")],
        "workload.parallelism.pipeline_layout", ["splits its multi-token-prediction layers"]),
    "layout without the embedding first": (
        [("workload.parallelism.pipeline_layout", "t*16|Et*16L")],
        "workload.parallelism.pipeline_layout", ["embedding (E) must open the first"]),
    "layout stages not a multiple of pp": (
        [("workload.parallelism.pipeline_layout", "Et*10|t*11|t*11L")],
        "workload.parallelism.pipeline_layout", ["3 virtual stages, not a multiple of pp = 2"]),
    "layout against a different vpp": (
        [("workload.parallelism.pipeline_layout", "Et*16|t*16L"), ("workload.parallelism.vpp", 2)],
        "workload.parallelism.pipeline_layout", ["make vpp = 1", "vpp is 2"]),
    "unknown layout symbol": (
        [("workload.parallelism.pipeline_layout", "Et*16|x*16L")],
        "workload.parallelism.pipeline_layout", ["'x'", "separated by '|'"]),
    "a stage's layers do not split over its chunks": (
        [("workload.parallelism.vpp", 2), ("workload.parallelism.layers_per_stage", [15, 17])],
        "workload.parallelism.layers_per_stage", ["15 layers do not split over vpp = 2"]),
    "first stage leaves an uneven rest": (
        [("workload.parallelism.first_stage_layers", 5), ("workload.parallelism.last_stage_layers", 5)],
        "workload.parallelism.first_stage_layers", ["hold 10 of the model's 32 layers", "no other stage is left "
                                                    "for the remaining 22"]),
    "embedding and loss accounted do not divide": (
        [("workload.parallelism.account_for_embedding_in_pipeline_split", True)],
        "workload.parallelism.account_for_embedding_in_pipeline_split", ["= 33 is not divisible by pp*vpp = 2"]),
    "the loss accounted does not divide": (  # the flag given is named, not the whole block
        [("workload.parallelism.account_for_loss_in_pipeline_split", True)],
        "workload.parallelism.account_for_loss_in_pipeline_split", ["= 33 is not divisible by pp*vpp = 2"]),
    "layers_per_stage wrong length": (
        [("workload.parallelism.layers_per_stage", [32])],
        "workload.parallelism.layers_per_stage", ["1 entries for pp = 2"]),
    "layers_per_stage wrong sum": (
        [("workload.parallelism.layers_per_stage", [16, 15])],
        "workload.parallelism.layers_per_stage", ["sums to 31", "32 layers"]),
    "global batch not a multiple of micro_batch*dp": (
        [("workload.training.micro_batch_size", 2), ("workload.training.global_batch_size", 5), NO_NMB],
        "workload.training.global_batch_size", ["5 is not a multiple", "micro_batch_size*dp = 2*1"]),
    "num_microbatches inconsistent": (
        [("workload.parallelism.num_microbatches", 3)],
        "workload.parallelism.num_microbatches", ["3, but", "= 4"]),
    "sequence parallelism with an odd sequence": (
        [("workload.parallelism.sequence_parallel", True), ("workload.training.sequence_length", 2047)],
        "workload.training.sequence_length", ["2047 is not divisible by tp*cp = 2"]),
    "ep without moe": (
        [*DP2, ("workload.parallelism.ep", 2)],
        "workload.parallelism.ep", ["ep = 2", "no MoE"]),
    "experts not divisible by ep": (
        [*DP2, ("workload.parallelism.ep", 2), ("workload.model.moe", {"num_experts": 3, "top_k": 1})],
        "workload.parallelism.ep", ["2 does not divide num_experts 3"]),
    "ep does not divide dp": (
        [*DP2, ("workload.parallelism.ep", 4), ("workload.model.moe", {"num_experts": 8, "top_k": 2})],
        "workload.parallelism.ep", ["4 does not divide dp*cp = 2", "expert parallelism"]),
    "sequence not split evenly by context parallelism": (
        [("workload.parallelism.tp", 1), ("workload.parallelism.cp", 2), ("workload.training.sequence_length", 2046)],
        "workload.training.sequence_length", ["2046 is not divisible by 2*cp = 4"]),
    "interleaving without pipeline": (
        [("workload.parallelism.pp", 1), ("workload.parallelism.tp", 4), ("workload.parallelism.vpp", 2)],
        "workload.parallelism.vpp", ["needs pipeline parallelism"]),
    "a layout of two virtual stages without pipeline": (  # its vpp 2 is the layout's, unwritten
        [("workload.parallelism.pp", 1), ("workload.parallelism.tp", 4), ("workload.parallelism.pipeline_schedule",
                                                                            "interleaved_1f1b"),
         ("workload.parallelism.pipeline_layout", "Et*16|t*16L")],
        "workload.parallelism.pipeline_layout", ["vpp = 2 needs pipeline parallelism"]),
    "1f1b named with interleaving": (
        [("workload.parallelism.vpp", 2)],   # the seed names pipeline_schedule: 1f1b
        "workload.parallelism.pipeline_schedule", ["1f1b runs one model chunk per rank, not vpp = 2",
                                                   "interleaved_1f1b"]),
    "deepep dispatch on a dense model": (
        [("workload.training.moe_dispatcher", "deepep")],
        "workload.training.moe_dispatcher", ["deepep", "no MoE block"]),
    "deepep dispatch padded to capacity": (  # Megatron-Core refuses deepep with --moe-pad-expert-input-to-capacity
        [*DP2, ("workload.parallelism.ep", 2), ("workload.training.moe_dispatcher", "deepep"),
         ("workload.model.moe", {"num_experts": 8, "top_k": 2, "capacity_factor": 1.5})],
        "workload.model.moe.capacity_factor", ["1.5 pads", "deepep does not", "at most 1"]),
    "deepep dispatch with every expert on every rank": (  # Megatron-Core asserts TPxEP > 1 for DeepEP's dispatcher
        [*DP2, ("workload.training.moe_dispatcher", "deepep"), ("workload.model.moe", {"num_experts": 8, "top_k": 2})],
        "workload.training.moe_dispatcher", ["ep 1 and expert tensor parallelism 1", "nothing to dispatch",
                                             "TPxEP > 1"]),
    "experts split over more ranks than the dense layers": (  # the seed's tp 2
        [("workload.parallelism.expert_tensor_parallel", 4), ("workload.model.moe", {"num_experts": 8, "top_k": 2})],
        "workload.parallelism.expert_tensor_parallel", ["4 above tp = 2 is not modelled", "at most 2"]),
    "experts' ranks do not divide the model's": (  # ep 4 x etp 1 over the seed's 2 tensor x 1 data ranks
        [("workload.parallelism.expert_tensor_parallel", 1), ("workload.parallelism.ep", 4),
         ("workload.model.moe", {"num_experts": 8, "top_k": 2})],
        "workload.parallelism.expert_tensor_parallel", ["ep x expert_tensor_parallel = 4 must divide tp*cp*dp = 2"]),
    "fsdp with distributed optimizer": (
        [("workload.parallelism.fsdp", "full_shard"), ("workload.parallelism.distributed_optimizer", True)],
        "workload.parallelism.fsdp", ["already shards the optimizer"]),
    "unknown parallelism key": (
        [("workload.parallelism.foo", 1)],
        "workload.parallelism.foo", ["unknown key"]),
    "unknown algorithm refused": (
        [("collective.algorithm", "warp")],
        "collective.algorithm", ["'warp'", "ring"]),
    "fp8 on an A100": (
        [("datacenter.node.gpu", {"name": "A100"}), ("workload.training.dtype", "fp8")],
        "workload.training.dtype", ["A100", "no fp8 peak"]),
    "top_k above num_experts": (
        [*DP2, ("workload.parallelism.ep", 2), ("workload.model.moe", {"num_experts": 2, "top_k": 3})],
        "workload.model.moe.top_k", ["3 exceeds num_experts"]),
    "multi-node cluster without a NIC": (
        [("datacenter.cluster.num_nodes", 2), ("datacenter.network.scale_out", {})],
        "datacenter.network.scale_out.nic", ["needs a NIC"]),
}


@pytest.mark.parametrize("case", list(CHECKS))
def test_consistency_check(tmp_path, case):
    changes, field, words = CHECKS[case]
    data = seed()
    for dotted, value in changes:
        _set(data, dotted, value)
    path, message = load_error(tmp_path, "bad-scenario.yaml", data)
    assert message.startswith(f"{path}: {field}: "), message
    for word in words:
        assert word in message
    assert "\n" not in message


def test_vpp_without_a_schedule_named_runs_interleaved_and_is_written_back_as_such():
    data = seed()
    del data["workload"]["parallelism"]["pipeline_schedule"]
    _set(data, "workload.parallelism.vpp", 2)
    sc = ScenarioConfig.model_validate(data)
    assert sc.workload.parallelism.pipeline_schedule == "interleaved_1f1b" and sc.workload.parallelism.interleaved
    again = parse_scenario(sc.as_data(), "again")
    assert again.workload.parallelism == sc.workload.parallelism


def test_changes_that_only_set_up_a_check_are_valid():
    """The helper changes (dp2 layout, uneven split that adds up, MoE with ep) validate on their own."""
    data = seed()
    for dotted, value in DP2:
        _set(data, dotted, value)
    _set(data, "workload.parallelism.ep", 2)
    _set(data, "workload.model.moe", {"num_experts": 8, "top_k": 2})
    sc = ScenarioConfig.model_validate(data)
    assert sc.workload.parallelism.ep == 2
    uneven = seed()
    _set(uneven, "workload.model.num_layers", 31)
    _set(uneven, "workload.parallelism.layers_per_stage", [16, 15])
    assert ScenarioConfig.model_validate(uneven).workload.parallelism.layers_per_stage == [16, 15]
    custom = seed()
    _set(custom, "workload.model", {**CUSTOM_MODEL, "num_heads": 34, "hidden_size": 34 * 128})
    assert ScenarioConfig.model_validate(custom).workload.model.activation == "gelu"
    fp8 = seed()
    _set(fp8, "workload.training.dtype", "fp8")       # the H100 has fp8
    assert ScenarioConfig.model_validate(fp8).workload.training.dtype is DType.fp8


def test_deepep_runs_over_expert_parallelism_or_over_expert_tensor_parallelism_alone():
    """DeepEP's dispatch group is expert tensor x expert parallelism (Megatron-Core's tp_ep group): ep 2, or ep 1
    with each expert split over the seed's tp 2, each has one to dispatch over."""
    for edits in ([*DP2, ("workload.parallelism.ep", 2)], []):
        data = seed()
        for dotted, value in [*edits, ("workload.training.moe_dispatcher", "deepep"),
                              ("workload.model.moe", {"num_experts": 8, "top_k": 2})]:
            _set(data, dotted, value)
        par = ScenarioConfig.model_validate(data).workload.parallelism
        assert par.ep * par.etp == 2


def test_datacenter_only_scenario_is_valid():
    data = seed()
    del data["workload"]
    sc = ScenarioConfig.model_validate(data)
    assert sc.workload is None


# --- unknown keys at every level --------------------------------------------------------------------

UNKNOWN_KEY_BLOCKS = [
    "", "datacenter", "datacenter.datacenter", "datacenter.cluster", "datacenter.node", "datacenter.node.gpu",
    "datacenter.network", "datacenter.network.scale_up", "datacenter.network.scale_up.switch",
    "datacenter.network.scale_out", "datacenter.network.scale_out.nic", "collective", "workload",
    "workload.model", "workload.parallelism", "workload.training",
]


@pytest.mark.parametrize("block", UNKNOWN_KEY_BLOCKS)
def test_unknown_key_is_an_error(tmp_path, block):
    data = seed()
    target = data
    for key in filter(None, block.split(".")):
        target = target[key]
    target["bogus_key"] = 1
    path, message = load_error(tmp_path, "scen.yaml", data)
    field = f"{block}.bogus_key" if block else "bogus_key"
    assert message == f"{path}: {field}: unknown key"


@pytest.mark.parametrize(("block", "key", "hint"), [
    ("workload.training", "micro_batch_sise", " (did you mean 'micro_batch_size'?)"),
    ("datacenter.node.gpu", "tdp", " (did you mean 'tdp_w'?)"),
    ("collective", "algoritm", " (did you mean 'algorithm'?)"),
    ("workload.training", "recompute", " (it belongs in workload.parallelism)"),
    ("workload.parallelism", "micro_batch_size", " (it belongs in workload.training)"),
    ("datacenter.node", "bogus_key", ""),
])
def test_an_unknown_key_names_the_key_it_is_likely_a_misspelling_of_or_the_block_that_holds_it(
        tmp_path, block, key, hint):
    data = seed()
    target = data
    for part in block.split("."):
        target = target[part]
    target[key] = 1
    path, message = load_error(tmp_path, "scen.yaml", data)
    assert message == f"{path}: {block}.{key}: unknown key{hint}"


@pytest.mark.parametrize(("block", "value", "field"), [
    ("workload.model.moe", {"num_experts": 8, "top_k": 2, "bogus_key": 1}, "workload.model.moe.bogus_key"),
    ("workload.model.mla", {"kv_lora_rank": 8, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8,
                            "bogus_key": 1}, "workload.model.mla.bogus_key"),
    ("datacenter.node.gpu.kernel_runs", [{"kernel": "gemm", "params": {}, "bogus_key": 1}],
     "datacenter.node.gpu.kernel_runs[0].bogus_key"),
])
def test_unknown_key_in_optional_blocks(tmp_path, block, value, field):
    data = seed()
    _set(data, block, value)
    path, message = load_error(tmp_path, "scen.yaml", data)
    assert message.startswith(f"{path}: {field}: unknown key")


def test_unknown_key_in_a_template_file_is_an_error(tmp_path):
    write(tmp_path, "gpu.yaml", {**find_template("gpu", "h100-sxm"), "bogus_key": 3})
    data = seed()
    data["datacenter"]["node"]["gpu"] = {"from": "gpu.yaml"}
    path, message = load_error(tmp_path, "scen.yaml", data)
    assert message == f"{tmp_path / 'gpu.yaml'} (included by {path} at datacenter.node.gpu): bogus_key: unknown key"


def test_several_problems_are_counted(tmp_path):
    data = seed()
    data["bogus_a"] = 1
    data["collective"]["bogus_b"] = 2
    path, message = load_error(tmp_path, "scen.yaml", data)
    assert message.startswith(f"{path}: ")
    assert message.endswith("unknown key (and 1 more problem)")


def test_missing_required_field(tmp_path):
    data = seed()
    del data["workload"]["training"]["global_batch_size"]
    path, message = load_error(tmp_path, "scen.yaml", data)
    assert message == f"{path}: workload.training.global_batch_size: required field is missing"


@pytest.mark.parametrize(("system", "hint"), [
    ("dgx-h100", "a node holds 8 GPUs ("),
    ("gb200-nvl72", "a node holds 4 GPUs, and 18 nodes make one NVLink domain of 72 ("),
])
def test_a_system_without_a_cluster_is_refused_saying_what_a_node_and_a_domain_hold(tmp_path, system, hint):
    data = {"datacenter": {"from": system}, "workload": seed()["workload"]}
    del data["workload"]["training"]["num_gpus"]  # no GPU count to size it by either
    path, message = load_error(tmp_path, "scen.yaml", data)
    assert message.startswith(f"{path}: datacenter.cluster: required: how many nodes (cluster: {{num_nodes: N}}); ")
    assert hint in message


def test_bad_unit_string_names_field(tmp_path):
    data = seed()
    data["datacenter"]["network"]["scale_out"]["nic"]["speed"] = "400Gbs"
    path, message = load_error(tmp_path, "scen.yaml", data)
    assert message.startswith(f"{path}: datacenter.network.scale_out.nic.speed: cannot read '400Gbs'")


@pytest.mark.parametrize("value", [True, "2", 2.0])
def test_wrong_types_are_not_coerced(value):
    data = seed()
    data["collective"]["num_channels"] = value
    with pytest.raises(Exception):  # noqa: B017 - any validation error will do
        ScenarioConfig.model_validate(data)


def test_invalid_yaml_template_file_gives_one_line(tmp_path):
    (tmp_path / "gpu.yaml").write_text("name: x\nmemory_capacity_gb: [1\n")
    data = seed()
    data["datacenter"]["node"]["gpu"] = {"from": "gpu.yaml"}
    path, message = load_error(tmp_path, "scen.yaml", data)
    assert message.startswith(f"{path}: datacenter.node.gpu: ")
    assert "not valid YAML" in message
    assert "\n" not in message


@pytest.mark.parametrize("path", sorted((SEED_PATH.parent).glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_example_is_a_valid_scenario(path):
    """The loader checks the strategy against the cluster; an example must pass it as shipped."""
    assert load_scenario(path).workload is not None


def test_the_parameter_gather_overlaps_only_with_the_gradient_reduction_as_megatron_requires(tmp_path):
    data = seed()
    data["workload"]["parallelism"].update(overlap_grad_reduce=False, overlap_param_gather=True,
                                           distributed_optimizer=True)
    path, message = load_error(tmp_path, "gather.yaml", data)
    assert str(path) in message and "overlap_param_gather" in message and "overlap_grad_reduce" in message
    del data["workload"]["parallelism"]["overlap_param_gather"]
    assert not load_scenario(write(tmp_path, "follows.yaml", data)).workload.parallelism.gathers_overlapped


@pytest.mark.parametrize("example", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.stem)
def test_a_scenario_written_as_data_parses_back_to_itself(example):
    sc = load_scenario(example)
    assert parse_scenario(sc.as_data(), "round trip") == sc
    # pydantic's own dump too, its unset blocks written as null (the Python API's natural round trip)
    for mode in ("python", "json"):
        assert ScenarioConfig.model_validate(sc.model_dump(mode=mode)) == sc


def test_a_part_taken_from_a_templates_model_stays_away_in_the_searchs_and_sweeps_variants():
    data = {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}},
            "workload": {"model": {"from": "deepseek-v3.2", "num_layers": 2, "mtp_layers": 0, "moe": None},
                         "parallelism": {"tp": 8},
                         "training": {"num_gpus": 8, "global_batch_size": 8, "sequence_length": 4096}}}
    sc = parse_scenario(data, "no experts")
    assert sc.workload.model.moe is None
    assert parse_scenario(sc.as_data(), "round trip").workload.model.moe is None
    strategy = Strategy(4, 2, 1, 1, 1, 1, 4, 1, True, "none", "distributed_optimizer", "bf16", False)
    assert scenario_for(sc, strategy, 8).workload.model == sc.workload.model


def test_a_copy_with_other_fields_answers_with_its_own_layers_not_its_originals_cached_ones():
    """A model's per-layer blocks are worked out once (cached), and a copy with other fields works out its own:
    pydantic copies the instance's dict, where the cache lives."""
    v3 = ModelSpec.model_validate({"from": "deepseek-v3"})
    assert len(v3.all_layer_blocks) == 62 and v3.layer_blocks(0) == ("attention", "mlp")
    shorter = v3.model_copy(update={"num_layers": 4})
    assert len(shorter.all_layer_blocks) == 5  # four decoder layers and the MTP layer
    assert shorter.layer_blocks(4)[0] == "mtp"
    dense = v3.model_copy(update={"moe": None})
    assert set(dense.layer_kinds) == {("attention", "mlp"), ("mtp", "attention", "mlp")}
    assert v3.model_copy().all_layer_blocks is v3.all_layer_blocks  # a plain copy keeps what it holds


# --- a cluster sized by the workload's GPUs ---------------------------------------------------------------

def sized(datacenter, num_gpus: int | None) -> dict:
    """A data-parallel scenario of a tiny model on `datacenter`, asking for `num_gpus` GPUs (None: not saying)."""
    training = {"global_batch_size": num_gpus or 8, "micro_batch_size": 1, "sequence_length": 1024}
    if num_gpus is not None:
        training["num_gpus"] = num_gpus
    return {"datacenter": datacenter,
            "workload": {"model": {"name": "tiny", "num_layers": 2, "hidden_size": 512, "num_heads": 8,
                                   "ffn_hidden_size": 2048, "vocab_size": 32000},
                         "training": training}}


@pytest.mark.parametrize(("datacenter", "num_gpus", "nodes"), [
    ({"from": "dgx-h100"}, 8, 1),
    ({"from": "dgx-h100"}, 16, 2),
    ("dgx-h100", 24, 3),                     # a bare template name
    ({"from": "gb200-nvl72"}, 72, 18),       # a rack's 18 trays of 4
    ({"from": "gb200-nvl72"}, 8, 2),
    ({"from": "gb200-nvl72"}, 144, 36),
    ({"from": "aws-p5"}, 8, 1),
    ({"from": "dgx-h100", "network": {"scale_out": {"nic": {"speed": "200Gbps"}}}}, 32, 4),
])
def test_a_template_without_a_cluster_holds_the_workloads_gpus_in_whole_nodes(datacenter, num_gpus, nodes):
    sc = parse_scenario(sized(datacenter, num_gpus))
    assert sc.datacenter.cluster.num_nodes == nodes and sc.datacenter.num_gpus == num_gpus
    block = {"from": datacenter} if isinstance(datacenter, str) else datacenter
    assert sc.datacenter == DatacenterConfig.model_validate({**block, "cluster": {"num_nodes": nodes}})
    assert parse_scenario(sc.as_data(), "round trip") == sc


@pytest.mark.parametrize(("system", "num_gpus", "says"), [
    ("dgx-h100", 12, "workload.training.num_gpus 12 is not a whole number of nodes of 8 GPUs, as 8 (1 node) or 16 "
                     "(2 nodes) would be ("),
    ("dgx-h100", 4, "workload.training.num_gpus 4 is not a whole number of nodes of 8 GPUs, as 8 (1 node) would be ("),
    ("gb200-nvl72", 10, "workload.training.num_gpus 10 is not a whole number of nodes of 4 GPUs, as 8 (2 nodes) or 12 "
                        "(3 nodes) would be; 18 nodes make one NVLink domain of 72 ("),
])
def test_gpus_that_fill_no_whole_number_of_nodes_are_refused_with_the_counts_that_do(tmp_path, system, num_gpus,
                                                                                       says):
    path, message = load_error(tmp_path, "scen.yaml", sized({"from": system}, num_gpus))
    assert message.startswith(f"{path}: datacenter.cluster: required: how many nodes (cluster: {{num_nodes: N}}): ")
    assert says in message


@given(st.integers(1, 16), st.integers(1, 32), st.integers(1, 4))
def test_k_nodes_of_gpus_are_k_nodes_whatever_the_node_and_its_nvlink_domain(per_node, k, domains):
    node = {"gpus_per_node": per_node, "gpu": "H100"}
    network = {"scale_up": {"domain_gpus": per_node * domains}, "scale_out": {"nic": {"speed": "400Gbps"}}}
    scenario = sized({"node": node, "network": network}, per_node * k)
    if k > domains and domains > 1 and not any(k % d == 0 for d in range(2, domains + 1)):
        with pytest.raises(ValueError, match="no two nodes would share NVLink"):  # domains cut to single nodes
            ScenarioConfig.model_validate(scenario)
        return
    assert ScenarioConfig.model_validate(scenario).datacenter.cluster.num_nodes == k


@pytest.mark.parametrize(("datacenter", "num_gpus", "nodes"), [
    ({"from": "dgx-h100", "cluster": {"num_nodes": 4}}, 8, 4),   # cluster written: kept, the job uses part of it
    ({"from": "gb200-nvl72", "cluster": {"num_nodes": 18}}, 8, 18),
    ({"from": "4x DGX H100"}, 8, 4),                              # a count the description states: kept
    ({"from": "GB200 NVL72 rack"}, 8, 18),                        # one rack
    ({"from": "8x H100 DGX", "cluster": {"num_nodes": 3}}, 12, 3),
])
def test_a_datacenter_that_states_its_nodes_keeps_them_whatever_the_workload_asks(datacenter, num_gpus, nodes):
    sc = parse_scenario(sized(datacenter, num_gpus))
    assert sc.datacenter.cluster.num_nodes == nodes
    assert sc.datacenter == DatacenterConfig.model_validate(datacenter)
    with pytest.raises(ValueError, match="how many nodes"):  # on its own, a datacenter still needs its nodes
        DatacenterConfig.model_validate({"from": "dgx-h100"})


def test_a_key_misplaced_under_a_block_of_the_same_name_is_sent_to_that_block_first(tmp_path):
    """A scale-out switch under a node group's scale_out belongs in datacenter.network.scale_out: the hint named
    the two scale_up blocks, which come first in the walk, and cut the right one."""
    data = {"datacenter": {"node_groups": [
        {"from": "dgx-h100", "num_nodes": 1, "network": {"scale_out": {"switch": {"from": "tomahawk-5"}}}},
        {"from": "dgx-a100", "num_nodes": 2}]}}
    path, message = load_error(tmp_path, "scen.yaml", data)
    assert message.startswith(f"{path}: datacenter.node_groups[0].network.scale_out.switch: unknown key "
                              "(it belongs in datacenter.network.scale_out or ")


@pytest.mark.parametrize(("value", "says"), [
    ("examples/scenario.yaml", "sc: expected a ScenarioConfig, got str: read the file with "
                               "simulon.config.load_scenario(path)"),
    (ROOT / "examples" / "scenario.yaml", "got PosixPath: read the file with simulon.config.load_scenario(path)"),
    ({"datacenter": {}}, "got dict: validate the data with simulon.config.parse_scenario(data)"),
    (None, "got NoneType: load one with simulon.config.load_scenario(path)"),
])
def test_a_python_entry_point_given_no_scenario_names_its_parameter_and_how_to_make_one(value, says):
    with pytest.raises(TypeError, match=re.escape(says)):
        scenario_argument(value)


def test_a_python_entry_point_that_simulates_a_step_refuses_a_scenario_without_a_workload():
    sc = ScenarioConfig.model_validate({"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}}})
    assert scenario_argument(sc) is sc
    with pytest.raises(ValueError, match=r"^scenario: the scenario has no workload block to simulate$"):
        scenario_argument(sc, "scenario", need_workload=True)
