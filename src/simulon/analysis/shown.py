"""How a time in milliseconds is written for a reader: one decimal from 10 ms up (a step of 520.9 ms, 7,108.4 ms),
three significant figures below, with no zeros after the last figure (0.146 ms, 2.35 ms, 0.02 ms), so that a tiny
step or term never reads "0.1 ms" for 0.146 ms, or "0.0 ms" for 20 microseconds."""

from __future__ import annotations

import math

SIGNIFICANT = 3
"""Significant figures written below 10 ms."""
TINY_MS = 1e-3
"""Below a microsecond (less than any kernel launch) a time is written in exponent form: its residue of rounding
would otherwise run to a dozen zeros."""


def decimals(ms: float) -> int:
    """The decimals that write `ms` to SIGNIFICANT figures, at least one (so that 10 ms and more keep one)."""
    rounded = abs(float(f"{ms:.{SIGNIFICANT}g}"))
    if rounded == 0:
        return 1
    return max(1, SIGNIFICANT - 1 - math.floor(math.log10(rounded)))


def shown_ms(ms: float, signed: bool = False) -> str:
    """`ms` as it is printed (without the unit); `signed` writes a + before a positive one (a change)."""
    sign = "+" if signed else ""
    if not math.isfinite(ms):
        return f"{ms:{sign}}"
    if 0 < abs(ms) < TINY_MS:
        return f"{ms:{sign}.{SIGNIFICANT}g}"
    text = f"{ms:{sign},.{decimals(ms)}f}"
    return text if abs(ms) >= 10 else trimmed(text)


def shown_number(value: float, fmt: str) -> str:
    """`value` in `fmt`, or, where that rounds a nonzero value to zero (a link's 0.00372 ms at stake as "0.00", a
    change of -0.04% as "-0.0%"), to three significant figures in fixed point, without the zeros that end them,
    signed as `fmt` signs."""
    text = fmt.format(value)
    if value and math.isfinite(value) and not float(text.replace(",", "")):
        sign = "+" if text.startswith("+") else ""
        text = trimmed(f"{value:{sign}.{2 - math.floor(math.log10(abs(value)))}f}")
    return text


def shown_share(share: float) -> str:
    """A share (0.25 of the step) as a percentage to one decimal ("25.0%"), or where that rounds a nonzero share to
    0 to three significant figures (shown_number, as the report shows it): 3.7 us of a 495 ms step reads
    "0.000753%", not "0.0%"."""
    return f"{shown_number(100 * share, '{:.1f}')}%"


def trimmed(text: str) -> str:
    """A fixed-point number without the zeros that end its decimals past the first (0.0200 -> 0.02, 2.00 -> 2.0):
    they are no figures of the time, only of the format."""
    whole, _, fraction = text.partition(".")
    return f"{whole}.{fraction.rstrip('0') or '0'}"
