"""MemoryModel.fullest, the strategy search's memory check, against the reference it shortcuts: every stage's peak
worked out on its own (MemoryModel.stage) and the largest taken. The fast path works out the states and the
activations per micro-batch once for stages whose chunks hold alike layers, so the models drawn here mix layer kinds
(dense then MoE layers, a hybrid pattern), splits, schedules, recomputation, multi-token prediction and bf16 layers of
a narrow format: whatever makes two stages differ."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.config.errors import ConfigError
from simulon.memory import MemoryModel
from simulon.memory.model import walked
from simulon.memory.walk import StagePlan
from simulon.workload.schedule import make_scheduler

SCHEDULES = [("1f1b", 1), ("interleaved_1f1b", 2), ("interleaved_1f1b", 3), ("zb_h1", 1), ("zb_v", 2),
             ("dualpipe", 1), ("dualpipev", 2)]


def model_of(layers: int, pp: int, schedule: tuple[str, int], kinds: str, *, mtp: int = 0, recompute: str = "none",
             first: int | None = None, fp8_bf16_layers: int = 0, mbs: int = 1) -> MemoryModel:
    name, vpp = schedule
    extra_model: dict = {"mtp_layers": mtp} if mtp and kinds != "hybrid" else {}  # hybrid MTP is not modelled
    moe = None
    if kinds == "dense-then-moe":
        moe = {"num_experts": 8, "top_k": 2, "first_dense_layers": 2}
    elif kinds == "hybrid":
        extra_model["hybrid_pattern"] = ("M*E-" * layers)[:layers]
        extra_model["mamba"] = {"state_size": 64, "num_heads": 16, "head_dim": 64, "num_groups": 4}
        moe = {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 2048}
    parallelism: dict = {"pipeline_schedule": name, "vpp": vpp, "recompute": recompute}
    if first is not None:
        parallelism["first_stage_layers"] = first
    dp = 24 // pp  # 24 GPUs: pp 2, 3, 4 and 8 divide them; 2 pp micro-batches, as every schedule takes
    sc = gpt_scenario(nodes=6, gpus_per_node=4, pp=pp, layers=layers, hidden=512, heads=8, gbs=2 * pp * dp * mbs,
                      mbs=mbs, seq=256, vocab=4096, moe=moe, extra_model=extra_model, extra_parallelism=parallelism)
    if fp8_bf16_layers:
        data = sc.model_dump(mode="json", exclude_none=True)
        data["workload"]["training"].update(dtype="fp8", bf16_first_layers=fp8_bf16_layers,
                                            bf16_last_layers=fp8_bf16_layers)
        sc = type(sc).model_validate(data)
    return MemoryModel.of(sc)


def reference(model: MemoryModel, stages: list[int]):
    return max((model.stage(s) for s in stages), key=lambda s: s.device)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers=st.integers(6, 20), pp=st.sampled_from([2, 3, 4]), schedule=st.sampled_from(SCHEDULES),
       kinds=st.sampled_from(["dense", "dense-then-moe", "hybrid"]), mtp=st.sampled_from([0, 1]),
       recompute=st.sampled_from(["none", "selective", "full"]), first=st.sampled_from([None, 1, 2]),
       bf16=st.sampled_from([0, 1]), mbs=st.sampled_from([1, 2]))
def test_the_fullest_stage_is_the_largest_of_every_stage_worked_out_alone(layers, pp, schedule, kinds, mtp, recompute,
                                                                          first, bf16, mbs):
    try:
        model = model_of(layers, pp, schedule, kinds, mtp=mtp, recompute=recompute, first=first,
                         fp8_bf16_layers=bf16, mbs=mbs)
    except (ConfigError, ValueError):
        assume(False)
    stages = list(range(pp))
    fullest, largest = model.fullest(stages), reference(model, stages)
    assert fullest.device == pytest.approx(largest.device, rel=1e-12)  # a near-tie may round either way
    assert fullest == model.stage(fullest.stage)


@pytest.mark.parametrize("schedule", SCHEDULES, ids=[f"{name}-vpp{vpp}" for name, vpp in SCHEDULES])
def test_middle_stages_of_alike_layers_are_each_walked_on_their_own_schedule(schedule):
    """Eight stages of MoE layers after two dense ones: the middle stages share their states and activations, and
    the fullest is still the one `stage` puts first, with its own layers' ids."""
    model = model_of(34 if schedule[1] == 3 else 26, 8, schedule, "dense-then-moe")
    stages = list(range(8))
    fullest = model.fullest(stages)
    assert fullest == reference(model, stages)
    assert fullest.unit_kept == model.stage(fullest.stage).unit_kept
    middle = [s for s in stages[1:-1] if model.fullest([s]).stage == s]
    assert [model.fullest([s]) for s in middle] == [model.stage(s) for s in middle]


def test_an_earlier_stage_of_alike_layers_keeps_more_in_flight_under_1f1b():
    """Stages 1 and 2 hold the same layers; 1F1B keeps pp - stage micro-batches in flight, so stage 1 is fuller
    even when stage 2 is worked out first (the walk is each stage's own, not the first alike stage's)."""
    model = model_of(16, 4, ("1f1b", 1), "dense")
    assert model.stage(1).microbatches_in_flight == 3 and model.stage(2).microbatches_in_flight == 2
    assert model.fullest([2, 1]) == model.stage(1)
    assert model.fullest([1, 1]) == model.stage(1)


def test_no_stage_is_refused():
    with pytest.raises(ValueError, match="no stage"):
        model_of(8, 2, ("1f1b", 1), "dense").fullest([])


def test_the_fullest_stage_where_the_optimizer_steps_copy_rivals_the_activations():
    """bf16 gradients reduce into an fp32 copy at the optimizer step, which the allocator reserves with its overhead:
    at 800 tokens the later middle stages peak on that copy, stage 1 on its activations, and stage 1 reserves the copy
    too, so it is the fullest of them without the later ones walked."""
    sc = gpt_scenario(nodes=2, gpus_per_node=4, pp=8, layers=14, hidden=2048, heads=16, gbs=16, seq=800, vocab=1024,
                      extra_parallelism={"first_stage_layers": 1, "last_stage_layers": 1})
    data = sc.model_dump(mode="json", exclude_none=True)
    data["workload"]["training"]["grad_reduce_dtype"] = "bf16"
    model = MemoryModel.of(type(sc).model_validate(data))
    assert "optimizer step transient" in model.stage(5).terms
    assert "optimizer step transient" not in model.stage(1).terms
    assert model.fullest(range(8)) == reference(model, list(range(8)))


def test_the_fast_path_walks_one_middle_stage_of_alike_layers_under_1f1b(monkeypatch):
    """32 layers over 8 stages, the first two dense: stages 1 to 6 hold four MoE layers each, so only stage 1 of them
    is walked; stage 0 (the embedding) and 7 (the head) are worked out alone: three walks where every stage alone
    takes eight (none kept from earlier: model.walked keeps a walk for the next model asking it)."""
    model = model_of(32, 8, ("1f1b", 1), "dense-then-moe")
    walks: list[int] = []
    peaks = StagePlan.peaks
    monkeypatch.setattr(StagePlan, "peaks", lambda plan, *args, **kw: walks.append(1) or peaks(plan, *args, **kw))
    walked.cache_clear()
    model.fullest(range(8))
    assert len(walks) == 3
    walked.cache_clear()
    reference(model, list(range(8)))
    assert len(walks) == 3 + 8


columns = st.lists(st.tuples(*[st.floats(0.0, 1e9, allow_nan=False)] * 4), min_size=1, max_size=4)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), schedule=st.sampled_from(["1f1b", "interleaved_1f1b"]), pp=st.integers(2, 12),
       groups=st.integers(1, 6), weight=st.sampled_from([1.0, 2.436]))
def test_under_megatrons_1f1b_an_earlier_stage_peaks_at_least_as_high_on_the_same_chunks(data, schedule, pp, groups,
                                                                                         weight):
    """The premise of MemoryModel.fullest's shortcut (PipelineScheduler.earlier_stages_keep_more), on any chunk
    values: each stage's activation peak, ranked by kept + weight x transient, falls with the stage (to the rounding
    of sums taken in another order: a later stage may come out one unit in the last place above)."""
    rows = data.draw(columns if schedule == "interleaved_1f1b" else columns.map(lambda r: r[:1]))
    kept, forward, backward, deferred = (np.array(c, dtype=float) for c in zip(*rows, strict=True))
    assert make_scheduler(schedule, len(rows)).earlier_stages_keep_more
    microbatches = groups * pp
    peaks = [StagePlan.of(schedule, len(rows), stage, pp, microbatches).peak(kept, forward, backward, deferred,
                                                                             weight=weight) for stage in range(pp)]
    values = [first + weight * second for first, second in peaks]
    assert all(earlier >= later * (1 - 1e-12) for earlier, later in itertools.pairwise(values))


@pytest.mark.parametrize(("schedule", "chunks", "combined"), [
    ("zb_h1", 1, False), ("zb_v", 2, False), ("dualpipe", 1, False), ("dualpipev", 2, False),
    ("1f1b", 1, True), ("interleaved_1f1b", 2, True)])
def test_schedules_whose_stages_run_other_orders_are_not_shortcut(schedule, chunks, combined):
    assert not make_scheduler(schedule, chunks, combined).earlier_stages_keep_more


def test_zb_h1s_later_stages_hold_more_deferred_weight_gradients():
    """Why ZB-H1 is not shortcut: stage i defers its first i weight gradients, holding what they read."""
    one = np.array([1.0])
    peaks = [sum(StagePlan.of("zb_h1", 1, stage, 4, 8).peak(one, 0 * one, 0 * one, 4 * one)) for stage in range(4)]
    assert peaks == [7.0, 10.0, 13.0, 16.0]


def test_under_zb_h1_a_later_middle_stage_of_alike_layers_is_walked_and_can_be_the_fullest():
    """With full recomputation a deferred W holds more than its chunk kept, and ZB-H1's later stages defer more."""
    model = model_of(32, 8, ("zb_h1", 1), "dense-then-moe", recompute="full")
    middle = list(range(1, 7))
    assert model.fullest(middle) == reference(model, middle)
    assert model.fullest(middle).stage == 6
