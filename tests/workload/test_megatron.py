"""Workload tracer: FLOPs against closed forms, 1F1B order, rank layout, per-layer kernels, DP overlap."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.collective.types import CollType
from simulon.dag.nodes import NodeKind
from simulon.pipeline import build_dag, simulate
from simulon.workload.kernels import Phase
from simulon.workload.layout import RankLayout
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import CollectiveOp, ComputeOp
from simulon.workload.schedule import OneFOneBScheduler, Step


def total_model_flops(sc) -> float:
    dag, _, _ = build_dag(sc)
    return dag.total_flops()


@pytest.mark.parametrize(("tp", "pp"), [(1, 1), (2, 1), (1, 2), (2, 2), (4, 1)])
def test_dense_gpt_flops_equal_narayanan_closed_form(tp, pp):
    layers, h, seq, vocab, gbs = 4, 1024, 512, 32768, 8
    sc = gpt_scenario(nodes=2, gpus_per_node=4, tp=tp, pp=pp, layers=layers, hidden=h, seq=seq, vocab=vocab, gbs=gbs)
    # Narayanan et al. (SC'21) eq. 3 without recomputation: 72 B s l h^2 (1 + s/(6h) + V/(12 l h))
    expected = 72 * gbs * seq * layers * h**2 * (1 + seq / (6 * h) + vocab / (12 * layers * h))
    assert total_model_flops(sc) == pytest.approx(expected, rel=1e-12)


def test_gqa_swiglu_flops_follow_their_closed_form():
    layers, h, heads, kv, ffn, seq, vocab, gbs = 2, 1024, 16, 4, 2816, 256, 32000, 4
    sc = gpt_scenario(tp=2, layers=layers, hidden=h, heads=heads, kv_heads=kv, ffn=ffn, seq=seq, vocab=vocab,
                      gbs=gbs, activation="swiglu")
    tokens, d = gbs * seq, h // heads
    per_layer_fwd = 2 * tokens * h * (heads + 2 * kv) * d + 4 * tokens * seq * h + 2 * tokens * h * h \
        + 3 * 2 * tokens * h * ffn
    expected = 3 * (layers * per_layer_fwd + 2 * tokens * h * vocab)
    assert total_model_flops(sc) == pytest.approx(expected, rel=1e-12)


def test_moe_flops_count_router_and_top_k_experts():
    layers, h, ffn, seq, vocab, gbs, experts, top_k = 2, 512, 1024, 256, 8192, 8, 4, 2
    sc = gpt_scenario(nodes=2, gpus_per_node=4, tp=1, ep=2, layers=layers, hidden=h, heads=8, ffn=ffn, seq=seq,
                      vocab=vocab, gbs=gbs, moe={"num_experts": experts, "top_k": top_k})
    tokens = gbs * seq
    attention = 2 * tokens * h * 3 * h + 4 * tokens * seq * h + 2 * tokens * h * h
    moe = 2 * tokens * h * experts + top_k * 2 * 2 * tokens * h * ffn
    assert total_model_flops(sc) == pytest.approx(3 * (layers * (attention + moe) + 2 * tokens * h * vocab), rel=1e-12)


@pytest.mark.parametrize("layer_freq", [2, [0, 1, 0, 1]])
def test_moe_layers_alternating_with_dense_ones_count_each_kind_s_flops(layer_freq):
    """Megatron's --moe-layer-freq: every second layer (0 and 2 for the step, 1 and 3 for the list) holds the
    experts, the others a dense MLP."""
    layers, h, ffn, seq, vocab, gbs, experts, top_k = 4, 512, 1024, 256, 8192, 8, 4, 2
    sc = gpt_scenario(nodes=2, gpus_per_node=4, tp=1, ep=2, layers=layers, hidden=h, heads=8, ffn=ffn, seq=seq,
                      vocab=vocab, gbs=gbs, moe={"num_experts": experts, "top_k": top_k, "layer_freq": layer_freq})
    tokens = gbs * seq
    attention = 2 * tokens * h * 3 * h + 4 * tokens * seq * h + 2 * tokens * h * h
    moe = 2 * tokens * h * experts + top_k * 2 * 2 * tokens * h * ffn
    dense = 2 * 2 * tokens * h * ffn
    expected = 3 * (layers * attention + 2 * moe + 2 * dense + 2 * tokens * h * vocab)
    assert total_model_flops(sc) == pytest.approx(expected, rel=1e-12)
    kinds = [sc.workload.model.layer_blocks(i)[1] for i in range(layers)]
    assert kinds == (["moe", "mlp"] * 2 if layer_freq == 2 else ["mlp", "moe"] * 2)


@given(p=st.integers(1, 8), m=st.integers(1, 24))
def test_one_f_one_b_order(p, m):
    sched = OneFOneBScheduler()
    for stage in range(p):
        steps = sched.steps(stage, p, m)
        assert sorted(steps) == sorted([Step("F", i) for i in range(m)] + [Step("B", i) for i in range(m)])
        warmup = min(p - stage - 1, m)
        assert steps[:warmup] == [Step("F", i) for i in range(warmup)]
        steady = steps[warmup:warmup + 2 * (m - warmup)]
        assert steady[0::2] == [Step("F", warmup + i) for i in range(m - warmup)]
        assert steady[1::2] == [Step("B", i) for i in range(m - warmup)]
        assert steps[warmup + 2 * (m - warmup):] == [Step("B", i) for i in range(m - warmup, m)]
        # at most p - stage micro-batches are in flight (activation memory of 1F1B)
        in_flight = peak = 0
        for kind, *_ in steps:
            in_flight += 1 if kind == "F" else -1
            peak = max(peak, in_flight)
        assert peak <= min(p - stage, m)


def test_rank_layout_is_tp_then_cp_then_dp_then_pp_with_ep_inside_dp():
    layout = RankLayout(tp=2, cp=1, dp=4, pp=2, ep=2)
    assert layout.group("tp", 5) == (4, 5)
    assert layout.group("dp", 1) == (1, 3, 5, 7)
    assert layout.group("pp", 3) == (3, 11)
    assert layout.group("ep", 4) == (4, 6)          # consecutive data-parallel ranks
    assert layout.group("edp", 4) == (0, 4)         # ranks ep apart
    assert set(layout.group("ep", 4)) <= set(layout.group("dp", 4))
    assert layout.num_gpus == 16
    for rank in range(16):
        t, c, d, p = layout.coords[rank]
        assert layout.rank(t, c, d, p) == rank


@given(st.sampled_from([(2, 1, 4, 1), (4, 2, 2, 2), (2, 1, 8, 2), (8, 1, 2, 4)]))
def test_expert_groups_partition_each_stage_whatever_the_expert_tensor_parallelism(shape):
    tp, cp, dp, ep = shape
    for etp in {tp, 1}:
        if (tp * cp * dp) % (ep * etp):
            continue
        layout = RankLayout(tp=tp, cp=cp, dp=dp, pp=2, ep=ep, etp=etp)
        for axis, size in (("ep", ep), ("edp", layout.edp)):
            groups = {layout.group(axis, rank) for rank in range(layout.num_gpus)}
            assert all(len(g) == size and rank in layout.group(axis, rank) for g in groups
                       for rank in g)
            assert sorted(r for g in groups for r in g) == list(range(layout.num_gpus))
            assert all(layout.stage_of(g[0]) == layout.stage_of(g[-1]) for g in groups)
        assert ep * etp * layout.edp == tp * cp * dp


def test_with_unsplit_experts_expert_parallelism_spans_tensor_parallel_ranks():
    layout = RankLayout(tp=2, cp=1, dp=4, pp=1, ep=8, etp=1)
    assert layout.group("ep", 3) == tuple(range(8)) and layout.group("edp", 3) == (3,)
    default = RankLayout(tp=2, cp=1, dp=4, pp=1, ep=2)
    assert default.group("ep", 4) == RankLayout(tp=2, cp=1, dp=4, pp=1, ep=2, etp=2).group("ep", 4) == (4, 6)


def test_unsplit_experts_process_a_tp_share_of_the_tokens_with_the_whole_expert_ffn():
    moe = {"num_experts": 8, "top_k": 2}
    split = MegatronTracer(gpt_scenario(nodes=2, gpus_per_node=4, tp=2, ep=2, moe=moe).workload, 8).kernels
    whole = MegatronTracer(gpt_scenario(nodes=2, gpus_per_node=4, tp=2, ep=8, moe=moe,
                                        extra_parallelism={"expert_tensor_parallel": 1}).workload, 8).kernels
    a, b = split["moe_expert_linear1"][Phase.fwd], whole["moe_expert_linear1"][Phase.fwd]
    assert (b.param("m"), b.param("n")) == (a.param("m") // 2, a.param("n") * 2)
    assert b.param("groups") == 1 and a.param("groups") == 4
    assert b.flops == a.flops  # each rank: half the tokens through the whole FFN, or all through half of it


@given(experts=st.sampled_from([2, 8, 32, 128]), ffn=st.sampled_from([256, 1024]))
def test_each_experts_weight_gradient_is_its_own_weight_from_its_own_tokens(experts, ffn):
    """A grouped GEMM's weight gradient is, per expert, ffn x hidden from that expert's tokens (the kernels table
    validates it so too: validate/kernels.py bwd_grad_w), not a slice of the weight from every token: its time stays
    near the forward's however many experts a rank holds."""
    from simulon.compute.analytical import AnalyticalModel
    from simulon.config.common import DType

    sc = gpt_scenario(nodes=1, gpus_per_node=4, moe={"num_experts": experts, "top_k": 2,
                                                      "expert_ffn_hidden_size": ffn}, seq=4096, gbs=4)
    kernels = MegatronTracer(sc.workload, 4).kernels
    fwd, wgrad = (kernels["moe_expert_linear1"][phase] for phase in (Phase.fwd, Phase.bwd_wg))
    tokens = fwd.param("m")
    assert (wgrad.param("m"), wgrad.param("n"), wgrad.param("k")) == (1024 * experts, ffn, tokens / experts)
    assert wgrad.flops == fwd.flops
    assert kernels.weights(["moe_expert_linear1"]) == experts * 1024 * ffn
    times = AnalyticalModel(sc.datacenter.groups[0].gpu, DType.bf16).seconds([fwd, wgrad])
    assert times[1] < 3 * times[0]


def test_every_layer_runs_forward_and_both_backward_parts_for_every_microbatch():
    sc = gpt_scenario(nodes=1, gpus_per_node=4, tp=2, pp=2, layers=4, gbs=6)
    tracer = MegatronTracer(sc.workload, 4)
    for program in tracer.stage_programs():
        counts = Counter((op.kernel.name, op.kernel.phase) for op in program.ops if isinstance(op, ComputeOp))
        for name in ("attn_qkv", "attn_proj", "mlp_linear1", "mlp_linear2"):
            for phase in (Phase.fwd, Phase.bwd_ig, Phase.bwd_wg):
                assert counts[(name, phase)] == 6 * 2  # micro-batches x layers per stage
        assert counts[("attn_flash", Phase.fwd)] == counts[("attn_flash", Phase.bwd_ig)] == 12
        assert counts[("optimizer", Phase.step)] == 1
        reduces = Counter((op.label, op.phase) for op in program.ops
                          if isinstance(op, CollectiveOp) and op.axis == "tp" and op.ctype == CollType.AllReduce)
        assert reduces[("attn_reduce", Phase.fwd)] == reduces[("mlp_reduce", Phase.fwd)] == 12
        assert reduces[("attn_reduce", Phase.bwd_ig)] == reduces[("mlp_reduce", Phase.bwd_ig)] == 12
    stage0, stage1 = tracer.stage_programs()
    names0 = {op.kernel.name for op in stage0.ops if isinstance(op, ComputeOp)}
    names1 = {op.kernel.name for op in stage1.ops if isinstance(op, ComputeOp)}
    assert "embedding" in names0 and "embedding" not in names1
    assert {"lm_head", "loss"} <= names1 and "lm_head" not in names0


def test_sequence_parallelism_swaps_all_reduce_for_gather_and_scatter():
    sc = gpt_scenario(tp=4, extra_parallelism={"sequence_parallel": True})
    ops = MegatronTracer(sc.workload, 4).stage_program(0).ops
    tp_types = Counter(op.ctype for op in ops if isinstance(op, CollectiveOp) and op.axis == "tp")
    assert tp_types[CollType.ReduceScatter] > 0 and tp_types[CollType.AllGather] > 0
    assert tp_types[CollType.AllReduce] == 3 * 8  # only the loss's three small all-reduces per micro-batch


def test_dp_gradient_sync_overlaps_backward_and_optimizer_comes_last():
    sc = gpt_scenario(nodes=4, gpus_per_node=1, tp=1, pp=1, layers=8, hidden=2048, heads=16, gbs=8,
                      extra_parallelism={"overlap_grad_reduce": True})
    sc = sc.model_copy(update={"workload": sc.workload.model_copy(update={"training": sc.workload.training.model_copy(
        update={"grad_bucket_size": 20_000_000})})})
    sim = simulate(sc, "full")
    dag, tl = sim.dag, sim.timeline
    on_gpu0 = dag.gpu == 0
    compute = np.flatnonzero((dag.kind == NodeKind.compute) & on_gpu0)
    backward = [n for n in compute if dag.kernel_specs[dag.kernel[n]].phase in (Phase.bwd_ig, Phase.bwd_wg)]
    grad_syncs = [c for c, inst in enumerate(dag.collectives) if inst.label == "grad_allreduce"]
    assert len(grad_syncs) >= 3
    markers = np.flatnonzero((dag.kind == NodeKind.marker) & on_gpu0)
    first_sync_start = min(tl.start[m] for m in markers if dag.coll[m] == grad_syncs[0])
    assert first_sync_start < max(tl.finish[n] for n in backward)  # launched while backward still runs
    optimizer = [n for n in compute if dag.kernel_specs[dag.kernel[n]].name == "optimizer"]
    assert tl.finish[optimizer[0]] == pytest.approx(tl.finish[compute].max())
    assert tl.start[optimizer[0]] >= max(tl.finish[m] for m in markers if dag.coll[m] in grad_syncs)


def test_breakdown_adds_up_to_the_iteration_time():
    result = simulate(gpt_scenario(nodes=2, gpus_per_node=4, tp=2, pp=2)).result
    for gpu in result.per_gpu:
        total = gpu.compute_ms + gpu.exposed_comm_ms + gpu.bubble_ms
        assert total == pytest.approx(result.iteration_time_ms, rel=1e-9)
    assert result.breakdown["bubble_ms"] > 0  # pp = 2 has a pipeline bubble


def recomputed_kernels(**parallelism) -> Counter:
    sc = gpt_scenario(nodes=1, gpus_per_node=2, pp=2, layers=4, gbs=2, extra_parallelism=parallelism)
    return Counter(op.kernel.name for program in MegatronTracer(sc.workload, 2).stage_programs() for op in program.ops
                   if isinstance(op, ComputeOp) and op.kernel.phase == Phase.recompute)


def test_selective_recomputation_re_runs_the_modules_it_names_and_core_attention_by_default():
    assert recomputed_kernels(recompute="selective") == Counter({"attn_flash": 8})  # 2 micro-batches x 4 layers
    named = recomputed_kernels(recompute="selective", recompute_modules=["mlp", "layernorm"])
    assert set(named) == {"attn_norm", "mlp_norm", "mlp_linear1", "mlp_act", "mlp_linear2"}
    assert set(named.values()) == {8}


def collectives_by_phase(sc) -> dict[Phase, Counter]:
    counts: dict[Phase, Counter] = {phase: Counter() for phase in Phase}
    for program in MegatronTracer(sc.workload, sc.datacenter.num_gpus).stage_programs():
        for op in program.ops:
            if isinstance(op, CollectiveOp):
                counts[op.phase][op.label] += 1
    return counts


def test_recomputing_the_mlp_or_the_moe_layer_re_runs_their_communication_as_megatrons_checkpoints_do():
    """TransformerLayer's recompute_mlp checkpoints self.mlp, whose linear layers gather and reduce over tp; MoELayer's
    moe_layer_recompute its whole forward, token dispatch and combine included (megatron/core/transformer/moe/
    moe_layer.py). Before, their kernels re-ran and none of their collectives."""
    dense = gpt_scenario(nodes=1, gpus_per_node=4, tp=2, pp=2, layers=4, gbs=2, extra_parallelism={
        "sequence_parallel": True, "recompute": "selective", "recompute_modules": ["mlp"]})
    counts = collectives_by_phase(dense)
    assert counts[Phase.recompute] == Counter({"mlp_gather": 8, "mlp_reduce": 8})  # 2 micro-batches x 4 layers
    assert all(counts[Phase.fwd][label] == 8 for label in counts[Phase.recompute])
    moe = gpt_scenario(nodes=2, gpus_per_node=4, ep=4, layers=2, hidden=1024, seq=1024, gbs=32,
                       moe={"num_experts": 8, "top_k": 2},
                       extra_parallelism={"recompute": "selective", "recompute_modules": ["moe"]})
    counts = collectives_by_phase(moe)
    assert set(counts[Phase.recompute]) == {"moe_dispatch", "moe_combine"}
    assert all(counts[Phase.recompute][label] == counts[Phase.fwd][label] > 0 for label in counts[Phase.recompute])


def test_recomputing_core_attentions_output_re_runs_core_attention_alone():
    assert recomputed_kernels(recompute="selective", recompute_modules=["context"]) == Counter({"attn_flash": 8})


def test_recomputing_the_mlp_input_re_runs_fc1_and_the_activation_but_never_fc2():
    # fc2's backward needs its input, not its output: JAX's remat re-runs up to the activation only
    assert recomputed_kernels(recompute="selective", recompute_modules=["mlp_in"]) == Counter(
        {"mlp_linear1": 8, "mlp_act": 8})


def test_full_recomputation_of_some_layers_re_runs_only_those_layers_of_each_chunk():
    every, first = recomputed_kernels(recompute="full"), recomputed_kernels(recompute="full", recompute_num_layers=1)
    assert set(every) == set(first) and all(first[name] * 2 == count for name, count in every.items())
