"""The steady-state estimate's chain of periods taken in whole cycles once every finish moves by one time."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.engine.steady_state import periodic_finish


def chain(parents: list[list[int]], weights: list[float], transfer: np.ndarray):
    """One period of a max-plus chain: each flow starts at the latest of its parents' finishes (plus a latency)
    in the period before and takes its transfer time."""
    def step(done: np.ndarray) -> np.ndarray:
        return np.array([max(done[p] + weights[p] for p in ps) for ps in parents]) + transfer
    return step


def stepped(step, first: np.ndarray, periods: int) -> np.ndarray:
    done = first
    for _ in range(periods - 1):
        done = step(done)
    return done


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6).flatmap(lambda n: st.tuples(
    st.lists(st.lists(st.integers(0, n - 1), min_size=1, max_size=3), min_size=n, max_size=n),
    st.lists(st.floats(0.0, 5.0), min_size=n, max_size=n),
    st.lists(st.floats(0.1, 10.0), min_size=n, max_size=n))), st.integers(1, 400))
def test_taking_a_chain_in_whole_cycles_finishes_where_stepping_every_period_does(system, periods):
    parents, weights, transfer = system
    transfer = np.array(transfer)
    step = chain(parents, weights, transfer)
    np.testing.assert_allclose(periodic_finish(step, transfer.copy(), periods),
                               stepped(step, transfer.copy(), periods), rtol=1e-9)


def test_a_ring_of_periods_is_taken_in_cycles_not_stepped_through():
    calls = []
    ring = [[(i - 1) % 8] for i in range(8)]
    inner = chain(ring, [1.0] * 8, np.full(8, 2.0))

    def step(done):
        calls.append(1)
        return inner(done)

    done = periodic_finish(step, np.full(8, 2.0), 16_381)
    np.testing.assert_allclose(done, np.full(8, 2.0 + 16_380 * 3.0))
    assert len(calls) < 10
