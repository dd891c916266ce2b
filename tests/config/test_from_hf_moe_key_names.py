"""Layouts that newer families write under other key names than DeepSeek's and Gemma's (Ling's and Trinity's
num_shared_experts, Trinity's num_dense_layers and global_attn_every_n_layers) are read, not dropped: a dropped key
read the model as another one, its published size missed by the shared experts or the dense layers left out; one
laying out layers simulon does not model (Ling's linear attention, layer_group_size) is refused naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulon.config.hf import HFConfigError, model_from_hf
from simulon.config.loading import parse_scenario
from simulon.config.workload import ModelSpec
from simulon.memory.model import MemoryModel

LING_LITE = {  # inclusionAI/Ling-lite-1.5 config.json (shape keys): two shared experts, BailingMoeConfig's key
    "architectures": ["BailingMoeForCausalLM"], "model_type": "bailing_moe", "first_k_dense_replace": 0,
    "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 1408, "moe_intermediate_size": 1408,
    "num_experts": 64, "num_shared_experts": 2, "num_attention_heads": 16, "num_experts_per_tok": 6,
    "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "tie_word_embeddings": False,
    "vocab_size": 126464}


def write(tmp_path, doc) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    return str(path)


def parameters(tmp_path, doc) -> tuple[float, float]:
    """(total, active) parameters of the file's model as the memory model counts them on one GPU."""
    data = {"datacenter": "dgx-h100", "workload": {
        "framework": "megatron", "model": {"from_hf": write(tmp_path, doc)}, "parallelism": {"tp": 1, "pp": 1},
        "training": {"num_gpus": 8, "global_batch_size": 8, "micro_batch_size": 1, "sequence_length": 1024}}}
    sc = parse_scenario(data, "scenario")
    stage = MemoryModel.of(sc).states.stage(0)
    moe = sc.workload.model.moe
    return stage.dense_params + stage.expert_params, stage.dense_params + stage.expert_params * moe.top_k / \
        moe.num_experts


def test_lings_num_shared_experts_are_its_shared_experts_and_its_published_size(tmp_path):
    """Ling-lite-1.5 is 16.8B parameters, 2.75B active (its model card); num_shared_experts unread, it was 16.32B
    and 2.27B: 28 layers' two shared experts (0.48B, a sixth of the active parameters) left out."""
    total, active = parameters(tmp_path, LING_LITE)
    assert total == pytest.approx(16.8e9, rel=0.005)
    assert active == pytest.approx(2.75e9, rel=0.01)


TRINITY_MINI = {  # arcee-ai/Trinity-Mini config.json (shape keys): two dense layers first, one shared expert
    "architectures": ["AfmoeForCausalLM"], "model_type": "afmoe", "global_attn_every_n_layers": 4, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 1024,
    "n_group": 1, "num_attention_heads": 32, "num_dense_layers": 2, "num_experts": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 32, "num_key_value_heads": 4, "num_shared_experts": 1, "rms_norm_eps": 1e-05,
    "sliding_window": 2048, "tie_word_embeddings": False, "topk_group": 1, "vocab_size": 200192,
    "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"] * 8}


def test_trinitys_num_dense_layers_keep_its_first_layers_dense_and_its_published_size(tmp_path):
    """Trinity Mini is 26B parameters, 3B active (Arcee's model card), its first two layers dense (AfmoeDecoderLayer:
    `layer_idx < num_dense_layers`); num_dense_layers unread, every layer held 128 experts: 27.4B (with the shared
    expert; 27.2B without)."""
    total, active = parameters(tmp_path, TRINITY_MINI)
    assert total == pytest.approx(26e9, rel=0.01)
    assert active == pytest.approx(3e9, rel=0.1)
    model = ModelSpec.model_validate({"from_hf": write(tmp_path, TRINITY_MINI)})
    assert model.moe.first_dense_layers == 2


def test_trinitys_global_attn_every_n_layers_windows_three_layers_in_four_where_the_file_has_no_layer_types(tmp_path):
    """AfmoeConfig fills layer_types from global_attn_every_n_layers (layer i full where (i + 1) % n == 0), which
    Trinity Nano's file gives without layer_types: it read as 56 layers of full attention, and at 8,192 tokens its
    attention's model FLOPs as four times the window's."""
    without = {k: v for k, v in TRINITY_MINI.items() if k != "layer_types"}
    listed = ModelSpec.model_validate({"from_hf": write(tmp_path, TRINITY_MINI)})
    model = ModelSpec.model_validate({"from_hf": write(tmp_path, without)})
    assert model.sliding_window == listed.sliding_window
    assert [i for i in range(32) if not model.windowed(i)] == list(range(3, 32, 4))
    two = ModelSpec.model_validate({"from_hf": write(tmp_path, {**without, "global_attn_every_n_layers": 2})})
    assert [i for i in range(32) if not two.windowed(i)] == list(range(1, 32, 2))


RING_MINI_LINEAR = {  # inclusionAI/Ring-mini-linear-2.0 config.json (shape keys): Lightning Attention, 4 in 5
    "architectures": ["BailingMoeLinearV2ForCausalLM"], "model_type": "bailing_moe_linear", "hidden_act": "silu",
    "hidden_size": 2048, "intermediate_size": 5120, "moe_intermediate_size": 512, "num_experts": 256,
    "num_experts_per_tok": 8, "num_shared_experts": 1, "first_k_dense_replace": 1, "num_attention_heads": 16,
    "num_key_value_heads": 4, "num_hidden_layers": 20, "layer_group_size": 5, "group_norm_size": 4, "head_dim": 128,
    "rms_norm_eps": 1e-06, "tie_word_embeddings": False, "vocab_size": 157184}


def test_a_ling_linear_model_is_refused_naming_layer_group_size_not_read_as_softmax_attention(tmp_path):
    """Ring-mini-linear-2.0's layers are Lightning Attention but every fifth (BailingMoeLinearV2DecoderLayer: softmax
    where (i + 1) % layer_group_size == 0): read without a word as 20 layers of softmax attention."""
    with pytest.raises(HFConfigError, match=r"key 'layer_group_size' is 5: it lays out linear-attention layers"):
        model_from_hf(Path(write(tmp_path, RING_MINI_LINEAR)))
    assert model_from_hf(Path(write(tmp_path, {**RING_MINI_LINEAR, "layer_group_size": 1})))["num_layers"] == 20


NEMOTRON_3_SUPER = {  # nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16 config.json (shape keys): latent experts
    "model_type": "nemotron_h", "hidden_size": 4096, "num_hidden_layers": 88, "vocab_size": 131072,
    "hybrid_override_pattern": "MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*"
                               "EMEMEMEME",
    "mamba_num_heads": 128, "mamba_head_dim": 64, "n_groups": 8, "ssm_state_size": 128, "conv_kernel": 4,
    "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 5376,
    "n_routed_experts": 512, "n_shared_experts": 1, "num_experts_per_tok": 22, "moe_latent_size": 1024,
    "moe_intermediate_size": 2688, "moe_shared_expert_intermediate_size": 5376, "mlp_hidden_act": "relu2",
    "mtp_hybrid_override_pattern": "*E", "num_nextn_predict_layers": 1, "tie_word_embeddings": False}


def test_latent_experts_are_refused_naming_moe_latent_size_not_read_hidden_size_wide(tmp_path):
    """Nemotron 3 Super (123.6B parameters with its MTP layers, 12.8B active) runs its 512 experts 1,024 wide, not
    4,096: read without a word as 458.6B parameters, 27.0B active."""
    with pytest.raises(HFConfigError, match=r"key 'moe_latent_size' runs the experts in a latent space"):
        model_from_hf(Path(write(tmp_path, NEMOTRON_3_SUPER)))
    nano = {**NEMOTRON_3_SUPER, "moe_latent_size": None}  # NemotronHConfig writes null where the experts are not
    assert model_from_hf(Path(write(tmp_path, nano)))["moe"]["num_experts"] == 512
