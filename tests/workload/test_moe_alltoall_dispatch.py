"""MoE token dispatch as Megatron-Core's alltoall dispatcher runs it under sequence parallelism: each rank routes
and sends only its own share of the sequence over ep, and the routed tokens are all-gathered over expert tensor
parallelism only after they arrive (token_dispatcher.py, MoEAlltoAllTokenDispatcher); the layer's output is reduced
across tp only where it has partial sums (a shared expert)."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.collective.types import CollType
from simulon.pipeline import simulate
from simulon.search.estimate import Estimator
from simulon.search.run import Search, apply
from simulon.search.space import Strategy
from simulon.workload.kernels import Phase
from simulon.workload.layer_kernels import LayerKernels
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import CollectiveOp

HIDDEN, SEQ, TOP_K = 1024, 512, 2


def scenario(tp: int, ep: int, etp: int | None = None, sp: bool = True, shared: int = 0, top_k: int = TOP_K,
             nodes: int = 2, capacity_factor: float | None = None):
    moe = {"num_experts": 8, "top_k": top_k, "num_shared_experts": shared,
           **({"capacity_factor": capacity_factor} if capacity_factor else {})}
    extra = {"sequence_parallel": sp, **({"expert_tensor_parallel": etp} if etp else {})}
    return gpt_scenario(nodes=nodes, gpus_per_node=4, tp=tp, ep=ep, layers=2, hidden=HIDDEN, seq=SEQ, gbs=8,
                        moe=moe, extra_parallelism=extra, framework=engine(tp, sp))


def engine(tp: int, sp: bool) -> str:
    """Megatron-Core refuses MoE at tp > 1 without sequence parallelism (MoELayer.forward); DeepSpeed's pipeline
    engine runs the same layers without it."""
    return "deepspeed" if tp > 1 and not sp else "megatron"


def collectives(sc) -> list[CollectiveOp]:
    programs = MegatronTracer(sc.workload, sc.datacenter.num_gpus).stage_programs()
    return [op for p in programs for op in p.ops if isinstance(op, CollectiveOp)]


def by_label(sc) -> dict[str, set[tuple[CollType, str, float]]]:
    found: dict[str, set] = {}
    for op in collectives(sc):
        found.setdefault(op.label, set()).add((op.ctype, op.axis, op.nbytes))
    return found


@pytest.mark.parametrize(("tp", "ep", "etp"), [(2, 2, None), (4, 2, None), (2, 4, 1), (4, 2, 2), (4, 2, 1)])
def test_the_dispatch_all_to_all_carries_only_the_ranks_own_sequence_share_whatever_the_expert_tp(tp, ep, etp):
    sc = scenario(tp, ep, etp)
    local_tokens = SEQ // tp  # micro-batch 1, the rank's sequence-parallel share
    expected = local_tokens * TOP_K * HIDDEN * 2
    found = by_label(sc)
    for label in ("moe_dispatch", "moe_combine"):
        assert found[label] == {(CollType.AllToAll, "ep", expected)}


@pytest.mark.parametrize(("tp", "etp", "axis"), [(2, None, "tp"), (4, None, "tp"), (4, 2, "etp")])
def test_routed_tokens_are_gathered_over_expert_tp_after_the_all_to_all_and_scattered_before_the_combine(tp, etp,
                                                                                                         axis):
    sc = scenario(tp, 2, etp)
    gathered = (SEQ // tp) * TOP_K * (etp or tp) * HIDDEN * 2  # every expert-tp rank's routed copies
    found = by_label(sc)
    assert found["moe_expert_gather"] == found["moe_expert_grad_gather"] == {(CollType.AllGather, axis, gathered)}
    assert found["moe_expert_scatter"] == found["moe_expert_grad_scatter"] == {
        (CollType.ReduceScatter, axis, gathered)}


def test_with_expert_tp_one_nothing_is_gathered_over_tp_around_the_experts():
    found = by_label(scenario(4, 2, 1))
    assert not {"moe_expert_gather", "moe_expert_scatter", "moe_gather", "moe_reduce"} & set(found)


def test_a_moe_layer_without_a_shared_expert_reduces_nothing_across_tp_and_one_with_it_gathers_and_reduces_once():
    plain, shared = Counter(op.label for op in collectives(scenario(2, 2))), Counter(
        op.label for op in collectives(scenario(2, 2, shared=1)))
    assert plain["moe_gather"] == plain["moe_reduce"] == plain["moe_grad_gather"] == 0
    assert shared["moe_gather"] > 0 and shared["moe_reduce"] == shared["moe_gather"]
    assert shared["attn_reduce"] == plain["attn_reduce"]  # attention untouched


def test_without_sequence_parallelism_every_tp_rank_sends_its_expert_tp_share_and_the_output_is_all_reduced():
    sc = scenario(2, 2, sp=False)
    routed = SEQ * TOP_K * HIDDEN * 2  # every token on every tp rank; etp = tp: all of them to its experts
    found = by_label(sc)
    assert found["moe_dispatch"] == {(CollType.AllToAll, "ep", routed)}
    assert found["moe_reduce"] == {(CollType.AllReduce, "tp", SEQ * HIDDEN * 2)}
    assert "moe_expert_gather" not in found


def test_the_router_scores_the_ranks_own_tokens():
    kernels = LayerKernels.of(scenario(4, 2).workload)
    assert dict(kernels["moe_route"][next(iter(kernels["moe_route"]))].shape)["m"] == SEQ // 4


@settings(max_examples=12, deadline=None)
@given(tp=st.sampled_from([1, 2, 4]), top_k=st.sampled_from([1, 2]))
def test_dispatch_bytes_do_not_depend_on_expert_tp_and_expert_tp_only_adds_gathers_inside_its_group(tp, top_k):
    same_tp = by_label(scenario(tp, 2, top_k=top_k))
    etp_one = by_label(scenario(tp, 2, 1, top_k=top_k))
    assert same_tp["moe_dispatch"] == etp_one["moe_dispatch"]
    assert ("moe_expert_gather" in same_tp) == (tp > 1)


def test_the_search_estimate_charges_expert_tp_its_gathers_and_scatters_on_top_of_the_same_dispatch():
    """tp 2 with expert tp 2 or 1: the same dispatch bytes and the same kernel FLOPs; the estimate's EP term differs
    by the gathers and scatters of the routed tokens over the expert-tp pair, both ways."""
    sc = scenario(2, 2, nodes=1)
    search = Search(sc, 4)
    base = Strategy(tp=2, pp=1, vpp=1, dp=2, cp=1, ep=2, etp=2, micro_batch_size=1, sequence_parallel=True,
                    recompute="none", sharding="distributed_optimizer", dtype="bf16", tp_comm_overlap=False)
    one = dataclasses.replace(base, etp=1)
    estimator: Estimator = search.estimator
    gathered, single = (estimator.estimate(s, apply(sc.workload, s)) for s in (base, one))
    assert gathered.ep_s > single.ep_s
    # the same FLOPs in other tiles: half of each expert's ffn over all its tokens, or all of it over half of them
    assert gathered.compute_s == pytest.approx(single.compute_s, rel=0.15)


@pytest.mark.parametrize("etp", [None, 2, 1])
def test_a_folded_step_with_expert_tp_gathers_takes_exactly_the_full_expansions_time(etp):
    sc = gpt_scenario(nodes=4, gpus_per_node=8, tp=4, ep=4, layers=2, hidden=HIDDEN, seq=SEQ, gbs=16,
                      moe={"num_experts": 8, "top_k": TOP_K},
                      extra_parallelism={"sequence_parallel": True, **({"expert_tensor_parallel": etp} if etp else {})})
    full, folded = (simulate(sc, fold_mode=mode).result.iteration_time_ms for mode in ("full", "symmetric"))
    assert folded == pytest.approx(full, rel=1e-9)


@pytest.mark.parametrize("factor", [0.5, 1.25, 2.0])
@pytest.mark.parametrize(("tp", "sp"), [(2, True), (2, False), (1, False)])
def test_a_capacity_factor_pads_the_dispatch_and_the_experts_rows_to_its_multiple_of_the_balanced_load(factor, tp,
                                                                                                        sp):
    """Megatron-Core's capacity ceil(tokens x top_k / experts x factor) per expert, every expert's input padded to it
    (--moe-pad-expert-input-to-capacity): the all-to-all and the expert GEMMs carry factor x the balanced tokens."""
    balanced, padded = scenario(tp, 2, sp=sp), scenario(tp, 2, sp=sp, capacity_factor=factor)
    local = (SEQ // tp if sp else SEQ) * TOP_K  # the token copies a rank sends, balanced
    for label in ("moe_dispatch", "moe_combine"):
        assert by_label(balanced)[label] == {(CollType.AllToAll, "ep", local * HIDDEN * 2)}
        assert by_label(padded)[label] == {(CollType.AllToAll, "ep", math.ceil(local * factor) * HIDDEN * 2)}
    rows = {name: LayerKernels.of(sc.workload)["moe_expert_linear2"][Phase.fwd].hw_flops for name, sc in
            (("balanced", balanced), ("padded", padded))}
    assert rows["padded"] / rows["balanced"] == pytest.approx(factor, rel=1e-3)


def test_more_capacity_is_never_faster_and_dropless_is_a_factor_of_one():
    times = [simulate(scenario(2, 2, capacity_factor=f)).result.iteration_time_ms for f in (0.5, 1.0, 1.5, 2.0)]
    assert times == sorted(times) and times[0] < times[-1]
    assert times[1] == simulate(scenario(2, 2)).result.iteration_time_ms


@pytest.mark.parametrize("factor", [0.5, 2.0])
def test_padding_to_capacity_is_hardware_work_not_model_flops(factor):
    """MFU counts the model's FLOPs (top_k experts a token), as Megatron's num_floating_point_operations does: padded
    rows cost time but are no model FLOPs; the hardware FLOPs the GEMMs run include them."""
    kernels = {f: LayerKernels.of(scenario(2, 2, capacity_factor=f).workload)["moe_expert_linear2"][Phase.fwd]
               for f in (None, factor)}
    assert kernels[factor].flops == pytest.approx(kernels[None].flops, rel=1e-6)
    assert kernels[factor].hw_flops == pytest.approx(factor * kernels[None].hw_flops, rel=1e-3)
