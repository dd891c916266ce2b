"""A layer's forward and backward transients under sequence parallelism in a narrow format, in closed form against
what Transformer Engine allocates: the forward gathers a column-parallel GEMM's input as the rank's quantized rows
(LayerNormLinear and Linear forward: `gather_along_first_dim(ln_out, tp_group, quantizer=quantizer)` with the
quantizer set to the row-wise usage alone) and frees the gathered copy after the GEMM."""

from __future__ import annotations

import pytest

from helpers import gpt_workload
from simulon.config.hybrid import DENSE_LAYER
from simulon.memory import MemoryModel
from simulon.memory.activations import ActivationModel

TP, SEQ, HIDDEN, FFN = 4, 512, 1024, 4096
ROW_WISE = {"bf16": 2.0, "fp8": 1.0, "mxfp8": 1 + 1 / 32, "nvfp4": 0.5 + 1 / 16}


def activations(dtype: str, sp: bool = True, tp: int = TP, ffn: int = FFN) -> ActivationModel:
    wl = gpt_workload(gpus=TP, tp=tp, seq=SEQ, hidden=HIDDEN, ffn=ffn, gbs=TP,
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


# fc1's input re-gathered beside its dgrad, held through it: one column-wise copy of a block-scaled format on every
# GPU; per-tensor fp8's gathered row-wise data with the transpose a TN-only GPU (Hopper) makes of it, the data alone
# where FP8 GEMMs read every layout (Blackwell: Float8TensorStorage.update_usage makes no transpose there)
REGATHERED = {("bf16", False): 2.0, ("bf16", True): 2.0, ("fp8", False): 2.0, ("fp8", True): 1.0,
              ("mxfp8", False): 1 + 1 / 32, ("mxfp8", True): 1 + 1 / 32,
              ("nvfp4", False): 0.5 + 1 / 16, ("nvfp4", True): 0.5 + 1 / 16}


@pytest.mark.parametrize(("dtype", "any_layout"), sorted(REGATHERED))
def test_the_backward_holds_fc1s_regathered_input_in_the_copies_the_gpu_makes_of_it(dtype, any_layout):
    on = activations(dtype).layer(DENSE_LAYER).backward_transient_on(any_layout)
    off = activations(dtype, sp=False).layer(DENSE_LAYER).backward_transient_on(any_layout)
    assert on - off == pytest.approx(SEQ * HIDDEN * REGATHERED[dtype, any_layout])


def test_a_blackwell_stage_peaks_one_fp8_byte_an_element_of_the_regathered_input_below_a_hopper_one():
    wl = gpt_workload(gpus=TP, tp=TP, seq=SEQ, hidden=HIDDEN, ffn=FFN, gbs=TP, vocab=1024, training={"dtype": "fp8"},
                      extra_parallelism={"sequence_parallel": True})  # a small vocabulary: a layer's transient peaks
    hopper, blackwell = (MemoryModel(wl, TP, 80 * 2**30, fp8_any_layout=any_layout).stage(0) for any_layout in
                         (False, True))
    assert hopper.terms["layer transient"] - blackwell.terms["layer transient"] == pytest.approx(SEQ * HIDDEN * 1)


# MXFP4 trains as a Transformer Engine custom recipe (NVFP4QuantizerRef with power-of-two scales): LayerNormLinear and
# Linear hand its quantizer no input before a sequence-parallel all-gather ("custom recipe doesn't need to support
# quantized AG"), and gather_along_first_dim gathers the 16-bit tensor and quantizes the whole sequence after
MXFP4 = 0.5 + 1 / 32


def test_mxfp4_under_sequence_parallelism_saves_the_norms_16_bit_output_rows():
    kept = activations("mxfp4").layer(DENSE_LAYER).parts
    for part in ("attention GEMM input", "MLP GEMM input"):
        assert kept[part] == pytest.approx(SEQ / TP * HIDDEN * 2)


@pytest.mark.parametrize("ffn", [FFN // 2, FFN, 2 * FFN])
def test_mxfp4s_forward_holds_the_16_bit_gather_and_the_copy_cast_from_it(ffn):
    fc1_output = SEQ * ffn / TP * 2
    assert activations("mxfp4", ffn=ffn).layer(DENSE_LAYER).forward_transient == pytest.approx(
        max(fc1_output + SEQ * HIDDEN * MXFP4, SEQ * HIDDEN * (2 + MXFP4)))


def test_mxfp4s_multi_token_prediction_projection_saves_its_16_bit_rows_under_sequence_parallelism():
    wl = gpt_workload(gpus=TP, tp=TP, seq=SEQ, hidden=HIDDEN, ffn=FFN, gbs=TP, training={"dtype": "mxfp4"},
                      extra_parallelism={"sequence_parallel": True}, extra_model={"mtp_layers": 1})
    assert ActivationModel(wl).layer(("mtp", *DENSE_LAYER)).parts["MTP projection input"] == pytest.approx(
        SEQ / TP * 2 * HIDDEN * 2)
