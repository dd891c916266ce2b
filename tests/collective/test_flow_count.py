"""A collective's flows counted without making them (decompose.flow_count, what a lone collective's memory check
counts) are the flows flow_set makes, for every algorithm and collective it runs, on groups of any shape."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from helpers import cli
from simulon.collective.algorithms import CATALOG
from simulon.collective.decompose import flow_count, flow_set
from simulon.collective.nccl import PROTOCOLS
from simulon.collective.shape import GroupShape
from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.dag.size import TooLarge
from simulon.pipeline import collective_sweep

RUNS = [(name, ctype) for name, a in CATALOG.items() for ctype in a.decompositions if name != "deepep"]


@st.composite
def groups(draw, regular: bool):
    """A group of ranks over nodes of `per_node` GPUs: each node's first members (regular), or any members."""
    nodes = draw(st.integers(1, 6))
    per_node = draw(st.integers(2 if nodes == 1 else 1, 8))
    if regular:
        members = draw(st.integers(1, per_node))
        ranks = [node * per_node + i for node in range(nodes) for i in range(members)]
    else:
        ranks = draw(st.lists(st.integers(0, nodes * per_node - 1), min_size=2, max_size=nodes * per_node,
                              unique=True))
    assume(len(ranks) >= 2)
    return tuple(ranks), per_node


@pytest.mark.parametrize(("algorithm", "ctype"), RUNS, ids=[f"{a}-{c.name}" for a, c in RUNS])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(data=st.data())
def test_the_counted_flows_are_the_flows_flow_set_makes(algorithm, ctype, data):
    group, per_node = data.draw(groups(regular=data.draw(st.booleans())))
    shape = GroupShape.of(group, per_node, rail_aligned=data.draw(st.booleans()), mesh=data.draw(st.booleans()))
    size = float(data.draw(st.integers(1, 2**31)))
    channels = data.draw(st.integers(1, 16))
    protocol = data.draw(st.sampled_from([p for p in PROTOCOLS if p in CATALOG[algorithm].protocols]))
    one_period = data.draw(st.booleans())
    chunk_bytes = data.draw(st.sampled_from([None, 32768.0, 131072.0]))
    try:
        built = flow_set(ctype, group, size, channels, algorithm, protocol, shape, one_period=one_period,
                         chunk_bytes=chunk_bytes)
    except ValueError:
        assume(False)
    assert flow_count(ctype, shape, size, channels, algorithm, protocol, one_period, chunk_bytes) == len(built)


@given(nodes=st.integers(1, 4), channels=st.integers(1, 4))
@settings(max_examples=10, deadline=None)
def test_deepep_is_counted_at_no_fewer_flows_than_it_makes(nodes, channels):
    shape = GroupShape.of(tuple(range(8 * nodes)), 8)
    built = len(flow_set(CollType.AllToAll, range(8 * nodes), 2**20, channels, "deepep", shape=shape))
    assert flow_count(CollType.AllToAll, shape, 2**20, channels, "deepep") >= built


def test_a_tree_all_reduce_over_131072_gpus_is_refused_before_it_is_built_with_the_memory_it_needs():
    """It used to build 67 million flows and grow past 24 GB until the kernel killed it. 512 pods of DGX H100s need
    cores of 512 ports, one cable a pod (8b2d5eb checks them): this one's switches are given them."""
    dc = DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": 16384}, "network": {
        "scale_out": {"switch": {"from": "quantum-2-qm9700", "port_count": 1024}}}})
    with pytest.raises(TooLarge, match=r"AllReduce of 1GiB over 131,072 GPUs makes 67,10[0-9],[0-9]{3} flows, which "
                                       r"need about [0-9.]+ GB, and 8\.0 GB are available"):
        collective_sweep(dc, "allreduce", range(131072), [2**30], algorithm="tree", memory_limit=8e9)


def test_a_table_row_too_large_for_the_memory_limit_is_skipped_with_what_it_needs(tmp_path):
    """A 16,384-rank all-to-all row grew past 8 GB to a MemoryError; the row beside it is still compared."""
    table = tmp_path / "collectives.csv"
    table.write_text("category,source,hardware,collective,msg_bytes,group_size,busbw_GBps,time_us\n"
                     "collective,test,DGX H100,alltoall,1048576,16384,40,\n"
                     "collective,test,DGX H100,allreduce,1048576,16,100,\n")
    proc = cli("validate", "collectives", "--csv", str(table), "--json", "--max-memory", "4GB")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [row["index"] for row in report["rows"]] == [1]
    (skipped,) = report["skipped"]
    assert skipped["index"] == 0
    assert skipped["reason"].startswith("too large: AllToAll of 1MiB over 16,384 GPUs makes 268,419,072 flows, "
                                        "which need about ")


def test_a_replayed_collective_counts_the_engine_it_compiles_not_only_its_flows():
    """A 64-GPU all-to-all peaks 122 MB over the import (the compiled replay), but was let run under 100 MB."""
    dc = DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": 8}})
    with pytest.raises(TooLarge, match="AllToAll of 1MiB over 64 GPUs"):
        collective_sweep(dc, "alltoall", range(64), [2**20], memory_limit=100e6)
    assert collective_sweep(dc, "alltoall", range(64), [2**20], memory_limit=200e6)
