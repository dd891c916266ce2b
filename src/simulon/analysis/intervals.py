"""Lengths of unions and overlaps of time intervals, on arrays."""

from __future__ import annotations

import numpy as np


def union_length(starts: np.ndarray, ends: np.ndarray) -> float:
    """Total time covered by at least one interval."""
    if len(starts) == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], np.maximum.accumulate(ends[order])
    # a new merged run starts where an interval begins after everything before it has ended
    new_run = np.concatenate([[True], s[1:] > e[:-1]])
    run_id = np.cumsum(new_run) - 1
    run_start = s[new_run]
    run_end = np.zeros(len(run_start))
    np.maximum.at(run_end, run_id, e)
    return float((run_end - run_start).sum())


def overlap_length(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Time covered by both sets: |A| + |B| - |A or B|, kept within [0, min(|A|, |B|)] where the subtraction's
    rounding would step outside (a -8.7e-16 ms overlap where none is)."""
    both = union_length(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))
    each = union_length(*a), union_length(*b)
    return min(max(each[0] + each[1] - both, 0.0), min(each))


IDLE_RESIDUE = 1e-9
"""The part of a step below which a GPU's idle time (the step less the union lengths it was busy) is the rounding of
summing those lengths, not time (a nanosecond a second, far below any kernel: a GPU busy throughout read 2.8e-14 ms
of bubble)."""


def idle_length(step: float, busy: float) -> float:
    """The time of `step` not covered by `busy`, 0 where within IDLE_RESIDUE of the step (or below it)."""
    return without_residue(step - busy, step)


def without_residue(length: float, step: float) -> float:
    """`length`, a time within `step` found by subtracting sums of times, or 0 where within IDLE_RESIDUE of the step
    (or below it): the rounding of the sums, not time."""
    return length if length > IDLE_RESIDUE * step else 0.0
