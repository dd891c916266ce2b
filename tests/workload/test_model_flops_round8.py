"""Model FLOPs belong to the model, not to the layout or to one token more or less of a window (a helper's
bug-bash): kernels every tensor-parallel rank runs whole (DeepSeek sparse attention's indexer, a key/value head
shared by ranks) count once over the group; a window or a top-k as long as the sequence counts as the dense layer
does, one token shorter about as much; the search's count takes every pipeline stage."""

from __future__ import annotations

import pytest

from simulon.config import ScenarioConfig
from simulon.pipeline import simulate
from simulon.search.estimate import Estimator

NODE = {"from": "dgx-h100", "cluster": {"num_nodes": 1}}
DSA = {"name": "custom", "hidden_size": 1024, "num_layers": 4, "num_heads": 16, "ffn_hidden_size": 2048,
       "vocab_size": 32000, "activation": "swiglu",
       "mla": {"q_lora_rank": 384, "kv_lora_rank": 128, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32,
               "v_head_dim": 64, "dsa": {"index_heads": 8, "index_head_dim": 64, "index_topk": 256}}}
GQA = {"name": "custom", "hidden_size": 1024, "num_layers": 4, "num_heads": 16, "num_kv_heads": 2,
       "ffn_hidden_size": 4096, "vocab_size": 32000}


def scenario(model: dict, tp: int = 1, pp: int = 1, seq: int = 1024) -> ScenarioConfig:
    return ScenarioConfig.model_validate({
        "datacenter": NODE, "workload": {
            "framework": "megatron", "model": model, "parallelism": {"tp": tp, "pp": pp},
            "training": {"num_gpus": 8, "global_batch_size": 8, "micro_batch_size": 1, "sequence_length": seq}}})


def model_flops(sc: ScenarioConfig) -> float:
    return simulate(sc).result.step_flops()


@pytest.mark.parametrize("tp", [2, 8])
def test_deepseek_sparse_attentions_indexer_counts_once_over_the_tensor_parallel_group(tp):
    """It runs whole on every rank: counted on each, a small DSA model's FLOPs a token were 17.6% higher at tp 8."""
    assert model_flops(scenario(DSA, tp)) == pytest.approx(model_flops(scenario(DSA, 1)), rel=1e-9)


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_key_value_heads_shared_by_tensor_parallel_ranks_count_once_and_match_the_closed_form(tp):
    """Narayanan et al.'s closed form with GQA: 3 [L (2h(nd + 2 kv d) + 2ndh + 4snd + 4hf) + 2hV] a token, where
    each rank projecting a whole key/value head counted the copies (+3.7% at tp 8)."""
    h, n, kv, f, L, s, V = 1024, 16, 2, 4096, 4, 1024, 32000
    d = h // n
    per_token = 3 * (L * (2 * h * (n * d + 2 * kv * d) + 2 * n * d * h + 4 * s * n * d + 4 * h * f) + 2 * h * V)
    assert model_flops(scenario(GQA, tp)) == pytest.approx(per_token * 8 * s, rel=1e-9)


@pytest.mark.parametrize("window", [1024, 1025, 700])
def test_a_window_one_token_shorter_counts_about_the_same_model_flops_and_more_window_never_fewer(window, seq=1024):
    """A window of s - 1 counted the causal band's mean keys a query, about s/2, where one of s counts the dense
    layer's s: the attention's model FLOPs halved for one token (MFU 8.26% to 7.88% at the same step time)."""
    def flops(w: int) -> float:
        return model_flops(scenario({**GQA, "num_kv_heads": 16, "sliding_window": {"size": w}}, seq=seq))

    shorter, this = flops(window - 1), flops(window)
    assert shorter <= this <= shorter * 1.002


def test_the_searchs_model_flops_take_every_pipeline_stage():
    """Stage 0's layers alone: a workload of pp 2 handed to the estimator counted about half its FLOPs."""
    for pp in (1, 2):
        sc = scenario(GQA, 2, pp)
        dc = sc.datacenter
        estimator = Estimator.on(sc.workload, dc, sc.collective)
        assert estimator.model_flops() == pytest.approx(model_flops(sc), rel=1e-9)
