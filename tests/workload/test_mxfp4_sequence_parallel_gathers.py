"""MXFP4 trains as a Transformer Engine custom recipe, whose inputs sequence parallelism gathers in 16 bits:
LayerNormLinear and Linear hand a custom quantizer no input before the all-gather ("custom recipe doesn't need to
support quantized AG"), and gather_along_first_dim, which knows no NVFP4QuantizerRef, gathers the 16-bit tensor and
quantizes the whole sequence after. The trace gathers 16 bits and casts the gathered tensor, as the memory model keeps
the 16-bit rows (memory.activations sp_16bit_gather); NVFP4, a recipe of Transformer Engine's own, still quantizes the
rank's rows before gathering them."""

from __future__ import annotations

import pytest

from helpers import gpt_workload
from simulon.workload.kernels import Phase
from simulon.workload.layer_kernels import LayerKernels

TP, SEQ, HIDDEN, FFN = 4, 512, 1024, 4096
MXFP4 = 0.5 + 1 / 32


def kernels(dtype: str) -> LayerKernels:
    wl = gpt_workload(gpus=TP, tp=TP, seq=SEQ, hidden=HIDDEN, ffn=FFN, gbs=TP,
                      training={"dtype": dtype, "bf16_first_layers": 0, "bf16_last_layers": 0},
                      extra_parallelism={"sequence_parallel": True})
    return LayerKernels.of(wl).at(1)


def test_mxfp4s_sequence_parallel_gathers_move_16_bits_and_cast_the_whole_sequence_after():
    k = kernels("mxfp4")
    for gemm, phase in (("attn_qkv", Phase.fwd), ("mlp_linear1", Phase.fwd), ("mlp_linear2", Phase.bwd_ig)):
        assert k.narrow_gather_bytes(gemm, phase) is None  # the caller's 16-bit size
        assert f"{gemm}_gather_cast" not in k
    # fc1's input: the row-wise copy of the gathered sequence in the forward, the column-wise one for the wgrad
    for phase in (Phase.fwd, Phase.bwd_wg):
        assert k["mlp_linear1_cast"][phase].bytes == pytest.approx(SEQ * HIDDEN * (2 + MXFP4))


def test_nvfp4_still_quantizes_the_ranks_rows_before_gathering_them():
    k = kernels("nvfp4")
    assert k.narrow_gather_bytes("mlp_linear1", Phase.fwd) == pytest.approx(SEQ * HIDDEN * (0.5 + 1 / 16))
    assert "mlp_linear1_gather_cast" in k
