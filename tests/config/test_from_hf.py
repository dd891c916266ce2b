"""`model: {from_hf: config.json}`: model blocks from HuggingFace configs agree with the shipped templates built
from the same published configs; bad files and keys are exit 2 naming the file and the key."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from helpers import cli
from simulon.config.errors import ConfigError
from simulon.config.hf import HFConfigError, model_from_hf
from simulon.config.loading import load_scenario, parse_scenario
from simulon.config.workload import ModelSpec
from simulon.memory.model import MemoryModel

LLAMA_31_70B = {  # meta-llama/Llama-3.1-70B config.json (shape keys)
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": 8192,
    "intermediate_size": 28672, "num_attention_heads": 64, "num_hidden_layers": 80, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "tie_word_embeddings": False, "vocab_size": 128256}
MIXTRAL_8X7B = {  # mistralai/Mixtral-8x7B-v0.1 config.json
    "model_type": "mixtral", "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
    "num_experts_per_tok": 2, "rms_norm_eps": 1e-05, "tie_word_embeddings": False, "vocab_size": 32000}
DEEPSEEK_V3 = {  # deepseek-ai/DeepSeek-V3 config.json
    "model_type": "deepseek_v3", "hidden_act": "silu", "hidden_size": 7168, "intermediate_size": 18432,
    "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "first_k_dense_replace": 3, "moe_layer_freq": 1, "n_group": 8, "topk_group": 4, "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "num_hidden_layers": 61, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "rms_norm_eps": 1e-06, "tie_word_embeddings": False,
    "vocab_size": 129280, "num_nextn_predict_layers": 1}
GPT_OSS_20B = {  # openai/gpt-oss-20b config.json
    "model_type": "gpt_oss", "hidden_act": "silu", "hidden_size": 2880, "intermediate_size": 2880, "head_dim": 64,
    "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 24, "num_local_experts": 32,
    "num_experts_per_tok": 4, "experts_per_token": 4, "sliding_window": 128, "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False, "vocab_size": 201088}
QWEN3_235B = {  # Qwen/Qwen3-235B-A22B config.json
    "model_type": "qwen3_moe", "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 12288,
    "moe_intermediate_size": 1536, "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1,
    "mlp_only_layers": [], "head_dim": 128, "num_attention_heads": 64, "num_key_value_heads": 4,
    "num_hidden_layers": 94, "rms_norm_eps": 1e-06, "tie_word_embeddings": False, "vocab_size": 151936}
LLAMA4_SCOUT = {  # meta-llama/Llama-4-Scout-17B-16E config.json: the decoder is under text_config
    "model_type": "llama4", "vision_config": {"hidden_size": 1408}, "text_config": {
        "hidden_act": "silu", "hidden_size": 5120, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
        "head_dim": 128, "num_attention_heads": 40, "num_key_value_heads": 8, "num_hidden_layers": 48,
        "num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1, "rms_norm_eps": 1e-05,
        "vocab_size": 202048}}
NEMOTRON_H_8B = {  # nvidia/Nemotron-H-8B-Base-8K config.json (as Megatron-Bridge's bridge test copies it)
    "model_type": "nemotron_h", "hidden_size": 4096, "intermediate_size": 21504, "num_hidden_layers": 52,
    "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-", "num_attention_heads": 32,
    "attention_head_dim": 128, "num_key_value_heads": 8, "mlp_hidden_act": "relu2", "mamba_num_heads": 128,
    "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4, "chunk_size": 128, "expand": 2,
    "layer_norm_epsilon": 1e-05, "rms_norm_eps": 1e-05, "tie_word_embeddings": False, "vocab_size": 131072,
    "n_routed_experts": 8, "num_experts_per_tok": 2}  # NemotronHConfig's MoE defaults, written though no layer is E
NEMOTRON_3_NANO = {  # nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B config.json (shape keys)
    "model_type": "nemotron_h", "hidden_size": 2688, "intermediate_size": 1856, "num_hidden_layers": 52,
    "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", "num_attention_heads": 32,
    "head_dim": 128, "num_key_value_heads": 2, "mlp_hidden_act": "relu2", "mamba_num_heads": 64,
    "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4, "chunk_size": 128,
    "n_routed_experts": 128, "num_experts_per_tok": 6, "moe_intermediate_size": 1856, "n_shared_experts": 1,
    "moe_shared_expert_intermediate_size": 3712, "n_group": 1, "topk_group": 1, "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False, "vocab_size": 131072}
GLM_45 = {  # zai-org/GLM-4.5 config.json (shape keys)
    "model_type": "glm4_moe", "hidden_act": "silu", "hidden_size": 5120, "intermediate_size": 12288,
    "moe_intermediate_size": 1536, "num_hidden_layers": 92, "num_attention_heads": 96, "num_key_value_heads": 8,
    "head_dim": 128, "n_shared_experts": 1, "n_routed_experts": 160, "num_experts_per_tok": 8,
    "first_k_dense_replace": 3, "n_group": 1, "topk_group": 1, "partial_rotary_factor": 0.5, "use_qk_norm": True,
    "rms_norm_eps": 1e-05, "tie_word_embeddings": False, "vocab_size": 151552, "num_nextn_predict_layers": 1}
GLM_5 = {  # zai-org/GLM-5 config.json (transformers' GlmMoeDsaConfig defaults), whose head_dim is MLA's rotary slice
    "model_type": "glm_moe_dsa", "hidden_act": "silu", "hidden_size": 6144, "intermediate_size": 12288,
    "moe_intermediate_size": 2048, "num_hidden_layers": 78, "num_attention_heads": 64, "num_key_value_heads": 64,
    "head_dim": 64, "n_shared_experts": 1, "n_routed_experts": 256, "num_experts_per_tok": 8,
    "first_k_dense_replace": 3, "n_group": 1, "topk_group": 1, "kv_lora_rank": 512, "q_lora_rank": 2048,
    "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 256, "index_n_heads": 32, "index_head_dim": 128,
    "index_topk": 2048, "rms_norm_eps": 1e-05, "tie_word_embeddings": False, "vocab_size": 154880,
    "num_nextn_predict_layers": 1}
GEMMA_2_27B = {  # google/gemma-2-27b config.json (shape keys): no layer_types, no tie_word_embeddings
    "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "head_dim": 128, "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 4608, "intermediate_size": 36864,
    "num_attention_heads": 32, "num_hidden_layers": 46, "num_key_value_heads": 16, "query_pre_attn_scalar": 144,
    "rms_norm_eps": 1e-06, "sliding_window": 4096, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
    "vocab_size": 256000}
GEMMA_3_27B = {  # google/gemma-3-27b-pt config.json: the decoder under text_config, no layer_types
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "vision_config": {"hidden_size": 1152},
    "text_config": {"model_type": "gemma3_text", "head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504,
                    "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
                    "query_pre_attn_scalar": 168, "sliding_window": 1024, "rms_norm_eps": 1e-06,
                    "vocab_size": 262208}}
SHAPE = ("num_layers", "hidden_size", "num_heads", "kv_heads", "head_size", "vocab_size", "activation",
         "normalization", "tie_embeddings", "mla", "mamba", "hybrid_pattern", "mtp_layers", "sliding_window",
         "position_embedding")


def write(tmp_path, doc, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(("config", "template"), [
    (LLAMA_31_70B, "llama-3.1-70b"), (MIXTRAL_8X7B, "mixtral-8x7b"), (DEEPSEEK_V3, "deepseek-v3"),
    (GPT_OSS_20B, "gpt-oss-20b"), (QWEN3_235B, "qwen3-235b-a22b"), (NEMOTRON_H_8B, "nemotron-h-8b"),
    (NEMOTRON_3_NANO, "nemotron-3-nano-30b-a3b"), (GLM_45, "glm-4.5"), (GLM_5, "glm-5"),
    (GEMMA_2_27B, "gemma-2-27b"), (GEMMA_3_27B, "gemma-3-27b")])
def test_a_hf_config_gives_the_model_its_template_describes(tmp_path, config, template):
    built = ModelSpec.model_validate({"from_hf": str(write(tmp_path, config))})
    shipped = ModelSpec.model_validate({"from": template})
    assert {k: getattr(built, k) for k in SHAPE} == {k: getattr(shipped, k) for k in SHAPE}
    if shipped.moe is None:
        assert built.moe is None and built.ffn_hidden_size == shipped.ffn_hidden_size
    else:
        assert built.moe.model_dump(exclude={"shared_expert_ffn_hidden_size"}) == \
            shipped.moe.model_dump(exclude={"shared_expert_ffn_hidden_size"})


def test_a_hybrid_configs_multi_token_prediction_follows_its_decoder_after_a_slash(tmp_path):
    built = ModelSpec.model_validate({"from_hf": str(write(tmp_path, {
        **NEMOTRON_3_NANO, "num_nextn_predict_layers": 1, "mtp_hybrid_override_pattern": "*E"}))})
    assert built.mtp_layers == 1 and built.hybrid_pattern == NEMOTRON_3_NANO["hybrid_override_pattern"] + "/*E"


def test_a_hybrid_config_given_as_block_names_reads_as_its_pattern(tmp_path):
    names = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    doc = {k: v for k, v in NEMOTRON_3_NANO.items() if k != "hybrid_override_pattern"}
    doc["layers_block_type"] = [names[c] for c in NEMOTRON_3_NANO["hybrid_override_pattern"]]
    built = ModelSpec.model_validate({"from_hf": str(write(tmp_path, doc))})
    assert built.hybrid_pattern == NEMOTRON_3_NANO["hybrid_override_pattern"]
    with pytest.raises(HFConfigError, match="key 'layers_block_type' must be a list of"):
        model_from_hf(write(tmp_path, {**doc, "layers_block_type": ["mamba", "gated_delta_net"]}))


def test_a_multimodal_config_is_read_through_its_text_config_and_the_shared_expert_is_counted(tmp_path):
    scout = ModelSpec.model_validate({"from_hf": str(write(tmp_path, LLAMA4_SCOUT))})
    assert scout.moe.num_shared_experts == 1 and scout.moe.shared_expert_ffn_hidden_size == 8192
    nested = model_from_hf(write(tmp_path, LLAMA4_SCOUT))
    assert (nested["num_layers"], nested["moe"]["num_experts"], nested["moe"]["top_k"]) == (48, 16, 1)


def test_keys_beside_from_hf_override_the_file_relative_to_the_scenario(tmp_path):
    write(tmp_path, LLAMA_31_70B)
    scenario = {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}},
                "workload": {"model": {"from_hf": "config.json", "num_layers": 2},
                             "parallelism": {"tp": 8},
                             "training": {"num_gpus": 8, "global_batch_size": 1, "sequence_length": 512}}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    run = cli("simulate", str(tmp_path / "s.yaml"), "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["num_gpus"] == 8


def test_a_name_from_the_file_never_pulls_in_a_shipped_template(tmp_path):
    """A dense config whose _name_or_path is an MoE model's: the template of that name must not add its experts."""
    path = write(tmp_path, {**LLAMA_31_70B, "_name_or_path": "Qwen/Qwen3-30B-A3B"})
    built = ModelSpec.model_validate({"from_hf": str(path)})
    assert built.moe is None and built.name.startswith("Qwen/Qwen3-30B-A3B")


LLAMA4_MAVERICK = {  # meta-llama/Llama-4-Maverick-17B-128E config.json (text_config shape keys)
    "model_type": "llama4", "text_config": {
        "hidden_act": "silu", "hidden_size": 5120, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
        "head_dim": 128, "num_attention_heads": 40, "num_key_value_heads": 8, "num_hidden_layers": 48,
        "num_local_experts": 128, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2, "rms_norm_eps": 1e-05,
        "vocab_size": 202048}}


def moe_layers(spec: ModelSpec) -> list[int]:
    return [i for i in range(spec.num_layers) if "moe" in spec.layer_blocks(i)]


def test_dense_and_moe_layers_interleave_where_the_config_places_the_experts(tmp_path):
    maverick = ModelSpec.model_validate({"from_hf": str(write(tmp_path, LLAMA4_MAVERICK))})
    shipped = ModelSpec.model_validate({"from": "llama-4-maverick"})
    assert moe_layers(maverick) == moe_layers(shipped) == list(range(1, 48, 2))  # Llama4TextModel's moe_layers
    assert maverick.ffn_hidden_size == shipped.ffn_hidden_size == 16384
    assert maverick.moe.model_dump() == shipped.moe.model_dump()
    qwen = ModelSpec.model_validate({"from_hf": str(write(tmp_path, {**QWEN3_235B, "num_hidden_layers": 6,
                                                                     "decoder_sparse_step": 2,
                                                                     "mlp_only_layers": [3]}))})
    assert moe_layers(qwen) == [1, 5]  # (i + 1) % 2 == 0, layer 3 kept dense
    deepseek = ModelSpec.model_validate({"from_hf": str(write(tmp_path, {**DEEPSEEK_V3, "moe_layer_freq": 2}))})
    assert moe_layers(deepseek) == list(range(4, 61, 2))  # past the three dense layers, i % 2 == 0


def windowed_layers(spec: ModelSpec) -> list[int]:
    return [i for i in range(spec.num_layers) if spec.windowed(i)]


def test_gemmas_mlp_gates_its_gelu_and_its_embeddings_are_tied_unless_the_file_says_otherwise(tmp_path):
    gemma2 = ModelSpec.model_validate({"from_hf": str(write(tmp_path, GEMMA_2_27B))})
    assert (gemma2.activation, gemma2.tie_embeddings) == ("geglu", True)
    untied = model_from_hf(write(tmp_path, {**GEMMA_2_27B, "tie_word_embeddings": False}))
    assert untied["tie_embeddings"] is False
    # GELU outside the Gemma families is not gated (GPT-NeoX's, StarCoder2's MLPs), and an absent key reads untied
    neox = model_from_hf(write(tmp_path, {**GEMMA_2_27B, "model_type": "gpt_neox"}))
    assert (neox["activation"], neox["tie_embeddings"]) == ("gelu", False)
    # Gemma 1 names its activation in hidden_activation, hidden_act left null
    gemma = model_from_hf(write(tmp_path, {**GEMMA_2_27B, "model_type": "gemma", "hidden_act": None}))
    assert gemma["activation"] == "geglu"


def test_sliding_layers_follow_the_configuration_class_where_the_file_leaves_layer_types_out(tmp_path):
    gemma2 = ModelSpec.model_validate({"from_hf": str(write(tmp_path, GEMMA_2_27B))})
    assert windowed_layers(gemma2) == list(range(0, 46, 2))  # Gemma2Config: sliding where (i + 1) % 2
    gemma3 = ModelSpec.model_validate({"from_hf": str(write(tmp_path, GEMMA_3_27B))})
    assert [i for i in range(62) if not gemma3.windowed(i)] == list(range(5, 62, 6))  # (i + 1) % 6 == 0 full
    four = model_from_hf(write(tmp_path, {**GEMMA_3_27B["text_config"], "sliding_window_pattern": 4}))
    assert four["sliding_window"] == {"size": 1024, "full_every": 4}
    phi3 = {"model_type": "phi3", "hidden_act": "silu", "hidden_size": 3072, "intermediate_size": 8192,
            "num_attention_heads": 32, "num_hidden_layers": 32, "vocab_size": 32064, "sliding_window": 2047}
    assert model_from_hf(write(tmp_path, phi3))["sliding_window"] == {"size": 2047, "full_every": 0}
    # Qwen's configs carry a sliding_window their attention does not use (use_sliding_window false)
    assert "sliding_window" not in model_from_hf(write(tmp_path, {**QWEN3_235B, "sliding_window": 131072}))


def test_full_attention_layers_of_their_own_head_size_are_refused_naming_the_key(tmp_path):
    doc = {**GEMMA_3_27B["text_config"], "model_type": "gemma4_text", "hidden_activation": "gelu_pytorch_tanh",
           "head_dim": 256, "global_head_dim": 512}
    with pytest.raises(HFConfigError, match="key 'global_head_dim' gives the full-attention layers a head size of "
                                            "512 beside the others' 256"):
        model_from_hf(write(tmp_path, doc))
    assert model_from_hf(write(tmp_path, {**doc, "global_head_dim": 256}))["head_dim"] == 256


@pytest.mark.parametrize(("key", "says"), [("moe_num_experts", "names experts under a key this reader does not take"),
                                            ("attn_layer_period", "lays out attention among Mamba layers"),
                                            ("expert_layer_period", "lays out experts among the layers")])
def test_experts_or_layers_under_keys_the_reader_does_not_take_are_refused_not_read_as_a_dense_model(tmp_path, key,
                                                                                                   says):
    # ERNIE-4.5-21B-A3B names its 64 experts moe_num_experts; Jamba places attention and experts by period
    with pytest.raises(HFConfigError, match=f"key '{key}' {says}"):
        model_from_hf(write(tmp_path, {**LLAMA_31_70B, key: 8}))
    assert "moe" not in model_from_hf(write(tmp_path, {**LLAMA_31_70B, key: None}))


def test_a_bad_layer_list_is_refused_naming_the_key(tmp_path):
    path = write(tmp_path, {**QWEN3_235B, "mlp_only_layers": [200]})
    with pytest.raises(HFConfigError, match="key 'mlp_only_layers' must be a list of layer indices below 94"):
        model_from_hf(path)


REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size")
BAD_VALUES = st.one_of(st.just(None), st.integers(max_value=0), st.text(max_size=5), st.floats(allow_nan=False),
                       st.booleans(), st.lists(st.integers(), max_size=2))


def scenario_with(tmp_path, config_text: str, ref: str = "config.json"):
    (tmp_path / "config.json").write_text(config_text)
    scenario = {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}},
                "workload": {"model": {"from_hf": ref},
                             "training": {"num_gpus": 8, "global_batch_size": 8, "sequence_length": 512}}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    return tmp_path / "s.yaml"


@given(key=st.sampled_from(REQUIRED), value=BAD_VALUES)
def test_a_missing_or_bad_key_is_bad_input_naming_the_file_and_the_key(tmp_path_factory, key, value):
    doc = dict(LLAMA_31_70B)
    if value is None:
        del doc[key]
    else:
        doc[key] = value
    path = scenario_with(tmp_path_factory.mktemp("hf"), json.dumps(doc))
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: workload.model: ") and "config.json" in message and repr(key) in message


@pytest.mark.parametrize(("text", "says"), [("{not json", "is not valid JSON"),
                                            ("[1, 2]", "does not hold a JSON object")])
def test_a_file_that_is_not_a_config_is_exit_2_on_the_cli(tmp_path, text, says):
    run = cli("simulate", str(scenario_with(tmp_path, text)), "--json")
    assert run.returncode == 2 and says in run.stderr and "config.json" in run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""


def test_a_missing_file_is_bad_input_naming_it(tmp_path):
    with pytest.raises(ConfigError, match=r"cannot read HuggingFace config .*nowhere/config\.json"):
        load_scenario(scenario_with(tmp_path, "{}", ref="nowhere/config.json"))


@pytest.mark.parametrize("ref", ["x" * 300, "x" * 300 + ".json"])
def test_a_from_hf_path_too_long_for_any_file_is_bad_input_naming_it(tmp_path, ref):
    # pathlib's is_dir() raised ENAMETOOLONG: exit 1, "cannot complete the command"
    with pytest.raises(ConfigError, match=r"workload\.model: cannot read HuggingFace config .*: File name too long"):
        load_scenario(scenario_with(tmp_path, "{}", ref=ref))


FAMILIES_WITH_A_SILU_DEFAULT = {"llama": LLAMA_31_70B, "mixtral": MIXTRAL_8X7B, "deepseek_v3": DEEPSEEK_V3,
                                "qwen3_moe": QWEN3_235B}


@pytest.mark.parametrize("family", sorted(FAMILIES_WITH_A_SILU_DEFAULT))
def test_a_file_without_its_activation_gets_its_familys_default_not_gelu(tmp_path, family):
    # LlamaConfig, MixtralConfig, DeepseekV3Config and Qwen3MoeConfig default hidden_act to silu: a SwiGLU MLP, whose
    # gate is a third of its weights; read as GELU it would lose them
    named = FAMILIES_WITH_A_SILU_DEFAULT[family]
    unnamed = {k: v for k, v in named.items() if k != "hidden_act"}
    assert model_from_hf(write(tmp_path, unnamed)) == model_from_hf(write(tmp_path, named))
    assert model_from_hf(write(tmp_path, unnamed))["activation"] == "swiglu"


def test_nemotron_h_without_its_activation_reads_squared_relu_and_gemma_gated_gelu(tmp_path):
    nemotron = {k: v for k, v in NEMOTRON_H_8B.items() if k != "mlp_hidden_act"}
    assert model_from_hf(write(tmp_path, nemotron))["activation"] == "squared_relu"
    gemma = {k: v for k, v in GEMMA_2_27B.items() if k not in ("hidden_act", "hidden_activation")}
    assert model_from_hf(write(tmp_path, gemma))["activation"] == "geglu"


@pytest.mark.parametrize("model_type", [None, "", "my_own_family"])
def test_a_file_of_an_unknown_family_without_its_activation_is_refused_naming_hidden_act(tmp_path, model_type):
    doc = {k: v for k, v in LLAMA_31_70B.items() if k not in ("hidden_act", "model_type")}
    if model_type is not None:
        doc["model_type"] = model_type
    with pytest.raises(HFConfigError, match=r"key 'hidden_act' is missing, and .* has no default simulon knows"):
        model_from_hf(write(tmp_path, doc))
    assert model_from_hf(write(tmp_path, {**doc, "hidden_act": "silu"}))["activation"] == "swiglu"


def test_a_key_given_twice_is_refused_naming_it(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama", "hidden_size": 2048, "hidden_size": 4096}')
    with pytest.raises(HFConfigError, match="key 'hidden_size' is given twice"):
        model_from_hf(path)


def test_a_null_flag_reads_as_its_configuration_class_default(tmp_path):
    assert model_from_hf(write(tmp_path, {**LLAMA_31_70B, "tie_word_embeddings": None}))["tie_embeddings"] is False
    assert model_from_hf(write(tmp_path, {**GEMMA_2_27B, "tie_word_embeddings": None}))["tie_embeddings"] is True


def test_a_block_starting_from_a_template_and_a_config_file_is_refused(tmp_path):
    path = str(write(tmp_path, LLAMA_31_70B))
    for block in ({"from_hf": path, "from": "deepseek-v3"}, {"from": "deepseek-v3", "from_hf": path}):
        with pytest.raises(ValidationError, match=r"give one of 'from' .* and 'from_hf' .* not both"):
            ModelSpec.model_validate(block)


KIMI_K2 = {  # moonshotai/Kimi-K2-Instruct config.json: DeepSeek-V3's architecture, no multi-token prediction module
    **DEEPSEEK_V3, "architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "first_k_dense_replace": 1,
    "n_routed_experts": 384, "num_attention_heads": 64, "num_key_value_heads": 64, "n_group": 1, "topk_group": 1,
    "vocab_size": 163840, "num_nextn_predict_layers": 0}


def parameters(model) -> float:
    """The model's parameters, as the memory model counts them on one GPU (no parallelism)."""
    data = {"datacenter": "dgx-h100", "workload": {
        "framework": "megatron", "model": model, "parallelism": {"tp": 1, "pp": 1},
        "training": {"num_gpus": 8, "global_batch_size": 8, "micro_batch_size": 1, "sequence_length": 1024}}}
    stage = MemoryModel.of(parse_scenario(data, "scenario")).states.stage(0)
    return stage.dense_params + stage.expert_params


@pytest.mark.parametrize(("config", "template", "published"), [
    (LLAMA4_SCOUT, "llama-4-scout", 109e9), (LLAMA4_MAVERICK, "llama-4-maverick", 400e9)])
def test_llama_4s_experts_always_share_one_expert_as_wide_as_a_routed_one(tmp_path, config, template, published):
    # Llama4TextMoe builds its shared_expert (a Llama4TextMLP of intermediate_size) whatever the config says; no key
    # names it. Meta's totals (109B, 400B) count the vision encoder too, which simulon does not model.
    built = parameters({"from_hf": str(write(tmp_path, config))})
    assert built == parameters(template) == pytest.approx(published, rel=0.02)


def test_a_count_of_zero_reads_as_none_where_the_configuration_class_counts_from_zero(tmp_path):
    # Kimi K2 ships num_nextn_predict_layers 0: no multi-token prediction module
    assert parameters({"from_hf": str(write(tmp_path, KIMI_K2))}) == parameters("kimi-k2") == \
        pytest.approx(1026.408e9, rel=1e-6)
    no_shared = model_from_hf(write(tmp_path, {**DEEPSEEK_V3, "n_shared_experts": 0}))
    assert no_shared["moe"]["num_shared_experts"] == 0 and "shared_expert_ffn_hidden_size" not in no_shared["moe"]
    for key in ("num_nextn_predict_layers", "n_shared_experts", "first_k_dense_replace"):
        with pytest.raises(HFConfigError, match=f"key '{key}' must be a non-negative integer \\(0: none\\), got -1"):
            model_from_hf(write(tmp_path, {**KIMI_K2, key: -1}))


def test_llama_4_s_nope_layers_read_from_no_rope_layers_or_their_interval(tmp_path):
    """Llama4TextConfig: no_rope_layers 0 marks a NoPE layer; unset, every no_rope_layer_interval-th (4) is one."""
    text = LLAMA4_SCOUT["text_config"]
    assert model_from_hf(write(tmp_path, LLAMA4_SCOUT))["nope_every"] == 4
    assert ModelSpec.model_validate({"from": "llama-4-scout"}).nope_every == 4
    flags = [int((i + 1) % 3 != 0) for i in range(48)]
    every_third = {**LLAMA4_SCOUT, "text_config": {**text, "no_rope_layers": flags}}
    assert model_from_hf(write(tmp_path, every_third))["nope_every"] == 3
    interval = {**LLAMA4_SCOUT, "text_config": {**text, "no_rope_layer_interval": 6}}
    assert model_from_hf(write(tmp_path, interval))["nope_every"] == 6
    types = ["chunked_attention"] * 3 + ["full_attention"]
    scattered = {**LLAMA4_SCOUT, "text_config": {**text, "layer_types": types * 12,
                                                  "no_rope_layers": [0] + [1] * 46 + [0]}}
    with pytest.raises(HFConfigError, match=r"NoPE layers .* not every N-th layer"):
        model_from_hf(write(tmp_path, scattered))
    assert "nope_every" not in model_from_hf(write(tmp_path, QWEN3_235B))  # every layer rotates


GPT_OSS_LAYERS = ["sliding_attention", "full_attention"] * 12


@pytest.mark.parametrize(("layer_types", "says"), [
    (["sliding_attention", "chunked_attention"] * 12, "names 'chunked_attention' (layer 1) beside sliding_window"),
    (GPT_OSS_LAYERS[:2], "has 2 entries, but num_hidden_layers is 24"),
    (GPT_OSS_LAYERS + GPT_OSS_LAYERS[:2], "has 26 entries, but num_hidden_layers is 24"),
    ("sliding_attention", "must be a list of sliding_attention, full_attention, one per layer"),
])
def test_layer_types_beside_a_sliding_window_must_give_each_layer_a_kind_simulon_models(tmp_path, layer_types, says):
    assert model_from_hf(write(tmp_path, {**GPT_OSS_20B, "layer_types": GPT_OSS_LAYERS}))["sliding_window"] == \
        {"size": 128, "full_every": 2}
    with pytest.raises(HFConfigError, match=rf"config\.json'?: key 'layer_types' {re.escape(says)}"):
        model_from_hf(write(tmp_path, {**GPT_OSS_20B, "layer_types": layer_types}))


LLAMA_3_8B = {**LLAMA_31_70B, "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
              "num_hidden_layers": 32, "num_key_value_heads": 8}  # meta-llama/Meta-Llama-3-8B config.json


GATED = {("llama", "gelu"): "geglu", ("mistral", "gelu_pytorch_tanh"): "geglu", ("qwen2", "relu"): "swiglu",
         ("llama", "silu"): "swiglu", ("gpt_neox", "gelu"): "gelu", ("nemotron", "relu2"): "squared_relu"}


def test_a_family_whose_mlp_always_gates_reads_gated_whatever_its_activation(tmp_path):
    # LlamaMLP, MistralMLP and Qwen2MLP are down_proj(act(gate_proj x) * up_proj x) for any hidden_act; GPT-NeoX's
    # and Nemotron's MLPs have no gate
    read = {(model_type, act): model_from_hf(write(tmp_path, {**LLAMA_3_8B, "model_type": model_type,
                                                              "hidden_act": act}))["activation"]
            for model_type, act in GATED}
    assert read == GATED


def test_a_llama_with_a_gelu_keeps_its_gate_and_its_8b_parameters(tmp_path):
    gelu = parameters({"from_hf": str(write(tmp_path, {**LLAMA_3_8B, "hidden_act": "gelu"}))})
    assert gelu == parameters("llama-3-8b") == pytest.approx(8.03e9, rel=1e-3)


TYPED_KEYS = ("first_k_dense_replace", "n_shared_experts", "num_nextn_predict_layers", "n_group", "topk_group",
              "moe_layer_freq")
MISTYPED = st.one_of(st.text(max_size=4), st.floats(allow_nan=False), st.booleans(), st.integers(max_value=-1),
                     st.lists(st.integers(), max_size=2))


@given(key=st.sampled_from(TYPED_KEYS), value=MISTYPED)
def test_a_mistyped_key_is_refused_naming_the_config_file_and_its_key_not_the_yaml_field(tmp_path_factory, key,
                                                                                         value):
    path = scenario_with(tmp_path_factory.mktemp("hf"), json.dumps({**DEEPSEEK_V3, key: value}))
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    assert str(caught.value).startswith(f"{path}: workload.model: HuggingFace config ")
    assert f"config.json': key {key!r} must be" in str(caught.value)


@pytest.mark.parametrize(("key", "also"), [("num_hidden_layers", "(nor is it given as 'n_layer' or 'num_layers')"),
                                           ("num_attention_heads", "(nor is it given as 'n_head')"),
                                           ("vocab_size", None)])
def test_a_missing_key_names_every_key_the_field_may_be_given_as(tmp_path, key, also):
    """A field read from one of several keys (GPT-2's n_layer for num_hidden_layers): the error says which would do."""
    doc = dict(LLAMA_31_70B)
    del doc[key]
    with pytest.raises(ConfigError) as caught:
        load_scenario(scenario_with(tmp_path, json.dumps(doc)))
    message = str(caught.value)
    assert f"key {key!r} is missing" in message
    assert (also in message) if also else "nor is it given as" not in message


def test_a_family_that_normalizes_with_rmsnorm_is_rmsnorm_though_its_file_leaves_out_rms_norm_eps_and_gpt2_reads(
        tmp_path):
    no_eps = {k: v for k, v in LLAMA_31_70B.items() if k != "rms_norm_eps"}
    assert model_from_hf(write(tmp_path, no_eps))["normalization"] == "rmsnorm"
    gpt2 = {"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "n_inner": None, "vocab_size": 50257,
            "layer_norm_epsilon": 1e-05, "activation_function": "gelu_new"}  # openai-community/gpt2's config.json
    block = model_from_hf(write(tmp_path, gpt2))
    assert (block["normalization"], block["ffn_hidden_size"], block["activation"]) == ("layernorm", 3072, "gelu")


def test_gemma_3s_text_config_written_as_a_diff_from_its_class_defaults_gets_the_class_vocabulary(tmp_path):
    """A multimodal checkpoint's text_config holds only what differs from Gemma3TextConfig (no vocab_size, no
    rms_norm_eps): the decoder is the class's 262,208-entry, RMSNorm one."""
    text = {k: v for k, v in GEMMA_3_27B["text_config"].items() if k not in ("vocab_size", "rms_norm_eps")}
    block = model_from_hf(write(tmp_path, {**GEMMA_3_27B, "text_config": text}))
    assert (block["vocab_size"], block["normalization"]) == (262208, "rmsnorm")
    with pytest.raises(HFConfigError, match="key 'vocab_size' is missing"):  # a Llama file must give its own
        model_from_hf(write(tmp_path, {k: v for k, v in LLAMA_31_70B.items() if k != "vocab_size"}))


@pytest.mark.parametrize("model_type", ["mamba2"])
def test_a_family_the_reader_does_not_build_is_refused_by_its_model_type_not_by_a_missing_key(tmp_path, model_type):
    doc = {"model_type": model_type, "hidden_size": 2560, "num_hidden_layers": 64, "vocab_size": 50280}
    with pytest.raises(HFConfigError, match=rf"key 'model_type' is '{model_type}', .*write its model block yourself"):
        model_from_hf(write(tmp_path, doc))


FALCON_MAMBA_7B = {  # tiiuae/falcon-mamba-7b config.json (shape keys)
    "architectures": ["FalconMambaForCausalLM"], "model_type": "falcon_mamba", "hidden_size": 4096,
    "num_hidden_layers": 64, "intermediate_size": 8192, "state_size": 16, "expand": 16, "conv_kernel": 4,
    "time_step_rank": 256, "vocab_size": 65024, "hidden_act": "silu", "layer_norm_epsilon": 1e-05,
    "tie_word_embeddings": False}


@pytest.mark.parametrize("model_type", ["falcon_mamba", "mamba"])
@given(heads=st.one_of(st.none(), st.integers(1, 128)))
def test_a_pure_mamba_1_model_is_refused_as_no_transformer_whatever_attention_keys_it_carries(tmp_path_factory,
                                                                                               model_type, heads):
    """Falcon Mamba was refused for a missing num_attention_heads, and read as a transformer where a file gave one;
    simulon's Mamba mixer is Mamba-2's, so a Mamba-1 model is not offered as one either."""
    doc = {**FALCON_MAMBA_7B, "model_type": model_type,
           **({"num_attention_heads": heads} if heads is not None else {})}
    with pytest.raises(HFConfigError, match=rf"key 'model_type' is '{model_type}', a pure Mamba-1 model .*no "
                                            r"transformer: its layers are Mamba-1 mixers .*does not model"):
        model_from_hf(write(tmp_path_factory.mktemp("mamba"), doc))


def test_falcon_mamba_from_hf_is_exit_2_naming_the_file_and_the_family(tmp_path):
    run = cli("simulate", str(scenario_with(tmp_path, json.dumps(FALCON_MAMBA_7B))), "--json")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert re.search(r"config\.json'?: key 'model_type' is 'falcon_mamba', a pure Mamba-1 model", run.stderr)


@pytest.mark.parametrize(("model_type", "key"), [("bamba", "mamba_d_state"), ("falcon_h1", "mamba_d_state"),
                                                 ("some_new_ssm", "ssm_state_size"), ("", "state_size")])
def test_a_file_sizing_a_mamba_mixer_without_a_layer_layout_is_refused_not_read_as_all_attention(tmp_path, model_type,
                                                                                                 key):
    """Bamba and Falcon-H1 configs carry a transformer's keys beside their Mamba mixers' and were read as
    transformers of attention layers alone."""
    doc = {**LLAMA_31_70B, "model_type": model_type, key: 128}
    with pytest.raises(HFConfigError, match=rf"key '{key}' sizes a state-space \(Mamba\) mixer, but the file .*lays "
                                            r"out its layers under no key this reader takes"):
        model_from_hf(write(tmp_path, doc))


def test_a_hybrid_that_lays_out_its_mamba_layers_is_still_read(tmp_path):
    assert model_from_hf(write(tmp_path, NEMOTRON_H_8B))["hybrid_pattern"].count("M") == 24


def test_from_hf_given_a_checkpoint_folder_reads_its_config_json(tmp_path):
    (tmp_path / "llama").mkdir()
    write(tmp_path / "llama", LLAMA_31_70B)
    assert ModelSpec.model_validate({"from_hf": "llama"}, context={"base_dir": tmp_path}).num_layers == 80


def test_from_hf_under_the_home_folder_expands_its_tilde_as_a_shell_does(tmp_path, monkeypatch):
    """'~/models/llama' was read as a folder named '~' beside the scenario: no such file."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "models" / "llama").mkdir(parents=True)
    write(tmp_path / "home" / "models" / "llama", LLAMA_31_70B)
    spec = ModelSpec.model_validate({"from_hf": "~/models/llama"}, context={"base_dir": tmp_path / "elsewhere"})
    assert spec.num_layers == 80


def test_a_hub_model_id_given_as_a_path_is_refused_pointing_to_from(tmp_path):
    with pytest.raises(ValidationError, match=r"no such file; a model on the HuggingFace Hub is named "
                                              r"with `from: meta-llama/Llama-3.1-8B`"):
        ModelSpec.model_validate({"from_hf": "meta-llama/Llama-3.1-8B"}, context={"base_dir": tmp_path})


def test_a_missing_json_file_in_a_folder_is_named_as_a_missing_file_not_a_hub_id(tmp_path):
    with pytest.raises(ValidationError, match=r"cannot read HuggingFace config '.*configs/llama\.json': No such file") \
            as raised:
        ModelSpec.model_validate({"from_hf": "configs/llama.json"}, context={"base_dir": tmp_path})
    assert "Hub" not in str(raised.value)


@pytest.mark.parametrize(("config", "template"), [
    ({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "n_inner": None, "vocab_size": 50257,
      "activation_function": "gelu_new"}, "gpt2-125m"),  # openai-community/gpt2's config.json (shape keys)
    ({"model_type": "opt", "num_hidden_layers": 24, "hidden_size": 1024, "num_attention_heads": 16, "ffn_dim": 4096,
      "vocab_size": 50272, "activation_function": "relu"}, "opt-350m"),  # facebook/opt-350m's
])
def test_a_family_whose_configuration_class_ties_the_embeddings_reads_tied_where_the_file_leaves_the_key_out(
        tmp_path, config, template):
    """save_pretrained leaves out a value equal to its class's default: GPT2Config's and OPTConfig's is tied, so their
    files never write it. Read untied, GPT-2 small counted 162M parameters for its 124M."""
    assert model_from_hf(write(tmp_path, config))["tie_embeddings"] is True
    assert ModelSpec.model_validate({"from": template}).tie_embeddings is True
    assert model_from_hf(write(tmp_path, {**config, "tie_word_embeddings": False}))["tie_embeddings"] is False
    assert model_from_hf(write(tmp_path, LLAMA_31_70B | {"tie_word_embeddings": None}))["tie_embeddings"] is False


@pytest.mark.parametrize(("doc", "says"), [
    ({"model_type": "bert", "architectures": ["BertForMaskedLM"]}, "key 'model_type' is 'bert', an encoder-only"),
    ({"model_type": "modernbert"}, "encoder-only"),
    ({"model_type": "t5", "is_encoder_decoder": True}, "key 'model_type' is 't5', an encoder-decoder"),
    ({"model_type": "my_seq2seq", "is_encoder_decoder": True}, "key 'is_encoder_decoder' says the model is an "
                                                                "encoder-decoder"),
])
def test_an_encoder_only_or_encoder_decoder_config_is_refused_not_read_as_a_decoder(tmp_path, doc, says):
    """bert-base-uncased's config.json read as a 12-layer decoder (its keys are the decoder's)."""
    shape = {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072,
             "vocab_size": 30522, "hidden_act": "gelu"}
    with pytest.raises(HFConfigError, match=re.escape(says)):
        model_from_hf(write(tmp_path, shape | doc))
    assert model_from_hf(write(tmp_path, shape | {"model_type": "my_decoder", "is_encoder_decoder": False}))


def test_linear_attention_layers_without_their_heads_are_refused_not_read_as_attention(tmp_path):
    doc = {**LLAMA_31_70B, "num_hidden_layers": 4, "model_type": "qwen3_next",
           "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"]}
    with pytest.raises(HFConfigError, match="key 'linear_num_value_heads' missing: layer_types names linear_attention"):
        model_from_hf(write(tmp_path, doc))
    gdn = {"linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
           "linear_value_head_dim": 128}
    assert model_from_hf(write(tmp_path, {**doc, **gdn}))["hybrid_pattern"] == "G-G-G-*-"


def test_a_hub_model_id_with_no_shipped_template_is_not_pointed_to_a_from_that_fails(tmp_path):
    # it was told to write `from: acme/SuperLM-9B`, which is refused as an unknown model template
    with pytest.raises(ValidationError, match=r"no such file; no shipped template is 'acme/SuperLM-9B', and simulon "
                                              r"reads nothing from the HuggingFace Hub: download") as raised:
        ModelSpec.model_validate({"from_hf": "acme/SuperLM-9B"}, context={"base_dir": tmp_path})
    assert "from:" not in str(raised.value)
    with pytest.raises(ValidationError, match=r"`from: meta-llama/Llama-3.1-8B` \(the shipped template llama-3.1-8b\)"):
        ModelSpec.model_validate({"from_hf": "meta-llama/Llama-3.1-8B"}, context={"base_dir": tmp_path})


def test_a_mixtral_config_with_a_sliding_window_windows_every_layer_as_mistrals_does(tmp_path):
    # MixtralAttention is MistralAttention's copy: the window was dropped (full attention in every layer)
    windowed = model_from_hf(write(tmp_path, {**MIXTRAL_8X7B, "sliding_window": 4096}))
    assert windowed["sliding_window"] == {"size": 4096, "full_every": 0}
    assert "sliding_window" not in model_from_hf(write(tmp_path, {**MIXTRAL_8X7B, "sliding_window": None}))


def test_a_model_template_file_may_start_from_a_hf_config_beside_it(tmp_path):
    # was "from_hf: unknown key (and 5 more problems)": a model file could start from a template, not a config.json
    (tmp_path / "models").mkdir()
    write(tmp_path / "models", LLAMA_31_70B)
    (tmp_path / "models" / "llama.yaml").write_text("from_hf: config.json\nnum_layers: 4\n")
    (tmp_path / "models" / "narrow.yaml").write_text("from: llama.yaml\nhidden_size: 4096\n")
    (tmp_path / "runs").mkdir()
    model = ModelSpec.model_validate({"from": "../models/narrow.yaml"}, context={"base_dir": tmp_path / "runs"})
    assert (model.num_layers, model.hidden_size, model.ffn_hidden_size, model.kv_heads) == (4, 4096, 28672, 8)
    (tmp_path / "models" / "missing.yaml").write_text("from_hf: nope.json\n")
    with pytest.raises(ValidationError, match=r"template file '.*missing\.yaml': cannot read HuggingFace config "
                                              r"'.*models/nope\.json': No such file"):
        ModelSpec.model_validate({"from": "../models/missing.yaml"}, context={"base_dir": tmp_path / "runs"})


GEMMA_3_12B = {  # google/gemma-3-12b-pt config.json: text_config writes only what differs from Gemma3TextConfig
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "mm_tokens_per_image": 256,
    "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model", "num_hidden_layers": 27},
    "text_config": {"hidden_size": 3840, "intermediate_size": 15360, "model_type": "gemma3_text",
                    "num_attention_heads": 16, "num_hidden_layers": 48, "num_key_value_heads": 8,
                    "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024}}
GEMMA_3_4B = {  # google/gemma-3-4b-pt config.json: its 8 query and 4 KV heads are Gemma3TextConfig's defaults
    **GEMMA_3_12B, "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                                   "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                                   "sliding_window": 1024}}


def test_gemma_3s_text_config_leaving_its_heads_to_the_class_defaults_reads_the_class_heads_not_hidden_over_heads(
        tmp_path):
    """Gemma 3 12B's head_dim is Gemma3TextConfig's 256 (not 3840 / 16 = 240, 11.62B parameters where the template
    has 11.77B); Gemma 3 4B's file gives no heads at all (8 query, 4 KV of 256: the Gemma 3 report's 4B)."""
    built = ModelSpec.model_validate({"from_hf": str(write(tmp_path, GEMMA_3_12B))})
    shipped = ModelSpec.model_validate({"from": "gemma-3-12b"})
    assert {k: getattr(built, k) for k in SHAPE} == {k: getattr(shipped, k) for k in SHAPE}
    small = ModelSpec.model_validate({"from_hf": str(write(tmp_path, GEMMA_3_4B))})
    assert (small.num_heads, small.kv_heads, small.head_size, small.vocab_size) == (8, 4, 256, 262208)
    assert small.sliding_window.model_dump() == {"size": 1024, "full_every": 6, "chunked": False}


def test_llama_4s_moe_layers_place_the_experts_over_its_interleave_step(tmp_path):
    """Llama4TextConfig fills moe_layers from interleave_moe_layer_step only where the file leaves it out, and
    Llama4TextDecoderLayer holds experts where `layer_idx in config.moe_layers` (transformers' save_pretrained writes
    it): experts every fourth layer are 12 MoE layers, not the step's 24."""
    text = LLAMA4_MAVERICK["text_config"]
    written = {**LLAMA4_MAVERICK, "text_config": {**text, "moe_layers": list(range(1, 48, 2))}}
    assert ModelSpec.model_validate({"from_hf": str(write(tmp_path, written))}).moe == \
        ModelSpec.model_validate({"from": "llama-4-maverick"}).moe
    fourth = {**LLAMA4_MAVERICK, "text_config": {**text, "moe_layers": list(range(3, 48, 4))}}
    model = ModelSpec.model_validate({"from_hf": str(write(tmp_path, fourth))})
    assert list(model.moe.layer_freq) == [int(i % 4 == 3) for i in range(48)]
    every = {**LLAMA4_MAVERICK, "text_config": {**text, "moe_layers": list(range(48))}}
    assert ModelSpec.model_validate({"from_hf": str(write(tmp_path, every))}).moe.layer_freq == 1
    bad = {**LLAMA4_MAVERICK, "text_config": {**text, "moe_layers": [1, 48]}}
    with pytest.raises(ValidationError, match="key 'moe_layers' must be a list of layer indices below 48"):
        ModelSpec.model_validate({"from_hf": str(write(tmp_path, bad))})


MINIMAX_M1 = {  # MiniMaxAI/MiniMax-M1-80k config.json (shape keys): lightning attention in seven layers of eight
    "model_type": "minimax_m1", "attn_type_list": ([0] * 7 + [1]) * 10, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 6144, "intermediate_size": 9216, "num_attention_heads": 64, "num_experts_per_tok": 2,
    "num_hidden_layers": 80, "num_key_value_heads": 8, "num_local_experts": 32, "rms_norm_eps": 1e-05,
    "rotary_dim": 64, "shared_intermediate_size": 0, "tie_word_embeddings": False, "vocab_size": 200064}
GRANITE_4_H = {  # ibm-granite/granite-4.0-h-small config.json (shape keys): Mamba-2 layers, attention in 4 of 40
    "model_type": "granitemoehybrid", "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 512,
    "layer_types": (["mamba"] * 9 + ["attention"]) * 4, "mamba_d_state": 128, "mamba_n_heads": 128,
    "mamba_d_head": 64, "num_attention_heads": 32, "num_experts_per_tok": 10, "num_hidden_layers": 40,
    "num_key_value_heads": 8, "num_local_experts": 72, "rms_norm_eps": 1e-05, "shared_intermediate_size": 1024,
    "tie_word_embeddings": True, "vocab_size": 100352}
LFM2_1_2B = {  # LiquidAI/LFM2-1.2B config.json (shape keys, with an activation named): short convolutions
    "model_type": "lfm2", "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 12288,
    "layer_types": ["conv", "conv", "full_attention"] * 5 + ["conv"], "num_attention_heads": 32,
    "num_hidden_layers": 16, "num_key_value_heads": 8, "vocab_size": 65536}

KIMI_LINEAR = {  # moonshotai/Kimi-Linear-48B-A3B-Instruct's layout: Kimi Delta Attention in three layers of four, MLA
    **KIMI_K2, "model_type": "kimi_linear", "num_hidden_layers": 24, "linear_attn_config": {
        "num_heads": 32, "head_dim": 128, "short_conv_kernel_size": 4,
        "kda_layers": [i for i in range(1, 25) if i % 4], "full_attn_layers": list(range(4, 25, 4))}}


@pytest.mark.parametrize(("doc", "says"), [
    (MINIMAX_M1, "key 'attn_type_list' marks layer 0 0: MiniMax's lightning attention"),
    ({**{k: v for k, v in MINIMAX_M1.items() if k != "attn_type_list"}, "model_type": "minimax",  # transformers'
      "layer_types": ["linear_attention" if t == 0 else "full_attention" for t in MINIMAX_M1["attn_type_list"]]},
     "key 'layer_types' names 'linear_attention' layers (layer 0): MiniMax's lightning attention"),
    (GRANITE_4_H, "key 'layer_types' names 'mamba' layers (layer 0), which this reader does not take"),
    (LFM2_1_2B, "key 'layer_types' names 'conv' layers (layer 0), which this reader does not take"),
    (KIMI_LINEAR, "key 'linear_attn_config' lays out Kimi Delta Attention layers"),
])
def test_layers_of_a_kind_the_reader_does_not_take_are_refused_not_read_as_attention_layers(tmp_path, doc, says):
    """MiniMax-M1 read as 80 softmax-attention layers (70 are lightning attention), Granite 4.0-H as 40 (36 are
    Mamba-2), LFM2 as 16 (10 are convolutions), Kimi Linear as all MLA (three layers in four are KDA), each without a
    word."""
    with pytest.raises(HFConfigError, match=re.escape(says)):
        model_from_hf(write(tmp_path, doc))
    all_softmax = {**MINIMAX_M1, "model_type": "minimax_m2", "attn_type_list": [1] * 80}  # MiniMax-M2's
    assert model_from_hf(write(tmp_path, all_softmax))["num_layers"] == 80


def test_a_sub_block_beside_from_hf_overrides_its_keys_alone_as_beside_a_template(tmp_path):
    """`moe: {top_k: 4}` beside from_hf replaced the file's whole MoE block (refused: num_experts missing), and
    `sliding_window: {size: 512}` dropped Gemma 3's full_every 6 (every layer windowed) where beside `from` the other
    keys stay."""
    qwen = str(write(tmp_path, {**QWEN3_235B}, "qwen.json"))
    gemma = str(write(tmp_path, GEMMA_3_12B, "gemma.json"))
    for written, template, change in ((qwen, "qwen3-235b-a22b", {"moe": {"top_k": 4}}),
                                      (gemma, "gemma-3-12b", {"sliding_window": {"size": 512}})):
        built = ModelSpec.model_validate({"from_hf": written, **change})
        shipped = ModelSpec.model_validate({"from": template, **change})
        assert built.model_dump(exclude={"name"}) == shipped.model_dump(exclude={"name"})
    assert ModelSpec.model_validate({"from_hf": gemma, "sliding_window": {"size": 512}}).sliding_window.full_every == 6


STARCODER = {  # bigcode/starcoder config.json (shape keys): multi-query attention, GPTBigCodeConfig's default too
    "model_type": "gpt_bigcode", "activation_function": "gelu_pytorch_tanh", "layer_norm_epsilon": 1e-05,
    "multi_query": True, "n_embd": 6144, "n_head": 48, "n_inner": 24576, "n_layer": 40, "n_positions": 8192,
    "vocab_size": 49152}


def test_starcoders_multi_query_attention_reads_one_key_value_head_and_its_published_15_5b_parameters(tmp_path):
    """GPTBigCodeAttention projects one key and one value head where multi_query (true unless the file says false):
    read as 48, StarCoder had 18.4B parameters, not its 15.5B."""
    block = model_from_hf(write(tmp_path, STARCODER))
    assert (block["num_heads"], block["num_kv_heads"]) == (48, 1)
    assert parameters({"from_hf": str(write(tmp_path, STARCODER))}) == pytest.approx(15.5e9, rel=0.01)
    assert model_from_hf(write(tmp_path, {k: v for k, v in STARCODER.items() if k != "multi_query"}))[
        "num_kv_heads"] == 1
    assert model_from_hf(write(tmp_path, {**STARCODER, "multi_query": False}))["num_kv_heads"] == 48


GPT2 = {  # openai-community/gpt2 config.json (shape and dropout keys)
    "model_type": "gpt2", "activation_function": "gelu_new", "attn_pdrop": 0.1, "embd_pdrop": 0.1,
    "layer_norm_epsilon": 1e-05, "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
    "resid_pdrop": 0.1, "summary_first_dropout": 0.1, "vocab_size": 50257}


def test_the_files_dropout_is_read_so_gpt2_is_its_template_with_its_dropout_masks(tmp_path):
    """GPT-2's resid_pdrop, embd_pdrop and attn_pdrop (0.1) were not read: the model trained without dropout masks,
    a peak of 11.17 GiB where the gpt2-125m template (dropout 0.1) needs 11.32 (mbs 8, 1,024 tokens, one H100)."""
    built = ModelSpec.model_validate({"from_hf": str(write(tmp_path, GPT2))})
    assert built.model_dump(exclude={"name"}) == ModelSpec.model_validate({"from": "gpt2-125m"}).model_dump(
        exclude={"name"})
    assert ModelSpec.model_validate({"from_hf": str(write(tmp_path, {**LLAMA_31_70B, "attention_dropout": 0.0}))
                                     }).dropout == 0
    with pytest.raises(HFConfigError, match=re.escape("'resid_pdrop' must be a probability from 0 to 0.99, got 1.5")):
        model_from_hf(write(tmp_path, {**GPT2, "resid_pdrop": 1.5}))


OPT_350M = {  # facebook/opt-350m config.json (shape and dropout keys)
    "model_type": "opt", "activation_function": "relu", "attention_dropout": 0.0, "dropout": 0.1, "ffn_dim": 4096,
    "hidden_size": 1024, "num_attention_heads": 16, "num_hidden_layers": 24, "vocab_size": 50272,
    "word_embed_proj_dim": 512, "do_layer_norm_before": False}


def test_a_relu_mlp_reads_as_relu_as_the_opt_template_built_from_the_same_file_says(tmp_path):
    built = ModelSpec.model_validate({"from_hf": str(write(tmp_path, OPT_350M))})
    shipped = ModelSpec.model_validate({"from": "opt-350m"})
    assert {k: getattr(built, k) for k in (*SHAPE, "activation", "dropout", "ffn_hidden_size")} == \
        {k: getattr(shipped, k) for k in (*SHAPE, "activation", "dropout", "ffn_hidden_size")}


LLAMA_32_11B_VISION = {  # meta-llama/Llama-3.2-11B-Vision config.json (text_config shape keys)
    "model_type": "mllama", "vision_config": {"hidden_size": 1280}, "text_config": {
        "model_type": "mllama_text_model", "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38],
        "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
        "num_hidden_layers": 40, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "tie_word_embeddings": False,
        "vocab_size": 128256}}


def test_a_decoder_with_cross_attention_layers_is_refused_not_read_as_self_attention_alone(tmp_path):
    """Llama 3.2 Vision's 40 text layers, 8 of them cross-attention to the image encoder, read as 40 self-attention
    layers."""
    with pytest.raises(HFConfigError, match="key 'cross_attention_layers' names layers that cross-attend"):
        model_from_hf(write(tmp_path, LLAMA_32_11B_VISION))
    none = {**LLAMA_32_11B_VISION, "text_config": {**LLAMA_32_11B_VISION["text_config"], "cross_attention_layers": []}}
    assert model_from_hf(write(tmp_path, none))["num_layers"] == 40


COMMAND_A = {  # CohereLabs/c4ai-command-a-03-2025 config.json (shape keys): sliding_window_pattern, no layer_types
    "model_type": "cohere2", "hidden_act": "silu", "hidden_size": 12288, "intermediate_size": 36864,
    "layer_norm_eps": 1e-05, "num_attention_heads": 96, "num_hidden_layers": 64, "num_key_value_heads": 8,
    "sliding_window": 4096, "sliding_window_pattern": 4, "order_of_interleaved_layers": "local_attn_first",
    "vocab_size": 256000}


def test_cohere_2s_sliding_window_pattern_windows_three_layers_in_four_where_the_file_has_no_layer_types(tmp_path):
    """Cohere2Config fills layer_types from sliding_window_pattern (4 by default, still written in the Hub's files):
    Command A read as 64 layers of full attention."""
    assert model_from_hf(write(tmp_path, COMMAND_A))["sliding_window"] == {"size": 4096, "full_every": 4}
    without = {k: v for k, v in COMMAND_A.items() if k != "sliding_window_pattern"}
    assert model_from_hf(write(tmp_path, without))["sliding_window"] == {"size": 4096, "full_every": 4}


FALCON_7B = {  # tiiuae/falcon-7b config.json (shape keys): multi-query, no ffn_hidden_size nor activation written
    "model_type": "falcon", "alibi": False, "bias": False, "hidden_size": 4544, "multi_query": True,
    "new_decoder_architecture": False, "num_attention_heads": 71, "num_hidden_layers": 32, "parallel_attn": True,
    "vocab_size": 65024}
FALCON_40B = {  # tiiuae/falcon-40b config.json (shape keys): grouped queries under new_decoder_architecture
    "model_type": "falcon", "alibi": False, "bias": False, "hidden_size": 8192, "new_decoder_architecture": True,
    "num_attention_heads": 128, "num_hidden_layers": 60, "num_kv_heads": 8, "parallel_attn": True,
    "vocab_size": 65024}
FALCON_180B = {**FALCON_40B, "hidden_size": 14848, "num_attention_heads": 232, "num_hidden_layers": 80}  # tiiuae/


def falcon_closed_form(doc, kv_heads) -> float:
    """Falcon's weights: fused QKV of (heads + 2 kv heads) x 64, the output projection, a 4h GELU MLP, the tied
    embedding; the layer norms' few thousand weights per layer aside."""
    h, heads = doc["hidden_size"], doc["num_attention_heads"]
    per_layer = h * (heads + 2 * kv_heads) * (h // heads) + h * h + 2 * h * 4 * h
    return doc["num_hidden_layers"] * per_layer + doc["vocab_size"] * h


@pytest.mark.parametrize(("config", "kv_heads", "published"), [
    (FALCON_7B, 1, 7e9), (FALCON_40B, 8, 40e9), ({**FALCON_40B, "multi_query": True}, 8, 40e9),
    (FALCON_180B, 8, 180e9)])
def test_falcon_reads_kv_heads_as_falcon_attention_does_and_its_published_parameters(tmp_path, config, kv_heads,
                                                                                    published):
    """FalconAttention: `num_kv_heads if (new_decoder_architecture or not multi_query) else 1`, a 4h MLP where
    ffn_hidden_size is absent, GELU where activation is. The files were refused for a missing intermediate_size,
    and given one, Falcon-7B read 71 key-value heads (not one) and Falcon-40B 128 (not its num_kv_heads 8)."""
    block = model_from_hf(write(tmp_path, config))
    assert (block["num_kv_heads"], block["ffn_hidden_size"], block["activation"]) == (
        kv_heads, 4 * config["hidden_size"], "gelu")
    counted = parameters({"from_hf": str(write(tmp_path, config))})
    assert counted == pytest.approx(falcon_closed_form(config, kv_heads), rel=1e-3)
    assert counted == pytest.approx(published, rel=0.035)  # 6.92B, 41.3B, 178.6B


def test_falcon_without_multi_query_or_new_decoder_takes_its_num_kv_heads_and_its_own_ffn_and_activation(tmp_path):
    assert model_from_hf(write(tmp_path, {**FALCON_7B, "multi_query": False}))["num_kv_heads"] == 71
    doc = {**FALCON_40B, "new_decoder_architecture": False, "multi_query": False, "ffn_hidden_size": 1000,
           "activation": "relu"}
    block = model_from_hf(write(tmp_path, doc))
    assert (block["num_kv_heads"], block["ffn_hidden_size"], block["activation"]) == (8, 1000, "relu")
