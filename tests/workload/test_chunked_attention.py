"""Llama 4's chunked attention (model.sliding_window with chunked; HF attention_chunk_size, layer_types
chunked_attention): a chunked layer's query attends to the earlier tokens of its own chunk, each chunk a causal
attention of its own; its model FLOPs count the chunk's keys a query as a dense layer counts the sequence's. Read as
full attention, Llama 4 Scout's model FLOPs a token were 39% over at 32,768 tokens and 2.3x at 131,072."""

from __future__ import annotations

import json

import pytest

from helpers import gpt_scenario
from simulon.config.hf import model_from_hf
from simulon.config.workload import ModelSpec
from simulon.pipeline import build_dag
from simulon.workload.kernels import Phase
from simulon.workload.layer_kernels import LayerKernels

CHUNK = {"size": 1024, "full_every": 4, "chunked": True}


def kernels(seq: int, window: dict | None = CHUNK, attention: str = "flash", **parallelism) -> LayerKernels:
    sc = gpt_scenario(nodes=1, gpus_per_node=4, layers=4, hidden=1024, heads=16, seq=seq, gbs=4,
                      extra_model={"sliding_window": window} if window else {}, extra_parallelism=parallelism)
    workload = sc.workload.model_copy(update={"training": sc.workload.training.model_copy(
        update={"attention": attention})})
    return LayerKernels.of(workload)


def test_a_chunked_layer_runs_a_causal_attention_per_chunk_and_counts_its_chunk_as_model_flops():
    seq, chunk, heads, dims = 4096, 1024, 16, 2 * 64
    table = kernels(seq)
    chunked, full = (table.at(layer)["attn_flash"][Phase.fwd] for layer in (0, 3))
    assert dict(chunked.shape)["batch"] == seq // chunk and dict(chunked.shape)["seq_q"] == chunk
    assert chunked.flops == pytest.approx(2 * heads * seq * chunk * dims)   # a chunk's keys a query
    assert chunked.hw_flops == pytest.approx(chunked.flops / 2)              # causal within the chunk
    assert full.flops == pytest.approx(2 * heads * seq * seq * dims)         # every fourth layer: everything


def test_chunked_attention_up_to_one_chunk_is_plain_causal_attention():
    assert kernels(1024).at(0)["attn_flash"] == kernels(1024, None)["attn_flash"]


@pytest.mark.parametrize("seq", [4096, 2500])
@pytest.mark.parametrize("library", ["pytorch", "unfused"])
def test_a_chunked_layers_model_flops_are_the_same_whatever_library_computes_it(seq, library):
    """A library that masks the whole matrix takes its time, but the model's FLOPs are the chunks' (the last,
    shorter chunk its own)."""
    def model_flops(table: LayerKernels) -> float:
        layer = table.at(0)
        return sum(layer[name][phase].flops for name in layer.attention_core for phase in (Phase.fwd, Phase.bwd_ig))

    flash = model_flops(kernels(seq))
    assert model_flops(kernels(seq, attention=library)) == pytest.approx(flash, rel=1e-9)
    chunks = [1024] * (seq // 1024) + ([seq % 1024] if seq % 1024 else [])
    assert flash == pytest.approx(3 * 2 * 16 * sum(c * c for c in chunks) * 128)


def test_context_parallelism_by_all_to_all_keeps_a_chunked_models_flops():
    def step_flops(**parallelism) -> float:
        sc = gpt_scenario(nodes=1, gpus_per_node=4, layers=4, hidden=1024, heads=16, seq=4096, gbs=4,
                          extra_model={"sliding_window": CHUNK}, extra_parallelism=parallelism)
        return build_dag(sc)[0].total_flops()

    assert step_flops(cp=2, context_parallel_comm="a2a") == pytest.approx(step_flops(), rel=1e-9)


LLAMA4_SCOUT = {  # meta-llama/Llama-4-Scout-17B-16E config.json, text_config (shape keys)
    "model_type": "llama4", "text_config": {
        "model_type": "llama4_text", "hidden_act": "silu", "hidden_size": 5120, "intermediate_size": 8192,
        "intermediate_size_mlp": 16384, "head_dim": 128, "num_attention_heads": 40, "num_key_value_heads": 8,
        "num_hidden_layers": 48, "num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1,
        "attention_chunk_size": 8192, "rms_norm_eps": 1e-05, "vocab_size": 202048}}


@pytest.mark.parametrize("layers", [
    {},                                                                        # Llama4TextConfig's defaults
    {"no_rope_layers": [int((i + 1) % 4 != 0) for i in range(48)]},            # as Meta's files give them
    {"layer_types": ["full_attention" if (i + 1) % 4 == 0 else "chunked_attention" for i in range(48)]},
])
def test_llama_4s_config_reads_its_chunked_layers_as_its_template_does(tmp_path, layers):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA4_SCOUT, "text_config": {**LLAMA4_SCOUT["text_config"], **layers}}))
    read = ModelSpec.model_validate({"from_hf": str(path)})
    assert read.sliding_window == ModelSpec.model_validate({"from": "llama-4-scout"}).sliding_window
    assert model_from_hf(path)["sliding_window"] == {"size": 8192, "full_every": 4, "chunked": True}
    assert [i for i in range(48) if not read.windowed(i)] == list(range(3, 48, 4))


def test_a_chunk_no_shorter_than_the_sequence_keeps_context_parallelism_by_ring_and_a_shorter_one_refuses_it():
    """Llama 4 at 8,192 tokens is causal attention throughout, which the ring runs; past one chunk only the
    all-to-all's heads split keeps the chunks whole."""
    def scenario(seq: int):
        return gpt_scenario(nodes=1, gpus_per_node=4, layers=4, hidden=1024, heads=16, seq=seq, gbs=4,
                            extra_model={"sliding_window": CHUNK}, extra_parallelism={"cp": 2})

    assert scenario(1024).workload.parallelism.context_parallel_comm == "p2p"
    with pytest.raises(ValueError, match="context_parallel_comm: 'p2p' with a sliding window"):
        scenario(2048)
