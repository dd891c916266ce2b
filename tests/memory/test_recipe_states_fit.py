"""Published recipes that ran must fit by the memory model, with the states their frameworks keep: NeMo's
performance recipes keep bf16 gradients (2 bytes a parameter), an FSDP-sharded fp8 run keeps only the running
layer's quantized weights."""

from __future__ import annotations

import pytest

from simulon.memory.model import estimate_memory
from simulon.validate.report import read_table, shipped_table
from simulon.validate.training import scenario_from_row

ROWS = read_table(shipped_table("training"))


def row_named(model: str, gpus: str, precision: str, source: str) -> dict[str, str]:
    return next(r for r in ROWS if r["model"] == model and r["num_gpus"] == gpus and r["precision"] == precision
                and source in r["subset"])


def test_nemo_llama3_8b_fp8_on_8_h100_fits_with_bf16_gradients():
    sc = scenario_from_row(row_named("LLAMA3-8B", "8", "FP8", "nemo_24.07_pretrain"))
    report = estimate_memory(sc)
    peak = report.peak
    assert report.fits
    assert peak.terms["gradients"] == pytest.approx(2.0 * peak.params)


def test_an_fsdp_sharded_fp8_run_keeps_one_layers_quantized_weights():
    sc = scenario_from_row(row_named("Llama 2 70B (MaxText/JAX)", "128", "FP8", "dgxc"))
    report = estimate_memory(sc)
    # 70B parameters over 128 ranks: one of 80 layers' GEMM weights (about 0.86B parameters) in two fp8 copies
    assert report.peak.terms["quantized weight copies"] == pytest.approx(2 * 0.856e9, rel=0.02)
    assert report.fits
