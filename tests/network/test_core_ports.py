"""A three-tier fabric's cores take cables from the spines of every pod, so only the cluster's size tells whether
their switch has the ports (config.dc.DatacenterConfig._cores_fit): the check counts the fullest core's cables as
network/fabric.py deals them, a fat tree's core layer (spine k of every pod to core group k, config.dc.core_reach).
Before it, no core's ports were checked, and every shipped three-tier template put more cables on its cores than
they have ports at every size it serves (the DGX H100 SuperPOD's 9 pods of 8 spines on 32 cores: 72 on 64 ports)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from simulon.config import DatacenterConfig
from simulon.config.dc import FabricSpec, core_cables, leaf_nics
from simulon.network.fabric import Fabric


def built_core_cables(built: Fabric) -> np.ndarray:
    """The cables down to each core of an ECMP fabric as its links are laid out and routed (Fabric.routes): link
    spine * core_paths + m of the spine_up block is cable m of that spine (spine k of its plane and pod), to core
    m mod core_reach of group k mod core_groups of its plane."""
    block = built.links_of("spine_up")
    spine, cable = np.divmod(np.arange(block.stop - block.start), built.core_paths)
    plane, local = np.divmod(spine, built.pods * built.spine_reach)
    group = local % built.spine_reach % built.core_groups
    per_plane = built.core_groups * built.core_reach
    core = plane * per_plane + group * built.core_reach + cable % built.core_reach
    return np.bincount(core, minlength=built.spec.planes * per_plane)


@settings(max_examples=80, deadline=None)
@given(nodes=st.integers(1, 40), per_leaf=st.integers(1, 12), spines=st.integers(1, 7), per_pod=st.integers(1, 6),
       cores=st.integers(1, 40), rail=st.booleans(), dual=st.booleans(), planes=st.booleans(),
       oversubscription=st.sampled_from([1.0, 1.5, 2.0]), pod_oversubscription=st.sampled_from([1.0, 2.0, 3.0]),
       ports=st.integers(1, 200))
def test_the_core_check_refuses_exactly_when_the_fabric_would_give_a_core_more_cables_than_ports(
        nodes, per_leaf, spines, per_pod, cores, rail, dual, planes, oversubscription, pod_oversubscription, ports):
    fabric = FabricSpec(tiers=3, nics_per_leaf=per_leaf, spines=spines, leaves_per_pod=per_pod, cores=cores,
                        rail_optimized=rail, dual_tor=dual, planes=2 if dual and planes else 1,
                        oversubscription=oversubscription, pod_oversubscription=pod_oversubscription)
    built = Fabric.build(fabric, nodes * 8, 8, 50e9, 1e-6, 1e-6, 0)  # ECMP: one link a cable
    pods = -(-sum(n for _, n in leaf_nics(fabric, nodes * 8, 8)) // per_pod)
    cables = built_core_cables(built)
    assert pods == built.pods
    assert core_cables(fabric, pods) == cables.max()
    assert (core_cables(fabric, pods) > ports) == bool((cables > ports).any())


@settings(max_examples=60, deadline=None)
@given(pods=st.integers(2, 4), per_leaf=st.integers(1, 12), spines=st.integers(1, 7), per_pod=st.integers(1, 4),
       cores=st.integers(1, 40), seed=st.integers(0, 2**31))
def test_a_flow_between_pods_comes_down_through_a_spine_its_core_is_cabled_to(pods, per_leaf, spines, per_pod,
                                                                             cores, seed):
    """A core has only its group's spines below it: the spine a flow goes down through is one of them."""
    fabric = FabricSpec(tiers=3, nics_per_leaf=per_leaf, spines=spines, leaves_per_pod=per_pod, cores=cores)
    f = Fabric.build(fabric, pods * per_pod * per_leaf, per_leaf, 50e9, 1e-6, 1e-6, 0)
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, len(f.leaf_of_port), (2, 300))
    hops = f.routes(src, dst, src, dst)
    far = hops[:, 2] != -1
    up = (hops[far, 2] - f.block_start[f.kind.index("spine_up")]) // f.core_paths % f.spine_reach
    down = (hops[far, 3] - f.block_start[f.kind.index("core_down")]) // f.core_paths % f.spine_reach
    assert (up % f.core_groups == down % f.core_groups).all()


def dgx(stem: str, nodes: int, **topology) -> DatacenterConfig:
    network = {"scale_out": {"topology": topology}} if topology else {}
    return DatacenterConfig.model_validate({"from": stem, "cluster": {"num_nodes": nodes}, "network": network})


@pytest.mark.parametrize(("stem", "first", "largest"), [
    ("dgx-h100", 257, 2048), ("dgx-b200", 257, 2048), ("hgx-h200", 257, 2048), ("dgx-cloud-h100", 257, 2048),
    ("dgx-a100", 101, 800), ("dgx-b300", 1297, 1296 * 8), ("gb200-nvl72", 513, 8192), ("hgx-h800", 129, 2048)])
def test_the_shipped_three_tier_fabrics_hold_their_clusters_from_the_first_size_they_serve(stem, first, largest):
    """Each template's three-tier fabric loads from its first size to its largest pods-worth: the NDR SuperPOD's
    64 SUs of the reference architecture (256 cores), the HDR's 40 pods, the XDR's 144, the GB200 NVL72's 64."""
    for nodes in (first, largest):
        assert dgx(stem, nodes).network.scale_out.topology.tiers == 3


def test_the_dgx_h100_superpod_on_32_cores_is_refused_past_8_pods():
    """The template's 32 cores before: 8 groups of 4, a spine's 32 uplinks 8 to each, 8 cables of every pod on each
    64-port QM9700: 64 at 8 pods (2,048 GPUs), 72 at 9, the first size the template serves."""
    dgx("dgx-h100", 256, tiers=3, rail_optimized=True, nics_per_leaf=32, spines=8, leaves_per_pod=8, cores=32)
    with pytest.raises(ValidationError, match=r"topology\.cores.*needs 72 cables down to the spines of 9 pods"):
        dgx("dgx-h100", 288, tiers=3, rail_optimized=True, nics_per_leaf=32, spines=8, leaves_per_pod=8, cores=32)


def test_the_ndr_superpod_takes_the_reference_architectures_cables_on_a_core():
    """RA (DGX B200, "Larger DGX SuperPOD component counts"): 16 SUs, 128 spines, 64 cores: a core takes 4 cables
    of each of 16 pods, 64; with the template's 256 cores of 64 SUs, one cable a pod, 64 at 64 SUs."""
    fabric = dgx("dgx-h100", 512).network.scale_out.topology
    assert core_cables(fabric.model_copy(update={"cores": 64}), 16) == 64
    assert core_cables(fabric, 64) == 64
    with pytest.raises(ValidationError, match=r"needs 65 cables down to the spines of 65 pods"):
        dgx("dgx-h100", 65 * 32)
