"""A pipeline split named per stage holds on the V schedules too: under zb_v and dualpipev a rank's second chunk is
the model stage 2pp - 1 - s, and `layers_per_stage` or the first/last stage counts give each rank its own layers
(they handed rank s's second half to rank pp - 1 - s)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario, gpt_workload
from simulon.config.pipeline_layout import V_SCHEDULES, model_stage
from simulon.config.workload import SCHEDULE_CHUNKS
from simulon.memory import MemoryModel
from simulon.workload.parameters import PipelineLayers
from simulon.workload.schedule import V_SHAPE, make_scheduler


def rank_layers(workload) -> list[int]:
    layers = PipelineLayers.of(workload)
    return [sum(len(layers.layers_of(s, c)) for c in range(layers.chunks)) for s in range(layers.pp)]


def test_the_v_schedules_of_the_config_are_the_schedules_whose_placement_is_a_v():
    for name, vpp in SCHEDULE_CHUNKS.items():
        assert (make_scheduler(name, vpp).placement is V_SHAPE) == (name in V_SCHEDULES)


def test_the_config_and_the_placement_number_the_model_stages_alike():
    for pp in (2, 3, 4):
        for chunk in (0, 1):
            for rank in range(pp):
                assert V_SHAPE.model_stage(rank, chunk, pp) == model_stage(rank, chunk, pp, v_shape=True)


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(schedule=st.sampled_from(V_SCHEDULES), halves=st.lists(st.integers(0, 4), min_size=4, max_size=4))
def test_each_rank_of_a_v_schedule_builds_the_layers_its_layers_per_stage_entry_gives(schedule, halves):
    per_stage = [2 * h for h in halves]
    if sum(per_stage) == 0:
        per_stage[0] = 2
    workload = gpt_workload(gpus=4, pp=4, layers=sum(per_stage), extra_parallelism={
        "pipeline_schedule": schedule, "vpp": 2, "layers_per_stage": per_stage, "num_microbatches": 8})
    assert rank_layers(workload) == per_stage


@pytest.mark.parametrize("schedule", V_SCHEDULES)
def test_the_first_and_last_stage_counts_are_the_first_and_last_ranks_layers_on_a_v(schedule):
    workload = gpt_workload(gpus=4, pp=4, layers=14, extra_parallelism={
        "pipeline_schedule": schedule, "vpp": 2, "first_stage_layers": 2, "num_microbatches": 8})
    assert rank_layers(workload) == [2, 4, 4, 4]
    workload = gpt_workload(gpus=4, pp=4, layers=14, extra_parallelism={
        "pipeline_schedule": schedule, "vpp": 2, "last_stage_layers": 2, "num_microbatches": 8})
    assert rank_layers(workload) == [4, 4, 4, 2]


def test_a_v_split_puts_the_parameters_and_the_memory_on_the_rank_that_holds_the_layers():
    """The bug hunt's case: [4, 2, 2, 8] under zb_v held 6, 2, 2, 6 layers; the last stage's parameters are now
    four times the second's, and the middle stages hold what they hold under 1F1B (whose last stage holds the LM head,
    which a V puts on the first rank)."""
    def stage_params(schedule: str, vpp: int) -> list[float]:
        sc = gpt_scenario(pp=4, layers=16, extra_parallelism={
            "pipeline_schedule": schedule, "vpp": vpp, "layers_per_stage": [4, 2, 2, 8], "num_microbatches": 8})
        model = MemoryModel.of(sc)
        return [model.stage(s).params for s in range(4)]

    v, plain = stage_params("zb_v", 2), stage_params("1f1b", 1)
    assert v[3] == pytest.approx(4 * v[1]) and v[1] == pytest.approx(v[2])
    assert v[1:3] == pytest.approx(plain[1:3])
