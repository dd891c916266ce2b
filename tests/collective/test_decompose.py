"""Collective decomposition: flow counts, bytes per rank, dependency structure, per algorithm; refusals."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.collective import ALGORITHMS, GroupShape, decompose_collective, flow_set
from simulon.collective.common import SWITCH
from simulon.collective.mesh import disjoint_cycles
from simulon.collective.nccl import constants
from simulon.collective.ring import p2p_deltas
from simulon.collective.tree import btree_parent, dtree_parent
from simulon.collective.types import CollType

sizes = st.integers(1, 2**30).map(float)
groups = st.integers(2, 16)
channels = st.integers(1, 4)
AR, AG, RS, A2A = CollType.AllReduce, CollType.AllGather, CollType.ReduceScatter, CollType.AllToAll


def shaped(nodes: int, per_node: int) -> GroupShape:
    return GroupShape.of(range(nodes * per_node), per_node)


@given(n=groups, c=channels, size=sizes)
def test_ring_all_reduce_has_2_n_minus_1_n_c_flows_and_moves_2_n_minus_1_over_n_per_rank(n, c, size):
    flows = flow_set("AllReduce", range(n), size, c)
    assert len(flows) * flows.lanes == 2 * (n - 1) * n * c
    for pos in range(n):
        assert flows.bytes_sent_by(pos) == pytest.approx(2 * (n - 1) / n * size)
        assert flows.bytes_received_by(pos) == pytest.approx(flows.bytes_sent_by(pos))


@given(n=groups, c=channels, size=sizes, ctype=st.sampled_from(["AllGather", "ReduceScatter"]))
def test_ring_gather_and_scatter_move_n_minus_1_over_n_per_rank(n, c, size, ctype):
    flows = flow_set(ctype, range(n), size, c)
    assert len(flows) * flows.lanes == (n - 1) * n * c
    for pos in range(n):
        assert flows.bytes_sent_by(pos) == pytest.approx((n - 1) / n * size)
        assert flows.bytes_received_by(pos) == pytest.approx((n - 1) / n * size)


@given(n=st.integers(2, 40), c=channels, size=sizes)
def test_all_to_all_across_nodes_sends_one_nth_to_every_peer_in_rounds_of_peers(n, c, size):
    flows = flow_set("AllToAll", range(n), size, c, shape=shaped(n, 1))
    assert len(flows) == n * (n - 1)  # identical channels are simulated once, carrying all their bytes
    assert (flows.src_pos != flows.dst_pos).all()
    pairs = {(int(s), int(d)) for s, d in zip(flows.src_pos, flows.dst_pos, strict=True)}
    assert len(pairs) == n * (n - 1)
    for pos in range(n):
        assert flows.bytes_sent_by(pos) == pytest.approx((n - 1) / n * size)
    # 16 peers at a time, in NCCL's p2pSchedule order of node deltas (one member a node: 1, 3, 2 of 4 nodes);
    # a flow of a later round waits for what its sender received in the round before
    offset = (flows.dst_pos - flows.src_pos) % n
    slot = {int(d): k for k, d in enumerate(p2p_deltas(n)[1:])}
    assert (flows.step == np.array([slot[int(o)] for o in offset]) // 16).all()
    assert len(flows.parent_idx) == max(0, n - 1 - 16) * n
    child = flows.parent_of
    assert (flows.dst_pos[flows.parent_idx] == flows.src_pos[child]).all()
    assert (flows.step[flows.parent_idx] == flows.step[child] - 1).all()


@given(n=st.integers(2, 80), c=st.sampled_from([1, 2, 4, 8, 16, 32]), size=sizes)
def test_all_to_all_in_a_node_cuts_each_peers_part_over_its_channels_which_serve_parts_in_turn(n, c, size):
    flows = flow_set("AllToAll", range(n), size, c)
    assert len(flows) == n * (n - 1) * c and flows.lanes == 1
    for pos in range(n):
        assert flows.bytes_sent_by(pos) == pytest.approx((n - 1) / n * size)
        assert flows.bytes_received_by(pos) == pytest.approx((n - 1) / n * size)
    offset = (flows.dst_pos - flows.src_pos) % n
    total = constants()["p2p_channels"]
    parts = Counter(zip(flows.src_pos.tolist(), offset.tolist(), strict=True))
    assert set(parts.values()) == {c}
    assert (((flows.channel - offset) % total)[:c] == [int(f"{j:05b}"[::-1], 2) for j in range(c)]).all()
    # a channel serves a rank's parts one after another, each once the part before on it has arrived
    load = Counter(zip(flows.src_pos.tolist(), flows.channel.tolist(), strict=True))
    assert flows.step.max() + 1 == max(load.values())
    child = flows.parent_of
    assert (flows.dst_pos[flows.parent_idx] == flows.src_pos[child]).all()
    assert (flows.channel[flows.parent_idx] == flows.channel[child]).all()
    assert (flows.step[flows.parent_idx] == flows.step[child] - 1).all()
    assert len(flows.parent_idx) == len(flows) - len(load)


def test_72_ranks_load_7_of_32_channels_with_a_third_part():
    flows = flow_set("AllToAll", range(72), 2.0**30, 1)
    load = Counter(flows.channel[flows.src_pos == 0].tolist())
    assert sorted(Counter(load.values()).items()) == [(2, 25), (3, 7)]


@given(n=groups, c=channels, ctype=st.sampled_from(["AllReduce", "AllGather", "ReduceScatter"]))
def test_ring_chains_forward_what_was_received_on_the_same_channel(n, c, ctype):
    flows = flow_set(ctype, range(n), 1024.0, c)
    for i in range(len(flows)):
        parents = flows.parents(i)
        if flows.step[i] == 0:
            assert len(parents) == 0
            continue
        (parent,) = parents
        assert flows.step[parent] == flows.step[i] - 1
        assert flows.channel[parent] == flows.channel[i]
        assert flows.dst_pos[parent] == flows.src_pos[i]  # what I send now is what I received
        assert flows.dst_pos[i] == (flows.src_pos[i] + 1) % n


@settings(max_examples=30, deadline=None)
@given(nodes=st.integers(2, 6), per_node=st.integers(2, 4), c=st.integers(1, 8))
def test_multi_node_rings_cross_each_node_boundary_once_per_channel_on_one_rail(nodes, per_node, c):
    shape = GroupShape.of(range(nodes * per_node), per_node, rail_aligned=True)
    flows = flow_set(AR, range(shape.n), 2.0**20, c, "ring", shape=shape)
    domain, local = np.asarray(shape.domain), shape.local
    first = flows.step == 0
    cross = first & (domain[flows.src_pos] != domain[flows.dst_pos])
    sim_channels = int(flows.channel.max()) + 1
    assert cross.sum() == nodes * sim_channels
    on_rail = local[flows.src_pos[cross]] == local[flows.dst_pos[cross]]
    assert on_rail.sum() >= (nodes - nodes % 2) * sim_channels  # an odd count needs one rail change
    # channels leave each node by different members (so by different NICs)
    exits = Counter(zip(domain[flows.src_pos[cross]].tolist(), local[flows.src_pos[cross]].tolist(), strict=True))
    assert max(exits.values()) == 1 or sim_channels > per_node


@pytest.mark.parametrize("n", [2, 3, 5, 8, 13, 16])
def test_double_binary_trees_are_complementary_trees(n):
    for parent in (btree_parent(n), dtree_parent(n)):
        assert (parent == -1).sum() == 1
        for rank in range(n):  # every rank reaches the root
            seen, r = set(), rank
            while parent[r] >= 0:
                assert r not in seen
                seen.add(r)
                r = int(parent[r])
        assert max(Counter(parent[parent >= 0].tolist()).values(), default=0) <= 2
    if n > 2:
        leaves = lambda p: set(range(n)) - set(p[p >= 0].tolist())  # noqa: E731
        assert leaves(btree_parent(n)) != leaves(dtree_parent(n))


@pytest.mark.parametrize("nodes,per_node", [(1, 8), (4, 1), (4, 4), (3, 2)])
def test_tree_all_reduce_reduces_up_and_broadcasts_down_every_chunk(nodes, per_node):
    shape = shaped(nodes, per_node)
    n, size = shape.n, 2.0**24
    flows = flow_set(AR, range(n), size, 2, "tree", shape=shape)
    # each channel's data crosses every tree edge once up and once down
    edges = Counter(zip(flows.src_pos.tolist(), flows.dst_pos.tolist(), strict=True))
    assert flows.size.sum() == pytest.approx(2 * (n - 1) * size * flows.lanes / flows.lanes)
    assert all(edges[(b, a)] == count for (a, b), count in edges.items())
    # a non-leaf forwards a chunk up only after all its children's copies of that chunk arrived
    for i in range(len(flows)):
        for p in flows.parents(i):
            assert flows.dst_pos[p] == flows.src_pos[i] or flows.src_pos[p] == flows.src_pos[i]


@pytest.mark.parametrize("ctype", [AR, RS, AG])
def test_nvls_reduces_in_the_switch_each_member_sending_the_others_their_parts(ctype):
    n, size = 8, 2.0**26
    flows = flow_set(ctype, range(n), size, 1, "nvls")
    up = flows.dst_pos == SWITCH
    down = flows.src_pos == SWITCH
    assert (up | down).all() and flows.switch == "scale_up"
    per_member_up = {p: flows.size[up & (flows.src_pos == p)].sum() for p in range(n)}
    per_member_down = {p: flows.size[down & (flows.dst_pos == p)].sum() for p in range(n)}
    expected_up = {AR: size, RS: size * (n - 1) / n, AG: size / n}[ctype]  # its own part stays local
    expected_down = {AR: size, RS: size / n, AG: size * (n - 1) / n}[ctype]
    assert all(v == pytest.approx(expected_up) for v in per_member_up.values())
    assert all(v == pytest.approx(expected_down) for v in per_member_down.values())


def test_nvls_tree_reduces_in_each_node_then_over_rail_trees():
    shape = shaped(4, 4)
    flows = flow_set(AR, range(16), 2.0**24, 2, "nvls_tree", shape=shape)
    p2p = (flows.src_pos >= 0) & (flows.dst_pos >= 0)
    domain, local = np.asarray(shape.domain), shape.local
    assert (domain[flows.src_pos[p2p]] != domain[flows.dst_pos[p2p]]).all()  # only the trees cross nodes
    assert (local[flows.src_pos[p2p]] == local[flows.dst_pos[p2p]]).all()    # each on its rail


@pytest.mark.parametrize("algorithm", ["collnet_direct", "collnet_chain"])
def test_collnet_reduces_across_nodes_in_the_network(algorithm):
    shape = shaped(4, 4)
    size = 2.0**24
    flows = flow_set(AR, range(16), size, 4, algorithm, shape=shape)
    assert flows.switch == "scale_out"
    up = flows.dst_pos == SWITCH
    # every node sends its whole (reduced) buffer up the network once
    per_node = Counter()
    for p, s in zip(flows.src_pos[up].tolist(), flows.size[up].tolist(), strict=True):
        per_node[shape.domain[p]] += s
    assert all(v == pytest.approx(size) for v in per_node.values())
    p2p = (flows.src_pos >= 0) & (flows.dst_pos >= 0)
    domain = np.asarray(shape.domain)
    assert (domain[flows.src_pos[p2p]] == domain[flows.dst_pos[p2p]]).all()  # NVLink inside nodes only


@pytest.mark.parametrize("ctype", [AG, RS])
@pytest.mark.parametrize("n", [2, 5, 8, 16])
def test_pat_takes_log_steps_and_moves_n_minus_1_over_n(ctype, n):
    size = 2.0**20
    flows = flow_set(ctype, range(n), size, 1, "pat")
    assert flows.step.max() + 1 == (n - 1).bit_length()
    for pos in range(n):
        assert flows.bytes_sent_by(pos) == pytest.approx((n - 1) / n * size)
        assert flows.bytes_received_by(pos) == pytest.approx((n - 1) / n * size)


@pytest.mark.parametrize("ctype", [AR, AG, RS])
def test_hierarchical_sends_only_a_1_over_m_share_across_nodes(ctype):
    nodes, m, size = 4, 4, 2.0**24
    shape = shaped(nodes, m)
    flows = flow_set(ctype, range(16), size, 1, "hierarchical", shape=shape)
    domain = np.asarray(shape.domain)
    cross = domain[flows.src_pos] != domain[flows.dst_pos]
    factor = 2 if ctype == AR else 1
    for pos in range(16):  # each member sends (a ring's share of) 1/m of the buffer to other nodes
        sent_out = flows.size[cross & (flows.src_pos == pos)].sum()
        assert sent_out == pytest.approx(factor * (nodes - 1) / nodes * size / m)
        assert flows.bytes_sent_by(pos) == pytest.approx(flows.bytes_received_by(pos))


def test_pxn_relays_cross_rail_flows_through_the_rail_aligned_peer():
    shape = shaped(2, 4)
    direct = flow_set(A2A, range(8), 2.0**20, 1, "ring", shape=shape)
    relayed = flow_set(A2A, range(8), 2.0**20, 1, "pxn", shape=shape)
    domain, local = np.asarray(shape.domain), shape.local
    cross = domain[relayed.src_pos] != domain[relayed.dst_pos]
    assert (local[relayed.src_pos[cross]] == local[relayed.dst_pos[cross]]).all()
    assert relayed.size.sum() > direct.size.sum()
    assert sum(relayed.bytes_received_by(p) for p in range(8)) == pytest.approx(relayed.size.sum())


@pytest.mark.parametrize("algorithm,ctype", [(a, c) for a in ALGORITHMS for c in ALGORITHMS[a]])
def test_every_algorithm_builds_acyclic_flows_for_what_it_does(algorithm, ctype):
    shape = shaped(1, 8) if algorithm == "nvls" else shaped(4, 4)
    flows = flow_set(ctype, range(shape.n), 2.0**22, 4, algorithm, shape=shape)
    empty = flows.size <= 0  # only NVLS-tree's rail heads reduce their own part locally: an empty leg up
    assert len(flows) > 0 and (not empty.any() or (algorithm == "nvls_tree" and (flows.dst_pos[empty] == SWITCH).all()))
    # Kahn's algorithm over the parent links visits every flow: no cycles
    children = [[] for _ in range(len(flows))]
    pending = np.diff(flows.parent_ptr).copy()
    for child, parent in zip(flows.parent_of.tolist(), flows.parent_idx.tolist(), strict=True):
        children[parent].append(child)
    ready = list(np.flatnonzero(pending == 0))
    seen = 0
    while ready:
        f = ready.pop()
        seen += 1
        for c in children[f]:
            pending[c] -= 1
            if pending[c] == 0:
                ready.append(c)
    assert seen == len(flows)


@pytest.mark.parametrize("algorithm,rail_aligned,expected", [
    ("ring", False, 4), ("ring", True, 8), ("tree", False, None), ("hierarchical", False, 4),
    ("collnet_chain", False, 4), ("pat", False, 1),
])
def test_symmetry_is_the_shift_that_maps_the_flows_onto_themselves(algorithm, rail_aligned, expected):
    shape = GroupShape.of(range(16), 4, rail_aligned)
    ctype = AG if algorithm == "pat" else AR
    flows = flow_set(ctype, range(16), 2.0**20, 4, algorithm, shape=shape)
    assert flows.symmetry == expected
    if expected is None:
        return
    # shifting every position by the symmetry gives back the same set of (step, channel, src, dst, size)
    key = lambda src, dst: sorted(zip(flows.step.tolist(), flows.channel.tolist(), src.tolist(),  # noqa: E731
                                      dst.tolist(), flows.size.tolist(), strict=True))
    shift = lambda pos: np.where(pos >= 0, (pos + expected) % 16, pos)  # noqa: E731
    assert key(shift(flows.src_pos), shift(flows.dst_pos)) == key(flows.src_pos, flows.dst_pos)


def test_identical_channels_are_simulated_once_carrying_all_their_bytes():
    one_node = flow_set(AR, range(8), 2.0**20, 16)
    assert one_node.lanes == 16 and one_node.channel.max() == 0
    shape = shaped(2, 4)
    two_nodes = flow_set(AR, range(8), 2.0**20, 16, "ring", shape=shape)
    assert two_nodes.lanes == 4 and two_nodes.channel.max() == 3  # one ring per member a channel starts at
    assert two_nodes.size.sum() == pytest.approx(one_node.size.sum())


def test_decompose_collective_as_the_seed_readme_calls_it():
    result, next_flow_id = decompose_collective(collective_type="AllReduce", group_ranks=[0, 1, 2, 3],
                                                data_size=1024 * 1024, num_channels=2, algorithm="ring")
    assert sum(f.bytes for f in result.flows) == pytest.approx(2 * 3 * 1024 * 1024)
    assert next_flow_id == len(result.flows)
    by_id = {f.flow_id: f for f in result.flows}
    for flow in result.flows:
        for parent in flow.parent_flow_ids:
            assert flow.flow_id in by_id[parent].child_flow_ids
            assert by_id[parent].dst == flow.src
        for child in flow.child_flow_ids:
            assert flow.flow_id in by_id[child].parent_flow_ids


def test_flow_ids_continue_from_the_given_start_and_map_ranks():
    result, nxt = decompose_collective("AllGather", [8, 16, 24], 3000, 1, flow_id_start=100)
    assert [f.flow_id for f in result.flows] == list(range(100, 106))
    assert nxt == 106
    assert {(f.src, f.dst) for f in result.flows} == {(8, 16), (16, 24), (24, 8)}


def test_algorithms_refuse_what_they_do_not_do():
    with pytest.raises(ValueError, match="AllGather has no tree decomposition"):
        flow_set(AG, range(4), 1024, 1, "tree")
    with pytest.raises(ValueError, match="nvls runs inside one NVLink domain"):
        flow_set(AR, range(8), 1024, 1, "nvls", shape=shaped(2, 4))
    with pytest.raises(ValueError, match="reduces across nodes in the network"):
        flow_set(AR, range(8), 1024, 1, "collnet_chain")
    with pytest.raises(ValueError, match="same number of group members on every node"):
        flow_set(AR, range(5), 1024, 1, "tree", shape=GroupShape((0, 0, 0, 1, 1)))
    with pytest.raises(ValueError, match=r"resolve it with collective\.tuner"):
        decompose_collective("AllReduce", [0, 1, 2, 3], 1024, 1, algorithm="auto")


def test_unknown_algorithm_and_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="unknown"):
        flow_set("AllReduce", [0, 1], 1024, 1, algorithm="warp-drive")
    with pytest.raises(ValueError, match=r"expected one of allreduce, .*, got 'Broadcastish'"):
        flow_set("Broadcastish", [0, 1], 1024, 1)
    with pytest.raises(ValueError, match="repeated"):
        flow_set("AllReduce", [0, 1, 1], 1024, 1)
    with pytest.raises(ValueError, match="channels"):
        flow_set("AllReduce", [0, 1], 1024, 0)
    with pytest.raises(ValueError, match="protocol"):
        flow_set("AllReduce", [0, 1], 1024, 1, protocol="ll256")


def test_single_member_group_has_no_flows():
    assert len(flow_set(CollType.AllReduce, [5], 1024, 2)) == 0
    assert np.asarray(flow_set(CollType.AllToAll, [5], 1024, 2).size).sum() == 0


@given(k=st.integers(1, 9))
def test_mesh_cycles_are_arc_disjoint_hamiltonian_cycles_using_every_link_where_one_can(k):
    cycles = disjoint_cycles(k)
    assert all(sorted(c) == list(range(k)) for c in cycles)
    arcs = [(c[i], c[(i + 1) % k]) for c in cycles for i in range(k)] if k > 1 else []
    assert len(set(arcs)) == len(arcs) and all(a != b for a, b in arcs)
    # the complete digraph splits into k-1 Hamiltonian cycles except on 4 and 6 vertices (Tillson 1980)
    assert len(cycles) == (k - 2 if k in (4, 6) else max(k - 1, 1))


@given(n=st.integers(2, 8), rounds=st.integers(1, 2), size=sizes)
def test_a_mesh_ring_spreads_its_channels_over_every_cycle_and_still_moves_2_n_minus_1_over_n(n, rounds, size):
    shape = GroupShape.of(range(n), n, mesh=True)
    cycles = len(disjoint_cycles(n))
    flows = flow_set(AR, range(n), size, rounds * cycles, "ring", shape=shape)
    for pos in range(n):
        assert flows.bytes_sent_by(pos) == pytest.approx(2 * (n - 1) / n * size)
        assert flows.bytes_received_by(pos) == pytest.approx(flows.bytes_sent_by(pos))
    per_arc = Counter()
    for s, d, b in zip(flows.src_pos.tolist(), flows.dst_pos.tolist(), flows.size.tolist(), strict=True):
        per_arc[(s, d)] += b
    assert len(per_arc) == n * cycles if n > 2 else len(per_arc) == 2
    assert max(per_arc.values()) == pytest.approx(min(per_arc.values()))   # every link it uses carries the same
    assert flows.symmetry is None or cycles == 1


@pytest.mark.parametrize(("algorithm", "n", "size", "real_chunk"), [  # NVLS: calcCollChunking's over 32 x n heads
    ("nvls", 8, 2**26, 2**15), ("nvls", 8, 2**30, 2**16), ("nvls", 4, 2**22, 2**14), ("tree", 8, 2**28, 2**19)])
def test_a_merged_channel_is_cut_into_the_chunks_of_one_real_channel(algorithm, n, size, real_chunk):
    channels = 32
    flows = flow_set(AR, range(n), size, channels, algorithm)
    assert flows.lanes > 1   # identical channels merged
    per_channel = size / channels / (n if algorithm == "nvls" else 1)
    chunks = min(max(1, -(-per_channel // real_chunk)), constants()["max_pipeline_chunks"])
    phases = 4 if algorithm == "nvls" else 2   # reduce up and down, multicast up and down; a tree's up and down
    assert flows.step.max() + 1 == phases * chunks


@pytest.mark.parametrize("n, c", [(4, 2), (8, 4), (3, 8)])
def test_a_ring_all_reduce_returns_every_channels_flows_as_mock_nccl_does(n, c):
    result, next_flow_id = decompose_collective("AllReduce", list(range(n)), 4096.0 * n * c, c, "ring")
    assert len(result.flows) == 2 * (n - 1) * n * c == next_flow_id
    assert sorted({f.channel for f in result.flows}) == list(range(c))
    per_channel = {ch: [f for f in result.flows if f.channel == ch] for ch in range(c)}
    assert all(len(flows) == 2 * (n - 1) * n for flows in per_channel.values())
    by_id = {f.flow_id: f for f in result.flows}
    assert all(by_id[p].channel == f.channel for f in result.flows for p in f.parent_flow_ids)


@given(algorithm=st.sampled_from(["ring", "tree", "pat"]), ctype=st.sampled_from(["AllReduce", "AllGather"]),
       n=st.integers(2, 9), channels=st.integers(1, 16), size=st.floats(1.0, 1e9))
def test_every_channel_keeps_the_bytes_and_numbers_the_channels_from_zero(algorithm, ctype, n, channels, size):
    try:
        simulated = flow_set(ctype, range(n), size, channels, algorithm)
    except ValueError:
        return  # an algorithm that does not do this collective
    result, _ = decompose_collective(ctype, list(range(n)), size, channels, algorithm)
    assert sum(f.bytes for f in result.flows) == pytest.approx(float(simulated.size.sum()), rel=1e-9)
    assert {f.channel for f in result.flows} == set(range(channels))
    assert len(result.flows) == len(simulated) * simulated.lanes


@pytest.mark.parametrize("variant", ["hierarchical", "pxn"])
@pytest.mark.parametrize("ctype", [AR, CollType.AllGather, CollType.ReduceScatter])
def test_ring_variants_inside_one_node_are_the_ring_and_take_its_time(variant, ctype):
    """Inside one NVLink domain the hierarchical ring has no rails to cross and PXN nothing to relay: each is the
    ring, its loops ending in the ring's local reduce or copy (it had none: a 1 GiB reduce-scatter ran 11% fast)."""
    from simulon.config import DatacenterConfig
    from simulon.pipeline import collective_sweep

    dc = DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": 1}})
    sizes = [2.0**20, 2.0**27, 2.0**30]
    ring = collective_sweep(dc, ctype, tuple(range(8)), sizes, "ring")
    other = collective_sweep(dc, ctype, tuple(range(8)), sizes, variant)
    assert [o.time_us for o in other] == pytest.approx([r.time_us for r in ring], rel=1e-9)


@pytest.mark.parametrize(("nodes", "per_node"), [(1, 8), (1, 4), (2, 4)])
def test_a_tree_takes_one_chain_on_every_channel_inside_a_domain_and_a_chain_from_each_channels_member_across(
        nodes, per_node):
    # NCCL's search replays its first channel's PCI order where the communicator has no network (search.cc,
    # "Intra-node only"); across nodes each channel starts from its own NIC, so from another member of the node.
    # Identical channels are simulated once, carrying the others' bytes (lanes)
    n = nodes * per_node
    shape = GroupShape(tuple(np.repeat(np.arange(nodes), per_node)))
    channels = 2 * per_node
    flows = flow_set(AR, range(n), 2.0**20, channels, "tree", shape=shape)
    edges = {c: {(s, d) for s, d, ch in zip(flows.src_pos, flows.dst_pos, flows.channel, strict=True) if ch == c}
             for c in np.unique(flows.channel)}
    if nodes == 1:
        chain = {(i, i - 1) for i in range(1, n)} | {(i - 1, i) for i in range(1, n)}   # up to 0, back down
        assert list(edges.values()) == [chain] and flows.lanes == channels
    else:
        assert len({frozenset(e) for e in edges.values()}) == per_node and flows.lanes == 1  # a chain per member
