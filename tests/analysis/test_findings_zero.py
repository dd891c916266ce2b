"""A term whose time at stake is under FLOOR_MS (1 microsecond: the replay's floating-point residue, such as a single
GPU's bubble of 1e-14 ms) is no finding; every term from it up is listed, however small a share of the step."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulon.analysis.exposure import GPUExposure
from simulon.analysis.findings import FLOOR_MS, findings
from simulon.analysis.shown import shown_ms


def row(gpu: int, *, bubble: float = 0.0, **exposed: float) -> GPUExposure:
    return GPUExposure(gpu, gpu, 1, 10.0, 0.0, {k: exposed.get(k, 0.0) for k in ("TP", "CP", "EP", "DP", "PP")},
                       bubble)


def test_residue_of_a_single_gpu_run_is_no_finding():
    path = {"by_term_ms": {"compute_slowdown": 3.1e-14, "link_contention": 0.0}, "by_collective_ms": {}}
    found = findings([row(0, bubble=6.9e-15, DP=250.0)], path, {}, step_ms=1000.0)
    assert [f.term for f in found] == ["DP"]


def test_the_floor_is_one_microsecond():
    assert FLOOR_MS == 1e-3
    path = {"by_term_ms": {}, "by_collective_ms": {}}
    assert [f.term for f in findings([row(0, TP=FLOOR_MS, PP=0.999e-3)], path, {}, step_ms=100.0)] == ["TP"]


@given(st.floats(0.0, 1e-3, exclude_max=True), st.floats(1e-3, 1e4))
def test_a_term_is_listed_exactly_when_its_time_reaches_the_floor(below, above):
    path = {"by_term_ms": {"compute_slowdown": below}, "by_collective_ms": {}}
    found = findings([row(0, bubble=below, EP=above)], path, {}, step_ms=2e4)
    assert [f.term for f in found] == ["EP"] and found[0].at_stake_ms == above


@pytest.mark.parametrize("ms, shown", [(0.02, "0.02"), (0.0012, "0.0012"), (0.1, "0.1"), (0.146, "0.146"),
                                       (1234.56, "1,234.6")])
def test_a_finding_under_ten_milliseconds_is_written_with_three_significant_digits_not_as_zero(ms, shown):
    assert shown_ms(ms) == shown


def test_a_findings_share_of_the_step_is_written_as_the_report_writes_it_not_as_zero():
    """A 3.7 us link contention on a 494.9 ms step read "0.000753% of the step" in the report's number and "0.0% of
    the step" in the finding's own sentence beside it."""
    path = {"by_term_ms": {"link_contention": 0.0037246533837035625}, "by_collective_ms": {}}
    found = findings([row(0, TP=195.3, PP=0.0124)], path, {}, step_ms=494.85284117683125)
    assert [f.detail for f in found] == [
        "TP communication exposed 195.3 ms on GPU 0 (stage 0), 39.5% of the step",
        "PP communication exposed 0.0124 ms on GPU 0 (stage 0), 0.00251% of the step",
        "flows slowed by link sharing on the critical path: 0.00372 ms, 0.000753% of the step"]
