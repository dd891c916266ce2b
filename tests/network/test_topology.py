"""Topologies built from the datacenter block: switch and link counts, routes, ECMP, bisection, fold weights."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.config import DatacenterConfig
from simulon.config.loading import ConfigError, parse_scenario
from simulon.network.calibration import LinkModel
from simulon.network.ecmp import ecmp_choice
from simulon.network.summary import TopologySummary
from simulon.network.topology import (
    FROM_SCALE_OUT_SWITCH,
    FROM_SCALE_UP_SWITCH,
    TO_SCALE_OUT_SWITCH,
    TO_SCALE_UP_SWITCH,
    Topology,
    packed_hops,
)

GB = 1e9


def datacenter(nodes: int = 4, gpus: int = 8, topology: dict | str = "single-switch", gpus_per_nic: int = 1,
               scale_up: dict | None = None, nic: str = "400Gbps") -> DatacenterConfig:
    return DatacenterConfig.model_validate({
        "cluster": {"num_nodes": nodes},
        "node": {"gpus_per_node": gpus, "gpus_per_nic": gpus_per_nic, "gpu": "H100"},
        "network": {"scale_up": {"switch": {"port_speed": "450GBps", "latency": "0.25us"}, **(scale_up or {})},
                    "scale_out": {"nic": {"speed": nic, "latency": "1us"}, "switch": {"latency": "0.5us"},
                                  "topology": topology}},
    })


def build(dc: DatacenterConfig) -> Topology:
    return Topology.from_datacenter(dc, model=LinkModel.ideal())


def hops(topo: Topology, src, dst, rep=None) -> list[int]:
    links, _, _ = topo.routes(np.atleast_1d(src), np.atleast_1d(dst), rep)
    return [int(x) for x in links[0] if x >= 0]


def kinds(topo: Topology, src: int, dst: int) -> list[str]:
    return [topo.link_name(link).split("[")[0] for link in hops(topo, src, dst)]


TWO_TIER = {"tiers": 2, "rail_optimized": True, "nics_per_leaf": 2, "spines": 4}


def test_inside_a_node_a_flow_crosses_its_nvswitch_ports_only():
    topo = build(datacenter())
    assert kinds(topo, 0, 5) == ["nvlink_up", "nvlink_down"]
    _, latency, out = topo.routes(np.array([0]), np.array([5]))
    assert latency[0] == pytest.approx(0.25e-6) and not out[0]


def test_single_switch_fabric_is_nic_to_nic():
    topo = build(datacenter())
    assert kinds(topo, 0, 8) == ["nic_up", "nic_down"]
    _, latency, out = topo.routes(np.array([0]), np.array([8]))
    assert latency[0] == pytest.approx(2e-6 + 0.5e-6) and out[0]  # two NICs and one switch


def test_rail_optimized_two_tier_stays_on_the_rail_leaf_and_crosses_spines_between_rails():
    topo = build(datacenter(nodes=4, topology=TWO_TIER))
    assert kinds(topo, 0, 8) == ["nic_up", "nic_down"]            # rail 0 of nodes 0 and 1: one leaf
    assert kinds(topo, 0, 9) == ["nic_up", "leaf_up", "spine_down", "nic_down"]  # rail 0 to rail 1
    assert kinds(topo, 0, 16) == ["nic_up", "leaf_up", "spine_down", "nic_down"]  # rail 0, next segment
    _, latency, _ = topo.routes(np.array([0]), np.array([9]))
    assert latency[0] == pytest.approx(2e-6 + 3 * 0.5e-6)        # leaf, spine, leaf


def test_spine_leaf_puts_a_node_under_one_leaf():
    topo = build(datacenter(nodes=4, topology={**TWO_TIER, "rail_optimized": False, "nics_per_leaf": 16}))
    assert kinds(topo, 0, 9) == ["nic_up", "nic_down"]       # nodes 0 and 1 share a leaf
    assert kinds(topo, 0, 16) == ["nic_up", "leaf_up", "spine_down", "nic_down"]


def test_three_tier_goes_through_a_core_between_pods_only():
    spec = {"tiers": 3, "rail_optimized": True, "nics_per_leaf": 2, "spines": 2, "leaves_per_pod": 8, "cores": 4}
    topo = build(datacenter(nodes=8, topology=spec))
    assert kinds(topo, 0, 9) == ["nic_up", "leaf_up", "spine_down", "nic_down"]  # same pod
    assert kinds(topo, 0, 32) == ["nic_up", "leaf_up", "spine_up", "core_down", "spine_down", "nic_down"]
    counts = TopologySummary.of(topo)
    assert [(t.name, t.switches) for t in counts.tiers] == [("nvswitch", 8), ("leaf", 32), ("spine", 8),
                                                            ("core", 4)]


def test_dual_tor_dual_plane_splits_each_nic_over_two_leaves_of_two_planes():
    spec = {**TWO_TIER, "dual_tor": True, "planes": 2}
    topo = build(datacenter(nodes=4, topology=spec))
    summary = TopologySummary.of(topo)
    assert summary.tiers[1].switches == 2 * 16 and summary.tiers[1].links == 2 * 32
    assert summary.tiers[1].link_rate == pytest.approx(25 * GB)   # two 200G ports of a 400G NIC
    assert summary.tiers[2].switches == 2 * 4                     # each plane its own spines
    # both ports of every NIC are used across flows, and a spine never joins the two planes
    ports = topo.fabric.port(np.zeros(64, dtype=int), np.zeros(64, dtype=int), np.arange(64) + 8)
    assert set(ports.tolist()) == {0, 1}
    links, _, _ = topo.routes(np.zeros(64, dtype=int), 9 + 8 * (np.arange(64) % 3))
    for row in links:
        names = [topo.link_name(int(x)) for x in row if x >= 0]
        planes = {topo.fabric.plane_of_leaf[topo.fabric.leaf_of_port[int(x) - topo.fabric.up(0)]]
                  for x in row if topo.fabric.up(0) <= x < topo.fabric.down(0)}
        assert len(planes) == 1 and names[0].startswith("nic_up")


def test_nvl72_domain_spans_nodes_over_nvlink():
    dc = DatacenterConfig.model_validate({"from": "gb200-nvl72", "cluster": {"num_nodes": 36}})
    topo = build(dc)
    assert kinds(topo, 0, 71) == ["nvlink_up", "nvlink_down"]     # tray 0 to tray 17, same rack
    assert kinds(topo, 0, 72) == ["nic_up", "nic_down"]           # the next rack
    assert TopologySummary.of(topo).tiers[0].switches == 2


@pytest.mark.parametrize(("trays", "per_rack"), [(2, 18), (18, 18), (20, 10), (32, 16), (64, 16), (72, 18)])
def test_a_job_fills_each_nvl72_rack_it_uses_with_as_many_trays(trays, per_rack):
    # SLURM's --segment as Megatron-Bridge's launcher sets it: the most trays a rack holds that divide the job's
    # (a job of a rack or less sits in one rack, whose 72 GPUs are then one domain)
    dc = DatacenterConfig.model_validate({"from": "gb200-nvl72", "cluster": {"num_nodes": trays}})
    assert dc.domain_gpus == 4 * per_rack
    topo = build(dc)
    if trays > per_rack:
        assert kinds(topo, 0, 4 * per_rack - 1) == ["nvlink_up", "nvlink_down"]  # the rack's last tray of the job
        assert kinds(topo, 0, 4 * per_rack) == ["nic_up", "nic_down"]              # the next rack's first


def test_pcie_nodes_send_through_the_gpus_pcie_link_even_to_the_nic():
    topo = build(datacenter(nodes=2, gpus=4, scale_up={"kind": "pcie"}))
    assert kinds(topo, 0, 1) == ["pcie_up", "pcie_down"]
    assert kinds(topo, 0, 4) == ["pcie_up", "nic_up", "nic_down", "pcie_down"]
    assert topo.reduces_in_switch == (False, False)


def test_in_switch_legs_use_one_port_each_way():
    topo = build(datacenter())
    assert kinds(topo, 3, TO_SCALE_UP_SWITCH) == ["nvlink_up"]
    assert kinds(topo, 3, FROM_SCALE_UP_SWITCH) == ["nvlink_down"]
    assert kinds(topo, 3, TO_SCALE_OUT_SWITCH) == ["nic_up"]
    assert kinds(topo, 3, FROM_SCALE_OUT_SWITCH) == ["nic_down"]


def test_shared_nics_and_bisection():
    shared = build(datacenter(nodes=2, gpus=8, gpus_per_nic=2))
    assert hops(shared, 0, 8)[0] == hops(shared, 1, 9)[0]   # GPUs 0 and 1 share NIC 0
    assert TopologySummary.of(shared).scale_out_bisection == pytest.approx(8 * 50 * GB / 2)
    oversubscribed = build(datacenter(nodes=4, topology={**TWO_TIER, "oversubscription": 4.0}))
    summary = TopologySummary.of(oversubscribed)
    assert summary.tiers[2].link_rate == pytest.approx(2 * 50 * GB / 4)   # 2 NICs down, 4:1: one uplink port
    assert summary.scale_out_bisection == pytest.approx(32 * 50 * GB / 4 / 2)


@settings(max_examples=30, deadline=None)
@given(src=st.integers(0, 63), dst=st.integers(0, 63), spines=st.integers(1, 16))
def test_ecmp_is_deterministic_and_within_range(src, dst, spines):
    a = ecmp_choice(spines, np.array([src]), np.array([dst]))
    b = ecmp_choice(spines, np.array([src]), np.array([dst]))
    assert a.tolist() == b.tolist() and 0 <= int(a[0]) < spines


def test_ecmp_spreads_pairs_over_the_spines():
    chosen = ecmp_choice(8, np.arange(4096), np.arange(4096) + 1)
    counts = np.bincount(chosen, minlength=8)
    assert counts.min() > 0.8 * 512 and counts.max() < 1.2 * 512


@pytest.mark.parametrize("spec", [TWO_TIER, {"tiers": 3, "rail_optimized": True, "nics_per_leaf": 2, "spines": 2,
                                              "leaves_per_pod": 8, "cores": 4, "pod_oversubscription": 2.0}])
def test_adaptive_routing_gives_each_leaf_one_path_of_all_its_uplinks_and_keeps_the_physical_fabric(spec):
    hashed, adaptive = (build(datacenter(nodes=8, topology={**spec, "routing": r})) for r in ("ecmp", "adaptive"))
    summaries = (TopologySummary.of(hashed), TopologySummary.of(adaptive))
    assert (summaries[0].routing, summaries[1].routing) == ("ecmp", "adaptive")
    assert replace(summaries[0], routing="adaptive") == summaries[1]  # the same switches, links and bisection
    fabric = adaptive.fabric
    links, _, _ = adaptive.routes(np.array([0, 8, 0]), np.array([9, 1, 25]))  # from rail 0 of nodes 0, 1: leaf 0
    leaf_up = {int(x) for x in links.ravel() if x >= 0 and adaptive.link_name(int(x)).startswith("leaf_up")}
    assert len(leaf_up) == 1 and adaptive.capacity[leaf_up.pop()] == pytest.approx(2 * 50 * GB)  # 2 NICs' worth

    def count(topo, kind):
        f = topo.fabric
        return sum(f.link_kind(link)[0] == kind for link in range(f.base, f.base + f.num_links))

    ports = spec["nics_per_leaf"]  # non-blocking: as many uplink ports as NICs, each reaching one spine
    assert count(adaptive, "leaf_up") == fabric.leaves
    assert count(hashed, "leaf_up") == fabric.leaves * min(spec["spines"], ports)
    if "cores" in spec:
        assert count(adaptive, "spine_up") == fabric.pods and count(hashed, "spine_up") == fabric.spines * 4


def test_adaptive_routing_spreads_what_ecmp_collides():
    from simulon.engine.fair_share import max_min_rates

    times = {}
    for routing in ("ecmp", "adaptive"):
        topo = build(datacenter(nodes=8, topology={**TWO_TIER, "spines": 8, "nics_per_leaf": 8, "routing": routing}))
        src = np.arange(0, 64, 8)          # rail 0 of every node
        dst = (src + 64 // 8 + 1) % 64     # to rail 1 of the next node: all cross the spines from leaf 0
        links, _, _ = topo.routes(src, dst)
        rates = max_min_rates(links, topo.capacity, np.full(len(src), np.inf))
        times[routing] = float((1e9 / rates).max())
    assert times["adaptive"] < times["ecmp"]  # eight flows hashed onto eight spines: some share one
    assert times["adaptive"] == pytest.approx(1e9 / (50 * GB))  # each flow at its NIC's speed: no collision


def test_fold_weights_count_the_class_on_shared_nics():
    topo = build(datacenter(nodes=2, gpus=4, gpus_per_nic=2))
    nic = topo.fabric.up(0)
    # GPUs 2, 3 (NIC 1) fold onto 0, 1 (NIC 0): NIC 0 carries what NIC 1 carries, weight 1
    weights = topo.fold_weights(np.array([0, 1, 0, 1, 4, 5, 4, 5]))
    assert weights[nic] == pytest.approx(1.0)
    # GPU 1 folds onto GPU 0 on the same NIC: each simulated flow there stands for two
    weights = topo.fold_weights(np.array([0, 0, 2, 2, 4, 4, 6, 6]))
    assert weights[nic] == pytest.approx(2.0) and weights[0] == 1.0


def test_an_incomplete_fabric_is_a_located_error():
    data = {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 2},
                           "network": {"scale_out": {"topology": {"tiers": 2}}}}}
    with pytest.raises(ConfigError, match=r"datacenter\.network\.scale_out\.topology\.nics_per_leaf: required"):
        parse_scenario(data, "s.yaml")
    data["datacenter"]["network"]["scale_out"]["topology"] = {"tiers": 1, "planes": 2}
    with pytest.raises(ConfigError, match=r"topology\.planes: two planes need dual_tor"):
        parse_scenario(data, "s.yaml")
    data["datacenter"]["network"] = {"scale_up": {"domain_gpus": 12}}
    with pytest.raises(ConfigError, match="domain_gpus: 12 must be a multiple of gpus_per_node"):
        parse_scenario(data, "s.yaml")


@pytest.mark.parametrize("name", ["spectrum-x", "alibaba-hpn", "dcn-plus", "spine-leaf", "rail-optimized-fat-tree",
                                  "rail-optimized-3-tier", "single-switch"])
def test_every_shipped_topology_builds_and_routes(name):
    topo = build(datacenter(nodes=16, topology=name))
    links, latency, _ = topo.routes(np.arange(128), (np.arange(128) * 37 + 11) % 128)
    assert (links < topo.num_links).all() and (latency > 0).all()
    assert ((links >= 0).sum(axis=1) >= 2).all()


def test_in_a_mesh_node_each_ordered_pair_of_gpus_has_its_own_link():
    topo = build(datacenter(nodes=2, gpus=8, scale_up={"kind": "mesh"}))
    pairs = [(s, d) for node in (0, 8) for s in range(node, node + 8) for d in range(node, node + 8) if s != d]
    links = [hops(topo, s, d) for s, d in pairs]
    assert all(len(path) == 1 for path in links)
    assert sorted(path[0] for path in links) == list(range(2 * 8 * 7))    # one link per ordered pair, no gaps
    assert topo.line_rate[hops(topo, 2, 5)[0]] == pytest.approx(450 * GB / 7)   # the port split over 7 peers
    assert topo.link_name(hops(topo, 2, 5)[0]) == "mesh[gpu 2 -> gpu 5]"
    assert kinds(topo, 3, 11) == ["nic_up", "nic_down"]
    summary = TopologySummary.of(topo)
    assert (summary.scale_up, summary.tiers[0].switches, summary.tiers[0].links) == ("mesh", 0, 2 * 28)
    assert summary.scale_up_bisection == pytest.approx(16 * 450 * GB / 7)   # 4 x 4 links across the cut


def test_a_mesh_spanning_nodes_is_a_located_error():
    with pytest.raises(ValueError, match="domain_gpus"):
        datacenter(nodes=2, gpus=8, scale_up={"kind": "mesh", "domain_gpus": 16})


def test_one_and_two_tier_fabrics_of_nvswitch_nodes_fold_and_others_do_not():
    spine_leaf = {"tiers": 2, "nics_per_leaf": 32, "spines": 4}
    rails = {"tiers": 2, "rail_optimized": True, "nics_per_leaf": 4, "spines": 4, "oversubscription": 2.0}
    assert build(datacenter(topology="single-switch")).foldable
    assert build(datacenter(nodes=8, gpus=8, topology=spine_leaf)).foldable
    assert build(datacenter(nodes=4, gpus=8, topology=rails)).foldable
    assert build(datacenter(nodes=8, gpus=8, topology="rail-optimized-3-tier")).foldable  # pods of whole rails
    not_rails = build(datacenter(nodes=8, gpus=8, topology={"from": "rail-optimized-3-tier", "rail_optimized": False}))
    assert not_rails.foldable and not_rails.fold_axes() == {"tp"}  # data parallelism unfolded there
    assert not build(datacenter(nodes=8, gpus=8, topology="alibaba-hpn")).foldable
    assert not build(datacenter(nodes=8, gpus=8, topology=spine_leaf, scale_up={"kind": "pcie"})).foldable
    assert build(datacenter(nodes=4, gpus=8, topology=spine_leaf, scale_up={"kind": "pcie"})).foldable  # one leaf


def test_metas_llama3_fabric_keeps_full_bisection_in_a_pod_and_one_seventh_above_it():
    topo = build(datacenter(nodes=2 * 192 * 2, topology="meta-llama3-roce"))   # two pods of 192 racks of 16 GPUs
    assert kinds(topo, 0, 15) == ["nic_up", "nic_down"] and len(kinds(topo, 0, 16)) == 4  # a rack: 16 GPUs, one ToR
    inside, across = kinds(topo, 0, 3000), kinds(topo, 0, 3072 + 5)
    assert inside == ["nic_up", "leaf_up", "spine_down", "nic_down"]
    assert across == ["nic_up", "leaf_up", "spine_up", "core_down", "spine_down", "nic_down"]
    rate = {kind: topo.line_rate[hops(topo, 0, 3072 + 5)[i]] for i, kind in enumerate(across)}
    # a ToR's 16 uplinks carry its 16 NICs; a cluster switch's 27 uplink cables (192 ports / 7 in whole ports of the
    # NIC's speed, round robin over the 16 aggregation switches) carry one port each: 1:7.1
    assert 16 * rate["leaf_up"] == pytest.approx(16 * rate["nic_up"])
    assert topo.fabric.spine_uplinks == topo.fabric.core_paths == 27 and topo.fabric.core_reach == 16
    assert rate["spine_up"] == pytest.approx(rate["nic_up"])


def test_under_ecmp_spines_beyond_a_leafs_uplink_ports_add_no_paths_and_thin_none():
    """8 NICs a leaf, non-blocking, under 16 spines: 8 uplinks of one port each, as under 8 spines (the uplink
    bandwidth split over 16 spines made links of half a port, and a single flow could not reach its NIC's speed)."""
    wide, eight = (build(datacenter(nodes=8, topology={"tiers": 2, "rail_optimized": False, "nics_per_leaf": 8,
                                                      "spines": spines})) for spines in (16, 8))
    assert wide.fabric.spine_paths == eight.fabric.spine_paths == 8
    up = wide.fabric.links_of("leaf_up")
    assert wide.fabric.capacity[up] == pytest.approx(np.full(8 * 8, 50 * GB))
    assert TopologySummary.of(wide).scale_out_bisection == TopologySummary.of(eight).scale_out_bisection


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(-1, 5), min_size=3, max_size=3), min_size=0, max_size=6))
def test_packed_hops_moves_each_rows_links_to_its_front_in_route_order(columns):
    """Columns are hops in route order, rows flows; -1 (NO_LINK) is a hop a flow does not take."""
    arrays = [np.array(column, dtype=np.int64) for column in columns]
    packed = packed_hops(arrays, 3)
    rows = [[column[row] for column in columns if column[row] >= 0] for row in range(3)]
    width = max(1, *(len(row) for row in rows))
    assert packed.shape == (3, width)
    assert packed.tolist() == [row + [-1] * (width - len(row)) for row in rows]


@pytest.mark.parametrize("name", ["dgx-h100-3-tier", "sailor-pcie", "gb200-nvl72"])
def test_a_flow_between_nodes_takes_its_fabric_route_between_its_gpu_ports(name):
    """Every inter-node flow's route is its GPU's up link, the fabric's hops from its NIC to the peer's NIC, and
    the peer's down link: the hops the routes of the fabric give, none dropped or moved."""
    dc = {"dgx-h100-3-tier": {"from": "dgx-h100", "cluster": {"num_nodes": 64},
                              "network": {"scale_out": {"topology": {"from": "rail-optimized-3-tier"}}}},
          "sailor-pcie": {"from": "sailor-mit-rtx3090", "cluster": {"num_nodes": 4}},
          "gb200-nvl72": {"from": "gb200-nvl72", "cluster": {"num_nodes": 72}}}[name]
    topo = Topology.from_datacenter(parse_scenario({"datacenter": dc}, name).datacenter)
    rng = np.random.default_rng(7)
    src = rng.integers(0, topo.num_gpus, 400)
    dst = rng.integers(0, topo.num_gpus, 400)
    links, _, scale_out = topo.routes(src, dst)
    fabric = topo.fabric
    out = scale_out & (src // topo.domain_gpus != dst // topo.domain_gpus)
    assert out.sum() > 100
    hops = fabric.routes(fabric.port(src[out] // topo.gpus_per_nic, src[out], dst[out]),
                         fabric.port(dst[out] // topo.gpus_per_nic, src[out], dst[out]), src[out], dst[out])
    for route, fabric_hops in zip(links[out].tolist(), hops.tolist(), strict=True):
        taken = [hop for hop in route if hop >= 0]
        assert [hop for hop in fabric_hops if hop >= 0] == [hop for hop in taken if hop >= fabric.base]


@pytest.mark.parametrize("gpus", [2, 3, 5, 8])
def test_a_domain_of_an_odd_gpu_count_is_cut_into_its_smaller_and_larger_half(gpus):
    """A switched domain of 3 GPUs was credited 1.5 GPUs' ports across its cut (675 GB/s of NVLink 4), where the
    smaller half, one GPU, sends and receives 450; a mesh of 3 has 1 x 2 links across, not 1 x 1."""
    half = gpus // 2
    switched = TopologySummary.of(build(datacenter(nodes=2, gpus=gpus)))
    assert switched.scale_up_bisection == pytest.approx(half * 450 * GB)
    mesh = TopologySummary.of(build(datacenter(nodes=2, gpus=gpus, scale_up={"kind": "mesh"})))
    assert mesh.scale_up_bisection == pytest.approx(half * (gpus - half) * 450 * GB / (gpus - 1))
