"""`from:` names of model templates as people write them: HuggingFace model ids, with their organisation and the
variant words of a release (config/templates.py)."""

from __future__ import annotations

import re

import pytest

from simulon.config.workload import ModelSpec


def model(ref: str, **context) -> ModelSpec:
    return ModelSpec.model_validate({"from": ref}, context=context)


@pytest.mark.parametrize(("ref", "suggested"), [
    ("mistralai/Mistral-7B-Instruct-v0.2", "did you mean mistral-7b or mistral-7b-v0.1"),  # v0.2: neither v0.1 nor v0.3
    ("deepseek-ai/DeepSeek-V2-Lite", "did you mean deepseek-v2"),  # 64 experts, no q_lora_rank: not DeepSeek-V2
])
def test_a_huggingface_id_no_template_has_is_an_unknown_template_with_suggestions_not_a_missing_file(ref, suggested):
    with pytest.raises(ValueError, match=re.escape(f"unknown model template '{ref}'; {suggested}")) as caught:
        model(ref)
    assert f"nor is it a template file: cannot read template file '{ref}': no such file" in str(caught.value)


def test_deepseek_v3_1_terminus_is_deepseek_v3s_architecture():
    # DeepSeek-V3.1-Terminus (September 2025) is an update of V3.1's weights; its config.json is V3.1's
    assert model("deepseek-ai/DeepSeek-V3.1-Terminus") == model("deepseek-v3") == model("DeepSeek-V3.1-Terminus")


def test_a_huggingface_ids_path_is_a_file_where_there_is_one_and_else_a_model_name(tmp_path):
    with pytest.raises(ValueError, match="unknown model template 'deepseek-ai/DeepSeek-V2-Lite'; did you mean"):
        model("deepseek-ai/DeepSeek-V2-Lite", base_dir=tmp_path)
    (tmp_path / "deepseek-ai").mkdir()
    (tmp_path / "deepseek-ai" / "DeepSeek-V2-Lite").write_text(
        "name: mine\nnum_layers: 2\nhidden_size: 64\nnum_heads: 2\nffn_hidden_size: 128\nvocab_size: 100\n")
    assert model("deepseek-ai/DeepSeek-V2-Lite", base_dir=tmp_path).name == "mine"
    for path in ("nobody/no/model", "./nobody/not-a-model", "nobody/not-a-model.yaml"):  # no id: a missing file
        with pytest.raises(ValueError, match=r"cannot read template file .*: No such file or directory"):
            model(path, base_dir=tmp_path)
