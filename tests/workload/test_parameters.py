"""Parameters per unit and per stage, as the gradient sync and the optimizer count them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.workload.layer_kernels import padded_vocabulary
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


@pytest.mark.parametrize("divisor, tp, shard", [(128, 1, 50304), (128, 8, 6400), (None, 8, 6283), (None, 1, 50257)])
def test_gpt2s_vocabulary_is_padded_as_megatron_lm_pads_it_only_where_the_run_says_so(divisor, tp, shard):
    """Megatron-LM's GPT-2 runs hold 50,304 entries at tp 1 and 51,200 at tp 8 (_vocab_size_with_padding); unpadded,
    each rank holds ceil(50,257 / tp) rows. The embedding, the LM head's GEMMs and their FLOPs follow."""
    sc = gpt_scenario(nodes=1, gpus_per_node=8, tp=tp, vocab=50257, hidden=1024, gbs=8 // tp)
    training = sc.workload.training.model_copy(update={"make_vocab_size_divisible_by": divisor})
    tracer = MegatronTracer(sc.workload.model_copy(update={"training": training}), 8)
    assert tracer.kernels.vocab_params == shard * 1024


@given(st.integers(1, 2**20), st.sampled_from([1, 2, 3, 4, 8, 16]), st.sampled_from([None, 1, 64, 128]))
def test_the_padded_vocabulary_is_the_least_multiple_of_the_divisor_times_tp_that_holds_every_token(vocab, tp, divisor):
    padded, multiple = padded_vocabulary(vocab, tp, divisor), tp * (divisor or 1)
    assert padded % multiple == 0 and vocab <= padded < vocab + multiple
