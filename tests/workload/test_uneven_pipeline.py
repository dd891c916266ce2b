"""Uneven pipeline stages, interleaved or not, traced, timed and sized as the split says."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.config.workload import MegatronWorkload
from simulon.memory import MemoryModel
from simulon.pipeline import simulate
from simulon.workload.megatron import MegatronTracer
from simulon.workload.parameters import PipelineLayers
from simulon.workload.program import EMBEDDING_LAYER, HEAD_LAYER, RecvOp, SendOp


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


@pytest.mark.parametrize("split", [{"layers_per_stage": [4, 0, 4]}, {"pipeline_layout": "Et*4||t*4L"}])
def test_a_stage_with_no_layer_passes_each_micro_batch_on_only_once_it_has_arrived(split):
    """A stage of no layer runs no kernel between its receive and its send: the send waits for the receive, so the
    stage after it cannot start a micro-batch before the stage before it has finished it. It used to wait for the
    stage's last kernel only (none), and the 4 | 0 | 4 pipeline ran faster than the same 4 | 4 without the empty
    stage (the last stage never waited for the first)."""
    sc = scenario(layers=8, pp=3, **split)
    program = MegatronTracer(sc.workload, 3).stage_program(1)
    received = {(op.microbatch, op.phase): i for i, op in enumerate(program.ops) if isinstance(op, RecvOp)}
    sends = [(i, op) for i, op in enumerate(program.ops) if isinstance(op, SendOp)]
    assert sends and all(received[op.microbatch, op.phase] in op.waits for _, op in sends)
    assert (simulate(sc).result.iteration_time_ms
            >= simulate(scenario(layers=8, pp=2, layers_per_stage=[4, 4])).result.iteration_time_ms)
