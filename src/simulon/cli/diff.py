"""`simulon diff A.json B.json`: what changed between two `simulate --json` results, and which terms moved."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:  # analysis.diff (and the result it reads) is imported when the command runs
    from ..analysis.diff import Change

SHOWN = 4
"""Terms shown per group in the terminal, those that moved most."""


def _headline(change: Change) -> str:
    from ..analysis.diff import Change
    from ..analysis.shown import shown_ms, shown_number

    if change.residue:  # written as no change, as the same result diffed with itself is (+0.0, +0.0%)
        change = Change(change.name, change.a, change.a)
    percent = f", {shown_number(change.percent, '{:+.1f}')}%" if change.percent is not None else ""
    if change.name.endswith("(ms)"):
        return f"{change.name}: {shown_ms(change.a)} -> {shown_ms(change.b)} ({shown_ms(change.delta, True)}{percent})"
    if change.name == "MFU":
        points = shown_number(100 * change.delta, "{:+.1f}")
        return f"{change.name}: {100 * change.a:.1f}% -> {100 * change.b:.1f}% ({points} points)"
    if change.a.is_integer() and change.b.is_integer():
        return f"{change.name}: {change.a:,.0f} -> {change.b:,.0f} ({change.delta:+,.0f}{percent})"
    return f"{change.name}: {change.a:,.1f} -> {change.b:,.1f} ({change.delta:+,.1f}{percent})"


def _moved(change: Change) -> str:
    from ..analysis.shown import shown_ms

    return f"{change.name} {shown_ms(change.delta, True)} ms ({shown_ms(change.a)} -> {shown_ms(change.b)})"


def diff_command(
    a: Annotated[Path, typer.Argument(metavar="before", help="a result of simulon simulate --json, before the change")],
    b: Annotated[Path, typer.Argument(metavar="after", help="another result of simulon simulate --json, after it")],
    as_json: Annotated[bool, typer.Option("--json", help="print the comparison as one JSON object")] = False,
) -> None:
    """Compare two simulation results: the headline numbers, and the terms that moved most, in groups of terms
    that add up to the step time (so their changes add up to its change)."""
    from ..analysis.diff import diff, read_result
    from ..analysis.findings import FLOOR_MS

    result = diff(read_result(a), read_result(b), a, b)
    if as_json:
        print(json.dumps({"a": str(a), "b": str(b), **result.to_dict()}))
        return
    print(f"{a} -> {b}")
    for change in result.headline:
        print(_headline(change))
    for group, changes in result.why.items():
        moved = [_moved(c) for c in changes[:SHOWN] if abs(c.delta) >= FLOOR_MS]  # not rounding residue
        print(f"{group}: {'; '.join(moved) if moved else 'unchanged'}")
    for group, reason in result.left_out.items():
        print(f"{group}: left out: {reason}")
