"""simulon's hierarchical collectives on a full mesh (AMD's xGMI): a node's rings take turns over the members'
disjoint cycles as the ring algorithm's do, so that inside one MI300X node hierarchical is the ring it reduces to,
not one cycle's links (7x slower), and across nodes its in-node phases use every link."""

from __future__ import annotations

from collections import Counter

import pytest

from simulon.collective import GroupShape, flow_set
from simulon.collective.mesh import disjoint_cycles
from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.pipeline import collective_sweep


def mi300x(nodes: int) -> DatacenterConfig:
    return DatacenterConfig.model_validate({"from": "mi300x-platform", "cluster": {"num_nodes": nodes}})


@pytest.mark.parametrize("ctype", [CollType.AllReduce, CollType.AllGather, CollType.ReduceScatter])
def test_inside_one_mesh_node_hierarchical_runs_as_fast_as_the_ring_it_reduces_to(ctype):
    """It took 1 GiB at 44.7 GB/s bus bandwidth, one xGMI link's pace, where the ring took 312.4."""
    dc = mi300x(1)
    ring, hierarchical = (collective_sweep(dc, ctype, tuple(range(8)), [2**30], algorithm)[0].time_us
                          for algorithm in ("ring", "hierarchical"))
    assert hierarchical == pytest.approx(ring, rel=0.02)


@pytest.mark.parametrize("ctype", [CollType.AllReduce, CollType.AllGather, CollType.ReduceScatter])
def test_a_mesh_nodes_hierarchical_channels_load_every_link_alike(ctype):
    cycles = len(disjoint_cycles(8))
    shape = GroupShape.of(range(16), 8, mesh=True)
    flows = flow_set(ctype, range(16), 2**28, cycles, "hierarchical", shape=shape)
    per_arc = Counter()
    for s, d, b in zip(flows.src_pos.tolist(), flows.dst_pos.tolist(), flows.size.tolist(), strict=True):
        if s // 8 == d // 8:
            per_arc[(s, d)] += b
    assert len(per_arc) == 2 * 8 * 7  # every ordered pair of each node's GPUs
    assert max(per_arc.values()) == pytest.approx(min(per_arc.values()))


def test_across_mesh_nodes_hierarchical_is_no_slower_than_one_links_pace():
    """Two MI300X nodes, 1 GiB all-reduce: 44.8 GB/s bus bandwidth before, every channel's node ring on one cycle."""
    timing = collective_sweep(mi300x(2), CollType.AllReduce, tuple(range(16)), [2**30], "hierarchical")[0]
    assert timing.busbw_GBps > 150
