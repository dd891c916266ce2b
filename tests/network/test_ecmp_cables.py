"""ECMP over cables: every fabric link is one cable, parallel cables to one switch are hashed across like any other
equal-cost next hop, and a route's cables meet at the switches they name (network/fabric.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.config.dc import FabricSpec
from simulon.network.fabric import NO_LINK, Fabric
from simulon.pipeline import time_collective

PORT = 50e9  # one NIC port's bytes/s


def fabric(nodes: int, spec: dict) -> Fabric:
    return Fabric.build(FabricSpec.model_validate(spec), nodes * 8, 8, PORT, 1e-6, 5e-7, 0)


def block(f: Fabric, kind: str) -> np.ndarray:
    return f.capacity[f.links_of(kind)]


FABRICS = st.fixed_dictionaries({
    "tiers": st.sampled_from([2, 3]), "rail_optimized": st.booleans(), "nics_per_leaf": st.sampled_from([4, 8, 16]),
    "spines": st.integers(1, 24), "oversubscription": st.sampled_from([1.0, 1.5, 2.0, 3.0]),
    "leaves_per_pod": st.sampled_from([2, 4]), "cores": st.integers(1, 40),
    "pod_oversubscription": st.sampled_from([1.0, 2.0, 7.0]), "routing": st.sampled_from(["ecmp", "adaptive"])})


@settings(max_examples=120, deadline=None)
@given(spec=FABRICS, nodes=st.integers(2, 24))
def test_uplinks_carry_what_the_oversubscription_leaves_and_under_ecmp_each_link_is_one_cable(spec, nodes):
    f = fabric(nodes, spec)
    leaf_up = block(f, "leaf_up").reshape(f.leaves, -1).sum(axis=1)
    assert leaf_up == pytest.approx(np.full(f.leaves, spec["nics_per_leaf"] * PORT / spec["oversubscription"]))
    kinds = ["leaf_up", "spine_down"] + (["spine_up", "core_down"] if spec["tiers"] == 3 else [])
    if spec["tiers"] == 3:  # a pod's spines send up what its leaves send them over the pod's oversubscription
        pod_up = block(f, "spine_up").reshape(f.pods, -1).sum(axis=1)
        assert pod_up == pytest.approx(np.full(f.pods, spec["leaves_per_pod"] * leaf_up[0]
                                               / spec["pod_oversubscription"]))
    if spec["routing"] == "ecmp":  # whole ports of the NIC's speed: a cable at one to two ports' rate, less only
        for kind in kinds:       # where a switch has less than one port's worth of uplink (one cable, then)
            cables = f.spine_paths if kind in ("leaf_up", "spine_down") else f.core_paths
            caps = block(f, kind)
            assert (caps < 2 * PORT).all() and ((caps >= PORT * (1 - 1e-9)).all() or cables == 1)
            assert f.physical_per_link(kind) == 1
    else:  # adaptive: one merged link per leaf (and per pod above), standing for every cable
        assert len(block(f, "leaf_up")) == f.leaves
        assert f.physical_per_link("leaf_up") == f.leaf_uplinks


@settings(max_examples=80, deadline=None)
@given(spec=FABRICS, nodes=st.integers(2, 24), seed=st.integers(0, 2**31))
def test_a_route_goes_down_from_the_switch_its_cable_up_reached(spec, nodes, seed):
    """Cable k of a leaf goes to spine k mod the spines it reaches (likewise a spine's cables to the cores): the
    cable a flow takes down to its leaf comes from the spine its cable up reached (within a pod), and the spine
    cable down from the core the spine cable up reached."""
    f = fabric(nodes, {**spec, "routing": "ecmp"})
    rng = np.random.default_rng(seed)
    ports = len(f.leaf_of_port)
    src, dst = rng.integers(0, ports, 300), rng.integers(0, ports, 300)
    hops = f.routes(src, dst, src, dst)
    leaf_s, leaf_d = f.leaf_of_port[src], f.leaf_of_port[dst]
    cross = leaf_s != leaf_d
    s, sr = f.spine_paths, f.spine_reach
    cable_up = hops[cross, 1] - f.block_start[f.kind.index("leaf_up")] - leaf_s[cross] * s
    cable_down = hops[cross, 4] - f.block_start[f.kind.index("spine_down")] - leaf_d[cross] * s
    assert ((cable_up >= 0) & (cable_up < s) & (cable_down >= 0) & (cable_down < s)).all()
    same_pod = f.pod_of_leaf[leaf_s[cross]] == f.pod_of_leaf[leaf_d[cross]]
    assert (cable_up[same_pod] % sr == cable_down[same_pod] % sr).all()
    if spec["tiers"] == 3:
        c, cr = f.core_paths, f.core_reach
        up, down = hops[cross, 2], hops[cross, 3]
        assert ((up == NO_LINK) == same_pod).all() and ((down == NO_LINK) == same_pod).all()
        core_up = (up[~same_pod] - f.block_start[f.kind.index("spine_up")]) % c
        core_down = (down[~same_pod] - f.block_start[f.kind.index("core_down")]) % c
        assert (core_up % cr == core_down % cr).all()
        spine_up = (up[~same_pod] - f.block_start[f.kind.index("spine_up")]) // c % sr
        assert (spine_up == cable_up[~same_pod] % sr).all()
        spine_down = (down[~same_pod] - f.block_start[f.kind.index("core_down")]) // c % sr
        assert (spine_down == cable_down[~same_pod] % sr).all()


@pytest.mark.parametrize("spines", [1, 2, 4])
def test_fewer_spines_than_a_leafs_uplink_ports_are_reached_by_parallel_cables_not_one_merged_link(spines):
    """8 NICs a leaf, non-blocking: 8 uplink cables of one port each, whatever the spine count (1 spine merged
    them into one link of 8 ports, which a single flow filled: a ring all-reduce over 4 DGX H100s ran at 337 GB/s
    bus bandwidth under 1 spine and 85.7 under 8)."""
    f = fabric(4, {"tiers": 2, "nics_per_leaf": 8, "spines": spines})
    assert (f.spine_paths, f.spine_reach, f.leaf_uplinks) == (8, spines, 8)
    assert block(f, "leaf_up") == pytest.approx(np.full(4 * 8, PORT))
    flows = f.routes(np.arange(8), np.arange(8, 16), np.arange(8), np.arange(8, 16))
    assert len(set(flows[:, 1].tolist())) > 1  # the eight flows from one leaf spread over its cables


def test_a_spine_with_more_uplink_ports_than_cores_sends_over_parallel_cables_of_one_port_each():
    """4 spines a pod, 8 leaves of 8 ports under each, to 2 cores at 1:1: a spine has 16 uplink ports, 8 cables to
    each core (they were 2 links of 8 ports each); with 64 cores it reaches 16 of them, not 64 thinner links."""
    spec = {"tiers": 3, "nics_per_leaf": 8, "spines": 4, "leaves_per_pod": 8}
    two, many = fabric(16, {**spec, "cores": 2}), fabric(16, {**spec, "cores": 64})  # two pods
    assert (two.core_paths, two.core_reach) == (16, 2) and (many.core_paths, many.core_reach) == (16, 16)
    assert block(two, "spine_up") == pytest.approx(np.full(2 * 4 * 16, PORT))
    assert block(many, "spine_up") == pytest.approx(block(two, "spine_up"))


def test_a_ring_all_reduce_under_one_spine_of_eight_cables_runs_as_under_eight_spines():
    """4 DGX H100 nodes, a leaf each, 8 uplink ports a leaf: one spine reached by 8 cables is the 8-spine fabric
    with every cable landing on one switch, and ECMP collides the rings' flows alike (337 GB/s bus bandwidth
    against 85.7 at 256 MiB before; the flows' last cables down differ, their time does not here)."""
    def busbw(spines: int) -> float:
        dc = DatacenterConfig.model_validate({
            "from": "dgx-h100", "cluster": {"num_nodes": 4},
            "network": {"scale_out": {"topology": {"tiers": 2, "nics_per_leaf": 8, "spines": spines}}}})
        size = 256 * 2**20
        timing = time_collective(dc, CollType.AllReduce, tuple(range(32)), size, "ring", None, "auto")
        return 2 * 31 / 32 * size / (timing.time_us * 1e-6) / 1e9
    one, eight = busbw(1), busbw(8)
    assert one == pytest.approx(eight, rel=1e-9)
    assert eight < 100  # ECMP's collisions, as the 8-spine fabric always had them
