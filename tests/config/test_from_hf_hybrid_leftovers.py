"""HuggingFace configs of hybrid models (Qwen3-Next, Qwen3.5, Nemotron-H): what their families' configuration classes
fill in where a file leaves a key out, their multi-token prediction, and their layer counts."""

from __future__ import annotations

import json

import pytest

from simulon.config.hf import model_from_hf

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
