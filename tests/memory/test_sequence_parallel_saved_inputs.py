"""The GEMM inputs a narrow-format layer saves for its weight gradients under sequence parallelism, in closed form
against what Transformer Engine keeps: a norm-fused column-parallel GEMM (LayerNormLinear: QKV, fc1) saves the rank's
own T/tp rows, quantized before its all-gather and gathered again for the wgrad, one copy of per-tensor fp8 (the
row-wise, the one it gathers) and of MXFP8 (the column-wise), both copies of NVFP4 (layernorm_linear.py drops the
row-wise data before saving only for MXFP8 and Float8Blockwise tensors); a row-parallel GEMM (the projection, fc2:
Linear) saves its column-wise copy of the whole sequence on its share of the columns. The MoE router is no
Transformer Engine module and saves the norm's output 16-bit; the shared experts' fc1 (a Linear) saves its own
quantized copy of it."""

from __future__ import annotations

import pytest

from helpers import gpt_workload
from simulon.config.hybrid import DENSE_LAYER, MOE_LAYER
from simulon.memory.activations import ActivationModel

TP, SEQ, HIDDEN, FFN = 4, 512, 1024, 4096
ONE_COPY = {"fp8": 1.0, "mxfp8": 1 + 1 / 32, "mxfp4": 0.5 + 1 / 32, "nvfp4": 0.5 + 1 / 16}
# MXFP4 runs as a custom recipe, whose quantizer TE hands no input before the all-gather: the 16-bit rows are saved
SAVED_UNDER_SP = {"fp8": 1.0, "mxfp8": 1 + 1 / 32, "mxfp4": 2.0, "nvfp4": 2 * (0.5 + 1 / 16)}


MOE = {"num_experts": 8, "top_k": 2, "num_shared_experts": 1}


def parts(dtype: str, sp: bool, moe: dict | None = None, modules: list[str] | None = None,
          tp: int = TP) -> dict[str, float]:
    recompute = {"recompute": "selective", "recompute_modules": modules} if modules else {}
    wl = gpt_workload(gpus=TP, tp=tp, seq=SEQ, hidden=HIDDEN, ffn=FFN, gbs=TP, moe=moe,
                      training={"dtype": dtype, "bf16_first_layers": 0, "bf16_last_layers": 0},
                      extra_parallelism={"sequence_parallel": sp, **recompute})
    return ActivationModel(wl).layer(MOE_LAYER if moe else DENSE_LAYER).parts


@pytest.mark.parametrize("dtype", sorted(SAVED_UNDER_SP))
def test_norm_fused_gemms_save_the_ranks_rows_in_the_copies_transformer_engine_keeps(dtype):
    kept = parts(dtype, sp=True)
    for part in ("attention GEMM input", "MLP GEMM input"):
        assert kept[part] == pytest.approx(SEQ / TP * HIDDEN * SAVED_UNDER_SP[dtype])
    # fc2 is a row-parallel Linear: the whole sequence, its share of the columns, the column-wise copy alone
    assert kept["mlp fc2 input"] == pytest.approx(SEQ * FFN / TP * ONE_COPY[dtype])


@pytest.mark.parametrize("dtype", sorted(ONE_COPY))
def test_without_sequence_parallelism_norm_fused_gemms_save_the_column_wise_copy_alone(dtype):
    kept = parts(dtype, sp=False)
    for part in ("attention GEMM input", "MLP GEMM input"):
        assert kept[part] == pytest.approx(SEQ * HIDDEN * ONE_COPY[dtype])


@pytest.mark.parametrize("sp", [True, False])
@pytest.mark.parametrize("dtype", sorted(ONE_COPY))
def test_the_router_keeps_its_input_16_bit_and_the_shared_experts_their_own_quantized_copy(dtype, sp):
    rows = SEQ / TP if sp else SEQ  # Megatron's MoE layer refuses tp > 1 without sequence parallelism
    kept = parts(dtype, sp, moe=MOE, tp=TP if sp else 1)
    assert kept["MoE router input"] == pytest.approx(rows * HIDDEN * 2)
    if dtype == "mxfp4" and sp:  # its fc1 saves the router's 16-bit tensor, quantized only after the gather
        assert "shared expert GEMM input" not in kept
    else:
        assert kept["shared expert GEMM input"] == pytest.approx(rows * HIDDEN * ONE_COPY[dtype])


def test_in_16_bits_the_router_and_the_shared_experts_keep_one_tensor():
    kept = parts("bf16", True, moe=MOE)
    assert kept["MoE router input"] == pytest.approx(SEQ / TP * HIDDEN * 2)
    assert "shared expert GEMM input" not in kept


def test_recomputed_shared_experts_keep_no_quantized_copy():
    assert "shared expert GEMM input" not in parts("fp8", True, moe=MOE, modules=["shared_experts"])


def held_for_w(dtype: str, sp: bool, any_layout: bool) -> float:
    wl = gpt_workload(gpus=TP, tp=TP, seq=SEQ, hidden=HIDDEN, ffn=FFN, gbs=TP,
                      training={"dtype": dtype, "bf16_first_layers": 0, "bf16_last_layers": 0},
                      extra_parallelism={"sequence_parallel": sp})
    return ActivationModel(wl).layer(DENSE_LAYER).held_for_weight_gradient(any_layout)


GATHERED_FOR_W = {("fp8", False): 2.0, ("fp8", True): 1.0, ("mxfp8", False): 1 + 1 / 32, ("mxfp8", True): 1 + 1 / 32,
                  ("nvfp4", False): 0.5 + 1 / 16, ("nvfp4", True): 0.5 + 1 / 16}


@pytest.mark.parametrize(("dtype", "any_layout"), sorted(GATHERED_FOR_W))
def test_a_split_backward_holds_qkv_and_fc1_inputs_gathered_whole_until_its_w(dtype, any_layout):
    # B re-gathers the rank's rows and puts the gathered tensor in the WeightGradStore: the whole sequence, one
    # column-wise copy (per-tensor fp8: the gathered data and, on a TN-only GPU, the transpose made of it), where
    # without sequence parallelism W reads the saved column-wise copy of the (whole) sequence
    extra = held_for_w(dtype, True, any_layout) - held_for_w(dtype, False, any_layout)
    assert extra == pytest.approx(2 * SEQ * HIDDEN * (GATHERED_FOR_W[dtype, any_layout] - ONE_COPY[dtype]))


def backward_transient(dtype: str, sp: bool, moe: dict | None = None) -> float:
    wl = gpt_workload(gpus=TP, tp=TP, seq=SEQ, hidden=HIDDEN, ffn=FFN, gbs=TP, moe=moe,
                      training={"dtype": dtype, "bf16_first_layers": 0, "bf16_last_layers": 0},
                      extra_parallelism={"sequence_parallel": sp})
    return ActivationModel(wl).layer(MOE_LAYER if moe else DENSE_LAYER).backward_transient


REGATHERED = {"bf16": 2.0, "fp8": 2.0, "mxfp8": 1 + 1 / 32, "nvfp4": 0.5 + 1 / 16}


@pytest.mark.parametrize("dtype", sorted(REGATHERED))
def test_a_sequence_parallel_backward_holds_fc1s_input_regathered_for_its_weight_gradient(dtype):
    # fc1's backward re-gathers its saved rows beside its dgrad (the whole sequence, one column-wise copy; per-tensor
    # fp8's gathered data and the transpose a TN-only GPU makes of it); nothing else in the transient changes
    extra = backward_transient(dtype, True) - backward_transient(dtype, False)
    assert extra == pytest.approx(SEQ * HIDDEN * REGATHERED[dtype])


def test_an_moe_layers_backward_regathers_nothing_for_its_experts():
    # the experts' inputs come from the dispatcher: the widest gradient twice and the dummy weight gradient alone
    # (the forward transient is the widest output and the hidden state gathered in fp8, one byte an element)
    kept = ActivationModel(gpt_workload(gpus=TP, tp=TP, seq=SEQ, hidden=HIDDEN, ffn=FFN, gbs=TP, moe=MOE,
                                        training={"dtype": "fp8"}, extra_parallelism={"sequence_parallel": True}))
    assert kept.layer(MOE_LAYER).backward_transient == pytest.approx(
        2 * kept.layer(MOE_LAYER).forward_transient - 2 * SEQ * HIDDEN * 1 + kept.largest_weight(MOE_LAYER) * 2)
