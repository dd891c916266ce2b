"""States under FSDP and autocast: experts are sharded over the ranks that hold them (the expert-data-parallel group),
ZeRO-2 holds no gathered weights beyond its unsharded ones, a shard group of one rank holds nothing more than no
sharding, and autocast keeps fp32 parameters and gradients."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.config.loading import parse_scenario
from simulon.memory.model import MemoryModel

MOE = {"num_experts": 8, "top_k": 2}


def terms(sc, **parallelism) -> dict[str, float]:
    data = sc.model_dump(mode="json", exclude_none=True)
    data["workload"]["parallelism"].update(parallelism)
    return MemoryModel.of(parse_scenario(data, "test")).stage(0).terms


@pytest.mark.parametrize("etp", [1, 2])
def test_fsdp_shards_expert_optimizer_states_as_the_distributed_optimizer_does(etp):
    """With experts not split over tp (etp 1 < tp 2), ZeRO-2 and ZeRO-3 sharded them over fsdp / ep = 2 ranks
    instead of the 4 that hold them: 3.8x ZeRO-1's optimizer memory on the MoE example."""
    sc = gpt_scenario(nodes=2, gpus_per_node=4, tp=2, ep=2, moe=MOE, layers=2, gbs=8,
                      extra_parallelism={"expert_tensor_parallel": etp})
    zero1 = terms(sc, distributed_optimizer=True)["optimizer states"]
    for fsdp in ("shard_grad_op", "full_shard"):
        assert terms(sc, fsdp=fsdp)["optimizer states"] == pytest.approx(zero1, rel=1e-12)


def test_zero2_holds_one_layers_unsharded_gradients_beyond_zero1_and_no_gathered_weights():
    sc = gpt_scenario(nodes=2, gpus_per_node=4, layers=4, hidden=2048, heads=16, gbs=8)
    zero1, zero2 = terms(sc, distributed_optimizer=True), terms(sc, fsdp="shard_grad_op")
    model = MemoryModel.of(sc)
    layer = max(sum(model.states.kernels.layer_params(kind)) for kind in sc.workload.model.layer_kinds)
    extra = zero2["layer transient"] - zero1["layer transient"]
    assert extra == pytest.approx(layer * model.states.shape.grad_bytes, rel=1e-9)
    assert zero2["weights"] == zero1["weights"]


@pytest.mark.parametrize("fsdp", ["shard_grad_op", "full_shard"])
def test_fsdp_over_one_rank_holds_what_no_sharding_holds(fsdp):
    sc = gpt_scenario(nodes=1, gpus_per_node=4, tp=4, layers=4, gbs=8)
    plain, sharded = terms(sc), terms(sc, fsdp=fsdp)
    assert sum(sharded.values()) == pytest.approx(sum(plain.values()), rel=1e-12)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_autocast_keeps_fp32_parameters_and_gradients_and_no_master_copy(dtype):
    """torch.autocast over fp32 parameters: 4 bytes a weight, 4 a gradient, Adam's 8 of moments (the parameters are
    the master); the memory model counted Megatron's 16-bit weights, gradients and fp32 master copy."""
    sc = gpt_scenario(nodes=1, gpus_per_node=4, layers=4, gbs=8)
    data = sc.model_dump(mode="json", exclude_none=True)
    data["workload"]["training"].update({"dtype": dtype, "autocast": True, "elementwise": "eager"})
    model = MemoryModel.of(parse_scenario(data, "test"))
    stage = model.stage(0)
    params = sum(model.states.stage_parameters(0).total())
    assert stage.terms["weights"] == pytest.approx(4 * params)
    assert stage.terms["gradients"] == pytest.approx(4 * params)
    assert stage.terms["optimizer states"] == pytest.approx(8 * params)
    assert "optimizer step transient" not in stage.terms


def _b200(dtype: str, fsdp: str):
    return parse_scenario({
        "datacenter": {"from": "dgx-b200", "cluster": {"num_nodes": 1}},
        "workload": {"model": {"name": "g", "hidden_size": 4096, "num_layers": 8, "num_heads": 32,
                               "ffn_hidden_size": 16384, "vocab_size": 51200},
                     "parallelism": {"fsdp": fsdp, "distributed_optimizer": fsdp == "none"},  # fp8_params: sharded
                     "training": {"num_gpus": 8, "global_batch_size": 8, "sequence_length": 2048, "dtype": dtype,
                                  "fp8_params": True}}}, "test")


@pytest.mark.parametrize("dtype", ["fp8", "mxfp8", "nvfp4"])  # no framework keeps MXFP4 weights
def test_full_sharding_holds_an_eighth_of_the_narrow_weights_over_eight_ranks(dtype):
    """fp8_params with FSDP full sharding: the 16-bit weights were sharded but the narrow GEMM weights that replace
    them were subtracted whole, so NVFP4 weights came out at -0.46 GiB and MXFP8 at 0.566 for 0.484."""
    whole = MemoryModel.of(_b200(dtype, "none")).stage(0).terms["weights"]
    sharded = MemoryModel.of(_b200(dtype, "full_shard")).stage(0).terms["weights"]
    assert sharded > 0
    assert sharded == pytest.approx(whole / 8, rel=1e-12)


def test_fsdp_gathers_no_expert_weights_where_expert_parallelism_takes_all_of_data_parallelism():
    """ep 2 over dp 2 leaves each expert on one rank (expert-data-parallel group of one): ZeRO-3 shards and gathers
    only the dense weights, so it holds less than ZeRO-2. The transient counted the layer's expert weights gathered
    twice (running and prefetched layer) and their gradients unsharded besides the whole ones the states hold:
    full_shard 574.8 MiB against shard_grad_op's 566.8 MiB on stage 0."""
    sc = gpt_scenario(nodes=2, gpus_per_node=4, tp=2, pp=2, ep=2, moe=MOE, layers=8, hidden=512, heads=8, seq=1024,
                      gbs=16)
    model = MemoryModel.of(sc)
    assert model.layout.expert_fsdp == 1
    zero2, zero3 = terms(sc, fsdp="shard_grad_op"), terms(sc, fsdp="full_shard")
    assert sum(zero3.values()) < sum(zero2.values())
    dense = max(model.states.kernels.layer_params(kind)[0] for kind in sc.workload.model.layer_kinds)
    assert zero3["layer transient"] - zero2["layer transient"] == pytest.approx(2 * dense * 2.0, rel=1e-9)


def stage_terms(sc, stage: int, **parallelism) -> dict[str, float]:
    data = sc.model_dump(mode="json", exclude_none=True)
    data["workload"]["parallelism"].update(parallelism)
    return MemoryModel.of(parse_scenario(data, "test")).stage(stage).terms


@pytest.mark.parametrize(("layers", "moe", "gathered_layers"), [(4, {**MOE, "first_dense_layers": 2}, 2), (2, None, 1)])
def test_zero3_gathers_two_of_the_stages_own_layers_or_its_one(layers, moe, gathered_layers):
    """ZeRO-3 holds the running layer's and the prefetched next layer's gathered weights beyond ZeRO-2: the stage's
    own layers', not the model's largest (a stage of dense layers gathered two MoE layers' experts), and one layer's
    on a stage of one layer (it gathered two there too)."""
    sc = gpt_scenario(nodes=2, gpus_per_node=4, pp=2, ep=2 if moe else 1, moe=moe, layers=layers, hidden=512, heads=8,
                      gbs=16)
    model = MemoryModel.of(sc)
    dense_layer = model.states.kernels.layer_params(sc.workload.model.layer_blocks(0))
    assert dense_layer[1] == 0.0
    zero2, zero3 = stage_terms(sc, 0, fsdp="shard_grad_op"), stage_terms(sc, 0, fsdp="full_shard")
    assert zero3["layer transient"] - zero2["layer transient"] == pytest.approx(
        gathered_layers * dense_layer[0] * 2.0, rel=1e-9)
