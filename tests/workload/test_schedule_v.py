"""ZB-V (zero-bubble V schedule) and the V placement: the order of the reference's own scheduler, zero bubble
between each rank's first forward and last step at equal F, B and W, 1F1B's activation memory, and pipeline
sends that follow the V."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pipeline_timing import time_schedule
from zbv_reference import PipelineGraph

from helpers import gpt_scenario
from simulon.memory import MemoryModel
from simulon.pipeline import simulate
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import SendOp
from simulon.workload.schedule import V_SHAPE, ZBV_COSTS, ZBV_MEMORY, Placement, make_scheduler, zbv_orders


def reference_memory(hidden: int, heads: int, seq: int) -> tuple[int, int, int]:
    """The reference's activation units (runtime.py): f = 34h + 5as, w = -32h, b = -f - w."""
    f, w = 34 * hidden + 5 * heads * seq, -32 * hidden
    return f, -f - w, w


def reference_order(num_stages: int, num_microbatches: int, memory=ZBV_MEMORY) -> list[list[tuple]]:
    return PipelineGraph(num_stages, num_microbatches, *ZBV_COSTS, *memory).create_schedule()


@given(num_stages=st.integers(2, 8), num_microbatches=st.integers(1, 32))
def test_zb_v_runs_the_order_of_the_reference_greedy_scheduler(num_stages, num_microbatches):
    scheduler = make_scheduler("zb_v", 2)
    expected = reference_order(num_stages, num_microbatches)
    for stage in range(num_stages):
        steps = scheduler.steps(stage, num_stages, num_microbatches)
        assert [(s.kind, s.chunk, s.microbatch) for s in steps] == expected[stage]


@pytest.mark.parametrize("shape", [(4096, 32, 8192), (8192, 64, 4096), (1024, 16, 512), (7168, 128, 4096)])
def test_the_zb_v_table_does_not_depend_on_the_model_shape_the_reference_weighs_memory_with(shape):
    """simulon builds the table once at GPT-3 175B's memory ratios; other shapes give the reference the same order."""
    for num_stages in range(2, 7):
        for num_microbatches in range(1, 3 * num_stages + 1):
            assert reference_order(num_stages, num_microbatches, reference_memory(*shape)) == \
                [[(s.kind, s.chunk, s.microbatch) for s in order] for order in zbv_orders(num_stages, num_microbatches)]


@given(num_stages=st.integers(2, 8), num_microbatches=st.integers(1, 32))
def test_zb_v_runs_every_forward_b_and_w_of_both_chunks_once_in_dependency_order(num_stages, num_microbatches):
    for stage in range(num_stages):
        steps = make_scheduler("zb_v", 2).steps(stage, num_stages, num_microbatches)
        position = {(s.kind, s.microbatch, s.chunk): i for i, s in enumerate(steps)}
        assert len(position) == len(steps) == 6 * num_microbatches
        for mb in range(num_microbatches):
            assert position[("F", mb, 0)] < position[("F", mb, 1)] < position[("B", mb, 1)] < position[("B", mb, 0)]
            assert all(position[("B", mb, c)] < position[("W", mb, c)] for c in (0, 1))


@pytest.mark.parametrize("num_stages", [2, 4, 6, 8])
@pytest.mark.parametrize("per_stage", [2, 3, 4])
def test_zb_v_has_no_bubble_between_a_ranks_first_forward_and_last_step_at_equal_f_b_w(num_stages, per_stage):
    """The zero-bubble README's table (T_F = T_B = T_W): ZB-V's bubble rate is 0, ZB-H1's (p - 1)/3m, 1F1B's
    (p - 1)/m; counted as the reference counts it, from each rank's first forward (the pipeline's fill is the
    parallelogram the next iteration overlaps)."""
    num_microbatches = per_stage * num_stages

    def bubble(name: str, vpp: int) -> float:
        scheduler = make_scheduler(name, vpp)
        orders = [scheduler.steps(s, num_stages, num_microbatches) for s in range(num_stages)]
        return time_schedule(orders, scheduler.placement).span_bubble

    assert bubble("zb_v", 2) == 0.0
    # 1F1B and ZB-H1 with F = B = W = 1 per rank, ZB-V with two chunks of half that: the whole-rank units
    assert bubble("1f1b", 1) == pytest.approx(3.0 * (num_stages - 1))
    assert bubble("zb_h1", 1) == pytest.approx(1.0 * (num_stages - 1))


@pytest.mark.parametrize("schedule", ["zb_v", "dualpipev"])
@pytest.mark.parametrize("num_stages", [2, 4, 6, 8])
def test_a_v_keeps_the_activations_of_1f1b_or_dualpipes_one_more_stage(schedule, num_stages):
    """Peak forwards whose backward has not run, in model chunks (stages) per rank: 2p chunks (1F1B's p
    micro-batches) for ZB-V; PP + 1 = 2p + 1 stages for DualPipeV (the DualPipe README's table)."""
    scheduler = make_scheduler(schedule, 2)
    peaks = []
    for stage in range(num_stages):
        live = peak = 0
        for step in scheduler.steps(stage, num_stages, 3 * num_stages):
            live += {"F": 1, "B": -1, "W": 0}[step.kind]
            peak = max(peak, live)
        peaks.append(peak)
    assert max(peaks) == 2 * num_stages + (schedule == "dualpipev")


def v_scenario(schedule: str = "zb_v", pp: int = 4, **extra):
    return gpt_scenario(nodes=1, gpus_per_node=pp, pp=pp, layers=16, gbs=16, hidden=512, heads=8, seq=512,
                        extra_parallelism={"pipeline_schedule": schedule, "vpp": 2, **extra})


def test_the_v_places_chunk_0_of_rank_i_at_stage_i_and_chunk_1_at_stage_2p_minus_1_minus_i():
    assert [[V_SHAPE.model_stage(rank, chunk, 4) for chunk in (0, 1)] for rank in range(4)] == \
        [[0, 7], [1, 6], [2, 5], [3, 4]]
    for rank in range(4):
        for chunk in (0, 1):
            stage = V_SHAPE.model_stage(rank, chunk, 4)
            if stage < 7:
                assert V_SHAPE.model_stage(*V_SHAPE.next(rank, chunk, 4), 4) == stage + 1
                assert V_SHAPE.previous(*V_SHAPE.next(rank, chunk, 4), 4) == (rank, chunk)


@pytest.mark.parametrize("kind", ["interleaved", "v", "mirrored"])
@given(ranks=st.integers(1, 8).map(lambda r: 2 * r))
def test_every_placement_sends_each_forward_to_the_rank_that_runs_the_next_stage(kind, ranks):
    placement = Placement(kind)  # type: ignore[arg-type]
    stages = placement.model_stages(ranks, 2)
    for rank in range(ranks):
        for chunk in (0, 1):
            stage = placement.model_stage(rank, chunk, ranks)
            assert 0 <= stage < stages
            if stage < stages - 1:
                assert placement.model_stage(*placement.next(rank, chunk, ranks), ranks) == stage + 1
            if stage > 0:
                assert placement.model_stage(*placement.previous(rank, chunk, ranks), ranks) == stage - 1


def test_the_tracer_sends_chunk_0_to_the_next_rank_chunk_1_to_the_previous_and_turns_on_the_last_rank():
    tracer = MegatronTracer(v_scenario().workload, 4)
    for stage, program in enumerate(tracer.stage_programs()):
        forward_sends = {(op.peer_stage, op.peer_chunk) for op in program.ops
                         if isinstance(op, SendOp) and op.phase == 0}
        expected = set()
        if stage < 3:
            expected.add((stage + 1, 0))
        if stage > 0:
            expected.add((stage - 1, 1))
        assert forward_sends == expected
    # the first rank holds both ends of the model: the embedding in chunk 0, the LM head in chunk 1
    assert tracer.layers.units_of(0, 0)[0] == -1 and tracer.layers.units_of(0, 1)[-1] == -2
    assert list(tracer.layers.layers_of(3, 0)) == [6, 7] and list(tracer.layers.layers_of(3, 1)) == [8, 9]


@pytest.mark.parametrize("schedule", ["zb_v", "dualpipev"])
def test_a_v_schedule_runs_1f1bs_kernels_and_beats_its_step_time(schedule):
    one_f_one_b = simulate(gpt_scenario(nodes=1, gpus_per_node=4, pp=4, layers=16, gbs=16, hidden=512, heads=8,
                                        seq=512))
    v = simulate(v_scenario(schedule))
    kernels = [sum(g.compute_ms for g in run.result.per_gpu) for run in (one_f_one_b, v)]
    assert kernels[1] == pytest.approx(kernels[0], rel=1e-9)
    assert v.result.iteration_time_ms < one_f_one_b.result.iteration_time_ms


def test_zb_v_middle_ranks_keep_1f1bs_first_stage_activations():
    """ZB-V's selling point: 1F1B's peak activation memory. A middle rank keeps 2p = 8 chunks of 2 layers (4
    micro-batches through both its chunks), the 16 layer-micro-batches 1F1B's first stage keeps (p = 4 micro-batches
    of 4 layers): 4/3 of 1F1B's stage 1 (3 of 4 layers)."""
    zbv = MemoryModel.of(v_scenario())
    one_f_one_b = MemoryModel.of(gpt_scenario(nodes=1, gpus_per_node=4, pp=4, layers=16, gbs=16, hidden=512,
                                              heads=8, seq=512))
    for stage in (1, 2):  # neither end of the model: every chunk keeps the same
        assert zbv.stage(stage).microbatches_in_flight == pytest.approx(4.0)
        assert zbv.stage(stage).kept_activations == pytest.approx(one_f_one_b.stage(1).kept_activations / 3 * 4)


@pytest.mark.parametrize(("extra", "field", "reason"), [
    ({"pipeline_schedule": "zb_v", "vpp": 1}, "pipeline_schedule", "two model chunks per rank as a V, not vpp = 1"),
    ({"pipeline_schedule": "zb_v", "vpp": 3}, "pipeline_schedule", "not vpp = 3"),
    ({"pipeline_schedule": "dualpipev", "vpp": 1}, "pipeline_schedule", "two model chunks"),
    ({"pipeline_schedule": "dualpipe", "vpp": 2}, "pipeline_schedule", "one model chunk per rank, not vpp = 2"),
    ({"pipeline_schedule": "zb_h1", "vpp": 2}, "pipeline_schedule", "zb_h1 runs one model chunk per rank"),
])
def test_a_schedule_with_the_wrong_number_of_chunks_is_refused_naming_the_field(extra, field, reason):
    with pytest.raises(ValueError, match=f"workload.parallelism.{field}: .*{reason}"):
        gpt_scenario(nodes=1, gpus_per_node=4, pp=4, layers=16, gbs=16, extra_parallelism=extra)


@given(schedule=st.sampled_from(["zb_h1", "zb_v", "dualpipe", "dualpipev"]), vpp=st.integers(1, 4))
def test_each_fixed_placement_schedule_accepts_only_its_own_number_of_chunks(schedule, vpp):
    expected = 2 if schedule in ("zb_v", "dualpipev") else 1
    try:
        v_scenario(schedule, vpp=vpp)
    except ValueError as exc:
        assert vpp != expected
        assert f"workload.parallelism.pipeline_schedule: {schedule} runs" in str(exc)
    else:
        assert vpp == expected
