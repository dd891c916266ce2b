"""DeepSeek-V3's DualPipe and DualPipeV: the reference's own step order, the bubble and memory of the DualPipe
README's table (and DeepSeek-V3's Table 2), the mirrored placement with its doubled parameters."""

from __future__ import annotations

import numpy as np
import pytest
from dualpipe_reference import ReferenceDualPipe, reference_pairs
from hypothesis import given
from hypothesis import strategies as st
from pipeline_timing import time_schedule

from helpers import gpt_scenario
from simulon.analysis.kinds import KIND_NAMES, node_kinds
from simulon.memory import MemoryModel
from simulon.pipeline import simulate
from simulon.workload.data_parallel import MIRROR_SYNC
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import OPTIMIZER_LAYER, ComputeOp, SendOp
from simulon.workload.schedule import MIRRORED, Step, make_scheduler

dualpipe_cases = st.integers(1, 5).flatmap(lambda half: st.tuples(
    st.just(2 * half), st.integers(2 * half, 6 * half).map(lambda m: 2 * m)))
dualpipev_cases = st.integers(2, 8).flatmap(lambda p: st.tuples(st.just(p), st.integers(2 * p, 5 * p)))


def reference_steps(rank: int, num_ranks: int, num_microbatches: int, v: bool) -> list[Step]:
    """The reference's order in simulon's numbering: module m is chunk m; DualPipe's reverse direction (module 1)
    carries micro-batches M/2 to M - 1."""
    offset = (0, 0) if v else (0, num_microbatches // 2)
    return [Step(kind, offset[module] + chunk_id, module)  # type: ignore[arg-type]
            for kind, module, chunk_id, _ in ReferenceDualPipe(rank, num_ranks, v).step(num_microbatches)]


@given(dualpipe_cases)
def test_dualpipe_runs_the_reference_step_order_on_every_rank(case):
    num_ranks, num_microbatches = case
    for rank in range(num_ranks):
        assert make_scheduler("dualpipe").steps(rank, num_ranks, num_microbatches) == \
            reference_steps(rank, num_ranks, num_microbatches, v=False)


@given(dualpipev_cases)
def test_dualpipev_runs_the_reference_step_order_on_every_rank(case):
    num_ranks, num_microbatches = case
    for rank in range(num_ranks):
        assert make_scheduler("dualpipev", 2).steps(rank, num_ranks, num_microbatches) == \
            reference_steps(rank, num_ranks, num_microbatches, v=True)


@given(dualpipe_cases)
def test_dualpipe_sends_half_the_micro_batches_each_way_each_through_every_stage_once(case):
    num_ranks, num_microbatches = case
    half = num_microbatches // 2
    for rank in range(num_ranks):
        steps = make_scheduler("dualpipe").steps(rank, num_ranks, num_microbatches)
        for chunk, microbatches in ((0, range(half)), (1, range(half, num_microbatches))):
            for kind in "FB":
                assert [s.microbatch for s in steps if s.kind == kind and s.chunk == chunk] == list(microbatches)
        position = {s: i for i, s in enumerate(steps)}
        for s in steps:
            if s.kind == "W":
                assert position[Step("B", s.microbatch, s.chunk)] < position[s]


def table_bubble(name: str, num_ranks: int, num_microbatches: int, overlapped: bool) -> float:
    vpp = 2 if name in ("zb_v", "dualpipev") else 1
    scheduler = make_scheduler(name, vpp)
    orders = [scheduler.steps(r, num_ranks, num_microbatches) for r in range(num_ranks)]
    pairs = reference_pairs(num_ranks, num_microbatches, name == "dualpipev") if overlapped else None
    return time_schedule(orders, scheduler.placement, pairs=pairs).span_bubble


@pytest.mark.parametrize("num_ranks", [2, 4, 6, 8])
@pytest.mark.parametrize("per_rank", [2, 3, 5])
def test_the_bubbles_of_the_dualpipe_readme_table_at_equal_f_b_w(num_ranks, per_rank):
    """The DualPipe README's (and DeepSeek-V3 Table 2's) bubbles with F = B = W = 1 (B the full backward is 2) and
    the overlapped pair F&B taking F + B = 3, over PP pipeline stages: 1F1B (PP - 1)(F + B), ZB1P
    (PP - 1)(F + B - 2W), DualPipe and DualPipeV (PP/2 - 1)(F&B + B - 3W); DualPipeV's PP = 2 x ranks."""
    m = per_rank * num_ranks * 2  # even and at least 2 PP for every schedule
    F, B, W, FB = 1.0, 2.0, 1.0, 3.0
    assert table_bubble("1f1b", num_ranks, m, False) == pytest.approx((num_ranks - 1) * (F + B))
    assert table_bubble("zb_h1", num_ranks, m, False) == pytest.approx((num_ranks - 1) * (F + B - 2 * W))
    assert table_bubble("dualpipe", num_ranks, m, True) == pytest.approx((num_ranks / 2 - 1) * (FB + B - 3 * W))
    assert table_bubble("dualpipev", num_ranks, m, True) == pytest.approx((num_ranks - 1) * (FB + B - 3 * W))


@pytest.mark.parametrize("name", ["dualpipe", "dualpipev"])
@pytest.mark.parametrize("num_ranks", [4, 6, 8])
def test_running_an_overlapped_pair_as_forward_then_backward_halves_dualpipes_bubble(name, num_ranks):
    """simulon runs a pair one after the other, the forward's output leaving before the backward: with F = B = W
    the bubble is half the overlapped unit's (the README's is an upper bound on what simulon can show)."""
    m = 4 * num_ranks
    assert table_bubble(name, num_ranks, m, False) == pytest.approx(table_bubble(name, num_ranks, m, True) / 2)


@pytest.mark.parametrize("num_ranks", [2, 4, 6, 8])
def test_dualpipe_keeps_one_stage_more_activations_than_1f1b(num_ranks):
    """The README's activation per device: 1F1B PP, DualPipe PP + 1 (in one stage's activations of one micro-batch,
    W's inputs left aside)."""
    def peak(name: str) -> int:
        worst = 0
        for rank in range(num_ranks):
            live = 0
            for step in make_scheduler(name).steps(rank, num_ranks, 4 * num_ranks):
                live += {"F": 1, "B": -1, "W": 0}[step.kind]
                worst = max(worst, live)
        return worst

    assert (peak("1f1b"), peak("zb_h1"), peak("dualpipe")) == (num_ranks, num_ranks, num_ranks + 1)


def dualpipe_scenario(schedule: str = "dualpipe", pp: int = 4, **extra):
    return gpt_scenario(nodes=1, gpus_per_node=pp, pp=pp, layers=16, gbs=16, hidden=512, heads=8, seq=512,
                        extra_parallelism={"pipeline_schedule": schedule, **extra})


def test_dualpipe_holds_each_stage_twice_so_each_rank_has_two_stages_parameters():
    """The README's parameter per device: 2x. Rank i holds 1F1B's stage i and stage p - 1 - i."""
    dual, one = MemoryModel.of(dualpipe_scenario()), MemoryModel.of(dualpipe_scenario("1f1b"))
    for stage in range(4):
        assert dual.stage(stage).params == pytest.approx(one.stage(stage).params + one.stage(3 - stage).params)
    assert sum(dual.stage(s).params for s in range(4)) == pytest.approx(2 * sum(one.stage(s).params for s in range(4)))


def test_dualpipe_middle_ranks_keep_pp_plus_one_stages_of_activations():
    report = MemoryModel.of(dualpipe_scenario()).report()
    assert [report.stages[s].microbatches_in_flight for s in (1, 2)] == [5.0, 5.0]
    # DualPipeV's 9 chunk passes, of the two chunks each micro-batch runs through on the rank
    assert MemoryModel.of(dualpipe_scenario("dualpipev", vpp=2)).stage(2).microbatches_in_flight == 4.5


def test_dualpipe_sends_each_direction_toward_its_far_end():
    tracer = MegatronTracer(dualpipe_scenario().workload, 4)
    assert [[MIRRORED.model_stage(r, c, 4) for c in (0, 1)] for r in range(4)] == [[0, 3], [1, 2], [2, 1], [3, 0]]
    for stage, program in enumerate(tracer.stage_programs()):
        sends = {(op.peer_stage, op.peer_chunk, op.microbatch < 8) for op in program.ops
                 if isinstance(op, SendOp) and op.phase == 0}
        expected = set()
        if stage < 3:
            expected.add((stage + 1, 0, True))   # forward direction: micro-batches 0..7 to the next rank
        if stage > 0:
            expected.add((stage - 1, 1, False))  # reverse direction: micro-batches 8..15 to the previous rank
        assert sends == expected
    # both ends of the pipeline hold the embedding and the LM head
    for rank in (0, 3):
        units = [u for c in (0, 1) for u in tracer.layers.units_of(rank, c)]
        assert -1 in units and -2 in units


def test_dualpipe_runs_every_micro_batch_through_the_model_once_faster_than_1f1b():
    one, dual = simulate(dualpipe_scenario("1f1b")), simulate(dualpipe_scenario())
    kernels = [sum(len([op for op in p.ops if hasattr(op, "kernel") and op.layer != OPTIMIZER_LAYER])
                   for p in MegatronTracer(sc.workload, 4).stage_programs())
               for sc in (dualpipe_scenario("1f1b"), dualpipe_scenario())]  # the step's own kernels per bucket aside
    assert kernels[0] == kernels[1]
    assert dual.result.iteration_time_ms < one.result.iteration_time_ms


@pytest.mark.parametrize(("extra", "field", "reason"), [
    ({"pp": 3}, "pp", "dualpipe needs an even pp"),
    ({"gbs": 6}, "num_microbatches", "at least 2 \\* pp = 8"),
    ({"gbs": 7, "schedule": "dualpipev", "vpp": 2}, "num_microbatches", "at least 2 \\* pp = 8"),
    ({"pp": 1, "schedule": "dualpipev", "vpp": 2}, "pp", "needs pipeline parallelism"),
])
def test_dualpipe_preconditions_are_refused_naming_the_field(extra, field, reason):
    pp, gbs = extra.pop("pp", 4), extra.pop("gbs", 16)
    schedule = extra.pop("schedule", "dualpipe")
    with pytest.raises(ValueError, match=f"workload.parallelism.{field}: .*{reason}"):
        gpt_scenario(nodes=1, gpus_per_node=pp, pp=pp, layers=12, gbs=gbs,
                     extra_parallelism={"pipeline_schedule": schedule, **extra})


@given(pp=st.integers(2, 8), microbatches=st.integers(1, 40))
def test_dualpipe_accepts_exactly_what_the_reference_asserts(pp, microbatches):
    accepted = pp % 2 == 0 and microbatches % 2 == 0 and microbatches >= 2 * pp
    try:
        gpt_scenario(nodes=1, gpus_per_node=pp, pp=pp, layers=pp * 2, gbs=microbatches, hidden=256,
                     heads=4, extra_parallelism={"pipeline_schedule": "dualpipe"})
    except ValueError as exc:
        assert not accepted, exc
        assert "workload.parallelism." in str(exc)
    else:
        assert accepted


def test_dualpipe_sums_each_stages_gradients_with_its_mirror_before_the_optimizer():
    """The DualPipe example sums the two copies' gradients (rank i and rank p - 1 - i): one all-reduce over the
    pair per stage, once the stage's last weight gradient has run, the same stage first on both ranks of a pair;
    the optimizer step waits for both."""
    tracer = MegatronTracer(dualpipe_scenario().workload, 4)
    assert tracer.layout.group("mirror", 1) == (1, 2) and tracer.layout.group("mirror", 3) == (0, 3)
    first_sums = {}
    for stage, program in enumerate(tracer.stage_programs()):
        mirror = [i for i, op in enumerate(program.ops) if getattr(op, "label", "") == MIRROR_SYNC]
        assert len(mirror) == 2
        assert sum(program.ops[i].nbytes for i in mirror) == pytest.approx(
            sum(tracer.parameters.stage(stage).total()) * tracer.shape.grad_bytes)
        assert set(mirror) <= set(program.ops[-1].waits)  # the optimizer step
        # the first overlaps the other stage's last backward kernels
        assert any(isinstance(op, ComputeOp) for op in program.ops[mirror[0]:mirror[1]])
        first_sums[stage] = program.ops[mirror[0]].nbytes
    assert first_sums[0] == first_sums[3] and first_sums[1] == first_sums[2]
    one_f_one_b = MegatronTracer(dualpipe_scenario("1f1b").workload, 4).stage_programs()
    assert not any(getattr(op, "label", "") == MIRROR_SYNC for p in one_f_one_b for op in p.ops)


@pytest.mark.parametrize(("schedule", "vpp"), [("dualpipe", 1), ("dualpipev", 2), ("zb_v", 2)])
def test_the_new_schedules_simulate_the_same_folded_as_fully_expanded(schedule, vpp):
    sc = gpt_scenario(nodes=4, gpus_per_node=4, pp=4, layers=16, gbs=32, hidden=512, heads=8, seq=512,
                      extra_parallelism={"pipeline_schedule": schedule, "vpp": vpp})
    full, folded = simulate(sc, "full").result, simulate(sc, "symmetric").result
    assert folded.simulated_gpus < full.simulated_gpus
    assert folded.iteration_time_ms == pytest.approx(full.iteration_time_ms, rel=1e-9)


def test_dualpipes_mirror_gradient_sum_is_pipeline_traffic_not_data_parallel():
    """At dp 1 the pair's all-reduce, on the data-parallel stream, was reported as exposed DP communication (and
    advised against with data-parallel remedies): it is the pipeline's own gradient sum between two stages' ranks."""
    dag = simulate(dualpipe_scenario()).dag
    kinds = np.array(KIND_NAMES)[node_kinds(dag)]
    mirror = np.array([dag.collectives[c].label == MIRROR_SYNC if c >= 0 else False for c in dag.coll.tolist()])
    assert mirror.any() and set(kinds[mirror]) == {"PP"}
    assert "DP" not in set(kinds[dag.coll >= 0])  # dp 1: no other data-parallel collective
