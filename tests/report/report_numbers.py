"""Checking a number the report shows against the result it names: its exact value and its rounded text."""

from __future__ import annotations

import json
import re

import pytest

from simulon.report.markup import FORMATS


def field(data, key: str):
    """The value at a dotted JSON path (list indices as numbers)."""
    for part in key.split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


def shown(text: str, unit: str) -> float:
    """The number a tagged element shows (with its unit, or bare where the column names it), back in the JSON's
    unit."""
    _, factor, suffix = FORMATS[unit]
    number = text.removesuffix(suffix) if unit else text
    assert re.fullmatch(r"-?[\d,]+(\.\d+)?", number), (text, unit)
    return float(number.replace(",", "")) / factor


def decimals(unit: str) -> int:
    match = re.search(r"\.(\d)f", FORMATS[unit][0])
    return int(match.group(1)) if match else 0


def agrees(result: dict, key: str, value: str, unit: str, text: str) -> None:
    """A tagged number (data-key, data-value, data-unit, its text) is the result's value at `key`, exactly, and
    its text shows that value rounded to the digits shown."""
    expected = field(result, key)
    assert json.loads(value) == expected, key
    if key == "memory.fits":
        assert text == ("fits" if expected else "does not fit")
        return
    half = 0.51 * 10 ** -decimals(unit) / FORMATS[unit][1]
    assert shown(text, unit) == pytest.approx(expected, abs=half), key
