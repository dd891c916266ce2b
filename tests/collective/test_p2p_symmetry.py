"""A lone send/receive ring shift is folded only where its members see the same links."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulon.collective.algorithms import CATALOG
from simulon.collective.shape import GroupShape
from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.network.topology import Topology
from simulon.pipeline import collective_sweep

SR, A2A = CollType.SendRecv, CollType.AllToAll


@given(nodes=st.integers(2, 8), per_node=st.integers(2, 8))
def test_a_ring_shift_across_nodes_repeats_node_by_node_and_an_all_to_all_everywhere(nodes, per_node):
    shape = GroupShape.of(range(nodes * per_node), per_node)
    assert CATALOG["p2p"].symmetry(SR, shape) == per_node
    assert CATALOG["p2p"].symmetry(A2A, shape) == 1
    assert CATALOG["p2p"].symmetry(SR, GroupShape.of(range(per_node), per_node)) == 1
    assert CATALOG["p2p"].symmetry(SR, GroupShape.of(range(0, nodes * per_node, per_node), per_node)) == 1


@pytest.mark.parametrize("kind", ["pcie", "nvswitch"])
@pytest.mark.parametrize("size", [2**16, 2**22])
def test_a_lone_ring_shift_over_two_nodes_takes_the_full_expansions_time(kind, size, monkeypatch):
    block = {"kind": kind, "switch": {"port_speed": "16GBps", "latency": "1us"}}
    dc = DatacenterConfig.model_validate({
        "cluster": {"num_nodes": 2}, "node": {"gpus_per_node": 8, "gpus_per_nic": 1, "gpu": {"from": "a100-sxm-80gb"}},
        "network": {"scale_up": block, "scale_out": {"nic": {"speed": "100Gbps"}}}})
    folded = collective_sweep(dc, SR, tuple(range(16)), [size], algorithm="p2p")[0].time_us
    monkeypatch.setattr(Topology, "foldable", property(lambda self: False))
    full = collective_sweep(dc, SR, tuple(range(16)), [size], algorithm="p2p")[0].time_us
    assert folded == full
