"""Per-stage peaks: micro-batches in flight per schedule, the stage that peaks, what fits."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import gpt_scenario, gpt_workload
from simulon.config.units import GiB
from simulon.memory import MemoryModel, estimate_memory


def model(pp: int, microbatches: int, vpp: int = 1, layers: int = 16, **knobs) -> MemoryModel:
    extra = {"vpp": vpp} if vpp > 1 else {}
    wl = gpt_workload(gpus=pp, pp=pp, layers=layers, gbs=microbatches, extra_parallelism=extra, **knobs)
    return MemoryModel(wl, pp, 80 * GiB)


def kept_per_microbatch(stage) -> float:
    return sum(stage.unit_kept.values())


@given(st.sampled_from([2, 4, 8]), st.integers(1, 12))
def test_1f1b_keeps_min_of_pp_minus_stage_and_the_micro_batches(pp, microbatches):
    memory = model(pp, microbatches)
    for s in range(pp):
        stage = memory.stage(s)
        assert stage.kept_activations == pytest.approx(min(pp - s, microbatches) * kept_per_microbatch(stage))


@pytest.mark.parametrize("pp, vpp, microbatches", [(4, 2, 8), (4, 2, 16), (8, 2, 16), (4, 4, 8)])
def test_interleaved_1f1b_keeps_its_warm_up_plus_one_model_chunks(pp, vpp, microbatches):
    memory = model(pp, microbatches, vpp=vpp)
    for s in range(1, pp - 1):  # middle stages: every chunk keeps the same
        stage = memory.stage(s)
        chunks = min((pp - s - 1) * 2 + (vpp - 1) * pp + 1, microbatches * vpp)
        assert stage.kept_activations == pytest.approx(chunks * kept_per_microbatch(stage) / vpp)


def test_the_peak_is_on_the_last_stage_when_the_logits_outweigh_the_pipeline_warm_up():
    memory = model(2, 8, layers=2, vocab=262144, training={"attention": "flash"})
    report = memory.report()
    assert report.peak.stage == 1
    assert report.stages[1].unit_kept[-2] > report.stages[0].unit_kept[0]  # the head keeps the logits


def test_reserved_covers_allocated_and_the_device_covers_reserved():
    for stage in estimate_memory(gpt_scenario(nodes=2, pp=2, tp=2, layers=8, gbs=16)).stages:
        assert stage.allocated <= stage.reserved <= stage.device
        assert all(math.isfinite(v) and v >= 0 for v in stage.terms.values())


def test_a_stage_that_needs_more_than_the_gpu_holds_does_not_fit():
    big = gpt_scenario(nodes=1, gpus_per_node=1, layers=32, hidden=8192, heads=64, seq=4096, gbs=1)
    report = estimate_memory(big)
    assert not report.fits and not report.peak.fits
    assert report.to_json()["fits"] is False and report.to_json()["stages"][0]["fits"] is False


def test_expandable_segments_reserve_what_is_allocated_and_nothing_else_moves():
    fixed = model(2, 8, layers=4).report()
    expandable = model(2, 8, layers=4, training={"expandable_segments": True}).report()
    for plain, grown in zip(fixed.stages, expandable.stages, strict=True):
        assert plain.reserved > plain.allocated  # the caching allocator's fragmentation excess
        assert grown.reserved == grown.allocated == plain.allocated
        assert grown.device - grown.reserved == pytest.approx(plain.device - plain.reserved)  # context, NCCL


def test_megatron_bridge_rows_run_under_its_recipes_expandable_segments():
    from simulon.config.frameworks import framework_defaults

    assert framework_defaults("Megatron-Bridge").expandable_segments
    assert not framework_defaults("Megatron-Core 0.8").expandable_segments


def bf16_gradient_stages(seq: int) -> MemoryModel:
    """bf16 gradients reduced into an fp32 copy at the optimizer step (the step's transient, ModelStates.stage)."""
    sc = gpt_scenario(nodes=2, gpus_per_node=4, pp=8, layers=14, hidden=2048, heads=16, gbs=16, seq=seq, vocab=1024,
                      extra_parallelism={"first_stage_layers": 1, "last_stage_layers": 1})
    data = sc.model_dump(mode="json", exclude_none=True)
    data["workload"]["training"]["grad_reduce_dtype"] = "bf16"
    return MemoryModel.of(type(sc).model_validate(data))


def test_more_tokens_never_reserve_less_where_the_optimizer_steps_copy_and_the_activations_trade_places():
    """The optimizer step runs after the walked steps, so the caching allocator's high-water mark is the larger of the
    two phases'. It was the step's only where the step's copy outgrew the activations' allocated peak, so a stage
    whose activations just overtook that copy reserved about 470 MiB less at 544 tokens than at 512 (stage 3)."""
    previous = None
    for seq in range(512, 1601, 32):
        reserved = [bf16_gradient_stages(seq).stage(s).reserved for s in range(8)]
        if previous is not None:
            assert all(now >= before for now, before in zip(reserved, previous, strict=True)), seq
        previous = reserved


def test_a_stage_reserves_the_optimizer_steps_copy_even_where_its_activations_peak_higher():
    memory = bf16_gradient_stages(800)
    stage, states = memory.stage(1), memory.states.stage(1)
    assert "optimizer step transient" not in stage.terms and states.step_transient > 0
    assert stage.reserved >= sum(states.terms().values()) + (1 + memory.allocator.overhead) * states.step_transient
