"""The MIT node templates of Sailor's runs (templates/datacenter/sailor-mit-*.yaml): GPU traffic staged through
host paths fitted to Sailor's tp-8 layer profile (scripts/sailor_host_path_fit.py), and the RTX 3090 node's
NVLink-bridged pairs."""

from __future__ import annotations

import numpy as np
import pytest

from simulon.config.dc import DatacenterConfig
from simulon.engine.fair_share import max_min_rates
from simulon.network.topology import Topology
from simulon.validate.hetero import NODE_TEMPLATES, node_microbatch_seconds

SAILOR_TP8_MICROBATCH_MS = {"rtx-3090": 1896.4, "titan-rtx": 776.2, "rtx-2080-ti": 909.9}
"""Sailor's layer profile of OPT-350M at tp 8, micro-batch 2, summed over the 26 layers' forward and backward
(eth-easl/sailor sailor/Planner/simulations/profiles_tmp.json), to which the host paths are fitted."""
FOUR_PAIRS_GBPS = {"rtx-3090": 6.47, "titan-rtx": 2 * 10.14, "rtx-2080-ti": 17.09}
"""GPUs 0-3 each sending to GPU i + 4 at once: one host path for the RTX 3090 node, the TITAN RTX node's two
pairs' paths, one of the RTX 2080 Ti node's paths per four GPUs."""


def node(gpu: str) -> Topology:
    return Topology.from_datacenter(DatacenterConfig.model_validate({"from": NODE_TEMPLATES[gpu],
                                                                     "cluster": {"num_nodes": 1}}))


def aggregate_GBps(topology: Topology, src, dst) -> float:
    links, _, _ = topology.routes(np.asarray(src), np.asarray(dst))
    return float(max_min_rates(links, topology.capacity, np.full(len(src), np.inf)).sum()) / 1e9


@pytest.mark.parametrize("gpu", sorted(NODE_TEMPLATES))
def test_every_mit_node_stages_its_gpu_traffic_through_its_host_paths(gpu):
    topology = node(gpu)
    assert topology.staging is not None and (topology.staging.host_of_gpu >= 0).all()
    assert aggregate_GBps(topology, range(4), range(4, 8)) == pytest.approx(FOUR_PAIRS_GBPS[gpu], rel=0.01)


@pytest.mark.parametrize("gpu", sorted(NODE_TEMPLATES))
def test_a_tp8_micro_batch_on_each_mit_node_takes_what_sailors_layer_profile_sums_to(gpu):
    assert node_microbatch_seconds(gpu, 8) * 1e3 == pytest.approx(SAILOR_TP8_MICROBATCH_MS[gpu], rel=0.005)


def test_the_rtx_3090_node_bridges_gpus_in_pairs_at_the_nvlink_3_bridge_rate():
    topology = node("rtx-3090")
    links, _, _ = topology.routes(np.array([0, 7, 1]), np.array([1, 6, 2]))
    names = [[topology.link_name(int(x)) for x in row if x >= 0] for row in links]
    assert names[0] == ["bridge[gpu 0 -> gpu 1]"] and names[1] == ["bridge[gpu 7 -> gpu 6]"]
    assert [n.split("[")[0] for n in names[2]] == ["pcie_up", "host_up", "host_down", "pcie_down"]
    assert topology.line_rate[links[0, 0]] == pytest.approx(56.25e9)
