"""A config.json whose keys disagree with each other (first_k_dense_replace above num_hidden_layers, a top-k above
the experts, key-value heads that do not divide the heads) is refused naming the file and its keys, not the model
block's YAML fields the reader filled from them; a field the scenario sets beside `from_hf` keeps its YAML name."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from helpers import cli
from simulon.config.errors import ConfigError
from simulon.config.hf import HFConfigError, model_from_hf
from simulon.config.loading import load_scenario
from simulon.config.workload import ModelSpec

DEEPSEEK_SMALL = {  # a DeepSeek-V3 shape, shrunk
    "model_type": "deepseek_v3", "hidden_act": "silu", "hidden_size": 1024, "intermediate_size": 2048,
    "moe_intermediate_size": 512, "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2,
    "first_k_dense_replace": 1, "moe_layer_freq": 1, "n_group": 4, "topk_group": 2, "num_attention_heads": 16,
    "num_key_value_heads": 16, "num_hidden_layers": 4, "kv_lora_rank": 128, "q_lora_rank": 256,
    "qk_nope_head_dim": 64, "qk_rope_head_dim": 32, "v_head_dim": 64, "rms_norm_eps": 1e-6, "vocab_size": 32000}
LLAMA_SMALL = {
    "model_type": "llama", "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 11008,
    "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 4, "rms_norm_eps": 1e-5,
    "vocab_size": 32000}
MIXTRAL_SMALL = {
    "model_type": "mixtral", "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 4, "num_key_value_heads": 8, "num_local_experts": 8,
    "num_experts_per_tok": 2, "rms_norm_eps": 1e-05, "vocab_size": 32000}
NEMOTRON_H_SMALL = {
    "model_type": "nemotron_h", "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 6,
    "hybrid_override_pattern": "M-M*-M", "num_attention_heads": 8, "attention_head_dim": 128,
    "num_key_value_heads": 8, "mlp_hidden_act": "relu2", "mamba_num_heads": 32, "mamba_head_dim": 64,
    "ssm_state_size": 128, "n_groups": 8, "rms_norm_eps": 1e-05, "vocab_size": 32000}

CASES = [  # (the file, what the message says after the file's path)
    ({**DEEPSEEK_SMALL, "first_k_dense_replace": 10},
     "key 'first_k_dense_replace': 10 exceeds num_hidden_layers (4)"),
    ({**LLAMA_SMALL, "num_key_value_heads": 3},
     "key 'num_key_value_heads': 3 does not divide num_attention_heads 32"),
    ({**MIXTRAL_SMALL, "num_experts_per_tok": 9},
     "key 'num_experts_per_tok': 9 exceeds num_local_experts (8)"),
    ({**LLAMA_SMALL, "hidden_size": 4000, "num_attention_heads": 48},
     "key 'num_attention_heads': 48 does not divide hidden_size 4000; give head_dim explicitly"),
    ({**DEEPSEEK_SMALL, "n_group": 3},
     "key 'n_group': 3 does not divide n_routed_experts (8)"),
    ({**DEEPSEEK_SMALL, "topk_group": 5},
     "key 'topk_group': 5 exceeds n_group (4)"),
    ({**DEEPSEEK_SMALL, "topk_group": 1, "num_experts_per_tok": 3},
     "key 'num_experts_per_tok': 3 exceeds the 2 experts of topk_group (1) groups"),
    ({**DEEPSEEK_SMALL, "first_k_dense_replace": 4},
     "key 'n_routed_experts': no layer is a mixture-of-experts layer (first_k_dense_replace and moe_layer_freq "
     "leave none)"),
    ({**DEEPSEEK_SMALL, "index_n_heads": 8, "index_head_dim": 16, "index_topk": 256},
     "key 'index_head_dim': 16 is less than qk_rope_head_dim (32)"),
    ({**NEMOTRON_H_SMALL, "num_hidden_layers": 5},
     "key 'hybrid_override_pattern': has 6 layer symbols, one per layer, but num_hidden_layers is 5"),
    ({**NEMOTRON_H_SMALL, "n_groups": 5},
     "key 'n_groups': 5 does not divide mamba_num_heads (32)"),
    ({**LLAMA_SMALL, "num_hidden_layers": 20000},
     "key 'num_hidden_layers': 20000 is more than 10,000 layers"),
]
IDS = ["first-dense", "kv-heads", "top-k", "heads-width", "groups", "group-topk", "routable", "no-moe-layer",
       "dsa-rope", "hybrid-length", "mamba-groups", "layer-bound"]


def scenario(tmp_path, doc: dict, **beside) -> tuple:
    """A scenario whose model is `from_hf: config.json` (and `beside` keys next to it), shaped like the quick-start
    example; (the scenario's path, the config's path)."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(doc))
    data = {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}},
            "workload": {"model": {"from_hf": "config.json", **beside},
                         "training": {"num_gpus": 8, "global_batch_size": 8, "sequence_length": 512}}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, config


@pytest.mark.parametrize(("doc", "says"), CASES, ids=IDS)
def test_keys_that_disagree_are_refused_naming_the_file_and_the_keys(tmp_path, doc, says):
    path, config = scenario(tmp_path, doc)
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: workload.model: HuggingFace config {str(config)!r}: {says}"), message
    assert "\n" not in message


@pytest.mark.parametrize(("doc", "says"), CASES[:3], ids=IDS[:3])
def test_keys_that_disagree_are_exit_2_on_the_cli_in_one_line(tmp_path, doc, says):
    path, config = scenario(tmp_path, doc)
    for command in ("memory", "simulate"):
        run = cli(command, str(path))
        assert run.returncode == 2, run.stderr
        assert run.stdout == "" and "Traceback" not in run.stderr
        assert run.stderr.strip() == f"error: {path}: workload.model: HuggingFace config {str(config)!r}: {says}"


def test_the_reader_alone_still_returns_the_block_the_model_refuses(tmp_path):
    """model_from_hf reads the file; the model block's checks run where the block is built (ModelSpec)."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**DEEPSEEK_SMALL, "first_k_dense_replace": 10}))
    assert model_from_hf(config)["moe"]["first_dense_layers"] == 10
    with pytest.raises(ValueError, match="key 'first_k_dense_replace': 10 exceeds num_hidden_layers \\(4\\)"):
        ModelSpec.model_validate({"from_hf": str(config)})


@pytest.mark.parametrize("doc", [DEEPSEEK_SMALL, LLAMA_SMALL, MIXTRAL_SMALL, NEMOTRON_H_SMALL],
                         ids=["deepseek", "llama", "mixtral", "nemotron-h"])
def test_a_config_whose_keys_agree_still_loads(tmp_path, doc):
    path, _ = scenario(tmp_path, doc)
    model = load_scenario(path).workload.model
    assert (model.num_layers, model.hidden_size) == (doc["num_hidden_layers"], doc["hidden_size"])


@pytest.mark.parametrize(("doc", "beside", "says"), [
    ({**DEEPSEEK_SMALL, "first_k_dense_replace": 3}, {"num_layers": 2},
     "workload.model.moe.first_dense_layers: 3 exceeds num_layers (2)"),
    (DEEPSEEK_SMALL, {"moe": {"num_experts": 4, "top_k": 8}}, "workload.model.moe.top_k: 8 exceeds num_experts (4)"),
    (LLAMA_SMALL, {"num_kv_heads": 3}, "workload.model.num_kv_heads: 3 does not divide num_heads 32"),
    ({**LLAMA_SMALL, "num_key_value_heads": 3}, {"num_heads": 30},
     "workload.model.num_heads: 30 does not divide hidden_size 4096"),
], ids=["yaml-layers", "yaml-moe", "yaml-kv-heads", "yaml-heads"])
def test_a_problem_with_a_field_set_beside_from_hf_is_named_under_the_yaml_field(tmp_path, doc, beside, says):
    path, _ = scenario(tmp_path, doc, **beside)
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    assert str(caught.value).startswith(f"{path}: {says}"), str(caught.value)
    assert "HuggingFace config" not in str(caught.value)


def test_a_field_set_beside_from_hf_can_mend_what_the_file_gets_wrong(tmp_path):
    path, _ = scenario(tmp_path, {**LLAMA_SMALL, "num_key_value_heads": 3}, num_kv_heads=4)
    assert load_scenario(path).workload.model.kv_heads == 4


@settings(max_examples=25, deadline=None)
@given(layers=st.integers(1, 64), extra=st.integers(1, 64))
def test_any_first_k_dense_replace_above_the_layers_is_refused_naming_both_keys(tmp_path_factory, layers, extra):
    config = tmp_path_factory.mktemp("hf") / "config.json"
    config.write_text(json.dumps({**DEEPSEEK_SMALL, "num_hidden_layers": layers,
                                  "first_k_dense_replace": layers + extra}))
    with pytest.raises(ValidationError) as caught:
        ModelSpec.model_validate({"from_hf": str(config)})
    cause = caught.value.errors()[0]["ctx"]["error"]
    assert isinstance(cause, HFConfigError)
    assert str(cause) == (f"HuggingFace config {str(config)!r}: key 'first_k_dense_replace': {layers + extra} "
                          f"exceeds num_hidden_layers ({layers})")
