"""ECMP over cables: every fabric link is one cable, parallel cables to one switch are hashed across like any other
equal-cost next hop, and a route's cables meet at the switches they name (network/fabric.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.config.dc import FabricSpec, fabric_cables
from simulon.network.fabric import NO_LINK, Fabric
from simulon.network.topology import Topology
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
    up, reach, j = fabric_cables(FabricSpec.model_validate(spec), spec["nics_per_leaf"])
    leaf_up = block(f, "leaf_up").reshape(f.leaves, -1).sum(axis=1)  # what the oversubscription leaves, in whole
    wanted = spec["nics_per_leaf"] * PORT / spec["oversubscription"]  # cables of one port (none beyond)
    assert leaf_up == pytest.approx(np.full(f.leaves, min(wanted, up * PORT)))
    kinds = ["leaf_up", "spine_down"] + (["spine_up", "core_down"] if spec["tiers"] == 3 else [])
    if spec["tiers"] == 3:  # every spine sends up what its pod's leaves send the fullest (spine 0: ceil(up / reach)
        pod_up = block(f, "spine_up").reshape(f.pods, -1).sum(axis=1)  # cables of each) over the oversubscription
        wanted = spec["leaves_per_pod"] * -(-up // reach) * leaf_up[0] / up / spec["pod_oversubscription"]
        assert pod_up == pytest.approx(np.full(f.pods, reach * min(wanted, j * PORT)))
    if spec["routing"] == "ecmp":  # whole ports of the NIC's speed: a cable at one port's rate, less only where a
        for kind in kinds:       # switch has less than one port's worth of uplink (one cable, then)
            cables = f.spine_paths if kind in ("leaf_up", "spine_down") else f.core_paths
            caps = block(f, kind)
            assert (caps <= PORT * (1 + 1e-9)).all() and ((caps >= PORT * (1 - 1e-9)).all() or cables == 1)
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
    key = rng.integers(0, 8, 300) if seed % 2 else None  # a pair's connections, hashed apart
    hops = f.routes(src, dst, src, dst, key)
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
    """4 spines a pod, 8 leaves of 8 ports under each, to 2 cores at 1:1: a spine has 16 uplink ports, 16 cables to
    the core of its group (spines 0 and 2 to core 0; they were 2 links of 8 ports each); with 64 cores, 4 groups of
    16, it reaches the 16 of its group, not 64 thinner links."""
    spec = {"tiers": 3, "nics_per_leaf": 8, "spines": 4, "leaves_per_pod": 8}
    two, many = fabric(16, {**spec, "cores": 2}), fabric(16, {**spec, "cores": 64})  # two pods
    assert (two.core_paths, two.core_reach, two.core_groups) == (16, 1, 2)
    assert (many.core_paths, many.core_reach, many.core_groups) == (16, 16, 4)
    assert block(two, "spine_up") == pytest.approx(np.full(2 * 4 * 16, PORT))
    assert block(many, "spine_up") == pytest.approx(block(two, "spine_up"))


def ring_busbw(spines: int, routing: str = "ecmp", qps: int = 1) -> float:
    """Bus bandwidth (GB/s) of a ring all-reduce of 256 MiB over 4 DGX H100 nodes, a leaf each, 8 uplink ports a
    leaf, `qps` queue pairs a connection."""
    dc = DatacenterConfig.model_validate({
        "from": "dgx-h100", "cluster": {"num_nodes": 4},
        "network": {"nccl": {"qps_per_connection": qps},
                    "scale_out": {"topology": {"tiers": 2, "nics_per_leaf": 8, "spines": spines, "routing": routing}}}})
    size = 256 * 2**20
    timing = time_collective(dc, CollType.AllReduce, tuple(range(32)), size, "ring", None, "auto")
    return 2 * 31 / 32 * size / (timing.time_us * 1e-6) / 1e9


def test_a_ring_all_reduce_under_one_spine_of_eight_cables_is_no_faster_than_under_eight_spines():
    """One spine reached by 8 cables is the 8-spine fabric with every cable landing on one switch, whose spine
    also hashes each connection onto one of its 8 cables down, where 8 spines have one: no faster (it ran at 337 GB/s
    bus bandwidth against 85.7 when the cables were merged into one link; 151.7 against 170.5 now, each of the 32
    channels' connections hashed apart, 4 a flow), and both below adaptive routing's spread over every cable."""
    one, eight = ring_busbw(1), ring_busbw(8)
    assert one <= eight * (1 + 1e-9)
    assert eight < 0.6 * ring_busbw(8, "adaptive")


def test_more_queue_pairs_a_connection_spread_a_ring_closer_to_adaptive_routing():
    """NCCL_IB_QPS_PER_CONNECTION: each queue pair hashed apart, a pair's bytes spread over more of the 8 cables
    (measured 170.5, 194.5, 226.4, 246.7, 267.6 GB/s at 1, 2, 4, 8, 16 queue pairs under 8 spines), never past
    adaptive routing (337.0), which routing: adaptive keeps whatever the queue pairs."""
    adaptive = ring_busbw(8, "adaptive")
    spread = [ring_busbw(8, qps=q) for q in (1, 4, 16)]
    assert spread[0] < spread[1] < spread[2] < adaptive
    assert ring_busbw(8, "adaptive", qps=16) == pytest.approx(adaptive, rel=1e-12)



def topology(nodes: int, fabric: dict, qps: int = 1) -> Topology:
    """A DGX H100 cluster on `fabric`, its switches of ports enough for any spine the fabrics drawn here cable (the
    spine port check refuses 9 nodes on 18 leaves of 4 NICs under one spine: 72 cables on a 64-port QM9700)."""
    return Topology.from_datacenter(DatacenterConfig.model_validate({
        "from": "dgx-h100", "cluster": {"num_nodes": nodes},
        "network": {"nccl": {"qps_per_connection": qps}, "scale_out": {
            "switch": {"from": "quantum-2-qm9700", "port_count": 100000}, "topology": fabric}}}))


@settings(max_examples=40, deadline=None)
@given(spec=FABRICS, nodes=st.integers(2, 12), qps=st.integers(1, 6), lanes=st.integers(1, 16),
       seed=st.integers(0, 2**31))
@example(spec={"tiers": 2, "rail_optimized": False, "nics_per_leaf": 4, "spines": 1, "oversubscription": 1.0,
               "leaves_per_pod": 2, "cores": 1, "pod_oversubscription": 1.0, "routing": "ecmp"},
         nodes=9, qps=1, lanes=1, seed=0)
def test_a_flows_connections_split_its_bytes_equally_over_the_cables_they_hash_to(spec, nodes, qps, lanes, seed):
    """Above the leaves each tier's shares of a flow sum to the whole, each a whole number of connections' worth;
    its first connection keeps the pair's route; adaptive routing and single cables leave a flow one connection."""
    topo = topology(nodes, {**spec, "nics_per_leaf": min(spec["nics_per_leaf"], 8)}, qps)
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 8, 40)
    dst = rng.integers(1, nodes, 40) * 8 + rng.integers(0, 8, 40)
    connections = topo.connections(np.full(40, lanes))
    fabric = topo.fabric
    if spec["routing"] == "adaptive" or (fabric.spine_paths <= 1 and fabric.core_paths <= 1):
        assert (connections == 1).all()
    else:
        assert (connections == lanes * qps).all()
        assert (topo.connections(np.full(40, lanes), True) == 2 * qps).all()  # a peer's part: 2 channels
    ptr, link, share = topo.connection_loads(src, dst, connections)
    routes, _, _ = topo.routes(src, dst)
    first = topo.inner_links_from  # the leaves' uplinks come first
    for f in range(40):
        links, shares = link[ptr[f]:ptr[f + 1]], share[ptr[f]:ptr[f + 1]]
        own = routes[f][routes[f] >= first]
        assert set(own.tolist()) <= set(links.tolist())
        assert np.allclose(shares * connections[f], np.round(shares * connections[f]))
        if len(own):
            up = links < first + fabric.leaves * fabric.spine_paths
            assert shares[up].sum() == pytest.approx(1.0)
            assert shares.sum() == pytest.approx(len(own))  # every tier up and down carries the whole flow
        else:
            assert len(links) == 0


@pytest.mark.parametrize("qps", [0, 129, "four", 2.5])
def test_queue_pairs_a_connection_outside_nccls_range_are_refused_naming_the_field(qps):
    with pytest.raises(ValueError, match="qps_per_connection"):
        topology(2, {"tiers": 2, "nics_per_leaf": 8, "spines": 2}, qps)


def test_a_dual_tor_nics_connections_hash_over_both_its_ports_so_a_send_reaches_the_whole_nic():
    """A send between two DGX H100 nodes on a dual-ToR fabric: its two connections (NCCL_NCHANNELS_PER_NET_PEER)
    hashed over the NIC's two 200G ports move 45.9 GB/s, what one NIC moves on a single-port fabric; one hash for
    the pair gave half (23.0 GB/s), whatever the routing above the leaves."""
    def algbw(spec: dict) -> float:
        dc = DatacenterConfig.model_validate({
            "from": "dgx-h100", "cluster": {"num_nodes": 4},
            "network": {"scale_out": {"switch": {"from": "tomahawk-5"}, "topology": spec}}})
        size = 256 * 2**20
        return size / (time_collective(dc, CollType.SendRecv, (0, 8), size, "auto", None, "auto").time_us * 1e-6)
    fabric = {"tiers": 2, "rail_optimized": True, "nics_per_leaf": 16, "spines": 8}
    single = algbw(fabric)
    for routing in ("ecmp", "adaptive"):
        assert algbw({**fabric, "dual_tor": True, "routing": routing}) == pytest.approx(single, rel=1e-9)


def test_static_routing_takes_a_pairs_every_connection_on_one_path_whatever_its_queue_pairs():
    """InfiniBand without adaptive routing forwards by destination: a ring's flows keep one cable each (85.7 GB/s,
    as ECMP gave when it hashed a pair once), where Ethernet's ECMP spreads their connections (170.5)."""
    static = ring_busbw(8, "static")
    assert static == pytest.approx(ring_busbw(8, "static", qps=8), rel=1e-12)
    assert static < ring_busbw(8, "ecmp") < ring_busbw(8, "adaptive")
    assert topology(4, {"tiers": 2, "nics_per_leaf": 8, "spines": 8, "routing": "static"}, 8).connections(
        np.array([4]))[0] == 1


@pytest.mark.parametrize(("written", "value"), [("2:1", 2.0), ("128:120", 128 / 120), (" 7 : 1 ", 7.0), (1.5, 1.5)])
def test_an_oversubscription_is_read_as_vendors_write_it(written, value):
    assert FabricSpec.model_validate({"tiers": 2, "nics_per_leaf": 8, "spines": 4,
                                      "oversubscription": written}).oversubscription == pytest.approx(value)


@pytest.mark.parametrize(("written", "problem"), [("1:7", "at least 1"), ("2:0", "no uplink"), ("x:1", "number")])
def test_an_oversubscription_below_one_or_without_uplinks_is_refused_naming_the_field(written, problem):
    with pytest.raises(ValueError, match=rf"oversubscription[\s\S]*{problem}"):
        FabricSpec.model_validate({"tiers": 2, "nics_per_leaf": 8, "spines": 4, "oversubscription": written})


def test_alibaba_hpn_leaves_keep_all_120_half_rate_uplinks():
    f = Topology.from_datacenter(DatacenterConfig.model_validate({
        "from": "dgx-h100", "cluster": {"num_nodes": 16},
        "network": {"scale_out": {"switch": {"from": "tomahawk-5"}, "topology": "alibaba-hpn"}}})).fabric
    assert (f.leaf_uplinks, f.spine_reach) == (120, 60)


@settings(max_examples=20, deadline=None)
@given(batch=st.integers(1, 40), seed=st.integers(0, 2**31))
def test_connections_routed_in_batches_load_the_links_as_routed_at_once(batch, seed):
    """Topology.connection_loads routes at most CONNECTION_BATCH connections at a time (whole flows, at least one
    a batch): any batch size gives the same links and shares."""
    import simulon.network.topology as topology_module
    topo = topology(8, {"tiers": 3, "nics_per_leaf": 8, "spines": 4, "leaves_per_pod": 2, "cores": 4}, 3)
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, 64, 60), rng.integers(0, 64, 60)
    connections = rng.integers(1, 9, 60)
    whole = topo.connection_loads(src, dst, connections)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(topology_module, "CONNECTION_BATCH", batch)
        batched = topo.connection_loads(src, dst, connections)
    for a, b in zip(whole, batched, strict=True):
        assert np.array_equal(a, b)
