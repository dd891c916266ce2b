"""A two-tier fabric's spines are cabled to every leaf of the cluster, so only the cluster's size tells whether
their switch has the ports (config.dc.DatacenterConfig._spines_fit): a spine-leaf fabric named for 512 DGX H100
nodes put 256 cables on each 64-port QM9700 spine and reported a bisection no such fabric has."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from helpers import cli
from simulon.config import DatacenterConfig
from simulon.config.dc import FabricSpec, fabric_cables, fabric_ports, leaf_nics, two_tier_spine_cables
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
    leaves of 32 uplinks, 640 cables; on the template's 16 spines each leaf puts 2 on every spine, 40 a spine."""
    dc = DatacenterConfig.model_validate({"from": "gb200-nvl72", "cluster": {"num_nodes": 144}})
    fabric = dc.network.scale_out.topology
    assert fabric.spines == 16
    assert two_tier_spine_cables(fabric, 576, 4) == (40, 20)


@pytest.mark.parametrize(("trays", "spines", "fullest"), [(144, 9, 80), (144, 10, 80), (288, 18, 72)])
def test_a_spine_count_that_does_not_divide_a_leafs_uplinks_is_checked_at_its_fullest_spine(trays, spines,
                                                                                              fullest):
    """Every leaf deals its 32 uplinks round robin from spine 0 (network/fabric.py): on 18 spines spines 0-13 take
    2 of each of the 36 leaves of 1,152 GB200, 72 cables on a 64-port QM9700, where the even share (64) passed; on
    10 spines spines 0 and 1 take 4 of each of 20 leaves, 80. Refused, naming the fullest spine's count."""
    with pytest.raises(ValidationError, match=rf"needs {fullest} cables down to the"):
        DatacenterConfig.model_validate({"from": "gb200-nvl72", "cluster": {"num_nodes": trays}, "network": {
            "scale_out": {"topology": {"from": "nvl72-superpod-ndr", "spines": spines}}}})


@pytest.mark.parametrize(("trays", "spines"), [(144, 16), (288, 32), (512, 32)])
def test_the_gb200_nvl72_template_takes_spines_that_divide_a_leafs_uplinks(trays, spines):
    dc = DatacenterConfig.model_validate({"from": "gb200-nvl72", "cluster": {"num_nodes": trays}})
    assert dc.network.scale_out.topology.spines == spines


def built_spine_cables(built: Fabric) -> np.ndarray:
    """The cables down to each spine of an ECMP fabric as its links are laid out (Fabric.routes): link
    leaf * spine_paths + k of the spine_down block is cable k of that leaf, to spine k mod spine_reach of its plane and
    pod."""
    block = built.links_of("spine_down")
    index = np.arange(block.stop - block.start)
    leaf, cable = np.divmod(index, built.spine_paths)
    spine = (built.plane_of_leaf[leaf] * built.pods + built.pod_of_leaf[leaf]) * built.spine_reach \
        + cable % built.spine_reach
    return np.bincount(spine, minlength=built.spines)


@settings(max_examples=60, deadline=None)
@given(nodes=st.integers(1, 40), per_leaf=st.integers(1, 12), spines=st.integers(1, 7), rail=st.booleans(),
       dual=st.booleans(), planes=st.booleans(), oversubscription=st.sampled_from([1.0, 1.5, 2.0, 3.0]),
       ports=st.integers(1, 200))
def test_the_spine_check_refuses_exactly_when_the_fabric_would_give_a_spine_more_cables_than_ports(
        nodes, per_leaf, spines, rail, dual, planes, oversubscription, ports):
    fabric = FabricSpec(tiers=2, nics_per_leaf=per_leaf, spines=spines, rail_optimized=rail, dual_tor=dual,
                        planes=2 if dual and planes else 1, oversubscription=oversubscription)
    built = Fabric.build(fabric, nodes * 8, 8, 50e9, 1e-6, 1e-6, 0)  # ECMP: one link a cable
    down, leaves = two_tier_spine_cables(fabric, nodes * 8, 8)
    cables = built_spine_cables(built)
    assert leaves * fabric.planes == built.leaves
    assert down == cables.max()
    assert (down > ports) == bool((cables > ports).any())


@settings(max_examples=40, deadline=None)
@given(pods=st.integers(1, 3), per_leaf=st.integers(1, 12), spines=st.integers(1, 7), per_pod=st.integers(1, 6),
       oversubscription=st.sampled_from([1.0, 1.5, 2.0]))
def test_the_three_tier_spine_check_counts_the_cables_of_the_fullest_spine_the_fabric_builds(
        pods, per_leaf, spines, per_pod, oversubscription):
    fabric = FabricSpec(tiers=3, nics_per_leaf=per_leaf, spines=spines, leaves_per_pod=per_pod, cores=4,
                        oversubscription=oversubscription)
    built = Fabric.build(fabric, pods * per_pod * per_leaf, per_leaf, 50e9, 1e-6, 1e-6, 0)  # ECMP, full pods
    _, _, spine_ports, role = fabric_ports(fabric)[-1]
    assert role == "spine"
    assert spine_ports - fabric_cables(fabric, per_leaf)[2] == built_spine_cables(built).max()


def test_the_dgx_a100_superpods_three_tier_spines_have_the_ports_their_cables_take():
    """The HDR SuperPOD's pods of 8 leaves of 20 uplinks on 8 spines put 3 cables of each leaf on spines 0-3: 24
    down and 20 up on a 40-port QM8790, checked as 20 + 20 and loaded; now 10 spines a pod take 2 of each. Every spine
    has the fullest one's uplinks (config.dc.fabric_cables), so 8 spines would take 24 up as well: 48 ports."""
    dc = DatacenterConfig.model_validate({"from": "dgx-a100", "cluster": {"num_nodes": 200}})
    fabric = dc.network.scale_out.topology
    assert (fabric.spines, fabric.cores) == (10, 160)  # 10 groups of 16 (config.dc.core_reach)
    assert [ports for *_, ports, role in fabric_ports(fabric) if role == "spine"] == [32]
    with pytest.raises(ValidationError, match=r"a spine needs 24 cables down to its pod's 8 leaves and 24 up"):
        DatacenterConfig.model_validate({"from": "dgx-a100", "cluster": {"num_nodes": 200}, "network": {
            "scale_out": {"topology": {"from": "dgx-superpod-hdr-3-tier", "spines": 8, "cores": 20}}}})


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
