"""A user's own kernels table holding the columns of its kernels only: GEMMs without a batch column (one GEMM each, as
a blank batch cell reads), attention without N and K (which no attention row reads); a row lacking a column its own
kernel needs is skipped naming it."""

from __future__ import annotations

import pytest

from simulon.validate.kernels import validate_kernels

GEMM = {"hardware": "H100 SXM", "kernel": "GEMM", "dtype": "bf16", "M": "8192", "N": "8192", "K": "8192",
        "kernel_tflops": "650"}
ATTENTION = {"hardware": "H100 SXM", "kernel": "FlashAttention-2 [FlashAttention-2]", "dtype": "bf16", "M": "4096",
             "batch": "8", "head_dim": "128", "heads": "16", "causal": "yes", "kernel_tflops": "400"}


@pytest.mark.parametrize("row", [GEMM, ATTENTION], ids=["gemm", "attention"])
def test_a_table_of_one_kernel_family_with_its_own_columns_only_is_compared(row):
    report = validate_kernels([row], source="mine.csv")
    assert not report.skipped and [r.index for r in report.rows] == [0]


def test_a_gemm_without_a_batch_column_is_predicted_as_with_a_blank_batch_cell():
    assert validate_kernels([GEMM]).rows[0].predicted == validate_kernels([{**GEMM, "batch": ""}]).rows[0].predicted


def test_a_row_lacking_a_column_of_its_own_kernel_is_skipped_naming_it():
    columns = dict.fromkeys([*GEMM, *ATTENTION], "")  # one table of both, N and K blank in the GEMM's row
    report = validate_kernels([{**columns, **GEMM, "N": "", "K": ""}, {**columns, **ATTENTION}], source="mine.csv")
    assert [(s.index, s.reason) for s in report.skipped] == [
        (0, "cannot read the shape: N, K blank or not a positive integer")]
