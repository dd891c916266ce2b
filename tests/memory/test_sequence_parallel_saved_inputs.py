"""The GEMM inputs a narrow-format layer saves for its weight gradients under sequence parallelism, in closed form
against what Transformer Engine keeps: a norm-fused column-parallel GEMM (LayerNormLinear: QKV, fc1) saves the rank's
own T/tp rows, quantized before its all-gather and gathered again for the wgrad, one copy of per-tensor fp8 (the
row-wise, the one it gathers) and of MXFP8 (the column-wise), both copies of NVFP4 (layernorm_linear.py drops the
row-wise data before saving only for MXFP8 and Float8Blockwise tensors); a row-parallel GEMM (the projection, fc2:
Linear) saves its column-wise copy of the whole sequence on its share of the columns."""

from __future__ import annotations

import pytest

from helpers import gpt_workload
from simulon.config.hybrid import DENSE_LAYER
from simulon.memory.activations import ActivationModel

TP, SEQ, HIDDEN, FFN = 4, 512, 1024, 4096
ONE_COPY = {"fp8": 1.0, "mxfp8": 1 + 1 / 32, "mxfp4": 0.5 + 1 / 32, "nvfp4": 0.5 + 1 / 16}
SAVED_UNDER_SP = {"fp8": 1.0, "mxfp8": 1 + 1 / 32, "mxfp4": 0.5 + 1 / 32, "nvfp4": 2 * (0.5 + 1 / 16)}


def parts(dtype: str, sp: bool) -> dict[str, float]:
    wl = gpt_workload(gpus=TP, tp=TP, seq=SEQ, hidden=HIDDEN, ffn=FFN, gbs=TP,
                      training={"dtype": dtype, "bf16_first_layers": 0, "bf16_last_layers": 0},
                      extra_parallelism={"sequence_parallel": sp})
    return ActivationModel(wl).layer(DENSE_LAYER).parts


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
