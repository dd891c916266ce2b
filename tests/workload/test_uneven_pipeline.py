"""Uneven pipeline stages, interleaved or not, traced, timed and sized as the split says."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.config.workload import MegatronWorkload
from simulon.memory import MemoryModel
from simulon.pipeline import simulate
from simulon.workload.megatron import MegatronTracer
from simulon.workload.parameters import PipelineLayers
from simulon.workload.program import EMBEDDING_LAYER, HEAD_LAYER


def scenario(layers: int = 10, pp: int = 2, gbs: int = 8, **parallelism):
    return gpt_scenario(nodes=1, gpus_per_node=pp, pp=pp, layers=layers, gbs=gbs, hidden=512, heads=8, seq=256,
                        extra_parallelism=parallelism)


def traced_layers(workload: MegatronWorkload, pp: int) -> list[int]:
    """Every transformer layer the stages' parameters hold, over all stages."""
    tracer = MegatronTracer(workload, pp)
    return sorted(unit for stage in range(pp) for unit in tracer.parameters.stage(stage).units if unit >= 0)


def test_layers_pp_does_not_divide_are_split_instead_of_refused():
    sc = scenario(layers=9, pp=2)
    assert PipelineLayers.of(sc.workload).counts == (5, 4)  # the loss stage one layer lighter
    assert traced_layers(sc.workload, 2) == list(range(9))
    assert simulate(sc).result.iteration_time_ms > 0


def test_interleaving_runs_with_uneven_first_and_last_stages():
    sc = scenario(layers=12, pp=2, vpp=2, first_stage_layers=4, last_stage_layers=8)
    assert PipelineLayers.of(sc.workload).counts == (2, 4, 2, 4)
    assert traced_layers(sc.workload, 2) == list(range(12))
    assert simulate(sc).result.iteration_time_ms > 0


def test_a_virtual_stage_may_hold_only_the_embedding_or_only_the_loss():
    sc = scenario(layers=6, pp=2, pipeline_layout="E|ttt|ttt|L")
    layers = PipelineLayers.of(sc.workload)
    assert layers.counts == (0, 3, 3, 0)
    assert layers.units_of(0, 0) == [EMBEDDING_LAYER] and layers.units_of(1, 1) == [HEAD_LAYER]
    assert simulate(sc).result.iteration_time_ms > 0


def test_a_stage_with_more_layers_keeps_more_activations_and_takes_longer():
    light, heavy = scenario(layers=8, first_stage_layers=2), scenario(layers=8, first_stage_layers=6)
    memory = [MemoryModel.of(sc).stage(0).kept_activations for sc in (light, heavy)]
    assert memory[0] < memory[1]
    busy = [simulate(sc).result.per_gpu[0].compute_ms for sc in (light, heavy)]
    assert busy[0] < busy[1]


@pytest.mark.parametrize("split", [{"layers_per_stage": [5, 5]}, {"first_stage_layers": 5},
                                   {"pipeline_layout": "Et*5|t*5L"}])
def test_the_same_split_written_three_ways_simulates_identically(split):
    even = simulate(scenario(layers=10)).result.iteration_time_ms
    assert simulate(scenario(layers=10, **split)).result.iteration_time_ms == even
