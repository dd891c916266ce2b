"""A two-tier fabric's spines are cabled to every leaf of the cluster, so only the cluster's size tells whether
their switch has the ports (config.dc.DatacenterConfig._spines_fit): a spine-leaf fabric named for 512 DGX H100
nodes put 256 cables on each 64-port QM9700 spine and reported a bisection no such fabric has."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from helpers import cli
from simulon.config import DatacenterConfig
from simulon.config.dc import FabricSpec, leaf_nics, two_tier_spine_cables
from simulon.network.calibration import LinkModel
from simulon.network.fabric import Fabric
from simulon.network.topology import Topology


def spine_leaf(nodes: int, **topology) -> DatacenterConfig:
    return DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": nodes}, "network": {
        "scale_out": {"topology": {"from": "spine-leaf", **topology}}}})


def test_spines_cabled_to_more_leaves_than_their_switch_has_ports_are_refused():
    # spine-leaf: 32 NICs a leaf, 32 uplinks over 16 spines, 2 cables a leaf to each; 64-port QM9700 spines
    spine_leaf(32)  # 256 NICs on 8 leaves: 16 cables a spine
    with pytest.raises(ValidationError, match=r"topology\.spines.*needs 256 cables down to the 128 leaves of 4096 "
                                              r"NICs.*Quantum-2-QM9700\) has 64"):
        spine_leaf(512)


def test_the_largest_two_tier_cluster_its_spines_serve_still_loads():
    assert two_tier_spine_cables(spine_leaf(32).network.scale_out.topology, 1024, 8) == (64, 32)
    spine_leaf(128)  # 1,024 NICs on 32 leaves: 64 cables a spine, every port
    with pytest.raises(ValidationError, match=r"needs 66 cables"):
        spine_leaf(129)  # a 33rd leaf of 8 NICs, cabled as a full one: 32 uplinks


def test_a_partly_filled_leaf_is_counted_with_a_full_leafs_uplinks_as_the_fabric_cables_it():
    """NVIDIA's SuperPOD reference architectures cable a cluster short of whole units with the full units' leaf-spine
    cables: 576 GB200 in NVL72 racks are 4 rails of 144 trays, 4 full leaves of 32 trays a rail and one of 16, 20
    leaves of 32 uplinks, 640 cables, which `simulon topology` drew on 9 spines of 64 ports (71.1 each) while the
    check counted the half leaves' 16 uplinks (576 cables, 64 a spine) and let it load; the template takes 10."""
    dc = DatacenterConfig.model_validate({"from": "gb200-nvl72", "cluster": {"num_nodes": 144}})
    fabric = dc.network.scale_out.topology
    assert fabric.spines == 10
    assert two_tier_spine_cables(fabric, 576, 4) == (64, 20)
    assert two_tier_spine_cables(fabric.model_copy(update={"spines": 9}), 576, 4) == (640 / 9, 20)


@settings(max_examples=40, deadline=None)
@given(nodes=st.integers(1, 40), per_leaf=st.integers(1, 12), spines=st.integers(1, 6), rail=st.booleans(),
       dual=st.booleans(), oversubscription=st.sampled_from([1.0, 1.5, 2.0, 3.0]))
def test_the_cables_the_spine_check_counts_are_the_cables_the_fabric_builds(nodes, per_leaf, spines, rail, dual,
                                                                          oversubscription):
    fabric = FabricSpec(tiers=2, nics_per_leaf=per_leaf, spines=spines, rail_optimized=rail, dual_tor=dual,
                        oversubscription=oversubscription)
    built = Fabric.build(fabric, nodes * 8, 8, 50e9, 1e-6, 1e-6, 0)  # ECMP: one link a cable
    down, leaves = two_tier_spine_cables(fabric, nodes * 8, 8)
    assert leaves == built.leaves
    assert down * built.spine_reach == built.links_of("spine_down").stop - built.links_of("spine_down").start


def test_the_topology_command_names_the_field_of_a_spine_with_too_few_ports(tmp_path):
    path = tmp_path / "dc.yaml"
    path.write_text("datacenter:\n  from: dgx-h100\n  cluster: {num_nodes: 512}\n  network:\n    scale_out:\n"
                    "      topology: {from: spine-leaf}\n")
    proc = cli("topology", str(path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "dc.yaml" in proc.stderr and "scale_out.topology.spines" in proc.stderr and "has 64" in proc.stderr


@settings(max_examples=40, deadline=None)
@given(nodes=st.integers(1, 40), per_leaf=st.integers(1, 12), rail=st.booleans(), dual=st.booleans())
def test_the_leaves_counted_for_the_check_are_the_leaves_the_fabric_builds(nodes, per_leaf, rail, dual):
    fabric = FabricSpec(tiers=2, nics_per_leaf=per_leaf, spines=4, rail_optimized=rail, dual_tor=dual)
    dc = DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": nodes}, "network": {
        "scale_out": {"switch": {"from": "quantum-2-qm9700", "port_count": 100000},
                      "topology": fabric.model_dump(exclude_defaults=True)}}})
    built = Topology.from_datacenter(dc, model=LinkModel.ideal()).fabric
    assert built.leaves == sum(leaves for _, leaves in leaf_nics(fabric, nodes * 8, 8)) * (2 if dual else 1)
