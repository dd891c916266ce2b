"""Grouped-query attention's copies in Megatron-Core (transformer/attention.py get_query_key_value_tensors): the
fused QKV output viewed as [sq, b, ng, (np/ng + 2) hn] and split, the query's reshape to [sq, b, np, hn] a copy
where a rank holds several groups of several query heads, rotated or not; its gradient then comes back in a buffer
of its own, so the split's backward concatenates the gradients (workload/layer_kernels.py QUERY_COPY,
QKV_GRAD_CAT); Transformer Engine's attention then makes the key and value views contiguous, and the query too
where the rank holds one group (LAYOUT_COPY)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simulon.workload.layer_kernels as layer_kernels
from helpers import gpt_scenario
from simulon.pipeline import simulate
from simulon.search.estimate import Estimator, unit_kind
from simulon.search.space import Strategy
from simulon.workload.kernels import Phase
from simulon.workload.layer_kernels import LAYOUT_COPY, QKV_GRAD_CAT, QUERY_COPY, LayerKernels

SEQ, HIDDEN, HEADS, LAYERS, MICRO_BATCHES = 1024, 1024, 16, 2, 2
HEAD = HIDDEN // HEADS


def scenario(position: str = "learned", tp: int = 1, kv_heads: int | None = 4, gpus: int | None = None,
             name: str = "test-gpt", gate: bool = False, **parallelism):
    gpus = gpus or tp
    extra = {"position_embedding": position, "name": name, **({"attention_output_gate": True} if gate else {})}
    return gpt_scenario(gpus_per_node=gpus, tp=tp, gbs=MICRO_BATCHES * gpus // tp, mbs=1, seq=SEQ, hidden=HIDDEN,
                        heads=HEADS, kv_heads=kv_heads, layers=LAYERS, activation="swiglu", extra_model=extra,
                        extra_parallelism=parallelism)


def nodes(sim, names: tuple[str, ...]) -> list[int]:
    dag = sim.dag
    return [n for n in np.flatnonzero(dag.kernel >= 0) if dag.kernel_specs[dag.kernel[n]].name in names]


@settings(max_examples=20, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from(["learned", "rope"]))
def test_the_query_is_copied_where_a_rank_holds_several_groups_of_several_heads(tp, kv_heads, position):
    """[sq, b, ng, np/ng hn] -> [sq, b, np, hn] is a view only with one group a rank (tp >= groups) or one head a
    group (multi-head attention): otherwise a read and a write of the rank's query, forward only."""
    kernels = LayerKernels.of(scenario(position, tp=tp, kv_heads=kv_heads).workload)
    heads, groups = HEADS // tp, max(kv_heads // tp, 1)
    if groups > 1 and heads > groups:
        assert set(kernels[QUERY_COPY]) == {Phase.fwd, Phase.recompute}
        assert kernels[QUERY_COPY][Phase.fwd].bytes == pytest.approx(SEQ * heads * HEAD * 2 * 2)  # bf16
        assert kernels[QUERY_COPY][Phase.fwd].flops == 0.0
    else:
        assert QUERY_COPY not in kernels


def test_an_output_gate_is_reshaped_with_its_query():
    kernels = LayerKernels.of(scenario(gate=True).workload)
    assert kernels[QUERY_COPY][Phase.fwd].bytes == pytest.approx(2 * SEQ * HEADS * HEAD * 2 * 2)


def test_an_unrotated_grouped_layer_concatenates_its_gradients_and_an_unrotated_multi_head_one_does_not():
    """The copied query's gradient is a buffer of its own: SplitAlongDim's backward cannot return a view."""
    grouped = LayerKernels.of(scenario().workload)
    qkv = SEQ * (HEADS + 2 * 4) * HEAD
    assert grouped[QKV_GRAD_CAT][Phase.bwd_ig].bytes == pytest.approx(qkv * 2 * 2)
    multi_head = LayerKernels.of(scenario(kv_heads=None).workload)
    assert QUERY_COPY not in multi_head and QKV_GRAD_CAT not in multi_head


def test_eager_huggingface_layers_copy_no_query():
    eager = scenario().workload
    eager = eager.model_copy(update={"training": eager.training.model_copy(update={"elementwise": "eager"})})
    assert QUERY_COPY not in LayerKernels.of(eager)


@pytest.mark.parametrize("recompute", [{}, {"recompute": "full"}])
def test_the_query_copy_runs_between_the_qkv_projection_and_the_core_attention(recompute):
    sim = simulate(scenario("rope", **recompute))
    dag, tl = sim.dag, sim.timeline
    kernels = LayerKernels.of(scenario("rope").workload)

    def forward(name: str, phase: Phase) -> dict[tuple[int, int], int]:
        return {(int(dag.layer[n]), int(dag.microbatch[n])): n for n in nodes(sim, (name,))
                if dag.kernel_specs[dag.kernel[n]].phase == phase}

    phases = [Phase.fwd, Phase.recompute] if recompute else [Phase.fwd]
    assert len(nodes(sim, (QUERY_COPY,))) == LAYERS * MICRO_BATCHES * len(phases)
    for phase in phases:
        copies, qkv, rope = forward(QUERY_COPY, phase), forward("attn_qkv", phase), forward("attn_rope", phase)
        core = forward(kernels.attention_core[0], phase)
        assert len(copies) == LAYERS * MICRO_BATCHES
        for key, copy in copies.items():
            assert tl.start[copy] >= tl.finish[qkv[key]]
            assert tl.finish[copy] <= tl.start[rope[key]] <= tl.start[core[key]]


def test_the_estimate_costs_the_copies_and_the_gradient_concatenation_as_the_replay_runs_them(monkeypatch):
    """A grouped layer's estimated seconds less the same layer's without the copies (copies_query and
    te_layout_copies off, under a
    model name of its own so that no shared table is reused) are what the replay's copies take a layer and
    micro-batch."""
    def layer_s(sc) -> float:
        estimator = Estimator.on(sc.workload, sc.datacenter, sc.collective, sc.workload.training.num_gpus)
        return estimator.unit_seconds(Strategy.of(sc), sc.workload, unit_kind(LayerKernels.of(sc.workload), 0))

    grouped = scenario()
    sim = simulate(grouped)
    replayed = float(sum(sim.dag.duration[n] for n in nodes(sim, (QUERY_COPY, QKV_GRAD_CAT, LAYOUT_COPY))))
    assert replayed > 0
    with_copies = layer_s(grouped)
    monkeypatch.setattr(layer_kernels, "copies_query", lambda *_: False)
    monkeypatch.setattr(layer_kernels, "te_layout_copies", lambda *_: 0.0)
    without = scenario(name="test-gpt-without-query-copy")
    assert QUERY_COPY not in LayerKernels.of(without.workload)
    assert with_copies - layer_s(without) == pytest.approx(replayed / (LAYERS * MICRO_BATCHES), rel=1e-6)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from(["learned", "rope"]))
def test_transformer_engine_copies_the_views_its_layout_check_refuses(tp, kv_heads, position):
    """get_qkv_layout: rotated, the value (the query and key are the rotary kernel's outputs); unrotated multi-head
    views interleave at the head (sbh3d), none; unrotated grouped ones lie apart in each group, the key and value,
    and the query too where a rank holds one group (its reshape a strided view). Forward only, a read and a write."""
    kernels = LayerKernels.of(scenario(position, tp=tp, kv_heads=kv_heads).workload)
    heads, groups = HEADS // tp, max(kv_heads // tp, 1)
    if position == "rope":
        copied = groups
    elif heads > groups:
        copied = 2 * groups + (heads if groups == 1 else 0)
    else:
        copied = 0
    if copied:
        assert set(kernels[LAYOUT_COPY]) == {Phase.fwd, Phase.recompute}
        assert kernels[LAYOUT_COPY][Phase.fwd].bytes == pytest.approx(SEQ * copied * HEAD * 2 * 2)  # bf16
        assert QKV_GRAD_CAT in kernels  # the gradients of the copies come back apart
    else:
        assert LAYOUT_COPY not in kernels and QKV_GRAD_CAT not in kernels


def test_attention_outside_transformer_engine_leaves_the_grouped_views_as_they_are():
    grouped = scenario().workload
    unfused = grouped.model_copy(update={"training": grouped.training.model_copy(update={"attention": "unfused"})})
    kernels = LayerKernels.of(unfused)
    assert LAYOUT_COPY not in kernels and QUERY_COPY in kernels and QKV_GRAD_CAT in kernels


def test_the_layout_copy_runs_with_the_core_attention_and_again_where_that_is_recomputed():
    def copies(sim) -> list[Phase]:
        return sorted(sim.dag.kernel_specs[sim.dag.kernel[n]].phase for n in nodes(sim, (LAYOUT_COPY,)))

    assert copies(simulate(scenario())) == [Phase.fwd] * LAYERS * MICRO_BATCHES
    recomputed = simulate(scenario(recompute="selective", recompute_modules=["core_attn"]))
    assert copies(recomputed) == sorted([Phase.fwd, Phase.recompute] * LAYERS * MICRO_BATCHES)
