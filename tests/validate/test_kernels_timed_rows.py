"""A user's kernels table may give each kernel's time (time_us, a profile's kernel durations) in place of its
throughput: the row is compared on the throughput its time gives under the row's FLOP convention, as the same kernel
given in TFLOP/s is; a row giving neither is skipped saying so."""

from __future__ import annotations

import pytest

from simulon.config.errors import ConfigError
from simulon.validate.kernels import validate_kernels

GEMM = {"hardware": "H100 SXM", "kernel": "GEMM", "dtype": "bf16", "M": "8192", "N": "8192", "K": "8192",
        "batch": ""}
FLOPS = 2.0 * 8192**3


def test_a_kernel_given_by_its_time_is_compared_as_the_same_kernel_given_by_its_throughput():
    by_rate = validate_kernels([{**GEMM, "kernel_tflops": "650", "time_us": ""}]).rows[0]
    micros = f"{FLOPS / 650e12 * 1e6!r}"
    by_time = validate_kernels([{**GEMM, "kernel_tflops": "", "time_us": micros}]).rows[0]
    assert by_time.measured == pytest.approx(by_rate.measured)
    assert by_time.predicted == by_rate.predicted


def test_a_table_of_kernel_times_without_a_throughput_column_is_read():
    report = validate_kernels([{**GEMM, "time_us": "1800"}], source="mine.csv")
    assert not report.skipped and report.rows[0].measured == pytest.approx(FLOPS / 1800e-6 / 1e12)


def test_a_row_with_neither_is_skipped_and_a_table_with_neither_column_refused():
    report = validate_kernels([{**GEMM, "kernel_tflops": "", "time_us": "0"}])
    assert [s.reason for s in report.skipped] == ["kernel_tflops and time_us are blank or not positive"]
    with pytest.raises(ConfigError, match="one of kernel_tflops/time_us missing"):
        validate_kernels([GEMM], source="mine.csv")
