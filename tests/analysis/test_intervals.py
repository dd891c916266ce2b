"""The time two sets of intervals cover together is never negative and never more than either covers, whatever the
rounding of the inclusion-exclusion it is computed by (a GPU's overlapped communication read -8.7e-16 ms)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.analysis.intervals import IDLE_RESIDUE, idle_length, overlap_length, union_length

times = st.floats(0.0, 1e-2, allow_nan=False, allow_subnormal=False)
interval_sets = st.lists(st.tuples(times, times).map(sorted), min_size=0, max_size=6).map(
    lambda pairs: (np.array([a for a, _ in pairs], dtype=float), np.array([b for _, b in pairs], dtype=float)))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(a=interval_sets, b=interval_sets)
def test_an_overlap_lies_between_nothing_and_the_lesser_of_the_two_sets(a, b):
    both = overlap_length(a, b)
    assert 0.0 <= both <= min(union_length(*a), union_length(*b))


def test_a_set_overlaps_itself_entirely_and_disjoint_sets_not_at_all():
    a = (np.array([0.1, 0.5]), np.array([0.3, 0.9]))
    assert overlap_length(a, a) == union_length(*a)
    assert overlap_length(a, (np.array([0.3]), np.array([0.5]))) == 0.0


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(cuts=st.lists(times, min_size=1, max_size=40))
def test_a_step_covered_end_to_end_has_no_idle_time_whatever_the_rounding_of_its_lengths(cuts):
    """A GPU busy throughout a pp-1 step read 2.8e-14 ms of bubble in the sweep's CSV."""
    edges = np.array(sorted({0.0, *cuts}))
    busy = sum(union_length(edges[i:i + 1], edges[i + 1:i + 2]) for i in range(len(edges) - 1))
    assert idle_length(float(edges[-1]), busy) == 0.0


@given(step=st.floats(1e-6, 1e3), part=st.floats(0.0, 1.0))
def test_idle_time_is_the_step_less_the_busy_time_where_more_than_rounding(step, part):
    busy = step * (1 - part)
    idle = idle_length(step, busy)
    assert idle == (step - busy if step - busy > IDLE_RESIDUE * step else 0.0)
    assert 0.0 <= idle <= step
    assert idle_length(step, step * 1.5) == 0.0
