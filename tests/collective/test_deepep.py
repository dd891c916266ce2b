"""DeepEP's internode all-to-all (collective.deepep): node-limited routing's expected reach against a Monte Carlo
of the routing, its flows (one fabric message per node on the sender's rail, NVLink forwarding), bytes conserved,
node-by-node symmetry, and its time on an idle fabric against the closed form of its two legs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.collective import flow_set
from simulon.collective.algorithms import Unrunnable, algorithm_for, find_algorithm
from simulon.collective.deepep import Routing, hit_probability, leg_bytes, parse_name, routed_name
from simulon.collective.shape import GroupShape
from simulon.collective.tuner import CollectivePlan
from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.network.topology import Topology
from simulon.pipeline import collective_sweep

A2A = CollType.AllToAll
DEEPSEEK_V3 = Routing(experts=256, groups=8, group_topk=4, top_k=8)


def monte_carlo_hits(routing: Routing, holders: int, tokens: int, seed: int = 0) -> float:
    """Mean over tokens of the holders hit: groups uniformly, then top_k experts uniformly among theirs."""
    rng = np.random.default_rng(seed)
    per_group = routing.experts // routing.groups
    groups = np.argsort(rng.random((tokens, routing.groups)), axis=1)[:, :routing.group_topk]
    pool = (groups[:, :, None] * per_group + np.arange(per_group)).reshape(tokens, -1)
    picks = np.argsort(rng.random(pool.shape), axis=1)[:, :routing.top_k]
    holder = np.take_along_axis(pool, picks, axis=1) // (routing.experts // holders)
    hit = np.zeros((tokens, holders), dtype=bool)
    np.put_along_axis(hit, holder, True, axis=1)
    return float(hit.sum(axis=1).mean())


def test_a_deepseek_v3_token_reaches_3_63_of_8_nodes_on_average_as_a_monte_carlo_of_its_routing_does():
    expected = 8 * hit_probability(DEEPSEEK_V3, 8)
    assert expected == pytest.approx(3.6290, abs=1e-4)
    assert expected <= DEEPSEEK_V3.group_topk  # node-limited: at most M = 4 nodes (groups align with nodes)
    assert monte_carlo_hits(DEEPSEEK_V3, 8, 200_000) == pytest.approx(expected, abs=0.01)
    # without node limits the same 8 experts reach 5.29 of 8 nodes: 1 - C(224, 8) / C(256, 8) each
    free = Routing(256, 1, 1, 8)
    assert 8 * hit_probability(free, 8) == pytest.approx(8 * (1 - math.comb(224, 8) / math.comb(256, 8)))


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_the_expected_reach_matches_a_monte_carlo_for_any_grouping_and_holders(data):
    groups = data.draw(st.sampled_from([1, 2, 3, 4, 6, 8]))
    experts = groups * data.draw(st.sampled_from([2, 4, 6, 8]))
    group_topk = data.draw(st.integers(1, groups))
    top_k = data.draw(st.integers(1, min(8, group_topk * experts // groups)))
    holders = data.draw(st.sampled_from([h for h in range(1, experts + 1) if experts % h == 0]))
    routing = Routing(experts, groups, group_topk, top_k)
    exact = holders * hit_probability(routing, holders)
    assert monte_carlo_hits(routing, holders, 40_000, seed=holders) == pytest.approx(exact, abs=0.03 + 0.01 * exact)


def test_a_routed_name_carries_its_routing_and_a_malformed_one_is_refused():
    name = routed_name(DEEPSEEK_V3)
    assert name == "deepep:256:8:4:8" and parse_name(name) == DEEPSEEK_V3 and parse_name("deepep") is None
    assert find_algorithm(name).name == name and A2A in find_algorithm(name).decompositions
    for bad in ("deepep:256:8", "deepep:256:9:4:8", "deepep:a:b:c:d"):
        with pytest.raises(Unrunnable):
            find_algorithm(bad)
    # an all-to-all runs as deepep when deepep is fixed; a collective algorithm still leaves it to p2p
    assert algorithm_for(A2A, "deepep") == "deepep" and algorithm_for(A2A, "ring") == "p2p"


def fabric_bytes(flows, shape: GroupShape) -> np.ndarray:
    domain = np.asarray(shape.domain)
    return domain[flows.src_pos] != domain[flows.dst_pos]


@settings(max_examples=40, deadline=None)
@given(nodes=st.integers(1, 5), per_node=st.integers(1, 5), channels=st.integers(1, 4))
def test_cross_node_legs_stay_on_the_senders_rail_and_the_forwarding_waits_for_them(nodes, per_node, channels):
    n = nodes * per_node
    shape = GroupShape.of(range(n), per_node, rail_aligned=True)
    flows = flow_set(A2A, range(n), 2.0**20, channels, "deepep", shape=shape)
    cross = fabric_bytes(flows, shape)
    np.testing.assert_array_equal(shape.local[flows.src_pos[cross]], shape.local[flows.dst_pos[cross]])
    assert (flows.step[cross] == 0).all()
    forwards = flows.step == 1
    assert not fabric_bytes(flows, shape)[forwards].any()
    # a forward waits for every fabric leg into its sender; nothing else waits
    for f in np.flatnonzero(forwards):
        into = np.flatnonzero(cross & (flows.dst_pos == flows.src_pos[f]))
        assert sorted(flows.parents(f).tolist()) == sorted(into.tolist())
    assert len(flows.parent_idx) == int(forwards.sum()) * max(nodes - 1, 0)
    # per member: (nodes - 1) fabric messages, (per_node - 1) sends in its node and as many forwards
    assert len(flows) == n * ((nodes - 1) + 2 * (per_node - 1) * (nodes > 1) + (per_node - 1) * (nodes == 1))


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=5), channels=st.integers(1, 3),
       size=st.floats(1.0, 1e9))
def test_every_member_sends_and_keeps_what_an_all_to_all_would_on_any_group_shape(sizes, channels, size):
    """Bytes conserved: a member sends (n-1)/n of its buffer as origin, and of what it receives it forwards all
    but its own parts, which add up to (n-1)/n of a buffer (nodes of any sizes: a sender without a rail peer on a
    node sends to its members directly)."""
    domain = [d for d, count in enumerate(sizes) for _ in range(count)]
    n = len(domain)
    shape = GroupShape(tuple(domain), rail_aligned=True)
    flows = flow_set(A2A, range(n), size, channels, "deepep", shape=shape)
    flows_step = flows.step
    for pos in range(n):
        origin = float(flows.size[(flows.src_pos == pos) & (flows_step == 0)].sum())
        forwarded = float(flows.size[(flows.src_pos == pos) & (flows_step == 1)].sum())
        received = flows.bytes_received_by(pos)
        assert origin == pytest.approx(size * (n - 1) / n)
        assert received - forwarded == pytest.approx(size * (n - 1) / n)


def test_routed_tokens_cross_to_a_node_once_and_reach_each_expert_member_once():
    n, nodes = 64, 8
    shape = GroupShape.of(range(n), 8, rail_aligned=True)
    size = 8.0 * 1000  # 1,000 token-bytes each sent top_k = 8 times by Megatron's all-to-all
    flows = flow_set(A2A, range(n), size, 1, routed_name(DEEPSEEK_V3), shape=shape)
    cross = fabric_bytes(flows, shape)
    per_member_fabric = float(flows.size[cross & (flows.src_pos == 0)].sum())
    assert per_member_fabric == pytest.approx(1000 * (nodes - 1) * hit_probability(DEEPSEEK_V3, nodes))
    assert leg_bytes(size, shape, DEEPSEEK_V3)[1] == pytest.approx(1000 * hit_probability(DEEPSEEK_V3, n))
    # DeepEP's deduplication: under half the fabric bytes of the plain all-to-all's 7/8 of the buffer
    assert per_member_fabric < 0.5 * size * (n - 8) / n
    with pytest.raises(ValueError, match="evenly"):
        flow_set(A2A, range(12), size, 1, routed_name(DEEPSEEK_V3), shape=GroupShape((0,) * 8 + (1,) * 4))


def moved(flows, shift: int, n: int) -> set[tuple]:
    def at(pos):
        return (pos + shift) % n
    return set(zip(at(flows.src_pos).tolist(), at(flows.dst_pos).tolist(), flows.channel.tolist(),
                   flows.step.tolist(), flows.tag.tolist(), strict=True))


@settings(max_examples=30, deadline=None)
@given(nodes=st.integers(1, 5), per_node=st.integers(1, 4))
def test_it_repeats_node_by_node_and_each_flow_of_a_member_is_told_apart(nodes, per_node):
    n = nodes * per_node
    shape = GroupShape.of(range(n), per_node, rail_aligned=True)
    flows = flow_set(A2A, range(n), 2.0**20, 1, "deepep", shape=shape)
    assert flows.symmetry == (1 if nodes == 1 or per_node == 1 else per_node)
    assert moved(flows, flows.symmetry % n, n) == moved(flows, 0, n)
    keys = set(zip(flows.src_pos.tolist(), flows.step.tolist(), flows.channel.tolist(), flows.tag.tolist(),
                   strict=True))
    assert len(keys) == len(flows)
    # nodes of different sizes: no shift maps it onto itself
    assert flow_set(A2A, range(3), 1.0, 1, "deepep", shape=GroupShape((0, 0, 1), rail_aligned=True)).symmetry is None


def two_nodes(nic: str, nvlink: str) -> DatacenterConfig:
    """Two nodes of 8 H100s whose NVLink (the GPUs' and the switch's ports) and NICs run at the rates given."""
    gpu = {"from": "h100-sxm", "nvlink_bandwidth": nvlink}  # a GPU's port runs no faster than its own NVLink
    return DatacenterConfig.model_validate({
        "cluster": {"num_nodes": 2}, "node": {"gpus_per_node": 8, "gpus_per_nic": 1, "gpu": gpu},
        "network": {"scale_up": {"kind": "nvswitch", "switch": {"port_speed": nvlink, "latency": "1us"}},
                    "scale_out": {"nic": {"speed": nic, "latency": "1us"}}}})


def test_on_an_idle_fabric_held_by_its_nics_it_takes_the_fabric_legs_bytes_over_the_nic_rate():
    """2 nodes of 8 with slow NICs and fast NVLink: a member sends 8/16 of its buffer S over its NIC (its parts for
    the other node's 8 members in one message), then the forwards take a few microseconds: S / 2 / NIC."""
    dc = two_nodes("100Gbps", "4000GBps")
    group, size = tuple(range(16)), float(2**32)
    ports = CollectivePlan(Topology.from_datacenter(dc), "deepep").weakest_ports(group)
    time = collective_sweep(dc, A2A, group, [size], algorithm="deepep")[0].time_us * 1e-6
    assert time == pytest.approx(size / 2 / ports.nic, rel=0.01)


def test_held_by_nvlink_its_two_legs_take_what_one_nodes_all_to_all_of_the_same_bytes_takes():
    """With NICs faster than NVLink a member's port carries 7/16 of S straight and 7/16 forwarded: the 7/8 of S an
    all-to-all inside one node of 8 sends, in the same time; NCCL's all-to-all sends only 7/16 over NVLink."""
    dc = two_nodes("8000Gbps", "50GBps")
    size = float(2**32)
    two = collective_sweep(dc, A2A, tuple(range(16)), [size], algorithm="deepep")[0].time_us
    one = collective_sweep(dc, A2A, tuple(range(8)), [size], algorithm="deepep")[0].time_us
    nccl = collective_sweep(dc, A2A, tuple(range(16)), [size], algorithm="p2p")[0].time_us
    assert two == pytest.approx(one, rel=0.01)
    assert nccl == pytest.approx(two / 2, rel=0.02)
