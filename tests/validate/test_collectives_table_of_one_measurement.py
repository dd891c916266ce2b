"""A user's own collectives table that gives one measured column, not all three of nccl-tests' (busbw_GBps,
algbw_GBps, time_us): it is read, its other measurement columns blank, each row compared on what it measured; a table
with none of the three is refused naming them."""

from __future__ import annotations

import pytest

from simulon.collective.metrics import bus_bandwidth_factor
from simulon.collective.types import CollType
from simulon.config.errors import ConfigError
from simulon.validate.collectives import validate_collectives

RUN = {"hardware": "DGX H100", "collective": "all_reduce", "msg_bytes": "1073741824", "group_size": "8"}
BUSBW = 450.0


@pytest.mark.parametrize("measured", [
    {"busbw_GBps": f"{BUSBW}"},
    {"algbw_GBps": f"{BUSBW / bus_bandwidth_factor(CollType.AllReduce, 8)}"},
    {"time_us": f"{bus_bandwidth_factor(CollType.AllReduce, 8) * 1073741824 / BUSBW / 1e3}"},
])
def test_a_table_of_one_measured_column_compares_its_rows_on_it(measured):
    report = validate_collectives([{**RUN, **measured}], source="mine.csv")
    assert not report.skipped
    assert [r.measured for r in report.rows] == [pytest.approx(BUSBW)]


def test_every_way_of_giving_the_measurement_gets_one_prediction():
    tables = [[{**RUN, "busbw_GBps": "450"}], [{**RUN, "algbw_GBps": "257.142857"}]]
    assert len({round(validate_collectives(t).rows[0].predicted, 9) for t in tables}) == 1


def test_a_table_without_any_measured_column_is_refused_naming_them():
    with pytest.raises(ConfigError, match="one of busbw_GBps/algbw_GBps/time_us missing"):
        validate_collectives([RUN], source="mine.csv")
