"""A ring's channels repeat after as many channels as it takes every domain's row of members to start at the same
member again: over domains holding different numbers of the group's members (a job on part of a node, node groups
of different sizes), the least common multiple of the counts. Taken as 1 there, every channel copied channel 0's
ring and left and entered each node by one NIC (a 256 MiB all-reduce over 4 + 2 GPUs of two DGX H100: 9,757 us,
one NIC's bandwidth; 4,894 us with every channel its own)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.collective.algorithms import CATALOG
from simulon.collective.ring import ring_order
from simulon.collective.shape import GroupShape
from simulon.collective.types import CollType

RINGS = [CollType.AllReduce, CollType.AllGather, CollType.ReduceScatter]


def hops(shape: GroupShape, channel: int) -> set[tuple[int, int]]:
    """The (sender, receiver) positions of a channel's ring: what its flows run between."""
    order = ring_order(shape, channel)
    return set(zip(order.tolist(), np.roll(order, -1).tolist(), strict=True))


@settings(max_examples=60, deadline=None)
@given(counts=st.lists(st.integers(1, 8), min_size=1, max_size=5), ctype=st.sampled_from(RINGS),
       rail=st.booleans())
def test_channels_one_period_apart_run_the_same_ring_whatever_members_each_domain_holds(counts, ctype, rail):
    group = [node * 8 + local for node, count in enumerate(counts) for local in range(count)]
    shape = GroupShape.of(group, 8, rail_aligned=rail)
    period = CATALOG["ring"].channel_period(ctype, shape)
    for channel in range(period):
        assert hops(shape, channel) == hops(shape, channel + period)


def test_a_ring_over_four_and_two_members_leaves_the_second_node_by_both_of_its_members():
    shape = GroupShape.of([0, 2, 4, 6, 8, 10], 8)
    period = CATALOG["ring"].channel_period(CollType.AllReduce, shape)
    assert period == 4
    leaving = {int(ring_order(shape, c)[-1]) for c in range(period)}  # the last of node 1's row leaves it
    assert leaving == {4, 5}
