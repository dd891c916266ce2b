"""Replay and network model: fair sharing, rate limits, closed forms, pipelines, contention, monotonicity,
folding exactness."""

from __future__ import annotations

from dataclasses import replace as with_

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.collective import flow_set
from simulon.collective.nccl import constants, pipeline_chunks, ring_overlap_fraction
from simulon.collective.shape import GroupShape
from simulon.collective.tree import tree_chunks
from simulon.collective.tuner import CollectivePlan
from simulon.collective.types import CollType
from simulon.config import DatacenterConfig, ScenarioConfig
from simulon.config.scenario import CollectiveConfig
from simulon.dag.fold import Fold
from simulon.dag.nodes import ExecutionDAG, NodeKind
from simulon.engine import replay
from simulon.engine.steady_state import SteadyState
from simulon.network import Topology
from simulon.network.calibration import LinkModel
from simulon.pipeline import collective_sweep, simulate, time_collective

GB = 1e9
IDEAL = LinkModel.ideal()


def datacenter(nodes: int = 1, gpus: int = 4, nvlink: str = "100GBps", nic: str = "400Gbps",
               nvlink_latency: str = "0us", nic_latency: str = "0us", gpus_per_nic: int = 1,
               topology: dict | str = "single-switch") -> DatacenterConfig:
    return DatacenterConfig.model_validate({
        "cluster": {"num_nodes": nodes},
        "node": {"gpus_per_node": gpus, "gpus_per_nic": gpus_per_nic, "gpu": "H100"},
        "network": {"scale_up": {"switch": {"port_speed": nvlink, "latency": nvlink_latency}},
                    "scale_out": {"nic": {"speed": nic, "latency": nic_latency}, "topology": topology}},
    })


def timed(dc: DatacenterConfig, ctype: CollType, group, size: float, algorithm: str | None = None, channels: int = 1,
          others=(), model: LinkModel = IDEAL):
    return time_collective(dc, ctype, tuple(group), size, algorithm, channels, "simple", others, model)


def hand_dag(flows: list[tuple[int, int, float]], num_gpus: int, edges: list[tuple[int, int]] = ()) -> ExecutionDAG:
    """A DAG of bare flows (src, dst, bytes) with optional dependency edges between them."""
    n = len(flows)
    col = lambda values, dtype: np.array(values, dtype=dtype)  # noqa: E731
    src = [e[0] for e in edges]
    dst = [e[1] for e in edges]
    return ExecutionDAG(
        kind=col([NodeKind.flow] * n, np.uint8), gpu=col([f[0] for f in flows], np.int32),
        peer=col([f[1] for f in flows], np.int32), stream=col([0] * n, np.uint8), kernel=col([-1] * n, np.int32),
        layer=col([-1] * n, np.int32), microbatch=col([-1] * n, np.int32), stage=col([0] * n, np.int16),
        coll=col([-1] * n, np.int32), size=col([f[2] for f in flows], np.float64), parent=col([-1] * n, np.int64),
        edge_src=col(src, np.int64), edge_dst=col(dst, np.int64), kernel_specs=[], collectives=[],
        num_gpus=num_gpus, multiplicity=np.ones(num_gpus, dtype=np.int64), duration=np.zeros(n))


def run_flows(dc: DatacenterConfig, flows, edges=()):
    dag = hand_dag(flows, dc.num_gpus, edges)
    return replay(dag, Topology.from_datacenter(dc, model=IDEAL), Fold.identity(dc.num_gpus))


def test_two_flows_on_one_link_each_get_half():
    dc = datacenter(nvlink="100GBps")
    size = 1e9
    timeline = run_flows(dc, [(0, 1, size), (0, 2, size)])  # share GPU 0's NVLink up link
    assert timeline.finish == pytest.approx([2 * size / (100 * GB)] * 2)


def test_flow_alone_runs_at_link_speed_and_adds_latency():
    dc = datacenter(nvlink="100GBps", nvlink_latency="3us")
    timeline = run_flows(dc, [(0, 1, 1e9)])
    assert timeline.finish[0] == pytest.approx(1e9 / (100 * GB) + 3e-6)


def test_max_min_fair_shares_leftover_bandwidth():
    # flows a: 0->1 and b: 0->2 share GPU 0's up link; c: 3->2 shares GPU 2's down link with b.
    # Max-min: every flow is limited to 50 GB/s by one of the two shared links.
    dc = datacenter(nvlink="100GBps")
    timeline = run_flows(dc, [(0, 1, 1e9), (0, 2, 1e9), (3, 2, 1e9)])
    assert timeline.finish == pytest.approx([0.02, 0.02, 0.02])
    # now make c tiny: once it is gone b speeds up to what a leaves
    timeline = run_flows(dc, [(0, 1, 1e9), (0, 2, 1e9), (3, 2, 1e8)])
    assert timeline.finish[2] == pytest.approx(1e8 / 50e9)
    assert timeline.finish[0] == pytest.approx(0.02) and timeline.finish[1] == pytest.approx(0.02)


def test_dependent_flow_waits_for_its_parent():
    dc = datacenter(nvlink="100GBps", nvlink_latency="1us")
    timeline = run_flows(dc, [(0, 1, 1e9), (1, 2, 1e9)], edges=[(0, 1)])
    assert timeline.start[1] == pytest.approx(timeline.finish[0])
    assert timeline.finish[1] == pytest.approx(2 * (0.01 + 1e-6))


def test_a_variable_length_route_loads_every_hop():
    # rail 0 to rail 1 on a two-tier fabric with one spine: NIC, leaf, spine, leaf, NIC
    spec = {"tiers": 2, "rail_optimized": True, "nics_per_leaf": 4, "spines": 1, "oversubscription": 4.0}
    dc = datacenter(nodes=4, gpus=2, nic="400Gbps", topology=spec)
    # two flows from different leaves' NICs share nothing but the single 50 GB/s spine link of leaf 0
    timeline = run_flows(dc, [(0, 3, 1e9), (2, 5, 1e9)])
    assert timeline.finish == pytest.approx([2 * 1e9 / (50 * GB)] * 2)


def sliced_ring_seconds(steps: int, chunk: float, bw: float, latency: float) -> float:
    """A Simple ring of `steps` steps each moving `chunk` bytes a channel at `bw`: every step but the last hands over
    to the next once its first slice arrived, hiding up to the time of what follows that slice
    (collective.nccl.ring_overlap_fraction) of its latency."""
    tau, after_first = chunk / bw, float(ring_overlap_fraction(chunk))
    return steps * tau + (steps - 1) * max(0.0, latency - after_first * tau) + latency


@pytest.mark.parametrize("n", [2, 4, 8])
def test_ring_all_reduce_matches_closed_form(n):
    bw, lat, size = 100 * GB, 2e-6, 256 * 2**20
    dc = datacenter(gpus=8, nvlink="100GBps", nvlink_latency="2us")
    timing = timed(dc, CollType.AllReduce, range(n), size)
    expected = sliced_ring_seconds(2 * (n - 1), size / n, bw, lat)
    assert timing.time_us * 1e-6 == pytest.approx(expected, rel=1e-9)
    assert timing.busbw_GBps == pytest.approx(size / expected / GB * 2 * (n - 1) / n)


@pytest.mark.parametrize("ctype", [CollType.AllGather, CollType.ReduceScatter])
def test_ring_gather_scatter_match_closed_form(ctype):
    n, bw, size = 8, 100 * GB, 2**30
    dc = datacenter(gpus=8, nvlink="100GBps")
    timing = timed(dc, ctype, range(n), size)
    assert timing.time_us * 1e-6 == pytest.approx((n - 1) / n * size / bw, rel=1e-9)


def test_more_channels_share_the_same_links():
    dc = datacenter(gpus=8, nvlink="100GBps")
    one = timed(dc, CollType.AllReduce, range(8), 2**30, channels=1)
    eight = timed(dc, CollType.AllReduce, range(8), 2**30, channels=8)
    assert eight.time_us == pytest.approx(one.time_us, rel=1e-6)
    assert eight.busbw_GBps <= 100 * (1 + 1e-9)


def test_a_channel_moves_no_faster_than_its_limit_and_more_channels_add_up():
    limited = LinkModel("test", "test", 1.0, 1.0, 1.0, 0.0, (0.0,) * 3, (0.0,) * 3, (0.0,) * 3, (10 * GB,) * 3)
    dc = datacenter(nodes=2, gpus=1, nic="400Gbps")
    size = 2**30
    for channels in (1, 2, 4):
        timing = timed(dc, CollType.AllReduce, range(2), size, channels=channels, model=limited)
        rate = min(channels * 10 * GB, 50 * GB)
        assert timing.time_us * 1e-6 == pytest.approx(size / rate, rel=1e-9)


def test_a_pipelined_tree_streams_its_chunks():
    # a tree over two GPUs is one edge: chunks go up back to back, each comes down once it has arrived
    lat, bw, size = 1e-6, 100 * GB, 2**28
    dc = datacenter(gpus=2, nvlink="100GBps", nvlink_latency="1us")
    chunks = tree_chunks(GroupShape.flat(2), size, 1, "simple")  # the tree's own count (its hops' chunks)
    timing = timed(dc, CollType.AllReduce, range(2), size, algorithm="tree")
    assert timing.time_us * 1e-6 == pytest.approx((chunks + 1) * size / chunks / bw + 2 * lat, rel=1e-9)


@pytest.mark.parametrize("channels", [1, 2, 4, 16])
def test_a_simple_tree_channel_moves_no_more_than_nccls_per_channel_tree_bus_bandwidth(channels):
    """NCCL bounds a tree's bus bandwidth by its channels x perChMaxTreeBw (tuning.cc). Over two GPUs a tree's
    flow carries its algorithm bandwidth, which is its bus bandwidth: the chunks stream at the lesser of the link
    and the channels' bound. Without the bound a one-node tree ran 1 GiB in 8,875.8 us on 1 channel as on 16."""
    bw, bound, size = 100 * GB, 20 * GB, 2**28
    dc = datacenter(gpus=2, nvlink="100GBps")
    chunks = tree_chunks(GroupShape.flat(2), size, channels, "simple")
    model = with_(IDEAL, tree_bus_bandwidth=(bound,) * 3)
    timing = timed(dc, CollType.AllReduce, range(2), size, "tree", channels, model=model)
    expected = (chunks + 1) * size / chunks / min(bw, channels * bound)
    assert timing.time_us * 1e-6 == pytest.approx(expected, rel=1e-9)
    flows = flow_set(CollType.AllReduce, range(2), size, channels, "tree", "simple", one_period=True)
    estimate = SteadyState(Topology.from_datacenter(dc, model=model)).estimate([flows], CollType.AllReduce, "tree",
                                                                               "simple")
    assert estimate == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("n", [4, 8])
def test_a_simple_tree_on_more_channels_is_faster_until_its_links_bound_it(n):
    """Over n GPUs each channel's flows carry the algorithm bandwidth, 2(n-1)/n of it the bus bandwidth: one
    channel reaches at most perChMaxTreeBw of bus bandwidth, c channels c times one's while the links allow."""
    dc = datacenter(gpus=8, nvlink="100GBps")
    model = with_(IDEAL, tree_bus_bandwidth=(5 * GB,) * 3)
    busbw = {c: timed(dc, CollType.AllReduce, range(n), 2**30, "tree", c, model=model).busbw_GBps
             for c in (1, 2, 4, 64)}
    assert busbw[1] <= 5 * (1 + 1e-9)
    assert busbw[2] == pytest.approx(2 * busbw[1], rel=1e-9) and busbw[4] == pytest.approx(4 * busbw[1], rel=1e-9)
    unbounded = timed(dc, CollType.AllReduce, range(n), 2**30, "tree", 64, model=IDEAL).busbw_GBps
    assert busbw[64] == pytest.approx(unbounded, rel=1e-9)   # 64 channels' bound lies beyond the links


def test_the_shipped_tree_runs_slower_on_one_channel_than_on_sixteen():
    dc = gpt_scenario(nodes=1, gpus_per_node=8).datacenter
    one, sixteen = (time_collective(dc, CollType.AllReduce, tuple(range(8)), 2**30, "tree", c, "simple").time_us
                    for c in (1, 16))
    assert one > 4 * sixteen


@pytest.mark.parametrize("launch_us", [5.0, 40.0])
def test_a_pipelined_tree_pays_its_launch_once_not_once_a_chunk(launch_us):
    # NCCL launches one kernel a collective: the chunks after a channel's first stream behind it, each starting
    # as the previous one's last byte leaves, with no launch of their own
    lat, bw, size = 1e-6, 100 * GB, 2**28
    dc = datacenter(gpus=2, nvlink="100GBps", nvlink_latency="1us")
    chunks = tree_chunks(GroupShape.flat(2), size, 1, "simple")
    model = with_(IDEAL, launch=(launch_us * 1e-6,) * 3)
    timing = timed(dc, CollType.AllReduce, range(2), size, algorithm="tree", model=model)
    expected = launch_us * 1e-6 + (chunks + 1) * size / chunks / bw + 2 * lat
    assert chunks > 1 and timing.time_us * 1e-6 == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("nodes", [1, 4])
def test_an_ll128_tree_cut_into_nccls_smaller_chunks_is_never_slower_than_in_one(nodes, monkeypatch):
    # NCCL halves an LL128 tree's chunk for a message of a few slots (enqueue.cc calcCollChunking) so that it
    # pipelines through the tree's depth: with the launch paid once, more chunks only shorten the fill
    import simulon.collective.tree as tree

    dc = DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": nodes}})
    group, size = tuple(range(8 * nodes)), 2.0**24

    def seconds(chunk: float) -> float:
        monkeypatch.setattr(tree, "tree_ll128_chunk_bytes", lambda *args: chunk)
        return time_collective(dc, CollType.AllReduce, group, size, "tree", None, "ll128").time_us

    times = [seconds(c) for c in (614400.0, 153600.0, 38400.0)]
    assert times == sorted(times, reverse=True) and times[-1] < 0.6 * times[0]


def test_nccls_ll128_tree_chunk_shrinks_for_a_message_of_a_few_slots_down_to_its_first_halving_under_32_kib():
    from simulon.collective.nccl import tree_ll128_chunk_bytes

    slot = constants()["chunk_bytes"]["ll128"]
    assert tree_ll128_chunk_bytes(2**30, 4, 8) == slot                 # plenty of chunks already
    # 16 MiB over 32 channels on 4 DGX nodes: nsteps = 1 + 2 + 0.8, halved past 128 KiB while under 30.4 chunks,
    # then once more while under 7.6
    assert tree_ll128_chunk_bytes(2**24 / 32, 4, 8) == slot // 16
    assert tree_ll128_chunk_bytes(1024, 16, 8) == slot // 32                 # a tiny message: 19,200 bytes


def test_nccls_collnet_chunks_shrink_until_a_part_fills_the_pipeline_depth():
    from simulon.collective.nccl import collnet_chunk_bytes

    slot = constants()["chunk_bytes"]["simple"]
    assert collnet_chunk_bytes(2**30, direct=True, depth=2) == slot      # plenty of chunks
    assert collnet_chunk_bytes(2**30, direct=False, depth=8) == min(262144, slot)  # the chain's cap
    # a 64 MiB all-reduce on 4 DGX nodes, 32 channels: a head's part of 256 KiB halves to 128 KiB (2 chunks),
    # then 64 KiB (4 < 16) and 32 KiB (8 < 16), the loops stopping at their floors
    assert collnet_chunk_bytes(2**26 / 32 / 8, direct=True, depth=2) == 32768
    assert collnet_chunk_bytes(1024, direct=False, depth=8) == 32768


@pytest.mark.parametrize("algorithm", ["collnet_direct", "collnet_chain"])
def test_a_collnet_all_reduce_cut_as_nccl_cuts_it_is_never_slower_than_in_slot_sized_chunks(algorithm, monkeypatch):
    import simulon.collective.collnet as collnet

    dc = DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": 4}, "network": {
        "scale_out": {"switch": {"from": "quantum-2-qm9700", "in_network_reduction": True}}}})
    sizes = [2.0**20, 2.0**24, 2.0**26, 2.0**28]
    nccl = collective_sweep(dc, CollType.AllReduce, tuple(range(32)), sizes, algorithm)
    monkeypatch.setattr(collnet, "collnet_chunk_bytes", lambda *args, **kwargs: constants()["chunk_bytes"]["simple"])
    slots = collective_sweep(dc, CollType.AllReduce, tuple(range(32)), sizes, algorithm)
    assert all(a.time_us <= b.time_us * (1 + 1e-9) for a, b in zip(nccl, slots, strict=True))
    assert any(a.time_us < 0.9 * b.time_us for a, b in zip(nccl, slots, strict=True))


@pytest.mark.parametrize(("ctype", "legs"), [(CollType.AllReduce, 4), (CollType.ReduceScatter, 2),
                                            (CollType.AllGather, 2)])
@pytest.mark.parametrize("n", [3, 4, 8])  # NCCL runs NVLS over more than two GPUs of a domain
def test_a_switch_leg_takes_longer_the_more_members_the_switch_serves(ctype, legs, n):
    """A tiny NVLS collective is its legs' latencies: up to the switch and down (reduce-scatter, all-gather),
    twice over for an all-reduce; each leg takes a base latency plus one per member beyond the first."""
    dc = DatacenterConfig.model_validate({
        "cluster": {"num_nodes": 1}, "node": {"gpus_per_node": 8, "gpu": "H100"},
        "network": {"scale_up": {"switch": {"port_speed": "100GBps", "in_network_reduction": True}}}})
    model = with_(IDEAL, in_switch_hop=2e-6, in_switch_member_hop=0.5e-6)
    timing = timed(dc, ctype, range(n), 8.0 * n, algorithm="nvls", model=model)
    assert timing.time_us == pytest.approx(legs * (2 + 0.5 * (n - 1)), abs=1e-2)   # plus nanoseconds of bytes


@pytest.mark.parametrize(("ctype", "legs", "member_us"),
                         [(CollType.AllReduce, 4, 0.5), (CollType.ReduceScatter, 2, 1.5), (CollType.AllGather, 2, 1.5)])
def test_an_all_gathers_or_reduce_scatters_switch_leg_takes_its_own_cost_per_member(ctype, legs, member_us):
    """NCCL's NVLS all-gather and reduce-scatter walk the members in one loop of 8 warps (collective.types.
    GATHER_SCATTER): their legs take in_switch_gather_member_hop per member beyond the first, an all-reduce's
    in_switch_member_hop, in replay and in the steady-state estimate alike."""
    n = 8
    dc = DatacenterConfig.model_validate({
        "cluster": {"num_nodes": 1}, "node": {"gpus_per_node": n, "gpu": "H100"},
        "network": {"scale_up": {"switch": {"port_speed": "100GBps", "in_network_reduction": True}}}})
    model = with_(IDEAL, in_switch_hop=2e-6, in_switch_member_hop=0.5e-6, in_switch_gather_member_hop=1.5e-6)
    expected = legs * (2 + member_us * (n - 1))
    assert timed(dc, ctype, range(n), 8.0 * n, algorithm="nvls", model=model).time_us == \
        pytest.approx(expected, abs=1e-2)   # plus nanoseconds of bytes
    flows = flow_set(ctype, range(n), 8.0 * n, 1, "nvls", "simple", GroupShape.flat(n), one_period=True)
    estimate = SteadyState(Topology.from_datacenter(dc, model=model)).estimate([flows], ctype, "nvls", "simple")
    assert estimate * 1e6 == pytest.approx(expected, abs=1e-2)


def test_in_switch_all_reduce_moves_each_shard_once_each_way():
    # NVLS: every port carries the others' parts of their shards plus its reduced shard up, and its reduced
    # shard plus the others' down: the buffer each way, pipelined (its own part stays local); the pipeline
    # fills with the first chunk's reduction and drains with the last one's multicast
    dc = DatacenterConfig.model_validate({
        "cluster": {"num_nodes": 1}, "node": {"gpus_per_node": 8, "gpu": "H100"},
        "network": {"scale_up": {"switch": {"port_speed": "100GBps", "in_network_reduction": True}}}})
    n, size = 8, 2**30
    timing = timed(dc, CollType.AllReduce, range(n), size, algorithm="nvls")
    chunks = pipeline_chunks(size / n, "simple", constants()["nvls_chunk_bytes"])
    steady = size / (100 * GB)
    assert steady < timing.time_us * 1e-6 <= steady * (1 + 2.0 / chunks) * (1 + 1e-9)
    ring = timed(dc, CollType.AllReduce, range(n), size)
    assert timing.time_us < ring.time_us


def test_all_to_all_cannot_beat_the_nic():
    dc = datacenter(nodes=8, gpus=1, nic="400Gbps")
    size = 2**30
    timing = timed(dc, CollType.AllToAll, range(8), size, channels=4)
    assert timing.time_us * 1e-6 == pytest.approx(7 / 8 * size / 50e9, rel=1e-9)
    # across the network the NIC moves the parts: the scale-up copy rate of a channel does not bind
    slow_copies = with_(IDEAL, p2p_channel_bandwidth=1 * GB)
    assert timed(dc, CollType.AllToAll, range(8), size, channels=4, model=slow_copies).time_us == \
        pytest.approx(timing.time_us, rel=1e-9)


def test_shared_nic_halves_inter_node_bandwidth():
    alone = datacenter(nodes=2, gpus=2, gpus_per_nic=1)
    shared = datacenter(nodes=2, gpus=2, gpus_per_nic=2)
    flows = [(0, 2, 1e9), (1, 3, 1e9)]
    assert run_flows(shared, flows).makespan == pytest.approx(2 * run_flows(alone, flows).makespan)


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_groups_crossing_an_oversubscribed_spine_slow_down_in_proportion(groups):
    # 8 one-GPU nodes, 4 under each leaf; DP group k = node k and node k+4, so each crosses the spine.
    # 4:1 oversubscribed, a leaf's uplink carries one NIC's worth: g groups share it. Non-blocking: they do not.
    # Adaptive routing spreads every flow over the leaf's uplink cables; under ECMP each flow hashes onto one of
    # them and flows may collide on a cable (tests/network/test_ecmp_cables.py).
    spec = {"tiers": 2, "rail_optimized": False, "nics_per_leaf": 4, "spines": 1, "routing": "adaptive"}
    size = 2**30
    members = [(k, k + 4) for k in range(groups)]
    times = {}
    for ratio in (1.0, 4.0):
        dc = datacenter(nodes=8, gpus=1, nic="400Gbps", topology={**spec, "oversubscription": ratio})
        times[ratio] = timed(dc, CollType.AllReduce, members[0], size, others=members[1:]).time_us
    alone = size / (50 * GB) * 1e6  # a two-member ring all-reduce moves the buffer once each way
    assert times[1.0] == pytest.approx(alone, rel=1e-9)
    assert times[4.0] == pytest.approx(groups * alone, rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(slow=st.integers(10, 400), extra=st.integers(1, 400), n=st.sampled_from([2, 4, 8]),
       op=st.sampled_from(list(CollType)[:4]), size=st.sampled_from([2**16, 2**22, 2**28]),
       algorithm=st.sampled_from(["ring", "pat", "hierarchical"]))
def test_more_bandwidth_is_never_slower_for_a_collective(slow, extra, n, op, size, algorithm):
    if algorithm == "pat" and op not in (CollType.AllGather, CollType.ReduceScatter):
        algorithm = "ring"
    if op == CollType.AllToAll:
        algorithm = None  # point-to-point sends, which no collective algorithm steers (it runs as p2p)
    group = tuple(range(n))
    t_slow = timed(datacenter(nodes=n, gpus=1, nic=f"{slow}Gbps", nic_latency="1us"), op, group, size, algorithm)
    t_fast = timed(datacenter(nodes=n, gpus=1, nic=f"{slow + extra}Gbps", nic_latency="1us"), op, group, size,
                   algorithm)
    assert t_fast.time_us <= t_slow.time_us * (1 + 1e-9)


@pytest.mark.parametrize("nic", ["25Gbps", "100Gbps", "400Gbps"])
def test_more_nic_bandwidth_is_never_slower_for_training(nic):
    slow = simulate(gpt_scenario(nodes=4, gpus_per_node=2, tp=2, pp=2, nic="25Gbps")).result
    fast = simulate(gpt_scenario(nodes=4, gpus_per_node=2, tp=2, pp=2, nic=nic)).result
    assert fast.iteration_time_ms <= slow.iteration_time_ms * (1 + 1e-9)


def with_collectives(sc: ScenarioConfig, algorithm: str, nvls: bool = False) -> ScenarioConfig:
    """The scenario with another collective algorithm (and NVLS-capable NVSwitches)."""
    data = sc.model_dump(mode="json", exclude_none=True)
    data["collective"] = {"algorithm": algorithm}
    data["datacenter"]["network"]["scale_up"]["switch"]["in_network_reduction"] = nvls
    return ScenarioConfig.model_validate(data)


FOLD_CASES = {
    "dp across nodes": dict(nodes=4, gpus_per_node=2, tp=2, pp=1),
    "dp and tp inside nodes": dict(nodes=2, gpus_per_node=8, tp=2, pp=2),
    "moe with ep": dict(nodes=8, gpus_per_node=2, tp=2, pp=2, ep=2, layers=4,
                        moe={"num_experts": 4, "top_k": 2}, gbs=16),
    "shared nics": dict(nodes=2, gpus_per_node=4, tp=1, pp=2, gpus_per_nic=2),
    "distributed optimizer": dict(nodes=4, gpus_per_node=2, tp=2, pp=2,
                                  extra_parallelism={"distributed_optimizer": True}),
}


@pytest.mark.parametrize("case", list(FOLD_CASES))
def test_symmetric_folding_agrees_with_full_expansion(case):
    sc = gpt_scenario(**FOLD_CASES[case])
    full = simulate(sc, "full")
    folded = simulate(sc, "symmetric")
    assert folded.result.simulated_gpus < full.result.simulated_gpus
    assert folded.result.iteration_time_ms == pytest.approx(full.result.iteration_time_ms, rel=1e-9)
    for name, value in full.result.breakdown.items():
        assert folded.result.breakdown[name] == pytest.approx(value, rel=1e-6, abs=1e-9)
    assert folded.result.tflops_per_gpu == pytest.approx(full.result.tflops_per_gpu, rel=1e-9)


def test_trees_are_not_folded_and_nvls_peers_are():
    # auto: the data-parallel gradient all-reduce across 16 nodes (0.66 MB, one GPU a node) runs as a tree (a root,
    # leaves: members differ), so the dp axis stays unfolded; tensor-parallel all-reduces inside a node (4 MB) run
    # on NVLS, folded. (A larger gradient takes the ring: one GPU a node sees one NIC, where the tree's
    # bandwidth is halved)
    sc = with_collectives(gpt_scenario(nodes=16, gpus_per_node=4, tp=4, pp=1, gbs=32, hidden=128, seq=16384,
                                       vocab=1024, layers=2), "auto", nvls=True)
    full = simulate(sc, "full")
    folded = simulate(sc, "symmetric")
    algorithms = {(c.group[1] - c.group[0], c.algorithm) for c in full.dag.collectives}
    assert (1, "nvls") in algorithms and (4, "tree") in algorithms
    assert folded.fold.axes == ("tp",)
    assert folded.result.simulated_gpus == 16
    assert folded.result.iteration_time_ms == pytest.approx(full.result.iteration_time_ms, rel=1e-9)


def test_a_fixed_tree_everywhere_folds_nothing():
    sc = with_collectives(gpt_scenario(nodes=4, gpus_per_node=2, tp=2, pp=1), "tree")
    assert simulate(sc, "symmetric").fold.axes == ()


def test_collective_config_defaults_keep_ring_and_let_nccl_pick_protocol_and_channels():
    config = CollectiveConfig()
    assert (config.algorithm, config.protocol, config.num_channels) == ("ring", "auto", None)


@pytest.mark.parametrize("algorithm,tolerance", [("ring", 0.12), ("nvls_tree", 0.1), ("tree", 0.16),
                                                 ("collnet_chain", 0.12), ("collnet_direct", 0.1)])
def test_the_steady_state_estimate_stays_near_replay(algorithm, tolerance, monkeypatch):
    # what `simulon collective` reports for collectives too large to replay, against replay where both run;
    # a tree of one chunk per channel (4 MiB here) is the hard case: its legs up the tree follow one another,
    # and an estimate that let them share links ran 1.9x replay; the ring's 4 MiB all-reduce (LL128, 32 channels)
    # is estimated 1.099x replay on the old calibration and 1.109x on the one refitted with send/receive; CollNet's
    # chain, cut into NCCL's chunks (calcCollChunking: 4 of them a channel at 4 MiB, where it had 1), 1.106x; the
    # LL128 tree's 4 MiB 1.143x, and 1.155x on the calibration refitted with NCCL's NVLS chunks (its LL128 hop longer)
    import simulon.pipeline as pipeline

    dc = DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": 4}, "network": {
        "scale_out": {"topology": "spectrum-x",
                      "switch": {"from": "spectrum-4-sn5600", "in_network_reduction": True}}}})
    sizes = [2.0**16, 2.0**22, 2.0**28]
    monkeypatch.setattr(pipeline, "REPLAY_MAX_FLOWS", 10**9)
    replayed = pipeline.collective_sweep(dc, CollType.AllReduce, tuple(range(32)), sizes, algorithm)
    monkeypatch.setattr(pipeline, "REPLAY_MAX_FLOWS", 0)
    estimated = pipeline.collective_sweep(dc, CollType.AllReduce, tuple(range(32)), sizes, algorithm)
    assert [r.model for r in replayed] == ["replay"] * 3 and [e.model for e in estimated] == ["estimate"] * 3
    for r, e in zip(replayed, estimated, strict=True):
        assert e.time_us == pytest.approx(r.time_us, rel=tolerance)


def test_the_steady_state_estimate_of_a_ring_on_identical_links_is_exact():
    n, size = 8, 2.0**28
    dc = datacenter(gpus=8, nvlink="100GBps", nvlink_latency="2us")
    flows = flow_set(CollType.AllReduce, range(n), size, 1, "ring", "simple", one_period=True)
    assert len(flows) == n and flows.periods == 2 * (n - 1)
    seconds = SteadyState(Topology.from_datacenter(dc, model=IDEAL)).estimate([flows], CollType.AllReduce, "ring",
                                                                              "simple")
    assert seconds == pytest.approx(sliced_ring_seconds(2 * (n - 1), size / n, 100 * GB, 2e-6), rel=1e-9)


@pytest.mark.parametrize("ctype", [CollType.ReduceScatter, CollType.AllGather, CollType.AllReduce])
@pytest.mark.parametrize(("n", "channels"), [(2, 1), (2, 8), (4, 2), (8, 16)])
def test_a_ring_channel_ends_with_a_local_step_on_its_last_chunk(ctype, n, channels):
    """A ring's link steps move size/n per rank over the port; then each channel reduces (reduce-scatter),
    copies (all-gather) or reduces, writes out and copies (all-reduce) the last chunk it received,
    size/(n channels), at the local rate of that kind of step."""
    dc = datacenter(gpus=8, nvlink="100GBps")
    rates = {CollType.ReduceScatter: 5 * GB, CollType.AllGather: 20 * GB, CollType.AllReduce: 8 * GB}
    model = with_(IDEAL, local_pass_bandwidth=tuple(rates.values()))
    size = 2.0**30
    steps = 2 * (n - 1) if ctype == CollType.AllReduce else n - 1
    rate = rates[ctype]
    expected = steps * size / n / (100 * GB) + size / (n * channels) / rate
    assert timed(dc, ctype, range(n), size, channels=channels, model=model).time_us * 1e-6 == \
        pytest.approx(expected, rel=1e-9)
    flows = flow_set(ctype, range(n), size, channels, "ring", "simple", one_period=True)
    estimate = SteadyState(Topology.from_datacenter(dc, model=model)).estimate([flows], ctype, "ring", "simple")
    assert estimate == pytest.approx(expected, rel=1e-9)


@given(st.integers(2, 7), st.floats(1.0, 100.0))
@settings(max_examples=20, deadline=None)
def test_a_ring_over_more_ranks_reaches_more_bus_bandwidth_once_it_has_a_local_step(n, local_GBps):
    """One local step per 2(n-1) link steps of an all-reduce: busbw = B 2(n-1) / (2(n-1) + B / (channels x
    local rate)) grows with n on the same links; without the step (an infinite rate) it is B at every n.
    Other algorithms have none."""
    dc = datacenter(gpus=8, nvlink="100GBps")
    model = with_(IDEAL, local_pass_bandwidth=(local_GBps * GB,) * 3)
    size = 2.0**28

    def busbw(ranks: int, algorithm: str = "ring", link_model: LinkModel = model) -> float:
        return timed(dc, CollType.AllReduce, range(ranks), size, algorithm, 2, model=link_model).busbw_GBps

    assert busbw(n) < busbw(n + 1)
    assert busbw(n) == pytest.approx(100 * 2 * (n - 1) / (2 * (n - 1) + 100 / (2 * local_GBps)), rel=1e-6)
    assert busbw(n, link_model=IDEAL) == pytest.approx(busbw(n + 1, link_model=IDEAL), rel=1e-9)
    assert busbw(n, "tree") == pytest.approx(busbw(n, "tree", IDEAL), rel=1e-12)


def test_a_ring_across_nodes_pays_no_local_step():
    """Across nodes the proxy keeps the NIC sending from its FIFO while the GPU copies the last chunk out."""
    dc = datacenter(nodes=4, gpus=2)
    model = with_(IDEAL, local_pass_bandwidth=(1 * GB,) * 3)
    for group in ((0, 2, 4, 6), tuple(range(8))):
        assert timed(dc, CollType.AllReduce, group, 2.0**28, channels=2, model=model).time_us == \
            pytest.approx(timed(dc, CollType.AllReduce, group, 2.0**28, channels=2).time_us, rel=1e-12)


@pytest.mark.parametrize(("n", "channels", "links"), [(2, 1, 1), (2, 4, 1), (3, 2, 2), (8, 7, 7), (8, 14, 7)])
def test_a_mesh_ring_all_reduce_runs_at_the_links_its_cycles_use(n, channels, links):
    dc = DatacenterConfig.model_validate({
        "cluster": {"num_nodes": 1}, "node": {"gpus_per_node": 8, "gpu": "MI300X"},
        "network": {"scale_up": {"kind": "mesh", "switch": {"port_speed": "448GBps"}}}})
    size = 2.0**30
    timing = timed(dc, CollType.AllReduce, range(n), size, channels=channels)
    assert timing.busbw_GBps == pytest.approx(links * 64, rel=1e-6)   # one 64 GB/s link per cycle in use


def test_tensor_parallel_groups_train_on_a_mesh_node_at_the_links_their_rings_use():
    """TP groups of 4 on one 8-GPU mesh node take 2 of a member's 7 links (the 4-vertex digraph has no third
    disjoint cycle): slower than a switch port of the same total, faster with faster links."""
    def run(kind: str, port: str) -> float:
        sc = gpt_scenario(gpus_per_node=8, tp=4, gbs=8, nvlink=port, scale_up_kind=kind)
        return simulate(sc).result.iteration_time_ms

    mesh = run("mesh", "448GBps")
    assert run("nvswitch", "448GBps") < mesh
    assert run("mesh", "896GBps") < mesh


@pytest.mark.parametrize("channels", [1, 4, 16])
def test_an_all_to_all_inside_a_node_moves_a_channel_copy_rate_per_channel_of_a_peer(channels):
    """Each channel's thread block copies its part of a grouped send at p2p_channel_bandwidth: two ranks
    exchange half the buffer each at channels x that rate while the links have room, plus one 512 KiB FIFO
    step that the receiver copies out after the sender copied it in; a ring pays neither."""
    dc = datacenter(gpus=2, nvlink="1000GBps")
    model = with_(IDEAL, p2p_channel_bandwidth=20 * GB)
    size = 2.0**30
    a2a = timed(dc, CollType.AllToAll, range(2), size, channels=channels, model=model)
    assert a2a.time_us * 1e-6 == pytest.approx(size / 2 / (channels * 20 * GB) + 2**19 / (20 * GB), rel=1e-9)
    ring = timed(dc, CollType.AllGather, range(2), size, channels=channels, model=model)
    assert ring.time_us == pytest.approx(timed(dc, CollType.AllGather, range(2), size, channels=channels).time_us)


@pytest.mark.parametrize("part", [2.0**16, 2.0**19, 2.0**22])
def test_a_part_of_a_grouped_send_pays_one_fifo_step_of_its_size_at_most(part):
    dc = datacenter(gpus=2, nvlink="1000GBps")
    model = with_(IDEAL, p2p_channel_bandwidth=20 * GB)
    a2a = timed(dc, CollType.AllToAll, range(2), 2 * part, model=model)
    assert a2a.time_us * 1e-6 == pytest.approx((part + min(part, 2**19)) / (20 * GB), rel=1e-9)


def test_all_to_all_rounds_pay_the_grouped_send_hop_and_ring_steps_do_not():
    """p2p_hop is what a round of grouped sends adds; a ring's steps keep their protocol's scale-up hop."""
    dc = datacenter(gpus=8, nvlink="100GBps")
    model = with_(IDEAL, p2p_hop=10e-6)
    tiny = 8.0   # bytes: the times are the latencies
    a2a = timed(dc, CollType.AllToAll, range(8), tiny, model=model)
    ring = timed(dc, CollType.AllReduce, range(8), tiny, model=model)
    assert a2a.time_us == pytest.approx(10.0, abs=1e-3)   # 7 peers: one round (plus picoseconds of bytes)
    assert ring.time_us == pytest.approx(timed(dc, CollType.AllReduce, range(8), tiny).time_us, rel=1e-9)
    assert ring.time_us < 1.0


@pytest.mark.parametrize("nodes", [2, 4])
def test_nccls_pick_replays_within_twice_the_fastest_choice_it_weighs(nodes):
    # NCCL's model and the replay may rank close choices differently, but not by a factor: when every chunk of a
    # tree paid the collective's launch, its LL128 tree replayed in 3x the ring's time on four DGX H100 nodes
    from simulon.collective.tuner import CollectivePlan
    from simulon.pipeline import collective_sweep

    dc = DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": nodes}})
    group, sizes = tuple(range(dc.num_gpus)), [2.0**16, 2.0**24, 2.0**27]
    auto = collective_sweep(dc, CollType.AllReduce, group, sizes, "auto")
    choices = CollectivePlan(Topology.from_datacenter(dc), "auto").candidates(CollType.AllReduce, group)
    each = [collective_sweep(dc, CollType.AllReduce, group, sizes, a, protocol=p) for a, p in choices]
    for i in range(len(sizes)):
        assert auto[i].time_us <= 2 * min(timings[i].time_us for timings in each)


@pytest.mark.parametrize("qps", [1, 4])
@pytest.mark.parametrize("spines", [1, 8])
def test_the_steady_state_estimate_spreads_a_rings_connections_over_the_cables_as_the_replay_does(spines, qps):
    """A ring all-reduce of 256 MiB over 4 DGX H100, a leaf each, under ECMP: each flow's 4 channels (of 32) and
    `qps` queue pairs a connection hashed apart over a leaf's 8 uplink cables; the steady-state estimate's fair
    shares and link loads take the same shares as the replay, to the same time."""
    dc = DatacenterConfig.model_validate({
        "from": "dgx-h100", "cluster": {"num_nodes": 4},
        "network": {"nccl": {"qps_per_connection": qps},
                    "scale_out": {"topology": {"tiers": 2, "nics_per_leaf": 8, "spines": spines}}}})
    size, group = 256 * 2**20, tuple(range(32))
    timing = time_collective(dc, CollType.AllReduce, group, size, "ring", None, "ll128")
    topology = Topology.from_datacenter(dc)
    flows = flow_set(CollType.AllReduce, group, size, timing.channels, "ring", "ll128",
                     CollectivePlan(topology, "ring", "ll128", None).shape(group), one_period=True)
    assert flows.lanes == 4
    estimate = SteadyState(topology).estimate([flows], CollType.AllReduce, "ring", "ll128")
    assert estimate == pytest.approx(timing.time_us * 1e-6, rel=1e-9)


@pytest.mark.parametrize("gpus", [4, 8])
def test_a_tree_inside_one_nvlink_domain_runs_every_channel_down_one_chain_at_half_the_port(gpus):
    # with no network in its topology NCCL searches the first tree channel in PCI order and replays that order for
    # the rest (src/graph/search.cc, ncclTopoSearchRec, "Intra-node only"): the members inside the chain send each
    # byte twice, up and back down, so a large all-reduce moves at half a port (NCCL's tree ratio, 0.5), under the
    # ring's n / (2 (n - 1))
    size, bw = 2.0**30, 100 * GB
    dc = datacenter(gpus=gpus, nvlink="100GBps")
    channels = 2 * gpus  # as many as would start a chain at every member of both trees
    tree = timed(dc, CollType.AllReduce, range(gpus), size, algorithm="tree", channels=channels)
    ring = timed(dc, CollType.AllReduce, range(gpus), size, algorithm="ring", channels=channels)
    chunks = pipeline_chunks(size / channels, "simple")
    # the chain's inner members' ports bound it below; the pipeline's fill, a chunk a hop, above
    assert 2 * size / bw * (1 - 1e-9) <= tree.time_us * 1e-6 <= 2 * size / bw * (1 + gpus / chunks)
    assert ring.time_us * 1e-6 == pytest.approx(2 * (gpus - 1) / gpus * size / bw, rel=1e-6)
    assert ring.time_us < tree.time_us
