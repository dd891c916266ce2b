"""The skipped rows' reasons as `simulon validate` prints them: reasons that differ only in a measured number are one
line with the number's range, a number inside a name keeps names apart, every skipped row is listed under one reason
by the number a spreadsheet shows it under, and a table none of whose rows could be compared is refused with every
reason."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from simulon.cli.validate import FIRST_ROW, ROWS_LISTED, row_numbers, skip_reasons, skipped_lines
from simulon.validate.report import Skipped

SUSPECT = "suspect: {} TFLOP/s is above the GPU's dense fp8 peak"


def test_reasons_differing_in_a_measured_value_are_one_line_with_its_range():
    reasons = [SUSPECT.format(v) for v in ("2301.7", "2012.64", "2592.8")]
    assert skip_reasons(reasons) == [(SUSPECT.format("2012.64 to 2592.8"), [0, 1, 2])]


def test_a_number_in_a_name_keeps_the_reasons_apart():
    reasons = ["hardware: 'Intel Gaudi 2' is not modelled", "hardware: 'Intel Gaudi 3' is not modelled",
               "hardware: 'Intel Gaudi 3' is not modelled", "dtype 'fp8' is not modelled",
               "dtype 'fp4' is not modelled"]
    assert skip_reasons(reasons) == [("hardware: 'Intel Gaudi 3' is not modelled", [1, 2]),
                                     ("hardware: 'Intel Gaudi 2' is not modelled", [0]),
                                     ("dtype 'fp8' is not modelled", [3]), ("dtype 'fp4' is not modelled", [4])]


def test_a_number_alike_in_every_reason_is_kept_as_it_is():
    reasons = ["over 2 times the time of a larger message", "over 2 times the time of a larger message"]
    assert skip_reasons(reasons, [7, 9]) == [("over 2 times the time of a larger message", [7, 9])]


@given(st.lists(st.sampled_from(["a 1 b", "a 2.5 b", "c 3", "c # 3", "d", "e 10 f 20", "e 11 f 20"]), max_size=30))
def test_the_lines_count_every_skipped_row_once_most_frequent_first(reasons):
    lines = skip_reasons(reasons)
    assert sorted(index for _, indices in lines for index in indices) == list(range(len(reasons)))
    assert [len(indices) for _, indices in lines] == sorted((len(indices) for _, indices in lines), reverse=True)
    assert {text for text, _ in lines if "to" not in text} <= set(reasons)
    assert all(reasons[index] == text for text, indices in lines if "to" not in text for index in indices)


def test_rows_are_numbered_as_a_spreadsheet_shows_them_runs_as_ranges():
    assert FIRST_ROW == 2
    assert row_numbers([0]) == "row 2"
    assert row_numbers([3, 0]) == "rows 2, 5"
    assert row_numbers([0, 1]) == "rows 2, 3"
    assert row_numbers([0, 1, 2, 7]) == "rows 2-4, 9"


def test_a_long_list_of_rows_names_the_first_and_counts_the_rest():
    indices = list(range(0, 4 * ROWS_LISTED, 2))
    text = row_numbers(indices)
    assert text.endswith(f" and {len(indices) - ROWS_LISTED} more")
    assert text.count(",") == ROWS_LISTED - 1


@given(st.sets(st.integers(0, 300), min_size=1, max_size=60))
def test_the_rows_listed_and_the_count_left_cover_every_row_once(indices):
    text = row_numbers(sorted(indices)).removeprefix("rows ").removeprefix("row ")
    listed, _, more = text.partition(" and ")
    covered = []
    for part in listed.split(", "):
        first, _, last = part.partition("-")
        covered.extend(range(int(first), int(last or first) + 1))
    assert covered == sorted(covered) and len(set(covered)) == len(covered)
    assert set(covered) <= {i + FIRST_ROW for i in indices}
    assert len(covered) + (int(more.removesuffix(" more")) if more else 0) == len(indices)


def test_each_line_says_how_many_rows_which_and_why():
    skipped = [Skipped(4, "no sequence length"), Skipped(0, "no sequence length"), Skipped(2, "dtype 'fp4'")]
    assert skipped_lines(skipped) == ["2 (rows 2, 6): no sequence length", "1 (row 4): dtype 'fp4'"]
