"""GCP A3 Mega's NCCL environment (templates/datacenter/gcp-a3-mega.yaml): Google's TCPXO profile and tuner plugin
run every all-reduce of two nodes as a Simple tree, which nccl-tests shows passing what any ring could reach."""

from __future__ import annotations

import pytest

from simulon.collective.tuner import CollectivePlan
from simulon.collective.types import CollType
from simulon.config.loading import parse_scenario
from simulon.network.topology import Topology
from simulon.pipeline import collective_sweep

AR, AG = CollType.AllReduce, CollType.AllGather
MiB, GiB = 2**20, 2**30


def a3_mega(nodes: int = 2):
    return parse_scenario({"datacenter": {"from": "gcp-a3-mega", "cluster": {"num_nodes": nodes}}},
                          "dc.yaml").datacenter


@pytest.mark.parametrize("size", [8, 64 * 1024, 16 * MiB, 32 * MiB, 8 * GiB])
def test_a_two_node_all_reduce_runs_as_googles_tuner_sets_it_a_simple_tree(size):
    plan = CollectivePlan(Topology.from_datacenter(a3_mega()), "auto", "auto")
    choice = plan.choose(AR, range(16), size)
    # NCCL's 16 channels, of which a small message fills one per 32 KiB cell of its traffic (enqueue.cc)
    assert (choice.algorithm, choice.protocol, choice.channels) == ("tree", "simple", min(16, max(1, size // 16384)))
    assert choice.chunk_bytes == MiB  # NCCL_BUFFSIZE 8 MiB over 8 slots
    one_a_node = plan.choose(AR, (0, 8), size)
    assert (one_a_node.algorithm, one_a_node.protocol, one_a_node.channels) == ("tree", "simple",
                                                                                min(2, max(1, size // 16384)))


def test_other_collectives_keep_nccls_choice_under_googles_simple_protocol():
    plan = CollectivePlan(Topology.from_datacenter(a3_mega()), "auto", "auto")
    assert plan.choose(AG, range(16), 64 * MiB).protocol == "simple"
    four = CollectivePlan(Topology.from_datacenter(a3_mega(4)), "auto", "auto")
    assert four.choose(AR, range(32), 64 * MiB).rule is None  # Google's rule for 3 to 6 nodes is not carried


def test_a_large_two_node_all_reduce_passes_the_ceiling_any_ring_has_on_these_nics():
    # a ring's bus bandwidth cannot pass a node's NICs, 8 x 200 Gb/s = 200 GB/s; the tree moves each byte over the
    # network once each way, up to 1.875 times that (nccl-tests measured 339 GB/s at 8 GiB)
    timing = collective_sweep(a3_mega(), AR, range(16), [8 * GiB], "auto")[0]
    busbw = 2 * 15 / 16 * 8 * GiB / (timing.time_us * 1e-6) / 1e9
    assert 300 < busbw < 375
