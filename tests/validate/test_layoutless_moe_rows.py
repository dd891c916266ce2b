"""A training row without a parallel layout runs as plain data parallelism only where one GPU holds the model; an MoE
model's parameters were counted as its embedding alone, so Mixtral 8x7B on 16 H100 ran so (333 GiB a GPU) and was
compared."""

from __future__ import annotations

import pytest

from simulon.validate import training

ROW = {**dict.fromkeys((*training.COLUMNS, *training.INFORMATIONAL), ""), "subset": "mine", "source": "me",
       "hardware": "H100", "num_gpus": "16", "seq_len": "4096", "framework": "Megatron-Core", "mbs": "1",
       "gbs": "32", "iter_time_s": "3"}


@pytest.mark.parametrize("model", ["Mixtral 8x7B", "Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V3"])
def test_an_moe_model_no_gpu_holds_is_refused_without_a_layout(model):
    with pytest.raises(training.Unsupported, match="does not fit one H100-SXM5-80GB for plain data parallelism"):
        training.scenario_from_row({**ROW, "model": model})


@pytest.mark.parametrize("model", ["Qwen3-30B-A3B", "Mixtral 8x7B"])
def test_the_same_row_with_a_layout_is_simulated(model):
    assert training.scenario_from_row({**ROW, "model": model, "tp": "2", "pp": "2", "ep": "4"}).workload.model.moe


def test_a_row_stating_only_its_expert_parallelism_is_simulated_where_its_share_of_the_experts_fits():
    """Mixtral 8x7B's experts over ep 8 (3.8B parameters a GPU) fit an H100: the row runs as data and expert
    parallelism."""
    row = {**ROW, "model": "Mixtral 8x7B", "num_gpus": "64", "ep": "8", "gbs": "64"}
    par = training.scenario_from_row(row).workload.parallelism
    assert (par.tp, par.pp, par.ep) == (1, 1, 8)
