"""algorithm: auto, the way NCCL's tuning model chooses algorithm, protocol and channels."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from simulon.collective import flow_set
from simulon.collective.algorithms import CATALOG, Unrunnable
from simulon.collective.nccl import constants, p2p_channels_per_peer, p2p_protocol
from simulon.collective.tuner import CollectivePlan
from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario
from simulon.network.topology import Topology

AR, AG, RS, A2A = CollType.AllReduce, CollType.AllGather, CollType.ReduceScatter, CollType.AllToAll


def plan(template: str = "dgx-h100", nodes: int = 1, algorithm: str = "auto", protocol: str = "auto",
         channels: int | None = None, sharp: bool = False, nccl: dict | None = None) -> CollectivePlan:
    data = {"from": template, "cluster": {"num_nodes": nodes}}
    if sharp:
        data["network"] = {"scale_out": {"switch": {"from": "quantum-2-qm9700", "in_network_reduction": True}}}
    if nccl is not None:
        data["network"] = {**data.get("network", {}), "nccl": nccl}
    return CollectivePlan(Topology.from_datacenter(DatacenterConfig.model_validate(data)), algorithm, protocol,
                          channels)


def test_one_h100_node_uses_a_low_latency_ring_for_small_messages_and_nvls_for_large():
    p = plan()
    small, large = p.choose(AR, range(8), 4096), p.choose(AR, range(8), 2**30)
    assert (small.algorithm, small.protocol) == ("ring", "ll")
    assert (large.algorithm, large.protocol) == ("nvls", "simple")


def test_without_an_nvls_switch_large_all_reduce_is_a_simple_ring():
    large = plan("dgx-a100").choose(AR, range(8), 2**30)
    assert (large.algorithm, large.protocol) == ("ring", "simple")


def test_channels_drop_for_small_messages_as_nccl_does_and_nvls_fills_its_own_from_a_cell_each():
    p = plan(algorithm="ring")
    assert p.choose(AR, range(8), 1024).channels == 1
    assert p.choose(AR, range(8), 2**30).channels == 32
    counts = [p.choose(AR, range(8), 2.0**k).channels for k in range(10, 31)]
    assert counts == sorted(counts)
    # NVLS_NCHANNELS_SM90 (enqueue.cc skips its thread tuning) once each channel gets a 32 KiB cell of traffic
    nvls = plan(algorithm="nvls")
    assert {nvls.choose(AR, range(8), 2.0**k).channels for k in range(18, 31)} == {16}
    assert nvls.choose(AR, range(8), 1024).channels == 1


def test_enabled_algorithms_follow_the_group_and_the_hardware():
    h100 = plan(nodes=4)
    one_per_node = h100.shape(range(0, 32, 8))
    full = h100.shape(range(32))
    assert h100._enabled(AG, one_per_node) == ["ring", "pat"]   # PAT: one GPU per node only
    assert h100._enabled(AG, full) == ["ring"]
    assert h100._enabled(AR, full) == ["ring", "tree", "nvls_tree"]
    assert "nvls" in h100._enabled(AR, h100.shape(range(8)))
    assert "collnet_direct" in plan(nodes=4, sharp=True)._enabled(AR, full)
    assert "nvls_tree" not in plan("dgx-a100", nodes=4)._enabled(AR, full)


def test_nvls_gathers_and_scatters_for_at_most_32_ranks_of_an_nvl72_rack_but_reduces_for_all():
    rack = plan("gb200-nvl72", nodes=18)
    assert "nvls" in rack._enabled(AG, rack.shape(range(32)))
    assert "nvls" not in rack._enabled(RS, rack.shape(range(36)))
    assert "nvls" in rack._enabled(AR, rack.shape(range(72)))


def test_a_fixed_nvls_gather_or_scatter_over_more_than_32_ranks_is_refused_as_nccl_skips_it():
    # src/enqueue.cc skips NVLS for all-gather and reduce-scatter over more than NCCL_MAX_NVLS_ARITY local ranks
    fixed = plan("gb200-nvl72", nodes=18, algorithm="nvls")
    for ctype in (AG, RS):
        with pytest.raises(Unrunnable, match=r"at most 32 GPUs .* this group has 36"):
            fixed.choose(ctype, range(36), 2**20)
        assert fixed.choose(ctype, range(32), 2**20).algorithm == "nvls"
    assert fixed.choose(AR, range(72), 2**20).algorithm == "nvls"


def test_nvls_needs_more_than_two_gpus_of_a_communicator_in_an_nvlink_domain():
    """ncclNvlsInit sets NVLS up only where the communicator has more than two GPUs in the domain."""
    p = plan(nodes=2)
    assert "nvls" not in p._enabled(AR, p.shape(range(2)))
    assert "nvls" in p._enabled(AR, p.shape(range(3)))
    assert "nvls_tree" not in p._enabled(AR, p.shape((0, 1, 8, 9)))
    assert "nvls_tree" in p._enabled(AR, p.shape((0, 1, 2, 8, 9, 10)))


@pytest.mark.parametrize(("template", "nodes", "ranks", "algorithm"), [
    ("dgx-h100", 1, 4, "ring"), ("dgx-h100", 1, 8, "nvls"), ("dgx-b200", 1, 4, "ring"), ("dgx-b200", 1, 8, "nvls"),
    ("gb200-nvl72", 18, 4, "ring"), ("gb200-nvl72", 18, 16, "nvls"), ("gb200-nvl72", 18, 72, "nvls")])
def test_a_large_all_reduce_takes_nvls_from_8_ranks_of_a_domain_and_a_ring_below(template, nodes, ranks, algorithm):
    """NCCL's NVLS graph has a channel per head, and a head's port carries its channel twice: at 4 ranks the
    search speeds leave NVLS short of a ring; from 8 its halved traffic wins."""
    assert plan(template, nodes).choose(AR, range(ranks), 2**30).algorithm == algorithm


def test_nvls_bandwidth_is_nccl_on_its_graph_in_the_ring_units():
    """H100 (NCCL's port: 18 NVLinks x 20.6 GB/s = 370.8): 8 heads at 40 GB/s (9 x 40 fits, 9 x 50 not);
    all-reduce (7 x 40 x 0.85 x 2 x 8/14), reduce-scatter (7 x 40 x 0.85 x 7/8 x 8/7), scaled to the ring's
    port bandwidth. A ring beats NVLS reduce-scatter inside one node."""
    p = plan()
    shape = p.shape(range(8))
    intra = p._bandwidths(shape)[0]
    scale = intra / (450 * 0.824)
    assert p._bus_bandwidth(AR, shape, "nvls", "simple") == pytest.approx(7 * 40 * 0.85 * 2 * 8 / 14 * scale)
    assert p._bus_bandwidth(RS, shape, "nvls", "simple") == pytest.approx(7 * 40 * 0.85 * scale)
    assert p.choose(RS, range(8), 2**30).algorithm == "ring"


@given(ranks=st.integers(3, 8), port_GBps=st.floats(50, 2000), more=st.floats(1, 8))
@settings(max_examples=25, deadline=None)
def test_nccl_nvls_bandwidth_never_falls_with_a_faster_port(ranks, port_GBps, more):
    def nvls(speed: float) -> float:
        dc = DatacenterConfig.model_validate(
            {"from": "dgx-h100", "cluster": {"num_nodes": 1},
             "network": {"scale_up": {"switch": {"port_speed": f"{speed}GBps"}}}})
        p = CollectivePlan(Topology.from_datacenter(dc), "auto")
        return p._bus_bandwidth(AR, p.shape(range(ranks)), "nvls", "simple")

    assert nvls(port_GBps * more) >= nvls(port_GBps) * (1 - 1e-9)


def test_all_to_all_runs_nccl_point_to_point_kernels_which_are_simple_only():
    p = plan()
    assert {p.choose(A2A, range(8), 2.0**k).protocol for k in range(10, 31, 4)} == {"simple"}


@pytest.mark.parametrize(("ranks", "peer_bytes", "channels"), [
    (72, 2**24, 1), (72, 2**25, 2), (72, 2**30, 32), (64, 2**26, 4), (36, 2**30, 32), (32, 2**26, 4),
    (18, 2**24, 1), (8, 2**20, 4), (8, 2**26, 4), (8, 2**27, 8), (8, 2**29, 32), (8, 2**30, 32), (2, 2**30, 32),
    (8, 2**15, 1)])
def test_a_peer_gets_the_point_to_point_channels_nccl_gives_it(ranks, peer_bytes, channels):
    # p2pnChannelsPerPeer 32 halved while x ranks > 32 to start with, parts of 64 KiB at least, doubled while
    # over 16 MiB up to all 32 (NCCL 2.24 on): 72 ranks start at 1 channel a peer, 8 at 4; XLA's permutes of a
    # whole message show the doublings from 32 MiB (72 ranks) and 128 MiB (8 ranks) up
    assert p2p_channels_per_peer(ranks, peer_bytes) == channels


@given(ranks=st.integers(2, 1024), peer_bytes=st.floats(1, 2**34), more=st.floats(1, 1024))
def test_a_peer_gets_a_power_of_two_of_the_channels_more_as_its_part_grows_fewer_as_ranks_grow(
        ranks, peer_bytes, more):
    count = p2p_channels_per_peer(ranks, peer_bytes)
    assert 1 <= count <= constants()["p2p_channels"] and count & (count - 1) == 0
    assert p2p_channels_per_peer(ranks, peer_bytes * more) >= count
    assert p2p_channels_per_peer(ranks + 1, peer_bytes) <= count


def test_an_all_to_all_inside_an_nvlink_domain_takes_nccls_channels_per_peer():
    rack = plan("gb200-nvl72", nodes=18)
    assert rack.choose(A2A, range(72), 72 * 2.0**24).channels == 1
    assert rack.choose(A2A, range(8), 8 * 2.0**30).channels == 32


def test_fixed_algorithm_protocol_and_channels_are_kept():
    choice = plan(nodes=2, algorithm="tree", protocol="ll128", channels=6).choose(AR, range(16), 2**20)
    assert (choice.algorithm, choice.protocol, choice.channels) == ("tree", "ll128", 6)
    ring = plan(algorithm="ring").choose(AR, range(8), 2**30)
    assert ring.algorithm == "ring" and ring.protocol == "simple"


@pytest.mark.parametrize(("algorithm", "protocol", "ctype", "nodes", "ranks", "sharp"), [
    ("nvls", "ll", AR, 1, range(8), False), ("nvls", "ll128", AR, 1, range(8), False),
    ("nvls_tree", "ll128", AR, 4, range(32), False), ("collnet_direct", "ll", AR, 4, range(32), True),
    ("pat", "ll", CollType.AllGather, 4, (0, 8, 16, 24), False)])
def test_a_protocol_the_fixed_algorithm_does_not_run_is_refused_not_timed(algorithm, protocol, ctype, nodes, ranks,
                                                                           sharp):
    """NCCL runs NVLS, NVLS-tree, CollNet and PAT with Simple only (their algorithms' protocols): LL on NVLS timed
    31.9 us at 1 KiB on a DGX H100, faster than anything NCCL can run there."""
    with pytest.raises(Unrunnable, match=rf"{algorithm} runs the simple protocol only, not {protocol}"):
        plan(nodes=nodes, algorithm=algorithm, protocol=protocol, sharp=sharp).choose(ctype, ranks, 2**20)


def test_point_to_point_calls_and_rings_keep_a_fixed_protocol():
    assert plan(algorithm="ring", protocol="ll").choose(AR, range(8), 2**20).protocol == "ll"
    assert plan(algorithm="p2p", protocol="ll").choose(A2A, range(8), 2**20).protocol == "ll"


def test_the_choice_is_a_pure_function_of_its_inputs():
    assert plan(nodes=4).choose(AR, range(32), 3 * 2**20) == plan(nodes=4).choose(AR, range(32), 3 * 2**20)


@pytest.mark.parametrize("kwargs,message", [
    ({"algorithm": "warp"}, "collective algorithm 'warp' is unknown"),
    ({"protocol": "ll256"}, "unknown protocol 'll256'"),
    ({"channels": 0}, "num_channels: must be at least 1, got 0"),
])
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plan(**kwargs)


def test_an_algorithm_that_does_not_do_the_collective_is_refused():
    with pytest.raises(ValueError, match="AllGather has no tree decomposition"):
        plan(algorithm="tree").choose(AG, range(8), 2**20)


def test_a_fixed_pat_is_refused_unless_the_group_has_one_gpu_per_node():
    p = plan(nodes=4, algorithm="pat")
    with pytest.raises(ValueError, match="pat needs a group with one GPU per node"):
        p.choose(AG, range(32), 2**20)
    assert p.choose(AG, range(0, 32, 8), 2**20).algorithm == "pat"


def test_auto_chooses_only_among_nccls_own_algorithms_and_tunes_each_variant_as_one_of_them():
    own = [a.name for a in CATALOG.values() if a.enabled is not None]
    assert own == ["ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat", "p2p"]
    assert {a.tuned_as for a in CATALOG.values()} <= set(own)


@pytest.mark.parametrize("fixed", ["auto", "ring", "tree", "nvls", "hierarchical", "pat", "p2p"])
def test_an_all_to_all_runs_as_send_receive_whatever_algorithm_collectives_are_fixed_to(fixed):
    p = plan(nodes=2, algorithm=fixed)
    assert p.choose(CollType.AllToAll, range(16), 2**20).algorithm == "p2p"
    assert p.choose(CollType.AllToAll, range(8), 2**20).algorithm == "p2p"


def test_pxn_relays_an_all_to_all_through_the_rail_aligned_peer_so_keeps_its_name():
    assert plan(nodes=2, algorithm="pxn").choose(CollType.AllToAll, range(16), 2**20).algorithm == "pxn"


def test_send_receive_is_no_collective_algorithm():
    with pytest.raises(ValueError, match="AllReduce has no p2p decomposition"):
        plan(nodes=2, algorithm="p2p").choose(CollType.AllReduce, range(16), 2**20)


def test_nvls_tree_gets_the_whole_network_share_on_two_nodes_and_half_beyond():
    # NCCL 2.27's model (the version of the measurements): min(bwIntra, bwInter), bwInter/2 beyond two nodes
    def bus(nodes: int) -> float:
        p = plan(nodes=nodes)
        return p._bus_bandwidth(AR, p.shape(range(8 * nodes)), "nvls_tree", "simple")

    # min(intra, inter) on two nodes (a DGX H100 pair is held by its NVLink side), inter / 2 from four on
    assert bus(8) == pytest.approx(bus(4)) and bus(4) < bus(2) <= 2 * bus(4) * (1 + 1e-12)


def test_auto_takes_nvls_tree_on_two_dgx_h100_nodes_and_the_ring_for_large_messages_on_four():
    # four B200 nodes by NCCL 2.27's default reach the ring's busbw from 1 GiB (362-382 GB/s, where NVLS-tree
    # forced on four H200 nodes reaches 310 against the ring's 365: validation/collectives.csv)
    assert plan(nodes=2).choose(AR, range(16), 2**30).algorithm == "nvls_tree"
    assert plan(nodes=4).choose(AR, range(32), 2**30).algorithm == "ring"
    assert plan(nodes=4).choose(AR, range(32), 2**20).algorithm != "ring"


SIZES = st.integers(min_value=6, max_value=33).map(lambda k: 2.0**k)
ENVIRONMENTS = st.fixed_dictionaries({}, optional={
    "algorithms": st.lists(st.sampled_from(["Ring", "TREE", "nvls", "NVLSTree", "collnet_direct"]), min_size=1),
    "protocols": st.lists(st.sampled_from(["Simple", "LL", "ll128"]), min_size=1)})


@settings(max_examples=40, deadline=None)
@given(environment=ENVIRONMENTS, size=SIZES, nodes=st.sampled_from([1, 2, 4]))
def test_auto_chooses_within_the_platforms_nccl_environment_and_no_faster_than_without_it(environment, size, nodes):
    free, held = plan(nodes=nodes, sharp=True), plan(nodes=nodes, sharp=True, nccl=environment)
    group = range(8 * nodes)
    shape, ports = held.shape(group), held.weakest_ports(group)
    choice = held.choose(AR, group, size)
    runnable = free._enabled(AR, shape)
    algorithms = [a.lower().replace("_", "").replace("nvlstree", "nvls_tree").replace("collnetdirect",
                  "collnet_direct") for a in environment.get("algorithms", runnable)]
    if set(algorithms) & set(runnable):  # an environment naming none that can run leaves NCCL its own
        assert choice.algorithm in algorithms
    protocols = [p.lower() for p in environment.get("protocols", ["simple", "ll", "ll128"])]
    if set(protocols) & set(free._protocols(choice.algorithm, AR)):
        assert choice.protocol in protocols
    # NCCL's model picks the fastest pair it may: a narrower choice never predicts a shorter time
    assert held._time(AR, shape, size, choice.algorithm, choice.protocol, ports) >= min(
        free._time(AR, shape, size, a, p, ports) for a in runnable for p in free._protocols(a, AR)) * (1 - 1e-12)


def test_a_platform_that_disables_nvls_and_low_latency_protocols_runs_its_collectives_on_rings_and_trees():
    # Google's A3 Mega environment: NCCL_ALGO=Ring,Tree, NCCL_PROTO=Simple (NCCL_NVLS_ENABLE=0)
    p = plan(nodes=2, nccl={"algorithms": "Ring,Tree", "protocols": "Simple"})
    for size in (2.0**10, 2.0**20, 2.0**30):
        choice = p.choose(AR, range(16), size)
        assert choice.algorithm in ("ring", "tree") and choice.protocol == "simple"
    assert plan(nodes=2).choose(AR, range(16), 2.0**30).algorithm == "nvls_tree"  # what it takes without
    assert p.choose(A2A, range(16), 2.0**20).algorithm == "p2p"  # NCCL_ALGO leaves send/receive alone


def test_a_scenario_that_fixes_an_algorithm_or_protocol_runs_it_whatever_the_platform_allows_auto():
    p = plan(nodes=2, algorithm="nvls_tree", protocol="simple", nccl={"algorithms": ["ring"], "protocols": ["ll"]})
    choice = p.choose(AR, range(16), 2.0**26)
    assert (choice.algorithm, choice.protocol) == ("nvls_tree", "simple")


@pytest.mark.parametrize("nccl,message", [
    ({"algorithms": ["Ring", "Butterfly"]},
     "dc.yaml: datacenter.network.nccl.algorithms: NCCL has no algorithm 'Butterfly'"),
    ({"protocols": "Simple,LL256"}, "dc.yaml: datacenter.network.nccl.protocols: NCCL has no protocol 'll256'"),
    ({"algorithms": []}, "dc.yaml: datacenter.network.nccl.algorithms: lists no algorithm"),
])
def test_a_platform_environment_naming_what_nccl_does_not_have_is_refused_naming_the_field(nccl, message):
    with pytest.raises(ConfigError, match=message):
        parse_scenario({"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}, "network": {"nccl": nccl}}},
                       "dc.yaml")


FIXED = sorted(a for a in CATALOG if a not in ("p2p", "deepep"))


@settings(max_examples=80, deadline=None)
@given(algorithm=st.sampled_from(FIXED), ctype=st.sampled_from([AR, AG, RS]),
       members=st.lists(st.integers(min_value=1, max_value=8), min_size=1, max_size=4))
def test_a_fixed_algorithm_either_runs_a_group_or_is_refused_saying_why(algorithm, ctype, members):
    # NCCL fails a communicator whose NCCL_ALGO cannot run it; simulon refuses it in words (collective.algorithm
    # in the scenario), never with an error from inside the decomposition
    p = plan(nodes=len(members), algorithm=algorithm, sharp=True)
    group = tuple(8 * node + j for node, count in enumerate(members) for j in range(count))
    assume(len(group) >= 2)
    try:
        choice = p.choose(ctype, group, 2.0**20)
    except Unrunnable as refused:
        assert str(refused)
        return
    flows = flow_set(ctype, group, 2.0**20, choice.channels, choice.algorithm, choice.protocol, p.shape(group))
    assert len(flows) > 0


@pytest.mark.parametrize(("nodes", "ceiling"), [(2, 39.0), (4, 20.4), (16, 20.4)])
def test_ll_is_capped_by_the_hosts_row_across_nodes_and_the_gpus_inside_one(nodes, ceiling):
    # src/graph/tuning.cc: llMaxBws[nNodes == 1 ? compCapIndex : (AMD host ? 1 : 0)][min(nNodes, 3) - 1], so an
    # H100 ring's LL across nodes is held at Intel's 39.0 / 20.4 GB/s, not Hopper's single-node 141
    p = plan(nodes=nodes)
    ranks = range(8 * nodes)
    ll_bus = p._bus_bandwidth(AR, p.shape(ranks), "ring", "ll") * 2 * (len(ranks) - 1) / len(ranks)
    assert ll_bus == pytest.approx(ceiling)
    one = plan(nodes=1)  # inside one node Hopper's own 141 GB/s holds it, well above any host's row
    inside = one._bus_bandwidth(AR, one.shape(range(8)), "ring", "ll") * 2 * 7 / 8
    assert 39.0 < inside <= 141.0


def test_an_inter_node_rings_steps_cost_at_least_the_networks_overhead():
    # ncclTopoTuneModel: intraLat = max(intraLat, netOverhead x 3 under Simple) once nNodes > 1: an H100 ring's
    # NVLink steps cost 1 us under LL (0.6 alone) and keep their 3.4 us under Simple (above 3 x 1 us)
    one, two = plan(nodes=1), plan(nodes=2)
    lat = constants()["hw_latency_us"]
    steps, inter_steps = 2 * 15, 2 * 1
    for protocol, floor in (("ll", 1.0), ("simple", 3.0), ("ll128", 1.0)):
        base = constants()["base_latency_us"]["ring"][protocol]
        intra = max(lat["nvlink"]["ring"][protocol], floor)
        expected = base + (steps - inter_steps) * intra + inter_steps * lat["net"]["ring"][protocol]
        assert two._latency(AR, two.shape(range(16)), "ring", protocol) == pytest.approx(expected)
    # inside one node the NVLink step's own latency stands
    assert one._latency(AR, one.shape(range(8)), "ring", "ll") == pytest.approx(
        constants()["base_latency_us"]["ring"]["ll"] + 14 * lat["nvlink"]["ring"]["ll"])


def test_a_multi_node_simple_ring_all_reduce_pays_the_plateau_only_from_64_bytes_a_channel_and_rank():
    # ncclTopoGetAlgoTime: lat *= 1.4 where nBytes / (nChannels x nRanks) >= 64 (2 x 8 H100s, 32 channels: 32 KiB)
    p = plan(nodes=2)
    shape, ports = p.shape(range(16)), p.weakest_ports(range(16))
    latency = p._latency(AR, shape, "ring", "simple")
    algbw = p._bus_bandwidth(AR, shape, "ring", "simple", ports)

    def overhead(size: float) -> float:
        return p._time(AR, shape, size, "ring", "simple", ports) - size / (1000 * algbw)

    assert overhead(32768 - 1024) == pytest.approx(latency)
    assert overhead(32768) == pytest.approx(latency * constants()["refinements"]["ring_plateau_latency"])


def host_plan(template: str, nodes: int, *hosts: str) -> CollectivePlan:
    """`nodes` nodes of `template` per host CPU named (each a node group of its own), or the template's own."""
    groups = [{"from": template, "num_nodes": nodes, "node": {"host_cpu": h}} for h in hosts]
    data = {"node_groups": groups} if groups else {"from": template, "cluster": {"num_nodes": nodes}}
    return CollectivePlan(Topology.from_datacenter(DatacenterConfig.model_validate(data)), "auto")


@pytest.mark.parametrize(("nodes", "intel", "amd"), [(2, 39.0, 22.5), (4, 20.4, 19.0)])
def test_ll_across_nodes_is_capped_by_the_amd_row_on_amd_hosts_as_dgx_a100s_are(nodes, intel, amd):
    # llMaxBws[cpuVendor == AMD ? 1 : 0][min(nNodes, 3) - 1]: DGX A100's EPYC 7742 hosts take {22.5, 19.0}
    def ll_bus(p: CollectivePlan) -> float:
        ranks = range(8 * nodes)
        return p._bus_bandwidth(AR, p.shape(ranks), "ring", "ll", p.weakest_ports(ranks)) * 2 * (8 * nodes - 1) / (
            8 * nodes)
    assert ll_bus(host_plan("dgx-a100", nodes)) == pytest.approx(amd)
    assert ll_bus(host_plan("dgx-a100", nodes, "Intel Xeon Platinum 8380")) == pytest.approx(intel)
    # hosts of two vendors in one communicator are MIXED, which takes the AMD row too
    half = host_plan("dgx-a100", nodes // 2, "AMD EPYC 7742", "Intel Xeon Platinum 8380")
    assert ll_bus(half) == pytest.approx(amd)


def test_an_inter_node_rings_steps_cost_nccls_2_us_overhead_on_amd_hosts_and_1_on_every_other():
    # getNetOverhead: 2 us on x86 AMD, 1 elsewhere (Intel, Arm, and a mixed communicator); x3 under Simple
    lat = constants()["hw_latency_us"]
    steps, inter_steps = 2 * 15, 2 * 1

    def expected(floor: float, protocol: str) -> float:
        intra = max(lat["nvlink"]["ring"][protocol], floor * (3 if protocol == "simple" else 1))
        base = constants()["base_latency_us"]["ring"][protocol]
        return base + (steps - inter_steps) * intra + inter_steps * lat["net"]["ring"][protocol]

    for hosts, floor in ((("AMD EPYC 7742",), 2.0), (("Intel Xeon 8480C",), 1.0), (("NVIDIA Grace",), 1.0),
                         (("AMD EPYC 7742", "Intel Xeon 8480C"), 1.0)):
        p = host_plan("dgx-h100", 2 // len(hosts), *hosts)
        group = p.weakest_ports(range(16))
        for protocol in ("ll", "ll128", "simple"):  # Simple's NVLink step: 3.4 us, under AMD's 6
            assert p._latency(AR, p.shape(range(16)), "ring", protocol, group) == pytest.approx(
                expected(floor, protocol)), (hosts, protocol)


def test_a_group_sees_the_nics_of_its_own_gpus_in_a_domain_as_nccls_trimmed_topology_does():
    # NCCL's topology holds only the communicator's own GPUs, so a ring of one GPU per node (data parallelism under
    # tp 8) crosses the network through that GPU's NIC, not all eight of its node: Simple's bandwidth wins over
    # LL128's 0.92 for a large bucket, where eight NICs' worth made LL128's lower latency win
    p = plan(nodes=48)
    rail, full = tuple(range(0, 384, 8)), tuple(range(16))
    nic = p.weakest_ports(rail).nic / 1e9
    assert p._bandwidths(p.shape(rail), p.weakest_ports(rail))[1] == pytest.approx(nic)
    assert p._bandwidths(p.shape(full), p.weakest_ports(full))[1] == pytest.approx(8 * nic)
    assert p.choose(RS, rail, 308e6).protocol == "simple"
    # across GB200 NVL72 racks NCCL fuses each rack's trays into one topology (MNNVL), so a group of one GPU a tray
    # sees the NICs of all 18 of its trays in a rack, not the 4 of one tray
    racks = plan("gb200-nvl72", nodes=36)
    trays = tuple(range(0, 144, 4))
    one_nic = racks.weakest_ports(trays).nic / 1e9
    assert racks._bandwidths(racks.shape(trays), racks.weakest_ports(trays))[1] == pytest.approx(18 * one_nic)
    # two GPUs a node of p4d's one NIC per two GPUs: that one NIC
    p4d = plan("aws-p4d", nodes=2)
    pair = (0, 1, 8, 9)
    assert p4d._bandwidths(p4d.shape(pair), p4d.weakest_ports(pair))[1] == pytest.approx(
        p4d.weakest_ports(pair).nic * p4d.topology.fabric.ports_per_nic / 1e9)


def test_an_algorithm_never_refused_runs_every_collective_of_a_step_on_any_group_and_protocol_and_only_those_do():
    """Algorithm.never_refused lets a sweep skip planning a point's step to find what its algorithm cannot run
    (pipeline.check_collectives): a fixed ring or pxn is chosen for all-reduce, all-gather and reduce-scatter on
    groups inside a node, across nodes one GPU each and unevenly, under every protocol and without any reducing
    switch; every other algorithm is refused somewhere there."""
    groups = [range(8), range(0, 32, 8), [0, 1, 2, 8]]
    never = {name for name, a in CATALOG.items() if a.never_refused}
    assert never == {"ring", "pxn"}
    for name in CATALOG:
        refused = False
        for protocol in ("simple", "ll", "ll128"):
            p = plan("dgx-a100", nodes=4, algorithm=name, protocol=protocol)
            for ctype in (AR, AG, RS):
                for group in groups:
                    try:
                        p.choose(ctype, group, 2**20)
                    except Unrunnable:
                        refused = True
        assert refused == (name not in never), name


def test_tree_correction_stops_past_its_table_as_ncclTopoGetAlgoTime_does():
    # src/graph/tuning.cc (2.27): bw *= treeCorrectionFactor[p][logSize] only while logSize = log2(nBytes / 64) < 23,
    # so from 512 MiB a tree is priced uncorrected (Simple's last entry, 0.9, applied to 4 GiB made it 11% slower)
    p = plan(nodes=16)
    shape, ports = p.shape(range(128)), p.weakest_ports(range(128))
    latency = p._latency(AR, shape, "tree", "simple", ports)
    bandwidth = p._bus_bandwidth(AR, shape, "tree", "simple", ports)
    for size, factor in ((2**28, 0.9), (2**29 - 64, 0.9), (2**29, 1.0), (2**32, 1.0)):
        expected = latency + size / (1000 * bandwidth * factor)
        assert p._time(AR, shape, size, "tree", "simple", ports) == pytest.approx(expected)


def auto_against_fastest(template: str, nodes: int, ctype: CollType, size: float) -> tuple[float, float]:
    """(auto's replayed microseconds, the fastest replayed (algorithm, protocol) auto weighs) for every GPU."""
    from simulon.pipeline import time_collective

    dc = DatacenterConfig.model_validate({"from": template, "cluster": {"num_nodes": nodes}})
    group = tuple(range(dc.num_gpus))
    choices = CollectivePlan(Topology.from_datacenter(dc), "auto").candidates(ctype, group)
    fastest = min(time_collective(dc, ctype, group, size, a, protocol=p).time_us for a, p in choices)
    return time_collective(dc, ctype, group, size, "auto").time_us, fastest


def test_a_mesh_trees_chains_spread_over_its_links_so_auto_picks_no_slower_tree():
    # NCCL's model prices a tree's chain at a member's whole port, which a mesh's chains reach only spread over the
    # disjoint cycles; all on one chain, two MI300X nodes' LL128 tree of 4 MiB replayed in 172 us against 83 us
    auto, fastest = auto_against_fastest("mi300x-platform", 2, AR, 4 * 2**20)
    assert auto <= 1.05 * fastest


@pytest.mark.parametrize(("template", "nodes", "per_node"), [("dgx-h100", 8, 1), ("dgx-h100", 2, 8),
                                                             ("mi300x-platform", 2, 8), ("mi300x-platform", 1, 8)])
def test_a_trees_channel_period_repeats_its_channels_flows(template, nodes, per_node):
    # flow_set simulates one period of a tree's channels; each of the period's channels must stand for the channels a
    # period away: same tree, same chain (a one-GPU-a-node tree of period 1 ran both trees as the first, 1.48x slower)
    from simulon.collective.algorithms import find_algorithm
    from simulon.collective.tree import tree_all_reduce

    p = plan(template, nodes)
    shape = p.shape(range(0, nodes * 8, 8 // per_node))
    period = find_algorithm("tree").channel_period(AR, shape)
    flows = tree_all_reduce(tuple(range(shape.n)), shape, 2**20, 2 * period, "simple")
    pairs = [sorted(zip(flows.src_pos[flows.channel == c], flows.dst_pos[flows.channel == c], strict=True))
             for c in range(2 * period)]
    assert pairs[:period] == pairs[period:]


SR = CollType.SendRecv


@pytest.mark.parametrize(("peer_bytes", "protocol"), [(1024, "ll"), (2.0**19, "ll"), (2.0**19 + 1, "simple"),
                                                      (2.0**20, "simple")])
def test_a_send_inside_a_domain_runs_ll_up_to_all_its_channels_times_nccls_ll_threshold(peer_bytes, protocol):
    # NCCL 2.22-2.28 addP2pToPlan: LL while bytes <= p2pnChannelsPerPeer (32) x NCCL_P2P_LL_THRESHOLD (16 KiB)
    assert p2p_protocol(peer_bytes) == protocol
    assert plan("dgx-b200").choose(SR, range(8), peer_bytes).protocol == protocol
    assert plan("gb200-nvl72", nodes=18).choose(SR, range(72), peer_bytes).protocol == protocol


def test_an_ll_send_takes_its_channels_from_ll_steps_an_all_to_all_and_a_fixed_protocol_keep_simple():
    # under LL a step is an LL slot (64 KiB on the wire), parts of at least an eighth of it: 16 KiB over 8 ranks
    # takes 2 of the 4 channels a peer starts from, where Simple's 64 KiB parts would take 1
    assert p2p_channels_per_peer(8, 2.0**14, "ll") == 2 and p2p_channels_per_peer(8, 2.0**14) == 1
    choice = plan("dgx-b200").choose(SR, range(8), 2.0**14)
    assert (choice.protocol, choice.channels) == ("ll", 2)
    assert plan("dgx-b200").choose(A2A, range(8), 8 * 2.0**14).protocol == "simple"
    assert plan("dgx-b200", protocol="simple").choose(SR, range(8), 2.0**14).protocol == "simple"
    assert plan("dgx-b200", nccl={"protocols": ["Simple"]}).choose(SR, range(8), 2.0**14).protocol == "simple"
