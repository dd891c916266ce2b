"""The floor under a validation's MAPE: rows a table does not tell apart get one prediction from any model, so the
spread of their measurements is error no model reading the table removes (validate.report)."""

from __future__ import annotations

import json
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import cli
from simulon.validate.report import Comparison, inputs_key, least_errors

HEADER = "subset,hardware,num_gpus,nodes,collective,msg_bytes,group_size,num_groups,algbw_GBps,busbw_GBps,time_us,notes"
measurements = st.lists(st.floats(min_value=1e-3, max_value=1e3), min_size=1, max_size=8)


def alike(measured: list[float], key: str = "same") -> list[Comparison]:
    return [Comparison(i, "s", "m", m, m, "g", key) for i, m in enumerate(measured)]


def test_three_readings_of_one_point_are_best_served_by_their_median_in_percentage_terms():
    # a prediction of 150 is 50% off 100, exact on 150 and 25% off 200; 100 or 200 would cost 83% or 133%
    assert least_errors(alike([100.0, 150.0, 200.0])) == [50.0, 0.0, 25.0]


def test_a_row_of_its_own_and_rows_measured_alike_have_no_floor():
    assert least_errors(alike([100.0, 250.0], key="")) == [0.0, 0.0]
    assert least_errors(alike([7.0, 7.0, 7.0])) == [0.0, 0.0, 0.0]


@given(measurements, st.floats(min_value=1e-3, max_value=1e3))
def test_no_single_prediction_beats_the_floor(measured, prediction):
    floor = statistics.fmean(least_errors(alike(measured)))
    assert floor <= statistics.fmean(100 * abs(prediction / m - 1) for m in measured) + 1e-9


@given(measurements, measurements)
def test_sets_under_other_keys_do_not_share_a_floor(first, second):
    rows = alike(first, "a") + alike(second, "b")
    assert least_errors(rows) == least_errors(alike(first, "a")) + least_errors(alike(second, "b"))


def test_rows_differing_only_in_what_they_measured_share_a_key_and_any_other_cell_splits_them():
    row = {"hardware": "B200", "msg_bytes": "1024", "time_us": "10", "busbw_GBps": "0.1", "notes": "x"}
    measured = ("time_us", "busbw_GBps")
    assert inputs_key(row, measured) == inputs_key({**row, "time_us": "15", "busbw_GBps": "0.07"}, measured)
    assert inputs_key(row, measured) != inputs_key({**row, "notes": "y"}, measured)


def test_the_collectives_report_shows_the_floor_of_rows_it_cannot_tell_apart_and_stays_above_it(tmp_path):
    path = tmp_path / "c.csv"
    # one all-reduce point read twice, 20% apart, and a point of its own
    path.write_text("\n".join([HEADER, "a,8x A100 NVLink,8,1,all_reduce,1073741824,8,,,200,,",
                               "a,8x A100 NVLink,8,1,all_reduce,1073741824,8,,,240,,",
                               "a,8x A100 NVLink,8,1,all_reduce,536870912,8,,,220,,"]) + "\n")
    run = cli("validate", "collectives", "--csv", str(path), "--json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    floor = data["floor_pct_by_subset"]["a"]
    assert floor == pytest.approx(100 / 6 / 3)  # the best prediction, 200, is 1/6 off 240; three rows
    assert statistics.fmean(abs(r["error_pct"]) for r in data["rows"]) >= floor
    twice = [r["predicted"] for r in data["rows"][:2]]
    assert twice[0] == twice[1]  # what the floor rests on: one prediction for rows alike
    table = cli("validate", "collectives", "--csv", str(path))
    assert "floor %" in table.stdout and "5.6" in table.stdout


def test_a_table_whose_rows_all_differ_shows_no_floor_column(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("\n".join([HEADER, "a,8x A100 NVLink,8,1,all_reduce,1073741824,8,,,200,,"]) + "\n")
    table = cli("validate", "collectives", "--csv", str(path))
    assert table.returncode == 0 and "floor %" not in table.stdout
