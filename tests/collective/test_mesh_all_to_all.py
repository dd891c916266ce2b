"""All-to-all on a full mesh (AMD's xGMI: every pair of a node's GPUs has its own link): more point-to-point
channels never make the same traffic slower, and every link carries its peer's share at its rate."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from simulon.collective import GroupShape, flow_set
from simulon.collective.nccl import p2p_channel
from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.network.calibration import LinkModel
from simulon.pipeline import collective_sweep

IDEAL = LinkModel.ideal()
LINK_GBPS = 64.0  # one xGMI link of an MI300X, one direction (the platform's 448 GB/s port over 7 links)
CHANNELS = (1, 2, 4, 8, 16, 32)


def mi300x(nodes: int) -> DatacenterConfig:
    return DatacenterConfig.model_validate({"from": "mi300x-platform", "cluster": {"num_nodes": nodes}})


def times(dc: DatacenterConfig, group: tuple[int, ...], size: float, model: LinkModel | None = None) -> list[float]:
    return [collective_sweep(dc, CollType.AllToAll, group, [size], "auto", channels=c, model=model)[0].time_us
            for c in CHANNELS]


def non_increasing(values: list[float]) -> bool:
    return all(b <= a * (1 + 1e-9) for a, b in pairwise(values))


@pytest.mark.parametrize("n, channels", [(8, 4), (8, 8), (8, 32), (4, 16), (5, 8)])
def test_in_a_mesh_node_every_part_of_an_all_to_all_starts_at_once_on_its_nccl_channel(n, channels):
    size = 2.0**30
    flows = flow_set(CollType.AllToAll, range(n), size, channels, "p2p", shape=GroupShape.of(range(n), n, mesh=True))
    assert len(flows) == n * (n - 1) * channels
    assert not len(flows.parent_idx) and (flows.step == 0).all()   # no part waits for another
    offset = (flows.dst_pos - flows.src_pos) % n
    # each part on NCCL's channel for it, every channel's parts for one peer distinct
    for src in range(n):
        mine = flows.src_pos == src
        parts = np.tile(np.arange(channels), n - 1)[np.argsort(np.argsort(offset[mine], kind="stable"))]
        np.testing.assert_array_equal(flows.channel[mine], p2p_channel(offset[mine], parts))
        np.testing.assert_allclose(np.bincount(offset[mine], weights=flows.size[mine], minlength=n)[1:], size / n)


def test_on_a_switch_a_channel_still_serves_its_parts_in_turn():
    flows = flow_set(CollType.AllToAll, range(8), 2.0**30, 8, "p2p", shape=GroupShape.of(range(8), 8))
    assert len(flows.parent_idx) and flows.step.max() == 1   # 56 parts over 32 channels: two turns on some


@pytest.mark.parametrize("group, size", [(tuple(range(8)), 2.0**30), (tuple(range(4)), 2.0**29)])
def test_a_mesh_all_to_all_is_no_slower_with_more_channels_and_its_links_set_the_pace(group, size):
    n = len(group)
    bound_us = size / n / (LINK_GBPS * 1e9) * 1e6   # each GPU sends size/n to each peer, over that peer's link
    ideal = times(mi300x(1), group, size, IDEAL)
    assert non_increasing(ideal), ideal
    assert min(ideal) >= bound_us * (1 - 1e-9)
    assert max(ideal) == pytest.approx(bound_us, rel=0.01)   # every link busy throughout, whatever the channels
    shipped = times(mi300x(1), group, size)
    assert non_increasing(shipped), shipped
    assert min(shipped) >= bound_us
    assert max(shipped) <= bound_us / 0.69   # the calibrated share of the links (cdna3: 70%), not a fraction of it


def test_across_two_mesh_nodes_an_all_to_all_is_no_slower_with_more_channels():
    size, n = 2.0**29, 16
    found = times(mi300x(2), tuple(range(n)), size)
    assert non_increasing(found), found
    assert min(found) >= size / n / (LINK_GBPS * 1e9) * 1e6
