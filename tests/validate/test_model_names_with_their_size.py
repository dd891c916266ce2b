"""A model named with its parameter count after the name ('DeepSeek V3 671B') is read by both validators as the
template of that name: the training validator read it, the memory validator skipped the row (no template)."""

from __future__ import annotations

import pytest

from simulon.validate import memory, training


def _memory_row(model: str) -> dict[str, str]:
    return {"source": "my lab", "model": model, "hardware": "H100", "framework": "Megatron-Core", "num_gpus": "64",
            "tp": "8", "pp": "8", "ep": "8", "recompute": "full", "mbs": "1", "gbs": "64", "seq_len": "4096",
            "dtype": "bf16", "mem_gib": "60", "mem_kind": "allocated",
            **dict.fromkeys(("dp", "cp", "vpp", "sp", "zero_or_fsdp", "notes", "locator"), "")}


def _training_row(model: str) -> dict[str, str]:
    row = dict.fromkeys((*training.COLUMNS, *training.INFORMATIONAL), "")
    return {**row, "subset": "mine", "source": "me", "hardware": "H100", "num_gpus": "512", "model": model,
            "seq_len": "4096", "framework": "Megatron-Core", "tp": "8", "pp": "8", "ep": "8", "mbs": "1",
            "gbs": "64", "iter_time_s": "10"}


@pytest.mark.parametrize(("name", "template"), [("DeepSeek V3 671B", "deepseek-v3"), ("Grok-1 314B", "grok-1"),
                                                ("DeepSeek-V3", "deepseek-v3")])
def test_a_model_named_with_its_size_after_it_is_its_template_in_both_validators(name, template):
    expected = training.scenario_from_row(_training_row(template)).workload.model
    assert training.scenario_from_row(_training_row(name)).workload.model == expected
    assert memory.scenario_from_row(_memory_row(name)).workload.model == \
        memory.scenario_from_row(_memory_row(template)).workload.model
