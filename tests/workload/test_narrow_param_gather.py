"""Parameter all-gathers of a run that keeps its GEMM weights only in the narrow format (fp8_params, Megatron's
--fp8-param-gather) move those weights as the format gathers them: one byte an element for fp8, bf16 for MXFP8
(quantized after the gather), half a byte for NVFP4 (its scales computed on each rank), the rest (norms, embedding,
LM head, layers the recipe keeps in bf16) in 16 bits; the search's estimate counts the same bytes. NVFP4's
optimizer all-reduces its weights' tile amaxes before they are gathered."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.config.loading import parse_scenario
from simulon.pipeline import build_dag
from simulon.search.estimate import Estimator
from simulon.search.space import Strategy
from simulon.workload.megatron import MegatronTracer

BASE = dict(nodes=2, gpus_per_node=4, tp=1, pp=1, layers=4, gbs=8, hidden=1024)
HIDDEN, LAYERS = 1024, 4


def narrow(fp8_params: bool, dtype: str = "fp8", **parallelism):
    data = gpt_scenario(**BASE, extra_parallelism=parallelism).as_data()
    if dtype != "fp8":  # the block-scaled formats need a Blackwell GPU
        data["datacenter"]["node"]["gpu"] = "B200"
    data["workload"]["training"].update(dtype=dtype, fp8_params=fp8_params)
    return parse_scenario(data, "s.yaml")


def gathered(sc, label: str) -> float:
    dag, _, _ = build_dag(sc, "full")
    return sum(c.nbytes for c in dag.collectives if c.label == label)


@pytest.mark.parametrize(("parallelism", "label", "passes"),
                         [({"distributed_optimizer": True}, "param_allgather", 1),
                          ({"fsdp": "full_shard"}, "fsdp_param_allgather", 2)],
                         ids=["distributed optimizer", "fsdp"])
def test_fp8_params_gather_the_gemm_weights_in_one_byte(parallelism, label, passes):
    sixteen, eight = (narrow(flag, **parallelism) for flag in (False, True))  # 1 micro-batch a rank
    held = MegatronTracer(sixteen.workload, 8).parameters.stage(0)
    params = sum(held.total())
    gemm = sum(held.of(unit)[0] - 2 * HIDDEN for unit in held.units if unit >= 0)  # every layer's but its norms
    assert gathered(sixteen, label) == pytest.approx(passes * 2 * params)
    assert gathered(eight, label) == pytest.approx(passes * (2 * params - gemm))


def narrow_on_b200(dtype: str):
    data = gpt_scenario(**BASE, extra_parallelism={"distributed_optimizer": True}).as_data()
    data["datacenter"]["node"]["gpu"] = "B200"
    data["workload"]["training"].update(dtype=dtype, fp8_params=True, bf16_first_layers=0, bf16_last_layers=0)
    sc = parse_scenario(data, "s.yaml")
    held = MegatronTracer(sc.workload, 8).parameters.stage(0)
    return sc, sum(held.total()), sum(held.of(unit)[0] - 2 * HIDDEN for unit in held.units if unit >= 0)


def test_mxfp8_weights_kept_narrow_are_gathered_in_bf16_and_quantized_after():
    # Megatron-LM cannot map MXFP8Tensor weights into a param buffer (Transformer Engine's replace_raw_data raises
    # for them): its distributed optimizer gathers the bf16 weights into the gradient buffer
    # (--reuse-grad-buf-for-mxfp8-param-ag; param_and_grad_buffer.py `shared_buffer`, _post_param_sync)
    sc, params, _ = narrow_on_b200("mxfp8")
    assert gathered(sc, "param_allgather") == pytest.approx(2 * params)


def test_nvfp4_weights_kept_narrow_are_gathered_as_packed_e2m1_data_without_their_scales():
    # Megatron-LM's --fp4-param-gather gathers the packed row-wise data (param_and_grad_buffer.py
    # `nvfp4_packed_numel`, numel // 2 bytes); every rank computes each 16 x 16 tile's scale from the amaxes it
    # all-reduces (Transformer Engine's _cast_master_weights_to_nvfp4_2d)
    sc, params, gemm = narrow_on_b200("nvfp4")
    assert gathered(sc, "param_allgather") == pytest.approx(2 * params - gemm * (2 - 0.5))


@pytest.mark.parametrize("dtype", ["fp8", "mxfp8", "nvfp4"])
def test_nvfp4_params_all_reduce_one_fp32_amax_per_16x16_tile_of_their_weights_each_step(dtype):
    # Transformer Engine's _cast_master_weights_to_nvfp4_2d all-reduces `packed_amaxes` (one fp32 per tile of every
    # weight, whole) over the data-parallel group before each rank quantizes its shard; the other formats' optimizers
    # reduce per-tensor amaxes at most (none under MXFP8's bf16 gather)
    sc, _, gemm = narrow_on_b200(dtype)
    expected = gemm / 256 * 4 if dtype == "nvfp4" else 0.0
    assert gathered(sc, "weight_amax_allreduce") == pytest.approx(expected)


def test_mxfp8_params_under_fsdp_all_reduce_their_block_amaxes_row_wise_and_column_wise_in_bf16_each_step():
    # Megatron-FSDP quantizes each shard itself (mixed_precision.fp8_quantize: Transformer Engine's
    # _cast_master_weights_to_fp8_mxfp8_scaling all-reduces one bf16 amax per 32 elements each way first); the
    # distributed optimizer gathers MXFP8 weights in bf16 and quantizes them whole after: no amaxes to reduce
    sixteen = narrow(False, "mxfp8", fsdp="full_shard")
    held = MegatronTracer(sixteen.workload, 8).parameters.stage(0)
    gemm = sum(held.of(unit)[0] - 2 * HIDDEN for unit in held.units if unit >= 0)
    assert gathered(narrow(True, "mxfp8", fsdp="full_shard"), "weight_amax_allreduce") == pytest.approx(gemm / 8)
    assert gathered(narrow(True, "mxfp8", distributed_optimizer=True), "weight_amax_allreduce") == 0.0


def exposed_gathers(sc) -> float:
    """The search's estimate of the exposed data-parallel sync: FSDP's gathers and reduce-scatters, the gathers the
    only part fp8_params changes."""
    estimator = Estimator.on(sc.workload, sc.datacenter, sc.collective, sc.workload.training.num_gpus)
    return estimator.estimate(Strategy.of(sc), sc.workload).dp_s


def test_the_search_estimate_gathers_the_bytes_the_trace_does():
    sixteen, eight = (narrow(flag, fsdp="full_shard") for flag in (False, True))
    assert exposed_gathers(eight) < exposed_gathers(sixteen)
