"""ZB-H1 (Qi et al., ICLR 2024): 1F1B with the weight gradients split off and deferred into the cool-down bubble."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.memory import MemoryModel
from simulon.memory.walk import StagePlan
from simulon.pipeline import simulate
from simulon.workload.schedule import Step, make_scheduler


def makespan(schedule: str, num_stages: int, num_microbatches: int, f: float = 1.0, b: float = 1.0,
             w: float = 1.0) -> float:
    """The step time of a pipeline with free communication: each stage runs its steps in order, a forward after
    the previous stage's forward of that micro-batch, a backward after the next stage's backward of it (1F1B's
    B includes W there), a W after its own B."""
    orders = [make_scheduler(schedule).steps(s, num_stages, num_microbatches) for s in range(num_stages)]
    split = any(step.kind == "W" for step in orders[0])
    cost = {"F": f, "B": b if split else b + w, "W": w}
    done: dict[tuple[str, int, int], float] = {}
    clocks, positions = [0.0] * num_stages, [0] * num_stages
    while any(positions[s] < len(orders[s]) for s in range(num_stages)):
        progressed = False
        for s in range(num_stages):
            if positions[s] == len(orders[s]):
                continue
            kind, mb = orders[s][positions[s]].kind, orders[s][positions[s]].microbatch
            needs = {"F": ("F", s - 1, mb) if s > 0 else None,
                     "B": ("B", s + 1, mb) if s < num_stages - 1 else None, "W": ("B", s, mb)}[kind]
            if needs is not None and needs not in done:
                continue
            start = max(clocks[s], done[needs] if needs else 0.0)
            clocks[s] = done[(kind, s, mb)] = start + cost[kind]
            positions[s] += 1
            progressed = True
        assert progressed, "the schedule deadlocks"
    return max(clocks)


@given(num_stages=st.integers(1, 8), num_microbatches=st.integers(1, 24))
def test_zb_h1_is_1f1b_with_each_weight_gradient_after_its_backward(num_stages, num_microbatches):
    for stage in range(num_stages):
        zb = make_scheduler("zb_h1").steps(stage, num_stages, num_microbatches)
        assert [s for s in zb if s.kind != "W"] == make_scheduler("1f1b").steps(stage, num_stages, num_microbatches)
        weights = [s.microbatch for s in zb if s.kind == "W"]
        assert weights == list(range(num_microbatches))
        for mb in range(num_microbatches):
            assert zb.index(Step("W", mb)) > zb.index(Step("B", mb))
        # stage i defers its first i weight gradients to the end (PyTorch's num_1f1b_microbatches = rank)
        tail = zb[len(zb) - min(stage, num_microbatches):]
        assert all(s.kind == "W" for s in tail)


@pytest.mark.parametrize("num_stages", [2, 4, 8])
def test_zb_h1_cuts_the_bubble_to_a_third_of_1f1bs_with_equal_f_b_and_w(num_stages):
    num_microbatches = 3 * num_stages
    ideal = 3.0 * num_microbatches
    one_f_one_b = makespan("1f1b", num_stages, num_microbatches) - ideal
    zero_bubble = makespan("zb_h1", num_stages, num_microbatches) - ideal
    assert one_f_one_b == pytest.approx(3.0 * (num_stages - 1))      # (p - 1)(T_F + T_B + T_W)
    assert zero_bubble == pytest.approx(1.0 * (num_stages - 1))      # (p - 1)(T_F + T_B - T_W)


def scenario(schedule: str, pp: int = 4, **extra):
    return gpt_scenario(nodes=1, gpus_per_node=pp, pp=pp, layers=8, gbs=8, hidden=512, heads=8, seq=512,
                        extra_parallelism={"pipeline_schedule": schedule, **extra})


def test_zb_h1_runs_the_same_kernels_as_1f1b_in_less_time():
    one_f_one_b, zero_bubble = simulate(scenario("1f1b")), simulate(scenario("zb_h1"))
    assert zero_bubble.dag.num_nodes == one_f_one_b.dag.num_nodes
    assert zero_bubble.result.iteration_time_ms < one_f_one_b.result.iteration_time_ms
    for a, b in zip(one_f_one_b.result.per_gpu, zero_bubble.result.per_gpu, strict=True):
        assert b.compute_ms == pytest.approx(a.compute_ms, rel=1e-9)


def test_zb_h1_stage_i_holds_1f1bs_activations_plus_i_micro_batches_of_deferred_weight_gradients():
    one_f_one_b, zero_bubble = MemoryModel.of(scenario("1f1b")), MemoryModel.of(scenario("zb_h1"))
    for stage in range(4):
        deferred = sum(zero_bubble.stage(stage).unit_deferred.values())  # one micro-batch's, through the stage
        assert 0 < deferred < sum(zero_bubble.stage(stage).unit_kept.values())
        assert zero_bubble.stage(stage).kept_activations == pytest.approx(
            one_f_one_b.stage(stage).kept_activations + stage * deferred)


def test_zb_h1_under_full_recomputation_holds_pp_minus_1_minus_i_layer_inputs_and_i_plus_1_deferred_ws_at_most():
    """A deferred W holds its GEMMs' inputs and output gradients though the forward kept only the layer's input (B
    re-created them): more than the micro-batch kept, so stage i's most kept comes after a B, with pp - 1 - i
    forwards in flight and i + 1 Ws pending (on the last stage, whose LM head and loss are not recomputed and keep
    more than its W holds, after an F: pp - i forwards, i Ws). simulon had reported 1F1B's figures on stages 0 to 2."""
    zero_bubble = MemoryModel.of(scenario("zb_h1", recompute="full"))
    for stage in range(4):
        memory = zero_bubble.stage(stage)
        kept, deferred = (sum(units.values()) for units in (memory.unit_kept, memory.unit_deferred))
        assert (deferred > 4 * kept) == (stage < 3)
        plan = StagePlan.of("zb_h1", 1, stage, 4, 8)
        most, _ = plan.peak(*(np.array([x]) for x in (kept, 0.0, 0.0, deferred)))
        assert most == pytest.approx((3 - stage) * kept + stage * deferred + max(kept, deferred))


def test_zb_h1_with_model_chunks_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="pipeline_schedule: zb_h1 runs one model chunk per rank"):
        scenario("zb_h1", vpp=2)


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_zb_h1_never_reserves_less_than_1f1b_on_any_stage(recompute):
    """ZB-H1 runs 1F1B's steps up to its first deferred W and holds more after it; the caching allocator's high-water
    mark keeps what 1F1B's backward reserved. Under full recomputation simulon reported stage 0 of ZB-H1 below 1F1B's
    (its peak at a W, where no re-created layer is held on top)."""
    extra = {"recompute": recompute}
    one_f_one_b, zero_bubble = MemoryModel.of(scenario("1f1b", **extra)), MemoryModel.of(scenario("zb_h1", **extra))
    for stage in range(4):
        assert zero_bubble.stage(stage).reserved >= one_f_one_b.stage(stage).reserved
        assert zero_bubble.stage(stage).allocated >= one_f_one_b.stage(stage).allocated
