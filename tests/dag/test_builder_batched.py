"""The builder writes collectives' nodes and edges in batches (dag.builder.PendingNodes, _placed_block): the batch
agrees with writing each call on its own, and every call of one signature on one group is the same nodes and
edges moved to its base id."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.collective.tuner import Choice
from simulon.dag.builder import COLUMNS, Expansion, ExpansionTemplate, PendingNodes
from simulon.dag.nodes import NO_NODE, ExecutionDAG
from simulon.pipeline import build_dag


def template(kinds: list[int], gpus: list[int], peers: list[int], sizes: list[float],
             parents: list[int]) -> ExpansionTemplate:
    empty = np.zeros(0, dtype=np.int64)
    return ExpansionTemplate((0,), 1, 1, np.array(kinds), np.array(gpus), np.array(peers), np.array(sizes),
                             np.array(parents), empty, empty, empty, empty)


@st.composite
def calls(draw):
    """Calls of random templates, one after another from a random first id, with room between some of them."""
    placed = draw(st.integers(0, 1_000))
    at, out = placed, []
    for _ in range(draw(st.integers(0, 6))):
        count = draw(st.integers(1, 5))
        at += draw(st.integers(0, 3))  # nodes made one by one between two calls
        t = template(draw(st.lists(st.integers(0, 3), min_size=count, max_size=count)),
                     list(range(count)), draw(st.lists(st.integers(-3, 40), min_size=count, max_size=count)),
                     draw(st.lists(st.floats(0, 1e9), min_size=count, max_size=count)),
                     draw(st.lists(st.sampled_from([NO_NODE, 0, 1, 2]), min_size=count, max_size=count)))
        gpu = np.array(draw(st.lists(st.integers(0, 63), min_size=count, max_size=count)))
        peer = np.array(draw(st.lists(st.integers(-3, 63), min_size=count, max_size=count)))
        e = Expansion(Choice("ring", "simple", 1), t, gpu, peer, ((0, 0),), draw(st.integers(0, 15)))
        out.append((at, e, draw(st.integers(0, 10_000)), draw(st.integers(0, 6)), draw(st.integers(-1, 99)),
                    draw(st.integers(-1, 99))))
        at += count
    return placed, at, out


@settings(max_examples=200, deadline=None)
@given(calls())
def test_a_batch_of_collectives_writes_the_columns_each_call_would_write_on_its_own(case):
    placed, end, made = case
    batched = {name: np.full(end - placed, 7, dtype=dtype) for name, dtype in COLUMNS.items()}
    one_by_one = {name: values.copy() for name, values in batched.items()}
    pending = PendingNodes.empty()
    for first, e, coll, stream, layer, microbatch in made:
        pending.add(first, e, coll, stream, layer, microbatch)
        t, start = e.template, first - placed
        values = {"kind": t.kind, "gpu": e.gpu, "peer": e.peer, "stream": stream, "kernel": -1, "layer": layer,
                  "microbatch": microbatch, "stage": e.stage, "coll": coll, "size": t.size,
                  "parent": np.where(t.parent != NO_NODE, t.parent + first, NO_NODE)}
        for name, value in values.items():
            one_by_one[name][start:start + len(t.kind)] = value
    pending.fill(batched, placed)
    for name in COLUMNS:
        np.testing.assert_array_equal(batched[name], one_by_one[name], err_msg=name)


def calls_by_signature(dag: ExecutionDAG) -> dict[tuple, list[int]]:
    groups = defaultdict(list)
    for i, c in enumerate(dag.collectives):
        groups[(c.ctype, c.nbytes, c.group, c.algorithm, c.protocol, c.channels)].append(i)
    return groups


@pytest.mark.parametrize("fold_mode", ["full", "auto"])
def test_every_call_of_one_signature_on_one_group_is_the_same_nodes_and_edges_moved_to_its_base(fold_mode):
    sc = gpt_scenario(nodes=4, gpus_per_node=4, tp=2, pp=2, ep=2, moe={"num_experts": 4, "top_k": 2}, gbs=16)
    dag, _, _ = build_dag(sc, fold_mode=fold_mode)
    node_coll = dag.coll
    by_coll = np.argsort(node_coll, kind="stable")
    bounds = np.searchsorted(node_coll[by_coll], np.arange(len(dag.collectives) + 1))
    in_edges = defaultdict(list)
    for s, d in zip(dag.edge_src.tolist(), dag.edge_dst.tolist(), strict=True):
        in_edges[d].append(s)
    repeated = 0
    for calls in calls_by_signature(dag).values():
        shapes = set()
        for c in calls:
            nodes = by_coll[bounds[c]:bounds[c + 1]]
            base = int(nodes[0])
            assert (np.diff(nodes) == 1).all(), "a call's nodes are consecutive"
            inner = tuple((s - base, d - base) for d in nodes.tolist() for s in in_edges[d]
                          if base <= s <= int(nodes[-1]))
            parent = np.where(dag.parent[nodes] != NO_NODE, dag.parent[nodes] - base, NO_NODE)
            shapes.add((dag.kind[nodes].tobytes(), dag.gpu[nodes].tobytes(), dag.peer[nodes].tobytes(),
                        dag.size[nodes].tobytes(), parent.tobytes(), inner))
        assert len(shapes) == 1
        repeated += len(calls) > 1
    assert repeated >= 10  # the MoE step repeats its tensor-parallel and expert calls every micro-batch
