"""A lone send/receive ring shift is folded only where its members see the same links."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulon import pipeline
from simulon.collective.algorithms import CATALOG
from simulon.collective.shape import GroupShape
from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.dag.fold import Fold
from simulon.network.topology import Topology
from simulon.pipeline import collective_sweep

SR, A2A = CollType.SendRecv, CollType.AllToAll


@given(nodes=st.integers(2, 8), per_node=st.integers(2, 8))
def test_a_ring_shift_and_an_all_to_all_across_nodes_repeat_node_by_node(nodes, per_node):
    """An all-to-all's rounds follow NCCL's node and local deltas across nodes (ring._in_rounds_of_peers)."""
    shape = GroupShape.of(range(nodes * per_node), per_node)
    assert CATALOG["p2p"].symmetry(SR, shape) == per_node
    assert CATALOG["p2p"].symmetry(A2A, shape) == per_node
    assert CATALOG["p2p"].symmetry(A2A, GroupShape.of(range(per_node), per_node)) == 1
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


@pytest.mark.parametrize(("nodes", "per_node"), [(4, 8), (3, 4), (6, 2)])
@pytest.mark.parametrize("size", [2**20, 2**26])
def test_a_lone_all_to_all_across_nodes_takes_the_full_expansions_time(nodes, per_node, size, monkeypatch):
    """By offset round the group, ranks of one node mixed NVLink and NIC peers in a round and drifted apart when every
    GPU was simulated: 1,604 us for 64 MiB over 4 DGX H100 where one member standing for the rest took 1,125. NCCL's
    schedule (node deltas, each with every local delta) keeps every round the same for every rank of a node."""
    dc = DatacenterConfig.model_validate({  # one fabric switch: nothing but the schedule tells the GPUs apart
        "cluster": {"num_nodes": nodes}, "node": {"gpus_per_node": per_node, "gpu": "H100"},
        "network": {"scale_up": {"switch": {"from": "nvswitch-gen4"}},
                    "scale_out": {"nic": {"from": "connectx-7-400g"}}}})
    group = tuple(range(nodes * per_node))
    folded = collective_sweep(dc, A2A, group, [size], algorithm="p2p")[0].time_us
    monkeypatch.setattr(pipeline, "fold_group", lambda gpus, groups: Fold.identity(gpus))  # every GPU simulated
    assert collective_sweep(dc, A2A, group, [size], algorithm="p2p")[0].time_us == pytest.approx(folded, rel=1e-9)
