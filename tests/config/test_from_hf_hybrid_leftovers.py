"""HuggingFace configs of hybrid models (Qwen3-Next, Qwen3.5, Nemotron-H): what their families' configuration classes
fill in where a file leaves a key out, their multi-token prediction, and their layer counts."""

from __future__ import annotations

import json

import pytest

from simulon.config.hf import HFConfigError, model_from_hf
from simulon.config.workload import ModelSpec

QWEN3_5_35B_TEXT = {  # Qwen/Qwen3.5-35B-A3B config.json's text_config (shape keys)
    "model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 16,
    "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 248320, "intermediate_size": 512,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "full_attention_interval": 4, "num_experts": 256,
    "num_experts_per_tok": 8, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
    "tie_word_embeddings": False}


def write(tmp_path, doc, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("model_type", ["qwen3_5_text", "qwen3_5_moe_text"])
def test_a_qwen3_5_config_without_rms_norm_eps_or_hidden_act_is_rmsnorm_and_swiglu_as_its_class_defaults(
        tmp_path, model_type):
    # it read as LayerNorm (no rms_norm_eps key), and a file without hidden_act was refused
    wrapped = {"model_type": model_type.removesuffix("_text"), "text_config": {**QWEN3_5_35B_TEXT,
                                                                                "model_type": model_type}}
    block = model_from_hf(write(tmp_path, wrapped))
    assert block["normalization"] == "rmsnorm"
    assert block["activation"] == "swiglu"


NEMOTRON_H_SMALL = {  # a Nemotron-H MoE hybrid's shape keys (NemotronHConfig), four layers
    "model_type": "nemotron_h", "hidden_size": 1024, "intermediate_size": 512, "num_hidden_layers": 4,
    "hybrid_override_pattern": "ME*E", "num_attention_heads": 8, "head_dim": 128, "num_key_value_heads": 2,
    "mlp_hidden_act": "relu2", "mamba_num_heads": 16, "mamba_head_dim": 64, "n_groups": 8, "ssm_state_size": 128,
    "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 512, "vocab_size": 32000}


@pytest.mark.parametrize(("doc", "pattern"), [
    ({**NEMOTRON_H_SMALL, "num_nextn_predict_layers": 2, "mtp_hybrid_override_pattern": "*E"}, "ME*E/*E/*E"),
    ({**NEMOTRON_H_SMALL, "num_nextn_predict_layers": 1, "mtp_layers_block_type": ["attention", "moe"]}, "ME*E/*E"),
    ({**NEMOTRON_H_SMALL, "num_nextn_predict_layers": 0, "mtp_hybrid_override_pattern": "*E"}, "ME*E"),
    ({**QWEN3_5_35B_TEXT, "num_hidden_layers": 4, "mtp_num_hidden_layers": 1}, "GEGEGE*E/*E"),
    ({**QWEN3_5_35B_TEXT, "model_type": "qwen3_next", "num_hidden_layers": 4, "num_nextn_predict_layers": 1},
     "GEGEGE*E/*E"),
])
def test_a_hybrid_configs_mtp_layers_are_read_as_depths_after_a_slash_of_the_blocks_the_family_gives(
        tmp_path, doc, pattern):
    # they were dropped: the decoder read alone, the MTP module's parameters, FLOPs and kernels missing
    block = model_from_hf(write(tmp_path, doc))
    assert block["hybrid_pattern"] == pattern
    depths = pattern.count("/")
    assert block.get("mtp_layers", 0) == depths
    model = ModelSpec.model_validate({"from_hf": str(write(tmp_path, doc))})
    assert model.all_layers == model.num_layers + depths
    if depths:
        assert model.layer_blocks(model.num_layers) == ("mtp", "attention", "moe")


def test_a_nemotron_h_config_with_mtp_layers_but_no_mtp_pattern_reads_its_class_default_attention_then_experts(
        tmp_path):
    # NemotronHConfig's mtp_layers_block_type defaults to ["full_attention", "moe"]; the file was refused
    assert model_from_hf(write(tmp_path, {**NEMOTRON_H_SMALL, "num_nextn_predict_layers": 1}))["hybrid_pattern"] \
        == "ME*E/*E"


JAMBA_1_5_MINI = {  # ai21labs/AI21-Jamba-1.5-Mini config.json (shape keys)
    "model_type": "jamba", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 65536, "attn_layer_period": 8,
    "attn_layer_offset": 4, "expert_layer_period": 2, "expert_layer_offset": 1, "num_experts": 16,
    "num_experts_per_tok": 2, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": 256}


def test_a_jamba_config_is_refused_for_its_mamba_1_layers_not_offered_as_a_mamba_2_hybrid(tmp_path):
    # it said to write the model block with its Mamba mixer as mamba, simulon's Mamba-2 mixer: another model
    with pytest.raises(HFConfigError) as info:
        model_from_hf(write(tmp_path, JAMBA_1_5_MINI))
    message = str(info.value)
    assert "key 'model_type' is 'jamba', Jamba" in message and "are Mamba-1 mixers" in message
    assert "writing the model as one would simulate another model" in message and "as mamba)" not in message


@pytest.mark.parametrize("key", ["layers_block_type", "layer_types"])
def test_a_nemotron_h_config_in_transformers_5s_names_reads_linear_attention_as_its_mamba_layers(tmp_path, key):
    # NemotronHConfig now saves layers_block_type with linear_attention for the Mamba-2 mixer and full_attention for
    # attention (layer_types its alias), and derives num_hidden_layers from it: such a file was refused
    doc = {k: v for k, v in NEMOTRON_H_SMALL.items() if k not in ("hybrid_override_pattern", "num_hidden_layers")}
    doc |= {key: ["linear_attention", "moe", "full_attention", "moe"], "num_nextn_predict_layers": 1,
            f"mtp_{'layers_block_type' if key == 'layers_block_type' else 'layer_types'}": ["full_attention", "mlp"]}
    block = model_from_hf(write(tmp_path, doc))
    assert (block["hybrid_pattern"], block["num_layers"], block["mtp_layers"]) == ("ME*E/*-", 4, 1)
    assert block["mamba"]["num_heads"] == 16 and "gdn" not in block
