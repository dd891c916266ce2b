"""Shipped model templates of current open models: their parameter counts are the published ones, they simulate,
and loosely written names (case, separators, HuggingFace organisation, variant words) find them."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulon.config.loading import parse_scenario
from simulon.config.templates import find_template, template_names, template_stem_loose
from simulon.config.workload import ModelSpec
from simulon.pipeline import simulate

PUBLISHED_BILLIONS = {
    # total parameters as the model cards state them (text decoder only where the model is multimodal)
    "gpt-oss-20b": 20.9, "gpt-oss-120b": 116.8, "kimi-k2": 1026.4, "mistral-large-2": 123.0,
    "llama-4-scout": 109.0, "qwen3-0.6b": 0.6, "qwen3-1.7b": 1.7, "qwen3-4b": 4.0, "qwen3-8b": 8.2,
    "qwen3-14b": 14.8, "qwen3-32b": 32.8, "deepseek-v3": 671.0, "qwen3-235b-a22b": 235.0,
    "glm-4.5": 355.0, "glm-4.5-air": 106.0, "glm-4.7-flash": 30.0, "glm-5": 744.0, "minimax-m2": 229.0,
    # embedding plus non-embedding parameters of the Gemma 2 report (arXiv 2408.00118, Table 2) and the Gemma 3
    # report's language models (arXiv 2503.19786, Table 1; the vision encoder left out)
    "gemma-2-9b": 0.918 + 8.324, "gemma-2-27b": 1.180 + 26.047, "gemma-3-12b": 1.012 + 10.759,
    "gemma-3-27b": 1.416 + 25.600,
    "qwen2.5-7b": 7.61, "qwen2.5-14b": 14.7, "qwen2.5-32b": 32.5, "qwen2.5-72b": 72.7, "llama-3.2-1b": 1.24,
    "llama-3.2-3b": 3.21, "mistral-7b": 7.25, "mistral-7b-v0.1": 7.24,
}
ACTIVE_BILLIONS = {"kimi-k2": 32.0, "llama-4-scout": 17.0, "deepseek-v3": 37.0, "qwen3-235b-a22b": 22.0,
                   "glm-4.5": 32.0, "glm-5": 40.0}
"""Parameters active per token, as the model cards state them."""
ACTIVE_WITHOUT_INPUT_EMBEDDING = {"gpt-oss-20b": 3.61, "gpt-oss-120b": 5.13}
"""GPT-OSS's model card counts the unembedding but not the input embedding among the active parameters."""


def parameters(m: ModelSpec) -> tuple[float, float]:
    """(total, active) weights of the model's GEMMs and embeddings, written out from its config (a reference
    independent of the workload code; norms and biases, under 0.1%, are left out)."""
    h, heads, kv, hd = m.hidden_size, m.num_heads, m.kv_heads, m.head_size
    if m.mla:
        a = m.mla
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        q = h * a.q_lora_rank + a.q_lora_rank * heads * qk if a.q_lora_rank else h * heads * qk
        attn = (q + h * (a.kv_lora_rank + a.qk_rope_head_dim)
                + a.kv_lora_rank * heads * (a.qk_nope_head_dim + a.v_head_dim) + heads * a.v_head_dim * h)
    else:
        attn = 2 * h * heads * hd + 2 * h * kv * hd
    mats = 3 if m.gated_mlp else 2
    total = active = 0.0
    for layer in range(m.num_layers):
        if m.moe and layer >= m.moe.first_dense_layers:
            e = m.moe
            expert = mats * h * (e.expert_ffn_hidden_size or m.ffn_hidden_size)
            shared = e.num_shared_experts * mats * h * (e.shared_expert_ffn_hidden_size or e.expert_ffn_hidden_size)
            total += attn + e.num_experts * expert + shared + h * e.num_experts
            active += attn + e.top_k * expert + shared + h * e.num_experts
        else:
            total += attn + mats * h * m.ffn_hidden_size
            active += attn + mats * h * m.ffn_hidden_size
    embeddings = m.vocab_size * h * (1 if m.tie_embeddings else 2)
    return (total + embeddings) / 1e9, (active + embeddings) / 1e9


@pytest.mark.parametrize(("stem", "billions"), PUBLISHED_BILLIONS.items())
def test_a_templates_parameter_count_is_the_published_one(stem, billions):
    total, active = parameters(ModelSpec.model_validate({"from": stem}))
    assert total == pytest.approx(billions, rel=0.02)
    if stem in ACTIVE_BILLIONS:
        assert active == pytest.approx(ACTIVE_BILLIONS[stem], rel=0.1)
    if stem in ACTIVE_WITHOUT_INPUT_EMBEDDING:
        model = ModelSpec.model_validate({"from": stem})
        embedding = model.vocab_size * model.hidden_size / 1e9
        assert active - embedding == pytest.approx(ACTIVE_WITHOUT_INPUT_EMBEDDING[stem], rel=0.01)


NEW_MODELS = ["gpt-oss-20b", "gpt-oss-120b", "kimi-k2", "mistral-large-2", "llama-4-scout", "qwen3-0.6b",
              "qwen3-8b", "qwen3-32b", "glm-4.5", "glm-4.7-flash", "glm-5", "minimax-m2", "gemma-2-27b", "gemma-3-12b",
              "qwen2.5-7b", "llama-3.2-1b", "mistral-7b-v0.1"]


@pytest.mark.parametrize("stem", NEW_MODELS)
def test_a_new_model_truncated_to_two_layers_simulates_on_one_node(stem):
    template = find_template("model", stem)
    model = {"from": stem, "num_layers": 2}
    if template.get("moe"):
        model["moe"] = {"first_dense_layers": min(template["moe"]["first_dense_layers"], 1)}
    sc = parse_scenario({
        "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}},
        "workload": {"model": model, "parallelism": {"tp": 1, "ep": 8 if template.get("moe") else 1},
                     "training": {"num_gpus": 8, "global_batch_size": 8, "sequence_length": 1024}}}, stem)
    result = simulate(sc).result
    assert math.isfinite(result.iteration_time_ms) and 0 < result.mfu < 1


@pytest.mark.parametrize(("written", "stem"), [
    ("meta-llama/Llama-3.1-70B", "llama-3.1-70b"), ("llama3_70b", "llama-3-70b"),
    ("Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b"), ("meta-llama/Meta-Llama-3.1-405B-Instruct", "llama-3.1-405b"),
    ("openai/gpt-oss-120b", "gpt-oss-120b"), ("moonshotai/Kimi-K2-Instruct", "kimi-k2"),
    ("mistralai/Mistral-Large-Instruct-2407", "mistral-large-2"), ("deepseek-ai/DeepSeek-V3.1", "deepseek-v3"),
    ("meta-llama/Llama-2-7b-hf", "llama-2-7b"), ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout"),
    ("GPT3-1.3B", "gpt3-1.3b"), ("QWEN3_0.6B", "qwen3-0.6b"),
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nemotron-3-nano-30b-a3b"),
    ("nvidia/Nemotron-H-8B-Base-8K", "nemotron-h-8b"), ("nvidia/NVIDIA-Nemotron-Nano-9B-v2", "nemotron-nano-9b-v2"),
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8", "llama-4-maverick"),
    ("zai-org/GLM-4.6", "glm-4.5"), ("zai-org/GLM-4.5-Air", "glm-4.5-air"), ("zai-org/GLM-5", "glm-5"),
    ("zai-org/GLM-4.7-Flash", "glm-4.7-flash"), ("MiniMaxAI/MiniMax-M2.5", "minimax-m2"),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b"), ("Qwen/Qwen3-235B-A22B-Thinking-2507", "qwen3-235b-a22b"),
    ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.1-70b"), ("Qwen/Qwen2.5-72B-Instruct", "qwen2.5-72b"),
    ("mistralai/Mistral-7B-v0.1", "mistral-7b-v0.1"), ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b"),
    ("meta-llama/Llama-3.2-1B-Instruct", "llama-3.2-1b"),
    # quantized packagings of the same architecture, as Qwen publishes them
    ("Qwen/Qwen3-32B-AWQ", "qwen3-32b"), ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "qwen2.5-7b"),
    ("Qwen/Qwen3-8B-GGUF", "qwen3-8b"), ("Qwen/Qwen2.5-72B-Instruct-GPTQ-Int8", "qwen2.5-72b"),
])
def test_loosely_written_model_names_find_their_template(written, stem):
    assert template_stem_loose("model", written) == stem
    assert ModelSpec.model_validate({"from": written}) == ModelSpec.model_validate({"from": stem})


def test_a_decimal_point_still_tells_models_apart():
    assert template_stem_loose("model", "GPT3 1.3B") == "gpt3-1.3b"
    assert template_stem_loose("model", "GPT3 13B") == "gpt3-13b"
    assert template_stem_loose("model", "my-own-model-7b") is None
    assert template_stem_loose("model", "Qwen3-8B-2507") == "qwen3-8b"  # a release's date is dropped
    assert template_stem_loose("model", "Qwen3-2507B") is None            # a size is not a date


@pytest.mark.parametrize(("written", "stem"), [
    ("gpt3_6_7b", "gpt3-6.7b"), ("gpt3_2_7b", "gpt3-2.7b"), ("llama_3_1_70b", "llama-3.1-70b"),
    ("qwen2_5_7b", "qwen2.5-7b"), ("deepseek_v3_2", "deepseek-v3.2"), ("mistral_7b_v0_1", "mistral-7b-v0.1"),
    ("llama_3_8b", "llama-3-8b"), ("gemma_2_27b", "gemma-2-27b"), ("gpt3_13b", "gpt3-13b"),
])
def test_a_name_written_as_an_identifier_reads_a_separator_between_digits_as_the_decimal_point_it_replaces(written,
                                                                                                           stem):
    assert template_stem_loose("model", written) == stem


@pytest.mark.parametrize("written", ["gpt3_1_3b", "GPT3-1-3B", "gpt3 1 3b"])
def test_a_name_that_reads_as_two_templates_is_refused_naming_both(written):
    """gpt3_1_3b loaded GPT-3 13B (its letters and digits are 13B's) for a user who meant 1.3B."""
    with pytest.raises(ValueError, match=r"ambiguous.*gpt3-13b or as gpt3-1\.3b"):
        template_stem_loose("model", written)
    with pytest.raises(ValueError, match="ambiguous"):
        ModelSpec.model_validate({"from": written})


@given(st.sampled_from(template_names("model")), st.sampled_from(["-", "_", " ", ""]), st.booleans(),
       st.sampled_from(["", "some-org/"]))
def test_any_case_separator_and_organisation_finds_every_model_template(stem, sep, upper, org):
    written = org + (stem.upper() if upper else stem).replace("-", sep)
    assert template_stem_loose("model", written) == stem


def test_a_path_that_exists_is_read_as_a_file_and_one_that_names_nothing_says_so(tmp_path):
    folder = tmp_path / "meta-llama"
    folder.mkdir()
    (folder / "Llama-3.1-70B").write_text("name: mine\nnum_layers: 2\nhidden_size: 64\nnum_heads: 2\n"
                                          "ffn_hidden_size: 128\nvocab_size: 100\n")
    mine = ModelSpec.model_validate({"from": "meta-llama/Llama-3.1-70B"}, context={"base_dir": tmp_path})
    assert mine.name == "mine"
    with pytest.raises(ValueError, match="cannot read template file"):
        ModelSpec.model_validate({"from": "nobody/not-a-model"}, context={"base_dir": tmp_path})
