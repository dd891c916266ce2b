"""Multi-token prediction (Megatron-Core's mtp_num_layers, DeepSeek-V3's MTP module): its layers, their place in the
pipeline, their FLOPs, parameters, activations and what the loss stage runs for them."""

from __future__ import annotations

from collections import Counter

import pytest

from helpers import estimate_over_replay, gpt_scenario
from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario
from simulon.config.workload import MegatronWorkload, ModelSpec
from simulon.memory.activations import ActivationModel
from simulon.pipeline import build_dag, simulate
from simulon.search.run import Search
from simulon.search.space import Strategy
from simulon.workload.kernels import Phase
from simulon.workload.layer_kernels import LayerKernels
from simulon.workload.megatron import MegatronTracer
from simulon.workload.parameters import ModelParameters, PipelineLayers
from simulon.workload.program import ComputeOp, SendOp

DEEPSEEK_V3_RECIPE = "Et*3|(tt|)*29,m|L"
"""Megatron's DeepSeek-V3 layout at pp 16, vpp 2: the MTP layer in a virtual stage of its own before the loss's."""


def mtp_scenario(mtp: int, **knobs):
    return gpt_scenario(extra_model={"mtp_layers": mtp} if mtp else None, **knobs)


def step_flops(sc) -> float:
    dag, _, _ = build_dag(sc)
    return dag.total_flops()


def workload(model: dict, parallelism: dict, gpus: int = 1) -> MegatronWorkload:
    return MegatronWorkload.model_validate({
        "framework": "megatron", "model": model, "parallelism": parallelism,
        "training": {"global_batch_size": 16, "micro_batch_size": 1, "sequence_length": 4096, "num_gpus": gpus}})


def test_an_mtp_layer_is_the_mtp_block_then_a_layer_like_the_decoders_last():
    dense = ModelSpec.model_validate({"num_layers": 4, "hidden_size": 256, "num_heads": 4, "ffn_hidden_size": 1024,
                                      "vocab_size": 1000, "mtp_layers": 2})
    assert [dense.layer_blocks(i) for i in range(4, 6)] == [("mtp", "attention", "mlp")] * 2
    v3 = ModelSpec.model_validate({"from": "deepseek-v3"})
    assert v3.mtp_layers == 1 and v3.all_layers == 62
    assert v3.layer_blocks(61) == ("mtp", "attention", "moe")
    assert v3.layer_kinds[-1] == ("mtp", "attention", "moe")


@pytest.mark.parametrize(("tp", "pp", "mtp"), [(1, 1, 1), (2, 1, 2), (1, 2, 1), (2, 2, 3)])
def test_flops_with_mtp_add_its_layers_projections_and_logits_to_the_closed_form(tp, pp, mtp):
    layers, h, seq, vocab, gbs = 4, 1024, 512, 32768, 8
    sc = mtp_scenario(mtp, nodes=2, gpus_per_node=4, tp=tp, pp=pp, layers=layers, hidden=h, seq=seq, vocab=vocab,
                      gbs=gbs)
    # Megatron-Core's num_floating_point_operations with mtp_num_layers: each depth a layer like the decoder's
    # (72 h^2 (1 + s/6h) per token), eh_proj's 2h x h (x 6) and one more logit pass (6 h V); Megatron also counts
    # the three norms (6 x 3h per token), which move bytes, not FLOPs, in the kernels
    per_token = 72 * h**2 * (layers + mtp) * (1 + seq / (6 * h)) + 6 * h * vocab * (1 + mtp) + 12 * h**2 * mtp
    assert step_flops(sc) == pytest.approx(gbs * seq * per_token, rel=1e-12)


def test_deepseek_v3s_mtp_module_is_its_moe_layer_and_projection_beside_the_671b():
    base = {"from": "deepseek-v3"}
    without = workload({**base, "mtp_layers": 0}, {"tp": 1})
    kernels = LayerKernels.weights_of(without)
    total = [sum(ModelParameters(LayerKernels.weights_of(wl), wl.model, PipelineLayers.of(wl)).stage(0).total())
             for wl in (without, workload(base, {"tp": 1}))]
    h, vocab = 7168, 129280
    moe_layer = sum(kernels.layer_params(("attention", "moe")))
    assert total[1] - total[0] == moe_layer + 2 * h * h + 3 * h
    # the 685B of the checkpoint (its README) count the MTP module's own copies of the embedding and the output
    # head, which Megatron-Core shares with the model's: 684.49B here
    assert (total[1] + 2 * vocab * h) / 1e9 == pytest.approx(685, abs=0.6)


def test_megatrons_deepseek_v3_layout_puts_the_mtp_layer_in_a_stage_of_its_own_that_sends_two_streams():
    wl = workload({"from": "deepseek-v3"}, {"pp": 16, "vpp": 2, "ep": 8, "pipeline_layout": DEEPSEEK_V3_RECIPE},
                  gpus=128)
    layers = PipelineLayers.of(wl)
    assert layers.counts == (3, *(2,) * 29, 1, 0)
    assert layers.mtp_stage == 14 and list(layers.layers_of(14, 1)) == [61]
    assert layers.streams(14, 1) == 2 and layers.streams(14, 1, end=False) == 1 and layers.streams(13, 1) == 1
    params = ModelParameters(LayerKernels.weights_of(wl), wl.model, layers)
    # untied: stage 14 looks the shifted tokens up in a word embedding of its own, summed with the first stage's
    assert params.embedding_stages == (0, 14)
    assert params.tied_embedding(14) == params.tied_embedding(0) == 129280 * 7168


def test_without_a_layout_the_mtp_layers_join_the_last_stage_and_share_a_tied_embedding_with_its_head():
    model = {"num_layers": 8, "hidden_size": 1024, "num_heads": 8, "ffn_hidden_size": 4096, "vocab_size": 32768,
             "mtp_layers": 2, "tie_embeddings": True}
    wl = workload(model, {"pp": 4}, gpus=4)
    layers = PipelineLayers.of(wl)
    assert layers.counts == (2, 2, 2, 4) and layers.mtp_stage == 3
    params = ModelParameters(LayerKernels.weights_of(wl), wl.model, layers)
    assert not params.mtp_embedding_copy and params.embedding_stages == (0, 3)


def test_the_loss_stage_runs_the_lm_head_and_loss_once_more_per_depth():
    sc = mtp_scenario(2, gpus_per_node=4, tp=2, pp=2, layers=4)
    tracer = MegatronTracer(sc.workload, 4)
    last, first = tracer.stage_program(1), tracer.stage_program(0)
    counts = Counter((op.kernel.name, op.kernel.phase) for op in last.ops if isinstance(op, ComputeOp))
    microbatches = tracer.num_microbatches
    assert counts[("lm_head", Phase.fwd)] == counts[("loss", Phase.bwd_ig)] == 3 * microbatches
    assert counts[("mtp_eh_proj", Phase.fwd)] == counts[("mtp_eh_proj", Phase.bwd_wg)] == 2 * microbatches
    assert counts[("mtp_embedding", Phase.bwd_wg)] == 2 * microbatches
    assert not any(op.kernel.name.startswith("mtp_") for op in first.ops if isinstance(op, ComputeOp))


def test_a_standalone_mtp_stage_sends_the_decoders_and_its_own_hidden_states():
    layout = {"pp": 3, "vpp": 2, "pipeline_layout": "Et|t|t|t|m|L"}
    sc = mtp_scenario(1, gpus_per_node=3, layers=4, gbs=6, extra_parallelism=layout)
    tracer = MegatronTracer(sc.workload, 3)
    assert tracer.layers.mtp_stage == 1
    sends = {(op.phase, op.peer_stage, op.peer_chunk): op.nbytes
             for op in tracer.stage_program(1).ops if isinstance(op, SendOp)}
    one = 512 * 1024 * 2  # a micro-batch's hidden state: sequence x hidden x bf16
    # stage 1's chunk 1 (virtual stage 4) holds the MTP layer and sends both streams on to the loss's (stage 2)
    assert sends[(Phase.fwd, 2, 1)] == 2 * one
    # and the gradient of the decoder's stream alone back to the decoder's last layer (stage 0, chunk 1)
    assert sends[(Phase.bwd_ig, 0, 1)] == one
    # the decoder's own chunk on this stage (virtual stage 1) sends one stream either way
    assert sends[(Phase.fwd, 2, 0)] == sends[(Phase.bwd_ig, 0, 0)] == one


def test_mtp_keeps_its_projection_input_and_a_loss_per_depth():
    one = ActivationModel(mtp_scenario(0, tp=2).workload)
    two = ActivationModel(mtp_scenario(2, tp=2).workload)
    head, head2 = one.head(), two.head()
    assert head2["logits"] == 3 * head["logits"] and head2["LM head input"] == 3 * head["LM head input"]
    assert head2["final norm input"] == head["final norm input"]
    mtp_layer = two.layer(("mtp", "attention", "mlp")).parts
    assert mtp_layer["MTP projection input"] == 512 * 2 * 1024 * 2  # the 2h concatenation, whole: no sp
    assert two.layer(("attention", "mlp")).total + sum(v for k, v in mtp_layer.items() if k.startswith("MTP")) \
        == pytest.approx(two.layer(("mtp", "attention", "mlp")).total)


def test_mtp_makes_the_step_slower_and_the_search_estimate_follows_the_replay():
    sc = mtp_scenario(1, nodes=2, gpus_per_node=4, layers=4, gbs=16, seq=1024)
    plain = mtp_scenario(0, nodes=2, gpus_per_node=4, layers=4, gbs=16, seq=1024)
    assert simulate(sc).result.iteration_time_ms > simulate(plain).result.iteration_time_ms
    search = Search(sc)
    # 0.96, 0.99 and 1.07; tp 2 pp 2 read 0.80 while the estimate left out the embedding copies' gradient all-reduce
    for strategy in (Strategy(1, 1, 1, 8, 1, 1, 1, 1, False, "none", "distributed_optimizer", "bf16", False),
                     Strategy(2, 2, 1, 2, 1, 1, 2, 1, True, "none", "distributed_optimizer", "bf16", False),
                     Strategy(1, 2, 1, 4, 1, 1, 1, 1, False, "none", "distributed_optimizer", "bf16", False)):
        assert 0.92 < estimate_over_replay(search, sc, strategy, 8) < 1.1, strategy


@pytest.mark.parametrize(("changes", "field", "words"), [
    ({"framework": "deepspeed"}, "workload.model.mtp_layers", "deepspeed has none"),
    ({"model": {"hybrid_pattern": "M*M-", "mamba": {"num_heads": 8, "head_dim": 64}}}, "workload.model.mtp_layers",
     "a hybrid model's multi-token-prediction layers need their blocks: give them after '/'"),
])
def test_mtp_where_its_framework_or_model_has_none_is_refused_naming_the_field(changes, field, words):
    data = mtp_scenario(1).model_dump(mode="json", exclude_none=True)
    workload_block = data["workload"]
    workload_block.update({k: v for k, v in changes.items() if k != "model"})
    workload_block["model"].update(changes.get("model", {}))
    with pytest.raises(ConfigError) as info:
        parse_scenario(data, "mtp.yaml")
    assert f"{field}: " in str(info.value) and words in str(info.value)


def test_a_hybrid_mtp_layer_is_the_mtp_block_then_the_blocks_its_pattern_gives_after_a_slash():
    # a hybrid's multi-token prediction was refused, and a HuggingFace file's dropped without a word
    nano = ModelSpec.model_validate({"from": "nemotron-3-nano-30b-a3b", "mtp_layers": 1, "hybrid_pattern":
                                     "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME/*E"})
    assert nano.num_layers == 52 and nano.all_layers == 53
    assert nano.layer_blocks(52) == ("mtp", "attention", "moe") and nano.layer_blocks(51) == ("moe",)
    without = workload({"from": "nemotron-3-nano-30b-a3b"}, {"tp": 1})
    with_mtp = workload(nano.model_dump(exclude_none=True), {"tp": 1})
    kernels = LayerKernels.weights_of(with_mtp)
    total = [sum(ModelParameters(LayerKernels.weights_of(wl), wl.model, PipelineLayers.of(wl)).stage(0).total())
             for wl in (without, with_mtp)]
    h = 2688
    assert total[1] - total[0] == sum(kernels.layer_params(("attention", "moe"))) + 2 * h * h + 3 * h


def test_a_hybrid_of_attention_and_mlp_layers_with_an_mtp_depth_has_the_flops_of_the_gpt_it_spells():
    # "*-*-/*-": two transformer layers as four single-block layers, and one MTP depth of attention then MLP
    gpt = mtp_scenario(1, layers=2)
    hybrid = gpt_scenario(layers=4, extra_model={"hybrid_pattern": "*-*-/*-", "mtp_layers": 1})
    assert step_flops(hybrid) == pytest.approx(step_flops(gpt), rel=1e-12)
    assert step_flops(hybrid) > step_flops(gpt_scenario(layers=4, extra_model={"hybrid_pattern": "*-*-"}))
