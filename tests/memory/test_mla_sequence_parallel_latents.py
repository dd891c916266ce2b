"""Under sequence parallelism MLA's latents are saved on the rank's share of the sequence: Megatron-Core runs the
duplicated down projections on s/tp rows (multi_latent_attention.py `q_compressed: [s / TP, b, q_lora_rank]`) and the
up projections' LayerNormLinears keep their 16-bit input and their local norm output, all-gathered again for the wgrad
(layernorm_linear.py `ln_out_needs_gather`); sparse attention's key-value norm output alone is saved gathered, in 16
bits (AbsorbedMLASelfAttention gathers it before the attention). They were counted on every token: DeepSeek-V3 (5
layers, tp 4 sp, ep 4, 2 nodes of 8 H100s, sequence 4096) peaked at 51.57 GiB where the rank's rows give 51.45."""

from __future__ import annotations

import pytest

from simulon.config.common import DType
from simulon.config.loading import parse_scenario
from simulon.config.number_formats import number_format
from simulon.memory.activations import ActivationModel

SEQ = 4096


def workload(model: str, tp: int, dtype: str):
    return parse_scenario({"datacenter": {"from": "dgx-b200", "cluster": {"num_nodes": 1}},
                           "workload": {"model": {"from": model, "num_layers": 4},
                                        "parallelism": {"tp": tp, "sequence_parallel": True},
                                        "training": {"num_gpus": 8, "global_batch_size": 8, "sequence_length": SEQ,
                                                     "dtype": dtype}}}, "s.yaml").workload


def saved_norm_output(dtype: str) -> float:
    """Bytes an element of the local norm output a LayerNormLinear saves under sequence parallelism."""
    return 2.0 if dtype == "bf16" else number_format(DType(dtype)).sp_norm_input_bytes or 2.0


@pytest.mark.parametrize("tp", [2, 4, 8])
@pytest.mark.parametrize("dtype", ["bf16", "fp8", "mxfp8"])
def test_mlas_latents_are_saved_on_the_ranks_share_of_the_sequence(tp, dtype):
    wl = workload("deepseek-v3", tp, dtype)
    mla, g = wl.model.mla, saved_norm_output(dtype)
    per_token = (mla.kv_lora_rank + mla.qk_rope_head_dim) * 2 + mla.kv_lora_rank * g + mla.q_lora_rank * (2 + g)
    parts = ActivationModel(wl).layer(("attention",)).parts
    assert parts["attention latents"] == pytest.approx(SEQ // tp * per_token)


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_sparse_attentions_key_value_norm_output_is_saved_gathered(tp):
    wl = workload("deepseek-v3.2", tp, "bf16")
    mla = wl.model.mla
    local = (mla.kv_lora_rank + mla.qk_rope_head_dim) * 2 + mla.q_lora_rank * 4
    parts = ActivationModel(wl).layer(("attention",)).parts
    assert parts["attention latents"] == pytest.approx(SEQ // tp * local + SEQ * mla.kv_lora_rank * 2)
