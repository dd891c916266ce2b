"""Collective decomposition: flow counts, bytes per rank, dependency chains, refusals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulon.collective import decompose_collective, flow_set
from simulon.workload.program import CollType

sizes = st.integers(1, 2**30).map(float)
groups = st.integers(2, 16)
channels = st.integers(1, 4)


@given(n=groups, c=channels, size=sizes)
def test_ring_all_reduce_has_2_n_minus_1_n_c_flows_and_moves_2_n_minus_1_over_n_per_rank(n, c, size):
    flows = flow_set("AllReduce", range(n), size, c)
    assert len(flows) == 2 * (n - 1) * n * c
    for pos in range(n):
        assert flows.bytes_sent_by(pos) == pytest.approx(2 * (n - 1) / n * size)
        assert flows.bytes_received_by(pos) == pytest.approx(flows.bytes_sent_by(pos))


@given(n=groups, c=channels, size=sizes, ctype=st.sampled_from(["AllGather", "ReduceScatter"]))
def test_ring_gather_and_scatter_move_n_minus_1_over_n_per_rank(n, c, size, ctype):
    flows = flow_set(ctype, range(n), size, c)
    assert len(flows) == (n - 1) * n * c
    for pos in range(n):
        assert flows.bytes_sent_by(pos) == pytest.approx((n - 1) / n * size)
        assert flows.bytes_received_by(pos) == pytest.approx((n - 1) / n * size)


@given(n=groups, c=channels, size=sizes)
def test_all_to_all_sends_one_nth_to_every_peer_without_chains(n, c, size):
    flows = flow_set("AllToAll", range(n), size, c)
    assert len(flows) == n * (n - 1) * c
    assert (flows.parent == -1).all()
    assert (flows.src_pos != flows.dst_pos).all()
    pairs = {(int(s), int(d)) for s, d in zip(flows.src_pos, flows.dst_pos, strict=True)}
    assert len(pairs) == n * (n - 1)
    for pos in range(n):
        assert flows.bytes_sent_by(pos) == pytest.approx((n - 1) / n * size)


@given(n=groups, c=channels, ctype=st.sampled_from(["AllReduce", "AllGather", "ReduceScatter"]))
def test_ring_chains_forward_what_was_received_on_the_same_channel(n, c, ctype):
    flows = flow_set(ctype, range(n), 1024.0, c)
    for i in range(len(flows)):
        parent = flows.parent[i]
        if flows.step[i] == 0:
            assert parent == -1
            continue
        assert flows.step[parent] == flows.step[i] - 1
        assert flows.channel[parent] == flows.channel[i]
        assert flows.dst_pos[parent] == flows.src_pos[i]  # what I send now is what I received
        assert flows.dst_pos[i] == (flows.src_pos[i] + 1) % n


def test_decompose_collective_as_the_seed_readme_calls_it():
    result, next_flow_id = decompose_collective(collective_type="AllReduce", group_ranks=[0, 1, 2, 3],
                                                data_size=1024 * 1024, num_channels=2, algorithm="ring")
    assert len(result.flows) == 2 * 3 * 4 * 2
    assert next_flow_id == len(result.flows)
    by_id = {f.flow_id: f for f in result.flows}
    for flow in result.flows:
        assert flow.bytes == 1024 * 1024 / (4 * 2)
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


@pytest.mark.parametrize("algorithm", ["tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain", "auto"])
def test_algorithms_not_built_are_refused_not_replaced(algorithm):
    with pytest.raises(ValueError, match="not built yet"):
        decompose_collective("AllReduce", [0, 1, 2, 3], 1024, 1, algorithm=algorithm)


def test_unknown_algorithm_and_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="unknown"):
        flow_set("AllReduce", [0, 1], 1024, 1, algorithm="warp-drive")
    with pytest.raises(ValueError, match="unknown collective type"):
        flow_set("Broadcastish", [0, 1], 1024, 1)
    with pytest.raises(ValueError, match="repeated"):
        flow_set("AllReduce", [0, 1, 1], 1024, 1)
    with pytest.raises(ValueError, match="channels"):
        flow_set("AllReduce", [0, 1], 1024, 0)


def test_single_member_group_has_no_flows():
    assert len(flow_set(CollType.AllReduce, [5], 1024, 2)) == 0
    assert np.asarray(flow_set(CollType.AllToAll, [5], 1024, 2).size).sum() == 0
