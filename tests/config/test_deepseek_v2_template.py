"""The DeepSeek-V2 template routes as its HuggingFace config does: device-limited (group-limited) top-6 routing,
a token's experts in at most 3 of 8 groups (config.json n_group 8, topk_group 3, topk_method group_limited_greedy)."""

from __future__ import annotations

import json

from simulon.config.workload import ModelSpec

DEEPSEEK_V2 = {  # deepseek-ai/DeepSeek-V2 config.json (shape and routing keys)
    "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "hidden_act": "silu",
    "hidden_size": 5120, "intermediate_size": 12288, "moe_intermediate_size": 1536, "n_routed_experts": 160,
    "n_shared_experts": 2, "num_experts_per_tok": 6, "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "n_group": 8, "topk_group": 3, "topk_method": "group_limited_greedy", "routed_scaling_factor": 16.0,
    "num_attention_heads": 128, "num_key_value_heads": 128, "num_hidden_layers": 60, "q_lora_rank": 1536,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "rms_norm_eps": 1e-06,
    "tie_word_embeddings": False, "vocab_size": 102400}


def test_the_template_routes_each_token_to_at_most_3_of_8_expert_groups():
    moe = ModelSpec.model_validate({"from": "deepseek-v2"}).moe
    assert (moe.num_experts, moe.top_k, moe.num_groups, moe.group_topk) == (160, 6, 8, 3)
    assert moe.routable_experts == 3 * 160 // 8  # the experts of the 3 groups chosen: 60


def test_the_hf_config_gives_the_same_routing_as_the_template(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(DEEPSEEK_V2))
    built = ModelSpec.model_validate({"from_hf": str(path)})
    shipped = ModelSpec.model_validate({"from": "deepseek-v2"})
    assert built.moe.model_dump(exclude={"shared_expert_ffn_hidden_size"}) == \
        shipped.moe.model_dump(exclude={"shared_expert_ffn_hidden_size"})
    assert (built.moe.num_groups, built.moe.group_topk) == (8, 3)
    assert (built.num_layers, built.hidden_size, built.mla) == (shipped.num_layers, shipped.hidden_size, shipped.mla)


def test_greedy_routing_ignores_the_groups_the_file_gives(tmp_path):
    """DeepseekV2's topk_method greedy picks the top-k experts whatever their group (n_group and topk_group unread)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**DEEPSEEK_V2, "topk_method": "greedy"}))
    moe = ModelSpec.model_validate({"from_hf": str(path)}).moe
    assert (moe.num_groups, moe.group_topk, moe.routable_experts) == (1, 1, 160)
