"""Micro-batches in flight on schedules that split backwards (ZB-H1, ZB-V, DualPipe, DualPipeV): a micro-batch
whose B has run and whose W has not is one micro-batch held, not the bytes its W reads over what one micro-batch
keeps. Under recomputation a pending W holds every GEMM's input and output gradient, several times what the layer
kept, and the bytes-over-kept figure counted them as micro-batches: `simulon memory` showed 49.2 micro-batches in
flight on stage 2 of a ZB-H1 run of 8 at pp 4 with full recomputation (19.1, 34.1, 49.2, 9.9 by stage), where each
stage holds pp = 4 as the zero-bubble paper's ZB-H1 keeps 1F1B's count (stage i: pp - i forwards and i deferred
weight gradients)."""

from __future__ import annotations

import pytest

from helpers import gpt_workload
from simulon.memory import MemoryModel

PP, MICROBATCHES = 4, 8


def memory(schedule: str, recompute: str, microbatches: int = MICROBATCHES) -> MemoryModel:
    chunks = 2 if schedule in ("zb_v", "dualpipev") else 1
    wl = gpt_workload(gpus=PP, pp=PP, layers=PP * chunks * 2, gbs=microbatches,
                      extra_parallelism={"pipeline_schedule": schedule, "vpp": chunks, "recompute": recompute})
    return MemoryModel(wl, PP, 80 * 2**30)


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_every_zb_h1_stage_holds_pp_micro_batches_whatever_it_recomputes(recompute):
    model = memory("zb_h1", recompute)
    assert [model.stage(s).microbatches_in_flight for s in range(PP)] == pytest.approx([PP] * PP)


@pytest.mark.parametrize("schedule", ["zb_h1", "zb_v", "dualpipe", "dualpipev"])
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("microbatches", [MICROBATCHES, 2 * MICROBATCHES])
def test_no_stage_holds_more_micro_batches_than_the_step_runs(schedule, recompute, microbatches):
    model = memory(schedule, recompute, microbatches)
    for stage in range(PP):
        assert 0 < model.stage(stage).microbatches_in_flight <= microbatches


def test_the_bytes_kept_at_the_peak_are_still_what_the_deferred_weight_gradients_hold():
    stage = memory("zb_h1", "full").stage(2)
    one_microbatch = sum(stage.unit_kept.values())
    assert stage.kept_activations > 4 * stage.microbatches_in_flight * one_microbatch  # the W's inputs, recomputed
