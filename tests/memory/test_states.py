"""Model states against the closed forms of mixed-precision Adam, and their invariants."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import gpt_workload
from simulon.config.workload import MegatronWorkload
from simulon.memory.states import ModelStates
from simulon.workload.layout import RankLayout


def workload(tp: int = 1, pp: int = 1, gpus: int = 8, parallelism: dict | None = None, training: dict | None = None,
             moe: dict | None = None, ep: int = 1) -> MegatronWorkload:
    return gpt_workload(gpus=gpus, training=training, tp=tp, pp=pp, ep=ep, layers=8, gbs=64, moe=moe,
                        extra_parallelism=parallelism)


def states(wl: MegatronWorkload, gpus: int = 8, stage: int = 0):
    par = wl.parallelism
    dp = gpus // (par.tp * par.pp * par.cp)
    layout = RankLayout(tp=par.tp, cp=par.cp, dp=dp, pp=par.pp, ep=par.ep, etp=par.etp,
                        fsdp=par.fsdp_size or dp * par.cp)
    return ModelStates(wl, layout).stage(stage)


def test_mixed_precision_adam_without_sharding_takes_18_bytes_per_parameter():
    s = states(workload())
    assert s.total == pytest.approx(18 * s.params)
    assert (s.weights, s.gradients, s.optimizer) == pytest.approx((2 * s.params, 4 * s.params, 12 * s.params))


@given(st.sampled_from([(1, 1), (2, 1), (4, 1), (8, 1), (2, 2), (1, 4)]))
def test_the_distributed_optimizer_takes_6_plus_12_over_dp_cp_bytes_per_parameter(dp_cp):
    dp, cp = dp_cp
    wl = workload(parallelism={"distributed_optimizer": True, "cp": cp}, gpus=dp * cp)
    s = states(wl, gpus=dp * cp)
    assert s.total == pytest.approx((6 + 12 / (dp * cp)) * s.params)


def test_fp16_keeps_16_bit_gradients_and_copies_them_to_fp32_for_the_step():
    s = states(workload(training={"dtype": "fp16"}))
    assert s.total == pytest.approx(16 * s.params)
    assert s.step_transient == pytest.approx(4 * s.params)


def test_bf16_adam_moments_save_four_bytes_per_parameter():
    plain, narrow = states(workload()), states(workload(training={"adam_moments_dtype": "bf16"}))
    assert plain.optimizer - narrow.optimizer == pytest.approx(4 * plain.params)


def test_apex_bf16_optimizer_keeps_six_bytes_per_parameter_and_no_fp32_gradient_copy():
    s = states(workload(training={"dtype": "fp16", "adam_moments_dtype": "bf16", "master_weights_dtype": "bf16"}))
    assert s.optimizer == pytest.approx(6 * s.params)  # a bf16 copy of the weights and two bf16 moments
    assert s.step_transient == 0.0  # the 16-bit gradients update a 16-bit copy: no main_grad.float()


@pytest.mark.parametrize("field", ["adam_moments_dtype", "master_weights_dtype"])
def test_optimizer_states_in_a_narrow_format_are_refused_naming_the_field(field):
    with pytest.raises(ValueError, match=f"{field}[^\\n]*\\n.*fp32, bf16 or fp16, not fp8"):
        workload(training={field: "fp8"})


def test_lora_keeps_only_the_frozen_weights():
    s = states(workload(training={"peft": "lora"}))
    assert (s.gradients, s.optimizer) == (0.0, 0.0) and s.weights == pytest.approx(2 * s.params)


def test_zero3_shards_weights_gradients_and_optimizer_over_the_shard_group():
    full = states(workload())
    sharded = states(workload(parallelism={"fsdp": "full_shard"}))
    assert sharded.total == pytest.approx(full.total / 8)


def test_fp8_keeps_a_narrow_copy_and_transpose_of_each_gemm_weight_unless_weights_live_in_fp8():
    cast = states(workload(training={"dtype": "fp8"}))
    primary = states(workload(training={"dtype": "fp8", "fp8_params": True}))
    assert cast.cast_weights > 0 and primary.cast_weights == 0
    assert primary.weights == pytest.approx(cast.weights)  # fp8 data + transpose weigh what 16 bits did
    assert primary.total == pytest.approx(cast.total - cast.cast_weights)


def test_expert_optimizer_states_shard_over_the_expert_data_parallel_group():
    moe = {"num_experts": 8, "top_k": 2}
    s = states(workload(moe=moe, ep=4, parallelism={"distributed_optimizer": True}))
    assert s.optimizer == pytest.approx(12 * (s.dense_params / 8 + s.expert_params / 2))


@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4]))
def test_more_tensor_or_pipeline_parallelism_never_raises_per_gpu_weight_memory(tp, pp):
    gpus = 32
    base = max(states(workload(tp=tp, pp=pp, gpus=gpus), gpus, stage).weights for stage in range(pp))
    for more_tp, more_pp in ((2 * tp, pp), (tp, 2 * pp)):
        if more_tp > 8 or more_tp * more_pp > gpus:
            continue
        more = max(states(workload(tp=more_tp, pp=more_pp, gpus=gpus), gpus, stage).weights
                   for stage in range(more_pp))
        assert more <= base * (1 + 1e-12)
