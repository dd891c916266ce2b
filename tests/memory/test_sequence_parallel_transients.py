"""A layer's forward and backward transients under sequence parallelism in a narrow format, in closed form against
what Transformer Engine allocates: the forward gathers a column-parallel GEMM's input as the rank's quantized rows
(LayerNormLinear and Linear forward: `gather_along_first_dim(ln_out, tp_group, quantizer=quantizer)` with the
quantizer set to the row-wise usage alone) and frees the gathered copy after the GEMM."""

from __future__ import annotations

import pytest

from helpers import gpt_workload
from simulon.config.hybrid import DENSE_LAYER
from simulon.memory.activations import ActivationModel

TP, SEQ, HIDDEN, FFN = 4, 512, 1024, 4096
ROW_WISE = {"bf16": 2.0, "fp8": 1.0, "mxfp8": 1 + 1 / 32, "nvfp4": 0.5 + 1 / 16}


def activations(dtype: str, sp: bool = True, tp: int = TP, gpu: str | None = None) -> ActivationModel:
    wl = gpt_workload(gpus=TP, tp=tp, seq=SEQ, hidden=HIDDEN, ffn=FFN, gbs=TP,
                      training={"dtype": dtype, "bf16_first_layers": 0, "bf16_last_layers": 0},
                      extra_parallelism={"sequence_parallel": sp})
    return ActivationModel(wl)


@pytest.mark.parametrize("dtype", sorted(ROW_WISE))
def test_the_forward_holds_fc1s_gathered_input_in_the_row_wise_copy_transformer_engine_gathers(dtype):
    fc1_output = SEQ * FFN / TP * 2  # the widest GEMM output, 16-bit
    gathered = SEQ * HIDDEN * ROW_WISE[dtype]
    assert activations(dtype).layer(DENSE_LAYER).forward_transient == pytest.approx(fc1_output + gathered)


@pytest.mark.parametrize("dtype", sorted(ROW_WISE))
def test_without_sequence_parallelism_the_forward_holds_the_16_bit_output_its_all_reduce_works_on(dtype):
    fc1_output = SEQ * FFN / TP * 2
    assert activations(dtype, sp=False).layer(DENSE_LAYER).forward_transient == pytest.approx(
        fc1_output + SEQ * HIDDEN * 2)


@pytest.mark.parametrize("dtype", sorted(ROW_WISE))
def test_the_forward_never_holds_less_than_a_row_parallel_output_and_its_reduce_scattered_share(dtype):
    for tp in (2, 4):
        acts = activations(dtype, tp=tp)
        floor = (SEQ + SEQ / tp) * HIDDEN * 2
        assert acts.layer(("attention",)).forward_transient >= floor
        assert acts.layer(DENSE_LAYER).forward_transient >= floor
