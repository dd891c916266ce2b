"""A tree all-reduce's chunks: the simulation's bound on chunks a channel (max_pipeline_chunks) never leaves a large
tree paying the fill of a few huge chunks over its hops (pipeline_chunks_per_hop)."""

from __future__ import annotations

from simulon.collective.types import CollType
from simulon.config.loading import parse_scenario
from simulon.network.calibration import link_model_for
from simulon.pipeline import collective_sweep

AR = CollType.AllReduce
GiB = 2**30


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
