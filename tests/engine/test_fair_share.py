"""Max-min fair sharing: the replay's incremental form and the steady-state estimate's vectorised form give the
same rates, whatever the links, their capacities, the flows' routes, weights and rate limits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.engine.fair_share import NO_LINK, FlowNetwork, link_rows, max_min_rates

INF = float("inf")


@st.composite
def link_sets(draw):
    """Links with capacities, and flows each over a random subset of them with a rate limit and a weight on each:
    a fold's (how many flows it stands for) or a connection's share of the flow's bytes (below one)."""
    num_links = draw(st.integers(1, 6))
    capacity = np.array(draw(st.lists(st.floats(1.0, 100.0), min_size=num_links, max_size=num_links)))
    routes = draw(st.lists(st.lists(st.integers(0, num_links - 1), min_size=1, max_size=num_links, unique=True),
                           min_size=1, max_size=8))
    weights = [draw(st.lists(st.sampled_from([0.25, 0.5, 1.0, 1.0, 2.0, 3.0, 4.5]), min_size=len(r),
                             max_size=len(r))) for r in routes]
    cap = np.array([draw(st.one_of(st.just(INF), st.floats(0.5, 100.0))) for _ in routes])
    return capacity, weights, routes, cap


def padded(routes: list[list[int]]) -> np.ndarray:
    """Routes as one array of link ids, NO_LINK padded."""
    links = np.full((len(routes), max(map(len, routes))), NO_LINK, dtype=np.int64)
    for f, route in enumerate(routes):
        links[f, :len(route)] = route
    return links


def padded_weights(weights: list[list[float]]) -> np.ndarray:
    """Each flow's weight on each link of its route, as one array, 0 padded."""
    out = np.zeros((len(weights), max(map(len, weights))))
    for f, w in enumerate(weights):
        out[f, :len(w)] = w
    return out


def incremental_rates(net: FlowNetwork, flows) -> np.ndarray:
    return np.array([net.rate[f] for f in flows])


@settings(max_examples=300, deadline=None)
@given(link_sets())
def test_the_incremental_and_vectorised_fair_shares_agree(case):
    capacity, weights, routes, cap = case
    net = FlowNetwork(routes, capacity, weights, cap)
    for f in range(len(routes)):
        net.add(f, 1.0, 0.0)
    net.reshare(0.0)
    expected = max_min_rates(padded(routes), capacity, cap, padded_weights(weights))
    assert incremental_rates(net, range(len(routes))) == pytest.approx(expected, rel=1e-6)


@settings(max_examples=200, deadline=None)
@given(link_sets(), st.data())
def test_flows_left_after_others_end_get_the_fair_share_of_those_left(case, data):
    capacity, weights, routes, cap = case
    net = FlowNetwork(routes, capacity, weights, cap)
    for f in range(len(routes)):
        net.add(f, 1.0, 0.0)
    net.reshare(0.0)
    ended = data.draw(st.sets(st.integers(0, len(routes) - 1), max_size=len(routes) - 1))
    for f in ended:
        net.remove(f, 0.5)
    net.reshare(0.5)
    left = [f for f in range(len(routes)) if f not in ended]
    expected = max_min_rates(padded([routes[f] for f in left]), capacity, cap[left],
                             padded_weights([weights[f] for f in left]))
    assert incremental_rates(net, left) == pytest.approx(expected, rel=1e-6)


def test_without_weights_each_flow_counts_once():
    links = padded([[0], [0, 1], [1]])
    capacity, cap = np.array([10.0, 30.0]), np.full(3, INF)
    assert max_min_rates(links, capacity, cap) == pytest.approx([5.0, 5.0, 25.0])
    assert max_min_rates(links, capacity, cap, np.ones(links.shape)) == pytest.approx([5.0, 5.0, 25.0])


def test_a_flow_split_in_halves_over_two_links_moves_at_twice_either_links_share():
    """A flow whose connections carry half its bytes on each of two links (and none of another flow's): alone on
    links of 10 it moves 20; beside a whole flow on the first link, that link's 10 is split so both move alike."""
    links = padded([[0, 1], [0]])
    split = np.array([[0.5, 0.5], [1.0, 0.0]])
    assert max_min_rates(links[:1], np.array([10.0, 10.0]), np.full(1, INF), split[:1]) == pytest.approx([20.0])
    assert max_min_rates(links, np.array([10.0, 10.0]), np.full(2, INF), split) == pytest.approx([20 / 3, 20 / 3])


def test_a_flow_at_its_limit_leaves_the_rest_of_its_link_to_the_others():
    net = FlowNetwork([[0], [0]], np.array([10.0]), [[1.0], [1.0]], np.array([2.0, INF]))
    net.add(0, 1.0, 0.0)
    net.add(1, 1.0, 0.0)
    net.reshare(0.0)
    assert incremental_rates(net, [0, 1]) == pytest.approx([2.0, 8.0])


def test_link_rows_drop_the_padding():
    assert link_rows(padded([[3, 1], [2]])) == [[3, 1], [2]]
    assert link_rows(padded([[3, 1], [2, 0]])) == [[3, 1], [2, 0]]
