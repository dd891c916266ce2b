"""Datacenter templates that list their fabrics by cluster size (config.dc.ScaleOutSpec.fabrics): the DGX
SuperPOD's rail-optimized two tiers with as many spines as its scalable units take, three tiers past them; a
scenario's own `topology` wins; the lists are ordered, non-blocking and foldable at every size; a cluster no
fabric holds is a located error; `simulon topology` names the fabric chosen."""

from __future__ import annotations

import json

import pytest

from helpers import cli
from simulon.config.dc import DatacenterConfig
from simulon.config.loading import ConfigError, parse_scenario
from simulon.config.templates import find_template
from simulon.network.calibration import LinkModel
from simulon.network.topology import Topology

LARGEST = {"dgx-a100": 6400}
"""GPUs an unbounded (three-tier) fabric is checked at, 16,384 unless its cores hold fewer: the DGX A100 SuperPOD's
40-port QM8790 cores take one cable of each pod of 160 GPUs, 40 pods (config.dc.core_cables)."""
SIZED = ["dgx-a100", "dgx-h100", "dgx-b200", "hgx-h200", "dgx-cloud-h100", "gb200-nvl72", "gb300-nvl72", "dgx-b300"]


def system(template: str, nodes: int, **network) -> DatacenterConfig:
    block = {"from": template, "cluster": {"num_nodes": nodes}}
    if network:
        block["network"] = network
    return parse_scenario({"datacenter": block}, "s.yaml").datacenter


@pytest.mark.parametrize(("nodes", "label", "spines"), [
    (1, "dgx-superpod-ndr", 4), (32, "dgx-superpod-ndr", 4), (33, "dgx-superpod-ndr", 8),
    (128, "dgx-superpod-ndr", 16), (256, "dgx-superpod-ndr", 32), (257, "dgx-superpod-ndr-3-tier", 8),
    (2048, "dgx-superpod-ndr-3-tier", 8)])
def test_a_dgx_h100_cluster_gets_the_superpod_fabric_of_its_size(nodes, label, spines):
    topology = system("dgx-h100", nodes).network.scale_out.topology
    assert (topology.label, topology.spines) == (label, spines)
    assert topology.tiers == (3 if "3-tier" in label else 2) and topology.rail_optimized


@pytest.mark.parametrize("nodes", [32, 256, 257])
def test_infiniband_superpods_route_adaptively_unless_the_scale_out_block_says_ecmp(nodes):
    assert system("dgx-h100", nodes).network.scale_out.topology.routing == "adaptive"
    hashed = system("dgx-h100", nodes, scale_out={"routing": "ecmp"}).network.scale_out.topology
    assert hashed.routing == "ecmp" and hashed.label.startswith("dgx-superpod-ndr")  # the same fabric otherwise


def test_a_scenarios_own_topology_wins_over_the_templates_list():
    dc = system("dgx-h100", 512, scale_out={"topology": "single-switch"})
    assert dc.network.scale_out.topology.tiers == 1
    dc = system("dgx-h100", 16, scale_out={"topology": {"from": "rail-optimized-fat-tree", "oversubscription": 4.0}})
    assert dc.network.scale_out.topology.oversubscription == 4.0


def test_a_cluster_larger_than_every_listed_fabric_is_a_located_error():
    data = {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 64}, "network": {"scale_out": {
        "fabrics": [{"max_gpus": 256, "topology": "rail-optimized-fat-tree"}]}}}}
    with pytest.raises(ConfigError, match=r"network\.scale_out\.fabrics.*no fabric holds 512 GPUs"):
        parse_scenario(data, "s.yaml")


@pytest.mark.parametrize("template", SIZED)
def test_each_systems_fabrics_grow_with_the_cluster_and_end_unbounded(template):
    fabrics = find_template("datacenter", template)["network"]["scale_out"]["fabrics"]
    bounds = [f.get("max_gpus") for f in fabrics]
    assert bounds[-1] is None and all(isinstance(b, int) for b in bounds[:-1])
    assert bounds[:-1] == sorted(bounds[:-1])


@pytest.mark.parametrize("template", SIZED)
def test_each_listed_fabric_is_non_blocking_and_folds_at_the_largest_size_it_holds(template):
    fabrics = find_template("datacenter", template)["network"]["scale_out"]["fabrics"]
    one = system(template, 1)
    for fabric in fabrics:
        gpus = fabric.get("max_gpus") or LARGEST.get(template, 16384)
        dc = system(template, gpus // one.node.gpus_per_node)
        topology = Topology.from_datacenter(dc, model=LinkModel.ideal())
        ports = len(topology.fabric.leaf_of_port)
        assert topology.fabric.bisection(topology.line_rate[topology.fabric.base]) == pytest.approx(
            ports * topology.line_rate[topology.fabric.base] / 2)
        assert topology.foldable


def test_simulon_topology_names_the_fabric_chosen(tmp_path):
    path = tmp_path / "dc.yaml"
    path.write_text(json.dumps({"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 512}}}))
    done = cli("topology", str(path), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["fabric"] == "dgx-superpod-ndr-3-tier"
    assert [t["name"] for t in summary["tiers"]] == ["nvswitch", "leaf", "spine", "core"]
    assert [t["switches"] for t in summary["tiers"][1:]] == [128, 128, 256]  # the RA's cores of 64 SUs
