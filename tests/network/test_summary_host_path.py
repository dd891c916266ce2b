"""`simulon topology` on PCIe nodes without peer to peer: GPUs exchange through the host, so a domain cut in half
moves what its host paths carry (the RTX 3090 nodes of Sailor's cluster: 6.47 GB/s, where the summary gave the PCIe
links' 126), and a bisection below one GB/s is printed as it is, not rounded to 0."""

from __future__ import annotations

import pytest

from helpers import cli
from simulon.config import DatacenterConfig
from simulon.network.summary import TopologySummary
from simulon.network.topology import Topology


def rtx3090(nodes: int) -> DatacenterConfig:
    return DatacenterConfig.model_validate({"from": "sailor-mit-rtx3090", "cluster": {"num_nodes": nodes}})


def test_a_node_that_stages_through_its_host_is_cut_at_its_host_path():
    dc = rtx3090(1)
    host = dc.network.scale_up.host_path.bandwidth
    summary = TopologySummary.of(Topology.from_datacenter(dc))
    assert summary.scale_up_bisection == pytest.approx(host)
    assert summary.scale_up_bisection < summary.tiers[0].link_rate


def test_a_bisection_under_one_gb_per_second_is_printed_to_three_figures(tmp_path):
    path = tmp_path / "rtx.yaml"
    path.write_text("datacenter:\n  from: sailor-mit-rtx3090\n  cluster: {num_nodes: 2}\n")
    proc = cli("topology", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "scale-out 0.125 GB/s; inside one scale-up domain 6.47 GB/s" in proc.stdout

