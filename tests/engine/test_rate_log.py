"""The rate log (engine/rate_log.py): the rates the replay gives the flows on the busiest links, in the order it
sets them. A flow's logged rates move its bytes by its last byte; the flows on a watched link never take more than
its capacity at any moment; and a flow that runs alone, then beside another, is logged at each rate."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import ROOT
from simulon.config.loading import load_scenario
from simulon.engine.fair_share import FlowNetwork
from simulon.engine.footprint import LinkLoads
from simulon.engine.rate_log import busiest_links, carried_bytes
from simulon.pipeline import simulate

INF = float("inf")


def test_a_flow_that_runs_alone_then_shares_its_link_is_logged_at_each_rate():
    net = FlowNetwork([[0], [0], [1]], np.array([10.0, 10.0]), [[1.0], [1.0], [1.0]], np.array([INF] * 3),
                      watched=[True, True, False])
    net.add(0, 30.0, 0.0)
    net.reshare(0.0)
    net.add(1, 5.0, 1.0)
    net.add(2, 5.0, 1.0)   # not watched: never logged
    net.reshare(1.0)
    net.remove(1, 2.0)     # 5 bytes at 5 bytes/s
    net.reshare(2.0)
    assert net.log == [(0.0, 0, 10.0), (1.0, 0, 5.0), (1.0, 1, 5.0), (2.0, 1, 0.0), (2.0, 0, 10.0)]


@pytest.fixture(scope="module")
def quick_start():
    """The README's quick start: 8 GPUs, its NVLink ports the busiest links."""
    return simulate(load_scenario(ROOT / "examples" / "scenario.yaml"), "auto")


def test_every_watched_flows_logged_rates_move_its_wire_bytes_and_end_at_zero(quick_start):
    log, wire = quick_start.timeline.rates, quick_start.timeline.flows.wire
    assert len(log.links) > 0 and len(log.flow) > 0
    for f in np.unique(log.flow).tolist():
        mine = log.flow == f
        times, rates = log.time[mine], log.rate[mine]
        assert rates[-1] == 0.0 and (rates[:-1] > 0).all()
        # to the rounding of times near the step's end: a 4-byte flag at 0.1 s moves 4 bytes less 5e-7
        assert float((rates[:-1] * np.diff(times)).sum()) == pytest.approx(wire[f], rel=1e-9, abs=1e-3)


def test_the_flows_on_a_watched_link_never_take_more_than_its_capacity(quick_start):
    """Each flow held at its mean rate instead read 1.06 of the quick start's NVLink ports for 3 us."""
    timeline, capacity = quick_start.timeline, quick_start.topology.capacity
    for link in timeline.rates.links.tolist():
        times, changes = timeline.rates.link_rate(timeline.loads, link)
        order = np.argsort(times, kind="stable")
        level = np.cumsum(changes[order]) / capacity[link]
        at_instant = np.append(times[order][1:] != times[order][:-1], True)
        assert level[at_instant].max() <= 1 + 1e-9
        assert level[at_instant].max() > 0.99   # NVLink ports busy with the tensor-parallel collectives


def test_the_watched_links_are_the_busiest_for_their_capacity_ties_by_id():
    carried = np.array([0.0, 4.0, 8.0, 4.0, 2.0, 1.0, 3.0])
    capacity = np.array([1.0, 1.0, 4.0, 1.0, 1.0, 0.5, 0.0])
    assert busiest_links(carried, capacity, 4).tolist() == [1, 3, 2, 4]   # 4, 4, 2, 2 bytes per capacity
    one_flow_on_link_2 = LinkLoads(np.array([0, 1]), np.array([2]), np.array([3.0]))
    assert carried_bytes(np.array([2.0]), one_flow_on_link_2, 4).tolist() == [0.0, 0.0, 6.0, 0.0]
