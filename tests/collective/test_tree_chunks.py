"""A tree all-reduce's chunks: a Simple tree moves each channel's data in one slot of the platform's NCCL_BUFFSIZE
(network.nccl.buffsize), and the simulation's bound on chunks a channel (max_pipeline_chunks) never leaves a large
tree paying the fill of a few huge chunks over its hops (pipeline_chunks_per_hop)."""

from __future__ import annotations

import pytest

from simulon.collective.tuner import CollectivePlan
from simulon.collective.types import CollType
from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario
from simulon.network.calibration import link_model_for
from simulon.network.topology import Topology
from simulon.pipeline import collective_sweep

AR = CollType.AllReduce
MiB, GiB = 2**20, 2**30


def datacenter(nccl: dict | None = None, template: str = "gcp-a3-mega"):
    block = {"from": template, "cluster": {"num_nodes": 2}}
    if nccl is not None:
        block["network"] = {"nccl": nccl}
    return parse_scenario({"datacenter": block}, "dc.yaml").datacenter


def test_a_large_two_node_tree_all_reduce_runs_at_its_nics_rate_not_slowed_by_the_chunk_bound():
    # each byte crosses the network once up and once down the tree: its algorithm bandwidth is bounded by a node's
    # NICs, 8 x 25 GB/s at the calibrated share of line rate; with 16 chunks a channel it reached 80% of that
    dc = datacenter()
    bound = 8 * 25e9 * link_model_for(dc).scale_out_efficiency
    timing = collective_sweep(dc, AR, range(16), [8 * GiB], "tree", channels=16, protocol="simple")[0]
    algbw = 8 * GiB / (timing.time_us * 1e-6)
    assert 0.95 * bound <= algbw <= bound * 1.001


def test_a_simple_tree_moves_one_slot_of_the_platforms_nccl_buffsize_a_chunk():
    default = CollectivePlan(Topology.from_datacenter(datacenter({"buffsize": None})), "tree", "simple", 16)
    doubled = CollectivePlan(Topology.from_datacenter(datacenter({"buffsize": 8 * MiB})), "tree", "simple", 16)
    assert default.choose(AR, range(16), 16 * MiB).chunk_bytes is None  # NCCL's 4 MiB: 512 KiB slots
    assert doubled.choose(AR, range(16), 16 * MiB).chunk_bytes == MiB
    ring = CollectivePlan(Topology.from_datacenter(datacenter({"buffsize": 8 * MiB})), "ring", "simple", 16)
    assert ring.choose(AR, range(16), 16 * MiB).chunk_bytes is None


def test_larger_tree_chunks_fill_the_pipeline_more_slowly_where_a_channel_holds_few():
    # 16 MiB over 16 channels: two 512 KiB chunks a channel pipeline over the tree's hops, one 1 MiB chunk does not
    sizes = [16 * MiB]
    small = collective_sweep(datacenter({"buffsize": 4 * MiB}), AR, range(16), sizes, "tree", 16, "simple")[0]
    large = collective_sweep(datacenter({"buffsize": 8 * MiB}), AR, range(16), sizes, "tree", 16, "simple")[0]
    assert large.time_us > small.time_us


@pytest.mark.parametrize("value,problem", [(1000, "greater than or equal to 65536"),
                                           ("8MiB", "expected a whole number")])
def test_a_bad_nccl_buffsize_is_refused_naming_the_field(value, problem):
    with pytest.raises(ConfigError) as refused:
        datacenter({"buffsize": value})
    assert "datacenter.network.nccl.buffsize" in str(refused.value)
    assert problem in str(refused.value)
