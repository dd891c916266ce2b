"""Parameters per unit and per stage, as the gradient sync and the optimizer count them."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.workload.megatron import MegatronTracer
from simulon.workload.parameters import PipelineLayers
from simulon.workload.program import EMBEDDING_LAYER, HEAD_LAYER


def tracer_for(pp: int = 2, vpp: int = 1, tie: bool = False, moe: dict | None = None) -> MegatronTracer:
    extra = {"vpp": vpp} if vpp > 1 else {}
    workload = gpt_scenario(nodes=2, gpus_per_node=4, pp=pp, ep=2 if moe else 1, layers=8, gbs=8 * pp, moe=moe,
                            extra_parallelism=extra).workload
    model = workload.model.model_copy(update={"tie_embeddings": tie})
    return MegatronTracer(workload.model_copy(update={"model": model}), 8)


def test_a_stage_holds_the_embedding_first_its_chunks_layers_in_order_and_the_head_last():
    layers = PipelineLayers(pp=2, chunks=2, counts=(2, 2, 2, 2))
    assert layers.stage_units(0) == [EMBEDDING_LAYER, 0, 1, 4, 5]
    assert layers.stage_units(1) == [2, 3, 6, 7, HEAD_LAYER]
    assert layers.units_of(1, 1) == [6, 7, HEAD_LAYER] and layers.units_of(0, 1) == [4, 5]


def test_uneven_stages_take_the_layer_counts_they_are_given():
    layers = PipelineLayers(pp=3, chunks=1, counts=(1, 4, 3))
    assert [list(layers.layers_of(stage)) for stage in range(3)] == [[0], [1, 2, 3, 4], [5, 6, 7]]


@pytest.mark.parametrize("pp, vpp", [(1, 1), (2, 1), (2, 2)])
def test_the_stages_hold_every_unit_once(pp, vpp):
    tracer = tracer_for(pp, vpp)
    units = [unit for stage in range(pp) for unit in tracer.parameters.stage(stage).units]
    assert sorted(units) == [HEAD_LAYER, EMBEDDING_LAYER, *range(8)]


def test_expert_parameters_sit_only_in_moe_layers_and_count_apart_from_dense_ones():
    tracer = tracer_for(pp=1, moe={"num_experts": 4, "top_k": 2, "first_dense_layers": 1})
    stage = tracer.parameters.stage(0)
    assert stage.of(0)[1] == 0 and all(stage.of(layer)[1] > 0 for layer in range(1, 8))
    assert stage.of(EMBEDDING_LAYER)[1] == stage.of(HEAD_LAYER)[1] == 0
    dense, expert = stage.total()
    assert dense == pytest.approx(sum(stage.of(unit)[0] for unit in stage.units))
    assert expert == pytest.approx(sum(stage.of(unit)[1] for unit in stage.units))


def test_a_tied_embedding_is_summed_across_the_first_and_last_stage_only_under_pipeline_parallelism():
    vocab = tracer_for().kernels.vocab_params
    piped = tracer_for(pp=2, tie=True).parameters
    assert piped.stage(0).tied_embedding == piped.stage(1).tied_embedding == vocab
    assert piped.stage(1).of(HEAD_LAYER)[0] > vocab  # the last stage keeps its own copy for the LM head
    single = tracer_for(pp=1, tie=True).parameters.stage(0)
    assert single.tied_embedding == 0.0
    assert single.of(HEAD_LAYER)[0] < vocab  # one matrix serves the embedding and the LM head
    assert tracer_for(pp=2).parameters.stage(0).tied_embedding == 0.0
