"""What a split backward (ZB-H1, ZB-V, DualPipe: B then W) holds from an MoE layer's B to its W, in closed form: the
experts' and the shared experts' GEMM inputs and output gradients, nothing of the router, whose weight gradient is
computed in B (Megatron-Core's RouterGatingLinearFunction.backward returns grad_weight with grad_input; the router is
no Transformer Engine module and has no WeightGradStore)."""

from __future__ import annotations

import pytest

from helpers import gpt_workload
from simulon.config.hybrid import MOE_LAYER
from simulon.memory.activations import ActivationModel

SEQ, HIDDEN, FFN, TOP_K = 512, 1024, 2048, 2
ONE_COPY = {"bf16": 2.0, "fp8": 1.0}
GRAD = {"bf16": 2.0, "fp8": 2 * 1.0}  # an output gradient held for W: per-tensor fp8's data and transpose (Hopper)
# the shared experts' fc1 input as W reads it: without sequence parallelism the saved column-wise copy; under it the
# whole sequence re-gathered in B, per-tensor fp8's row-wise data with its transpose (Hopper)
GATHERED = {("bf16", 1): 2.0, ("fp8", 1): 1.0, ("bf16", 4): 2.0, ("fp8", 4): 2 * 1.0}


def moe_block_deferred(dtype: str, tp: int, experts: int, shared: int) -> float:
    wl = gpt_workload(gpus=4, tp=tp, seq=SEQ, hidden=HIDDEN, ffn=FFN, gbs=4,
                      moe={"num_experts": experts, "top_k": TOP_K, "num_shared_experts": shared},
                      training={"dtype": dtype, "bf16_first_layers": 0, "bf16_last_layers": 0},
                      extra_parallelism={"sequence_parallel": tp > 1})
    acts = ActivationModel(wl)
    return acts.layer(MOE_LAYER).deferred - acts.layer(("attention",)).deferred


@pytest.mark.parametrize("dtype", sorted(ONE_COPY))
@pytest.mark.parametrize("experts", [4, 16])
def test_a_pending_w_holds_the_experts_gemm_inputs_and_output_gradients_and_nothing_of_the_router(dtype, experts):
    g, dy = ONE_COPY[dtype], GRAD[dtype]
    routed = SEQ * TOP_K  # ep 1: every token's top-k copies on this rank
    fc1 = routed * HIDDEN * g + routed * FFN * dy
    fc2 = routed * FFN * g + routed * HIDDEN * dy
    assert moe_block_deferred(dtype, 1, experts, 0) == pytest.approx(fc1 + fc2)


@pytest.mark.parametrize("dtype", sorted(ONE_COPY))
@pytest.mark.parametrize("tp", [1, 4])
def test_the_shared_experts_fc1_holds_the_norm_output_itself_and_the_expert_count_changes_nothing(dtype, tp):
    g, dy, fs = ONE_COPY[dtype], GRAD[dtype], FFN // tp  # the shared expert's columns on this rank
    fc1 = SEQ * HIDDEN * GATHERED[dtype, tp] + SEQ * fs * dy
    fc2 = SEQ * fs * g + SEQ * HIDDEN * dy
    assert moe_block_deferred(dtype, tp, 8, 1) - moe_block_deferred(dtype, tp, 8, 0) == pytest.approx(fc1 + fc2)
    assert moe_block_deferred(dtype, tp, 4, 1) == pytest.approx(moe_block_deferred(dtype, tp, 16, 1))
