"""Unit strings: bandwidth, time and size against hand-computed values, and as properties."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from simulon.config.errors import shown
from simulon.config.units import memory_amount, memory_amounts, parse_bandwidth, parse_size, parse_time

# Scales written out by hand (not imported from the module under test).
BANDWIDTH_SCALES = {
    "bps": 0.125, "Kbps": 125.0, "Mbps": 125e3, "Gbps": 125e6, "Tbps": 125e9,
    "Bps": 1.0, "KBps": 1e3, "MBps": 1e6, "GBps": 1e9, "TBps": 1e12,
    "KiBps": 1024.0, "MiBps": 1048576.0, "GiBps": 1073741824.0, "TiBps": 1099511627776.0,
    "B/s": 1.0, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
    "Mb/s": 1e6 / 8, "Gb/s": 1e9 / 8, "Tb/s": 1e12 / 8,
}
TIME_SCALES = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
SIZE_SCALES = {
    "": 1.0, "b": 1.0, "B": 1.0,
    "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
    "KiB": 1024.0, "MiB": 1048576.0, "GiB": 1073741824.0, "TiB": 1099511627776.0,
    "K": 1024.0, "M": 1048576.0, "G": 1073741824.0,
}
PARSERS = {
    "bandwidth": (parse_bandwidth, BANDWIDTH_SCALES),
    "time": (parse_time, TIME_SCALES),
    "size": (parse_size, SIZE_SCALES),
}
UNIT_CASES = [(kind, unit) for kind, (_, table) in PARSERS.items() for unit in table]


# --- hand-computed values ---------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("400Gbps", 50e9),            # 400e9 bits/s / 8
    ("200Gbps", 25e9),
    ("3.35TBps", 3.35e12),
    ("450GB/s", 450e9),
    ("450GBps", 450e9),
    ("2880Gbps", 360e9),
    ("1GiBps", 2**30),
    ("8bps", 1.0),
    ("400 Gbps", 50e9),           # a space between number and unit is allowed
    ("  1Tbps  ", 125e9),
    ("1e3Bps", 1000.0),
])
def test_parse_bandwidth_values(text, expected):
    assert parse_bandwidth(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("text", "expected"), [
    ("5us", 5e-6),
    ("0.000025ms", 2.5e-8),
    ("0.005ms", 5e-6),
    ("1ns", 1e-9),
    ("130ns", 1.3e-7),
    ("2s", 2.0),
    ("1.5e-3s", 1.5e-3),
])
def test_parse_time_values(text, expected):
    assert parse_time(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("text", "expected"), [
    ("64MiB", 2**26),
    ("1KiB", 1024),
    ("1GiB", 2**30),
    ("1TiB", 2**40),
    ("1GB", 1e9),
    ("4096", 4096),
    ("4096B", 4096),
    ("1.5KB", 1500),
    ("2K", 2048),
    ("3M", 3 * 2**20),
    ("1G", 2**30),
])
def test_parse_size_values(text, expected):
    assert parse_size(text) == pytest.approx(expected, rel=1e-12)
    assert parse_size(text) == float(expected)


@pytest.mark.parametrize("parse", [parse_bandwidth, parse_time, parse_size])
@pytest.mark.parametrize("number", [0, 1, 7, 0.5, 2.5e9, 12345678901234])
def test_plain_numbers_pass_through_as_floats(parse, number):
    value = parse(number)
    assert isinstance(value, float)
    assert value == float(number)


def test_equivalent_spellings_agree():
    assert parse_bandwidth("8Gbps") == parse_bandwidth("1GBps") == parse_bandwidth("1GB/s") == 1e9
    assert parse_time("1000us") == pytest.approx(parse_time("1ms"))
    assert parse_time("1000000ns") == pytest.approx(parse_time("1ms"))
    assert parse_size("1024KiB") == parse_size("1MiB") == parse_size("1M") == 2**20
    assert parse_size("1000MB") == parse_size("1GB")


# --- bad input --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("parse", "bad"), [
    (parse_size, "12XB"),
    (parse_size, "-1"),
    (parse_size, "-1GB"),
    (parse_size, "1.2.3GB"),
    (parse_size, "GB"),
    (parse_size, ""),
    (parse_size, "   "),
    (parse_size, "1e"),
    (parse_size, "nan"),
    (parse_size, "inf"),
    (parse_size, "1 G B"),
    (parse_size, "1Gbps"),          # a bandwidth is not a size
    (parse_bandwidth, "fast"),
    (parse_bandwidth, "400Gb"),
    (parse_bandwidth, "400gbps"),   # units are case-sensitive: b is bits, B bytes
    (parse_bandwidth, "400GBs"),
    (parse_bandwidth, "5us"),
    (parse_bandwidth, "-400Gbps"),
    (parse_time, "5 sec"),
    (parse_time, "5m"),
    (parse_time, "5US"),
    (parse_time, "5ps"),
    (parse_time, "1GB"),
    (parse_time, "--5us"),
])
def test_bad_strings_raise_value_error_naming_the_value(parse, bad):
    with pytest.raises(ValueError) as info:
        parse(bad)
    message = str(info.value)
    assert repr(bad) in message
    assert "cannot read" in message
    assert "units:" in message


@pytest.mark.parametrize("parse", [parse_bandwidth, parse_time, parse_size])
@pytest.mark.parametrize("bad", [None, True, False, [1], {"a": 1}, b"5us", (1, "GB")])
def test_wrong_types_raise_value_error_naming_the_value(parse, bad):
    with pytest.raises(ValueError) as info:
        parse(bad)
    assert shown(bad) in str(info.value)
    assert "expected a" in str(info.value)


@pytest.mark.parametrize("parse", [parse_bandwidth, parse_time, parse_size])
@pytest.mark.parametrize("bad", [-1, -0.5, -1e9])
def test_negative_numbers_are_refused(parse, bad):
    with pytest.raises(ValueError, match="must not be negative") as info:
        parse(bad)
    assert str(bad) in str(info.value)


@pytest.mark.parametrize("parse", [parse_bandwidth, parse_time, parse_size])
def test_non_finite_numbers_are_refused(parse):
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError):
            parse(bad)


@pytest.mark.parametrize(("kind", "example"), [("bandwidth", "1x"), ("time", "1x"), ("size", "1x")])
def test_error_message_lists_exactly_the_units_tested_here(kind, example):
    """The units a parser names in its message are exactly the ones whose scale this file checks."""
    parse, table = PARSERS[kind]
    with pytest.raises(ValueError) as info:
        parse(example)
    listed = re.search(r"units: ([^)]*)\)", str(info.value)).group(1).split(", ")
    assert set(listed) == {u for u in table if u}


# --- properties -------------------------------------------------------------------------------------

positive_floats = st.floats(min_value=1e-30, max_value=1e30, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(case=st.sampled_from(UNIT_CASES), x=positive_floats)
def test_number_with_unit_is_number_times_scale(case, x):
    kind, unit = case
    parse, table = PARSERS[kind]
    assert parse(f"{x}{unit}") == pytest.approx(x * table[unit], rel=1e-12)


@settings(max_examples=150, deadline=None)
@given(case=st.sampled_from(UNIT_CASES), n=st.integers(min_value=0, max_value=10**15))
def test_integer_with_unit_is_integer_times_scale(case, n):
    kind, unit = case
    parse, table = PARSERS[kind]
    assert parse(f"{n}{unit}") == pytest.approx(n * table[unit], rel=1e-12)


@settings(max_examples=300, deadline=None)
@given(case=st.sampled_from(UNIT_CASES),
       x=st.floats(min_value=1e-6, max_value=1e12), y=st.floats(min_value=1e-6, max_value=1e12))
def test_bigger_number_gives_bigger_value(case, x, y):
    kind, unit = case
    parse, _ = PARSERS[kind]
    lo, hi = sorted((x, y))
    assume(hi > lo * (1 + 1e-9))
    assert parse(f"{lo}{unit}") < parse(f"{hi}{unit}")


@settings(max_examples=100, deadline=None)
@given(kind=st.sampled_from(sorted(PARSERS)), x=positive_floats)
def test_bigger_unit_gives_bigger_value(kind, x):
    """For one number, the units sorted by hand-written scale give non-decreasing values."""
    parse, table = PARSERS[kind]
    units = sorted(table, key=table.__getitem__)
    values = [parse(f"{x}{u}") for u in units]
    assert values == sorted(values)


@pytest.mark.parametrize(("num_bytes", "text"), [
    (39.6e9, "39.6 GB"), (0.2e9, "0.2 GB"), (1e8, "0.1 GB"), (2.4e7, "24.0 MB"), (1e6, "1.0 MB"), (1000.0, "1.0 KB"),
    (100.0, "0.1 KB"), (64.0, "64 B"), (1.0, "1 B"), (0.0, "0.0 KB")])
def test_a_memory_amount_is_in_the_largest_unit_that_shows_it_above_zero(num_bytes, text):
    assert memory_amount(num_bytes) == text


@given(st.floats(1.0, 1e15))
def test_a_memory_amount_never_reads_as_zero_and_reads_back_within_its_rounding(num_bytes):
    text = memory_amount(num_bytes)
    value = parse_size(text.replace(",", "").replace(" ", ""))
    assert float(text.split()[0].replace(",", "")) >= 0.1 or text.split()[1] in ("KB", "B")
    assert math.isclose(value, num_bytes, rel_tol=0.5, abs_tol=100)


@given(limit=st.floats(1.0, 1e15), excess=st.floats(1e-6, 10.0))
def test_a_need_above_its_limit_never_reads_as_the_same_amount(limit, excess):
    """A refusal said 'need about 8.0 GB, and 8.0 GB are available' of 8.04 GB against 8 GB."""
    need = limit * (1 + excess)
    if need <= limit:
        return
    need_text, limit_text = memory_amounts(need, limit)
    assert need_text != limit_text
    assert memory_amounts(8.04e9, 8e9) == ("8.04 GB", "8.00 GB")
    assert memory_amounts(39.6e9, 8e9) == ("39.6 GB", "8.0 GB")
