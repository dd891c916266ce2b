"""The skipped rows' reasons as `simulon validate` prints them: reasons that differ only in a measured number are one
line with the number's range, a number inside a name keeps names apart, and the counts add up to the rows skipped."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from simulon.cli.validate import skip_reasons

SUSPECT = "suspect: {} TFLOP/s is above the GPU's dense fp8 peak"


def test_reasons_differing_in_a_measured_value_are_one_line_with_its_range():
    reasons = [SUSPECT.format(v) for v in ("2301.7", "2012.64", "2592.8")]
    assert skip_reasons(reasons) == [(SUSPECT.format("2012.64 to 2592.8"), 3)]


def test_a_number_in_a_name_keeps_the_reasons_apart():
    reasons = ["hardware: 'Intel Gaudi 2' is not modelled", "hardware: 'Intel Gaudi 3' is not modelled",
               "hardware: 'Intel Gaudi 3' is not modelled", "dtype 'fp8' is not modelled",
               "dtype 'fp4' is not modelled"]
    assert skip_reasons(reasons) == [("hardware: 'Intel Gaudi 3' is not modelled", 2),
                                     ("hardware: 'Intel Gaudi 2' is not modelled", 1),
                                     ("dtype 'fp8' is not modelled", 1), ("dtype 'fp4' is not modelled", 1)]


def test_a_number_alike_in_every_reason_is_kept_as_it_is():
    reasons = ["over 2 times the time of a larger message", "over 2 times the time of a larger message"]
    assert skip_reasons(reasons) == [("over 2 times the time of a larger message", 2)]


@given(st.lists(st.sampled_from(["a 1 b", "a 2.5 b", "c 3", "c # 3", "d", "e 10 f 20", "e 11 f 20"]), max_size=30))
def test_the_lines_count_every_skipped_row_once_most_frequent_first(reasons):
    lines = skip_reasons(reasons)
    assert sum(count for _, count in lines) == len(reasons)
    assert [count for _, count in lines] == sorted((count for _, count in lines), reverse=True)
    assert {text for text, _ in lines if "to" not in text} <= set(reasons)
