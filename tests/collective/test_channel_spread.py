"""How many channels NCCL deals a collective out to (src/enqueue.cc scheduleCollTasksToPlan, NCCL 2.22 on): cells of
32 KiB of traffic, each channel its share of the traffic in whole cells, so a small message fills fewer channels
than its tuner (NCCL's own count, a plugin's or NVLS's) allows it."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from simulon.collective.nccl import PROTOCOLS
from simulon.collective.tuner import MIN_TRAFFIC_PER_CHANNEL, CollectivePlan, spread_channels, traffic_per_byte
from simulon.collective.types import CollType
from simulon.config.loading import parse_scenario
from simulon.network.topology import Topology

AR, AG, RS = CollType.AllReduce, CollType.AllGather, CollType.ReduceScatter
KiB, MiB = 2**10, 2**20


def a3_mega_plan() -> CollectivePlan:
    dc = parse_scenario({"datacenter": {"from": "gcp-a3-mega", "cluster": {"num_nodes": 2}}}, "dc.yaml").datacenter
    return CollectivePlan(Topology.from_datacenter(dc), "auto", "auto")


def test_googles_sixteen_channels_hold_a_small_all_reduce_on_the_channels_its_cells_fill():
    # an all-reduce moves 2 bytes of traffic a byte: 16 KiB cells; a channel takes at least one, and its share of the
    # traffic (2 x size / 16 channels) in whole cells of 32 KiB
    plan = a3_mega_plan()
    expected = {8: 1, 16 * KiB: 1, 32 * KiB: 2, 64 * KiB: 4, 128 * KiB: 8, 256 * KiB: 16, 512 * KiB: 16, 64 * MiB: 16}
    assert {size: plan.choose(AR, range(16), size).channels for size in expected} == expected
    assert plan.choose(AR, (0, 8), 8).channels == 1  # the plugin's 2 channels for one rank a node, one cell


def test_nvls_fills_its_own_channels_only_once_each_gets_a_cell():
    dc = parse_scenario({"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}}}, "dc.yaml").datacenter
    nvls = CollectivePlan(Topology.from_datacenter(dc), "nvls", "auto")
    assert nvls.choose(AR, range(8), KiB).channels == 1
    assert nvls.choose(AR, range(8), 128 * KiB).channels == 8
    assert {nvls.choose(AR, range(8), 2.0**k).channels for k in range(18, 31)} == {16}  # NVLS_NCHANNELS_SM90


sizes = st.integers(min_value=1, max_value=2**34)
ranks = st.integers(min_value=2, max_value=576)
colls = st.sampled_from([AR, AG, RS])


@given(colls, sizes, ranks, st.sampled_from(PROTOCOLS), st.integers(min_value=1, max_value=64))
def test_a_collective_takes_at_least_one_channel_and_at_most_its_tuners(ctype, size, n, protocol, channels):
    assert 1 <= spread_channels(ctype, size, n, protocol, channels) <= channels


@given(colls, ranks, st.sampled_from(PROTOCOLS), st.integers(min_value=1, max_value=64))
def test_a_message_of_one_cell_runs_on_one_channel(ctype, n, protocol, channels):
    size = MIN_TRAFFIC_PER_CHANNEL / traffic_per_byte(ctype, n, protocol) * (1 if ctype == AR else n)
    assert spread_channels(ctype, size, n, protocol, channels) == 1


def test_whole_cell_shares_can_give_a_larger_message_fewer_channels_as_in_nccl():
    # 4 channels over 2 ranks: 48 KiB + 1 B is 4 cells of 16 KiB, a share of 24 KiB of traffic rounds up to one cell
    # each, 4 channels; 64 KiB + 1 B is 5 cells and a share just over 32 KiB rounds up to two: 2 + 2 + 1, 3 channels
    assert spread_channels(AR, 48 * KiB + 1, 2, "simple", 4) == 4
    assert spread_channels(AR, 64 * KiB + 1, 2, "simple", 4) == 3


@given(colls, sizes, ranks, st.sampled_from(PROTOCOLS), st.integers(min_value=1, max_value=64))
def test_every_channel_but_one_carries_a_full_share_of_the_traffic(ctype, size, n, protocol, channels):
    # the channels taken are the fewest that hold the rank's traffic at each one's share (at least a cell, 32 KiB,
    # rounded up to whole cells), so one fewer could not hold it
    used = spread_channels(ctype, size, n, protocol, channels)
    per_byte = traffic_per_byte(ctype, n, protocol)
    traffic = (size if ctype == AR else size / n) * per_byte
    share = max(MIN_TRAFFIC_PER_CHANNEL, traffic) / channels
    cell_traffic = math.ceil(math.ceil(MIN_TRAFFIC_PER_CHANNEL / per_byte) / 16) * 16 * per_byte
    held = max(1, math.ceil(share / cell_traffic)) * cell_traffic
    if used < channels:
        assert (used - 1) * held < traffic <= used * held + cell_traffic
