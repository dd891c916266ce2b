"""What a rotary position embedding costs a training step: Megatron-Core rotates every layer's queries and keys
before the core attention (apply_rotary_pos_emb, Transformer Engine's fused RoPE kernel), reading each and writing
its rotated copy, and rotates their gradients back in the backward (workload/layer_kernels.py,
ElementwisePasses.rope). A model that learns its positions, biases its attention by ALiBi or has none runs no such
kernel."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.config.workload import ModelSpec
from simulon.pipeline import simulate
from simulon.search.estimate import Estimator, unit_kind
from simulon.search.space import Strategy
from simulon.workload.kernels import Phase
from simulon.workload.layer_kernels import FUSED_PASSES, LAYOUT_COPY, QKV_GRAD_CAT, LayerKernels

SEQ, HIDDEN, HEADS, LAYERS, MICRO_BATCHES = 1024, 1024, 16, 2, 2


def scenario(position: str, tp: int = 1, kv_heads: int | None = None, gpus: int = 1, **parallelism):
    return gpt_scenario(gpus_per_node=gpus, tp=tp, gbs=MICRO_BATCHES * gpus // tp, mbs=1, seq=SEQ, hidden=HIDDEN,
                        heads=HEADS, kv_heads=kv_heads, layers=LAYERS, activation="swiglu",
                        extra_model={"position_embedding": position}, extra_parallelism=parallelism)


def with_training(sc, **training):
    update = sc.workload.training.model_copy(update=training)
    return sc.workload.model_copy(update={"training": update})


def rope_nodes(sim, names: tuple[str, ...] = ("attn_rope",)) -> list[int]:
    dag = sim.dag
    return [n for n in np.flatnonzero(dag.kernel >= 0) if dag.kernel_specs[dag.kernel[n]].name in names]


@settings(max_examples=12, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8, 16]))
def test_rotary_embedding_moves_each_rank_s_queries_and_keys_twice_each_way(tp, kv_heads):
    kernels = LayerKernels.of(scenario("rope", tp=tp, kv_heads=kv_heads, gpus=tp).workload)
    head = HIDDEN // HEADS
    rotated = SEQ * (HEADS // tp + max(kv_heads // tp, 1)) * head  # the rank's query and key elements
    for phase, passes in zip((Phase.fwd, Phase.bwd_ig), FUSED_PASSES.rope, strict=True):
        assert kernels["attn_rope"][phase].bytes == pytest.approx(rotated * passes * 2)  # bf16 activations
        assert kernels["attn_rope"][phase].flops == 0.0  # bandwidth-bound, no model FLOPs


@pytest.mark.parametrize("position", ["learned", "alibi", "none"])
def test_a_model_that_does_not_rotate_its_queries_runs_no_rotary_kernel(position):
    kernels = LayerKernels.of(scenario(position).workload)
    assert "attn_rope" not in kernels and QKV_GRAD_CAT not in kernels and LAYOUT_COPY not in kernels
    assert rope_nodes(simulate(scenario(position)), ("attn_rope", QKV_GRAD_CAT, LAYOUT_COPY)) == []


def test_every_layer_rotates_once_forward_and_once_backward_each_micro_batch():
    sim = simulate(scenario("rope"))
    phases = sorted(sim.dag.kernel_specs[sim.dag.kernel[n]].phase for n in rope_nodes(sim))
    assert phases == sorted([Phase.fwd, Phase.bwd_ig] * LAYERS * MICRO_BATCHES)


def test_a_rotary_model_is_slower_than_a_learned_one_by_its_rotations_and_gradient_copies_time():
    learned, rotary = simulate(scenario("learned")), simulate(scenario("rope"))
    rotations = float(sum(rotary.dag.duration[n] for n in rope_nodes(rotary, ("attn_rope", QKV_GRAD_CAT, LAYOUT_COPY))))
    assert rotations > 0
    slower = (rotary.result.iteration_time_ms - learned.result.iteration_time_ms) / 1e3
    assert slower == pytest.approx(rotations, rel=1e-6)


@settings(max_examples=12, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8, 16]))
def test_the_split_s_backward_copies_each_rank_s_query_key_and_value_gradients_once(tp, kv_heads):
    """Megatron-Core's QKV split (SplitAlongDim) gets the rotated query's and key's gradients as new tensors, so its
    backward concatenates them with the value's: a read and a write of every element, backward only."""
    kernels = LayerKernels.of(scenario("rope", tp=tp, kv_heads=kv_heads, gpus=tp).workload)
    head, kv = HIDDEN // HEADS, max(kv_heads // tp, 1)
    qkv = SEQ * (HEADS // tp + 2 * kv) * head
    assert set(kernels[QKV_GRAD_CAT]) == {Phase.bwd_ig}
    assert kernels[QKV_GRAD_CAT][Phase.bwd_ig].bytes == pytest.approx(qkv * 2 * 2)  # read + write, bf16
    assert kernels[QKV_GRAD_CAT][Phase.bwd_ig].flops == 0.0


def test_the_gradient_copy_runs_once_a_layer_and_micro_batch_between_the_inverse_rotation_and_the_dgrad():
    sim = simulate(scenario("rope"))
    dag, tl = sim.dag, sim.timeline

    def backward(name: str) -> dict[tuple[int, int], int]:
        nodes = {(int(dag.layer[n]), int(dag.microbatch[n])): n for n in rope_nodes(sim, (name,))
                 if dag.kernel_specs[dag.kernel[n]].phase == Phase.bwd_ig}
        return nodes

    copies, rotations, dgrads = backward(QKV_GRAD_CAT), backward("attn_rope"), backward("attn_qkv")
    assert len(copies) == LAYERS * MICRO_BATCHES == len(rope_nodes(sim, (QKV_GRAD_CAT,)))
    for key, copy in copies.items():
        assert tl.start[copy] >= tl.finish[rotations[key]]
        assert tl.finish[copy] <= tl.start[dgrads[key]]


def test_huggingface_s_separate_projections_copy_no_gradient_together():
    kernels = LayerKernels.of(with_training(scenario("rope"), elementwise="eager"))
    assert QKV_GRAD_CAT not in kernels and LAYOUT_COPY not in kernels


@settings(max_examples=12, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8, 16]))
def test_transformer_engine_s_attention_copies_the_rank_s_value_once_forward(tp, kv_heads):
    """Its layout check (get_qkv_layout) finds the rotated query and key contiguous and the value a strided view of
    the QKV output, and makes the value contiguous: a read and a write of it, forward only."""
    kernels = LayerKernels.of(scenario("rope", tp=tp, kv_heads=kv_heads, gpus=tp).workload)
    values = SEQ * max(kv_heads // tp, 1) * (HIDDEN // HEADS)
    assert set(kernels[LAYOUT_COPY]) == {Phase.fwd, Phase.recompute}
    assert kernels[LAYOUT_COPY][Phase.fwd].bytes == pytest.approx(values * 2 * 2)  # read + write, bf16


def test_attention_outside_transformer_engine_copies_no_value():
    assert LAYOUT_COPY not in LayerKernels.of(with_training(scenario("rope"), attention="unfused"))


def test_the_value_copy_runs_with_the_core_attention_and_again_where_that_is_recomputed():
    def copies(sim) -> list[Phase]:
        return sorted(sim.dag.kernel_specs[sim.dag.kernel[n]].phase for n in rope_nodes(sim, (LAYOUT_COPY,)))

    assert copies(simulate(scenario("rope"))) == [Phase.fwd] * LAYERS * MICRO_BATCHES
    recomputed = simulate(scenario("rope", recompute="selective", recompute_modules=["core_attn"]))
    assert copies(recomputed) == sorted([Phase.fwd, Phase.recompute] * LAYERS * MICRO_BATCHES)


@pytest.mark.parametrize("recompute", [{}, {"recompute": "selective", "recompute_modules": ["core_attn"]}])
def test_the_estimate_costs_a_rotary_layer_s_extra_kernels_as_the_replay_runs_them(recompute):
    """A layer's estimated seconds grow from learned to rotary positions by what the replay's rotary kernels take
    a layer and micro-batch: the rotations, the gradients' concatenation and the value's copy, re-run with a
    recomputed core attention."""
    def layer_s(sc) -> float:
        estimator = Estimator.on(sc.workload, sc.datacenter, sc.collective, sc.workload.training.num_gpus)
        unit = unit_kind(LayerKernels.of(sc.workload), 0)
        return estimator.unit_seconds(Strategy.of(sc), sc.workload, unit)

    learned, rotary = scenario("learned", **recompute), scenario("rope", **recompute)
    sim = simulate(rotary)
    replayed = float(sum(sim.dag.duration[n] for n in rope_nodes(sim, ("attn_rope", QKV_GRAD_CAT, LAYOUT_COPY))))
    assert layer_s(rotary) - layer_s(learned) == pytest.approx(replayed / (LAYERS * MICRO_BATCHES), rel=1e-6)


def test_a_nope_layer_runs_no_rotary_kernel_and_the_others_do():
    """Llama 4's NoPE layers (nope_every: every 4th, HF no_rope_layers 0) skip the rotation, the gradients'
    concatenation and the value's copy; the tracer and the estimate both pick the layer's twin without them."""
    every, layers = 2, 4
    sc = gpt_scenario(gpus_per_node=1, gbs=1, mbs=1, seq=SEQ, hidden=HIDDEN, heads=HEADS, layers=layers,
                      activation="swiglu", extra_model={"position_embedding": "rope", "nope_every": every})
    kernels = LayerKernels.of(sc.workload)
    rotary = [layer for layer in range(layers) if "attn_rope" in kernels.at(layer)]
    assert rotary == [0, 2]
    assert all(not {"attn_rope", QKV_GRAD_CAT, LAYOUT_COPY} & set(kernels.at(layer).table) for layer in (1, 3))
    sim = simulate(sc)
    names = ("attn_rope", QKV_GRAD_CAT, LAYOUT_COPY)
    assert sorted({int(sim.dag.layer[n]) for n in rope_nodes(sim, names)}) == rotary
    estimator = Estimator.on(sc.workload, sc.datacenter, sc.collective, sc.workload.training.num_gpus)
    s = Strategy.of(sc)
    seconds = [estimator.unit_seconds(s, sc.workload, unit_kind(kernels, layer)) for layer in range(layers)]
    per_layer = float(sum(sim.dag.duration[n] for n in rope_nodes(sim, names))) / len(rotary)
    assert seconds[0] == seconds[2] and seconds[1] == seconds[3]
    assert seconds[0] - seconds[1] == pytest.approx(per_layer, rel=1e-6)


def test_the_llama_4_templates_leave_every_fourth_layer_unrotated():
    for name in ("llama-4-scout", "llama-4-maverick"):
        model = ModelSpec.model_validate({"from": name})
        assert [model.rotates(layer) for layer in range(8)] == [True, True, True, False] * 2
        assert not model.sliding_window.windowed(3)  # the NoPE layers are the full-attention ones


def test_nope_layers_need_a_rotary_model():
    with pytest.raises(ValueError, match="nope_every"):
        ModelSpec.model_validate({"from": "gpt3-175b", "nope_every": 4})


MLA = {"q_lora_rank": 256, "kv_lora_rank": 128, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32, "v_head_dim": 64}


def mla_scenario(position: str = "rope", tp: int = 1, dsa: bool = False, **parallelism):
    mla = {**MLA, **({"dsa": {"index_heads": 8, "index_head_dim": 64, "index_topk": 256}} if dsa else {})}
    return gpt_scenario(gpus_per_node=tp, tp=tp, gbs=MICRO_BATCHES, mbs=1, seq=SEQ, hidden=HIDDEN, heads=HEADS,
                        layers=LAYERS, activation="swiglu",
                        extra_model={"position_embedding": position, "mla": mla},
                        extra_parallelism={"sequence_parallel": tp > 1, **parallelism})


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_mla_rotates_only_its_rotary_slice_and_splits_the_key_and_value_in_one_pass(tp):
    """Megatron-Core's fused MLA RoPE (fused_mla_yarn_rope_apply.py): the query's last qk_rope_head_dim of each head
    rotated in place, and the up-projected key-value read with the shared k_pe, the key and value written apart."""
    kernels = LayerKernels.of(mla_scenario(tp=tp).workload)
    n, k, r, v = HEADS // tp, MLA["qk_nope_head_dim"], MLA["qk_rope_head_dim"], MLA["v_head_dim"]
    query = 2 * n * r  # read and write the rotary slice
    key_value = (n * (k + v) + r) + (n * (k + r) + n * v)  # read kv and k_pe, write the key and the value
    for phase in (Phase.fwd, Phase.bwd_ig):
        assert kernels["attn_rope"][phase].bytes == pytest.approx(SEQ * (query + key_value) * 2)  # bf16
    assert QKV_GRAD_CAT not in kernels and LAYOUT_COPY not in kernels


def test_mla_without_rotary_positions_and_mla_s_absorbed_form_run_no_rotary_kernel():
    assert "attn_rope" not in LayerKernels.of(mla_scenario("none").workload)
    assert "attn_rope" not in LayerKernels.of(mla_scenario(dsa=True).workload)


@pytest.mark.parametrize("recompute", [{}, {"recompute": "selective", "recompute_modules": ["mla_up_proj"]}])
def test_mla_s_rotation_runs_once_each_way_and_again_in_its_up_projections_checkpoint(recompute):
    sim = simulate(mla_scenario(**recompute))
    phases = sorted(sim.dag.kernel_specs[sim.dag.kernel[n]].phase for n in rope_nodes(sim))
    again = [Phase.recompute] if recompute else []
    assert phases == sorted([Phase.fwd, Phase.bwd_ig, *again] * LAYERS * MICRO_BATCHES)

    def layer_s(sc) -> float:
        estimator = Estimator.on(sc.workload, sc.datacenter, sc.collective, sc.workload.training.num_gpus)
        unit = unit_kind(LayerKernels.of(sc.workload), 0)
        return estimator.unit_seconds(Strategy.of(sc), sc.workload, unit)

    replayed = float(sum(sim.dag.duration[n] for n in rope_nodes(sim))) / (LAYERS * MICRO_BATCHES)
    assert layer_s(mla_scenario(**recompute)) - layer_s(mla_scenario("none", **recompute)) == pytest.approx(
        replayed, rel=1e-6)


def test_templates_name_the_position_embedding_their_family_uses():
    def position(name: str) -> str:
        return ModelSpec.model_validate({"from": name}).position_embedding

    assert [position(n) for n in ("llama-2-7b", "mistral-7b", "qwen3-8b", "gpt-oss-20b")] == ["rope"] * 4
    assert [position(n) for n in ("gpt3-175b", "gpt-1.7b", "gpt2-125m", "opt-350m")] == ["learned"] * 4
    assert [position(n) for n in ("bloom-176b", "mpt-7b")] == ["alibi"] * 2
    assert position("nemotron-h-8b") == "none"


def test_an_eager_huggingface_rotation_moves_five_times_the_fused_kernel_s_bytes():
    sc = scenario("rope")
    training = sc.workload.training.model_copy(update={"elementwise": "eager"})
    eager = LayerKernels.of(sc.workload.model_copy(update={"training": training}))
    fused = LayerKernels.of(sc.workload)
    for phase in (Phase.fwd, Phase.bwd_ig):
        assert eager["attn_rope"][phase].bytes == pytest.approx(5 * fused["attn_rope"][phase].bytes)
