"""Fewer collective channels hold fewer SMs but move each collective over fewer rings: advised against compute
slowdown only where the slowdown outweighs the critical path's channel-bound time. GPT-OSS 120B in mxfp8 on a GB200
NVL72 rack (tp 1, ep 8, cp 2 over a2a) slowed 20.6 ms against 93.2 ms of transfers and delivery on its critical path;
it was told to try fewer channels, and 4 took the step from 587.9 to 630.3 ms (8: 604.9 ms)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from simulon.analysis.findings import UNKNOWN, Settings, findings, slowdown_advice


def slowdown_finding(slowdown: float, transfer: float, settings: Settings = UNKNOWN):
    path = {"by_term_ms": {"compute_slowdown": slowdown, "transfer": transfer, "delivery": 0.0}, "by_collective_ms": {}}
    return next(f for f in findings([], path, {}, 600.0, settings) if f.term == "compute_slowdown")


def test_fewer_channels_are_not_advised_where_they_would_slow_more_transfer_than_the_slowdown_they_save():
    advice = slowdown_finding(20.6, 93.2).advice
    assert "fewer collective channels" not in advice
    assert "93.2 ms of transfers on the critical path" in advice
    assert slowdown_finding(40.0, 10.0).advice.startswith("fewer collective channels (num_channels)")


def test_a_pinned_channel_count_is_told_to_let_nccl_choose_not_to_pin_fewer_where_that_slows_the_step():
    """GPT-OSS at num_channels 4 (step 630.3 ms) was told 'fewer collective channels' again."""
    pinned = slowdown_finding(3.8, 153.3, Settings(pinned_channels=4)).advice
    assert pinned.startswith("let NCCL choose the channel count (collective.num_channels is pinned to 4)")
    assert "fewer collective channels" not in pinned
    assert slowdown_advice(40.0, 10.0, Settings(pinned_channels=4)).startswith("fewer than the 4 collective channels")
    assert "fewer than" not in slowdown_advice(40.0, 10.0, Settings(pinned_channels=1))


@given(st.floats(0.0, 1e4), st.floats(0.0, 1e4), st.one_of(st.none(), st.integers(1, 64)))
def test_fewer_channels_are_offered_only_where_the_slowdown_exceeds_the_channel_bound_time(slowdown, bound, pinned):
    text = slowdown_advice(slowdown, bound, Settings(pinned_channels=pinned))
    assert ("fewer" in text.split(" (")[0]) == (slowdown > bound and pinned != 1)
