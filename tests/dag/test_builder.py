"""The DAG builder on programs written by hand: every node and edge it makes, checked one by one."""

from __future__ import annotations

from helpers import gpt_scenario
from simulon.collective.tuner import CollectivePlan
from simulon.collective.types import CollType
from simulon.dag.builder import DAGBuilder
from simulon.dag.fold import Fold
from simulon.dag.nodes import NO_NODE, ExecutionDAG, NodeKind
from simulon.network.topology import Topology
from simulon.workload.kernels import Phase, memory_bound
from simulon.workload.layout import RankLayout
from simulon.workload.program import StageProgram, Stream


def build(programs: list[StageProgram], layout: RankLayout) -> ExecutionDAG:
    topology = Topology.from_datacenter(gpt_scenario(gpus_per_node=2).datacenter)
    plan = CollectivePlan(topology, "ring", "simple", channels=1)
    return DAGBuilder(programs, layout, Fold.identity(layout.num_gpus), plan).build()


def kernel(name: str):
    return memory_bound(name, Phase.fwd, 1e6, 1e6)


def edges(dag: ExecutionDAG) -> set[tuple[int, int]]:
    return set(zip(dag.edge_src.tolist(), dag.edge_dst.tolist(), strict=True))


def test_a_two_rank_ring_all_reduce_between_kernels_has_exactly_its_dependencies():
    prog = StageProgram(0)
    prog.compute(kernel("a"), layer=0, microbatch=0)
    reduce = prog.collective(CollType.AllReduce, "tp", 2**20, Stream.tp_comm, "ar", 0, 0, Phase.fwd)
    prog.compute(kernel("b"), layer=0, microbatch=0, waits=(reduce,))
    dag = build([prog], RankLayout(tp=2, cp=1, dp=1, pp=1))
    # rank 0 is instantiated first: a, the collective's markers (start, end) of both members and its four
    # flows, then rank 0's b; rank 1's a and b come after.
    a0, start0, end0, start1, end1, f01, f10, g01, g10, b0, a1, b1 = range(12)
    assert dag.kind.tolist() == [NodeKind.compute] + [NodeKind.marker] * 4 + [NodeKind.flow] * 4 + \
        [NodeKind.compute] * 3
    assert dag.gpu.tolist() == [0, 0, 0, 1, 1, 0, 1, 0, 1, 0, 1, 1]
    # the reduce-scatter step sends each rank's half to the other; the all-gather step forwards what came in
    assert dag.peer[[f01, f10, g01, g10]].tolist() == [1, 0, 1, 0]
    assert dag.parent[[f01, f10, g01, g10]].tolist() == [NO_NODE, NO_NODE, f10, f01]
    assert edges(dag) == {
        (a0, start0), (a1, start1),                     # the collective carries a's output
        (start0, end0), (start1, end1),                 # a member's part ends no earlier than it starts
        (f10, g01), (f01, g10),                         # a rank forwards what it received
        (start0, f01), (start1, f10),                   # a chain starts when its sender has joined
        (start1, f01), (start0, f10),                   # ... and its receiver
        (g01, end0), (g10, end1),                       # a member is done when its last send arrived
        (g01, end1), (g10, end0),                       # ... and its last receive
        (a0, b0), (a1, b1),                             # kernels run in order on the compute stream
        (end0, b0), (end1, b1),                         # b waits for the all-reduce
    }
    # a connection carries one step at a time: the all-gather step leaves once the reduce-scatter step has
    assert set(zip(dag.stream_src.tolist(), dag.stream_dst.tolist(), strict=True)) == {(f01, g01), (f10, g10)}


def test_a_pipeline_send_links_the_producing_kernel_to_the_consumer_on_the_next_stage():
    first, second = StageProgram(0), StageProgram(1)
    first.compute(kernel("a"), layer=0, microbatch=0)
    first.send(peer_stage=1, peer_chunk=0, nbytes=2**20, microbatch=0, phase=Phase.fwd)
    received = second.recv(peer_stage=0, chunk=0, microbatch=0, phase=Phase.fwd)
    second.compute(kernel("b"), layer=1, microbatch=0, waits=(received,))
    dag = build([first, second], RankLayout(tp=1, cp=1, dp=1, pp=2))
    a, send, b = range(3)
    assert dag.kind.tolist() == [NodeKind.compute, NodeKind.flow, NodeKind.compute]
    assert (dag.gpu[send], dag.peer[send], dag.size[send]) == (0, 1, 2**20)
    assert edges(dag) == {(a, send), (send, b)}


def test_ranks_running_one_program_number_their_kernels_after_the_collectives_the_first_of_them_made():
    """A collective launched with a kernel (its launch marker), a kernel waiting for it, on two ranks of one
    program: rank 0 makes the collective's nodes for both, so rank 1's kernels follow rank 0's directly."""
    prog = StageProgram(0)
    prog.compute(kernel("a"), layer=0, microbatch=0)
    b = prog.compute(kernel("b"), layer=0, microbatch=0)
    reduce = prog.collective(CollType.AllReduce, "tp", 2**20, Stream.tp_comm, "ar", 0, 0, Phase.fwd,
                             alongside=(b,))
    prog.compute(kernel("c"), layer=0, microbatch=0, waits=(reduce,))
    dag = build([prog], RankLayout(tp=2, cp=1, dp=1, pp=1))
    a0, m0, b0, start0, end0, start1, end1, *flows, c0, a1, m1, b1, c1 = range(16)
    assert dag.peer[flows].tolist() == [1, 0, 1, 0]
    assert dag.kind.tolist() == [NodeKind.compute, NodeKind.marker, NodeKind.compute] + [NodeKind.marker] * 4 + \
        [NodeKind.flow] * 4 + [NodeKind.compute, NodeKind.compute, NodeKind.marker, NodeKind.compute,
                               NodeKind.compute]
    assert dag.gpu.tolist() == [0, 0, 0, 0, 0, 1, 1, 0, 1, 0, 1, 0, 1, 1, 1, 1]
    assert [dag.kernel_specs[k].name for k in dag.kernel[[a0, b0, c0, a1, b1, c1]]] == ["a", "b", "c"] * 2
    assert dag.kernel[[m0, m1]].tolist() == [-1, -1]
    assert {(a0, m0), (m0, b0), (m0, start0), (b0, c0), (end0, c0),      # b launches the all-reduce with it
            (a1, m1), (m1, b1), (m1, start1), (b1, c1), (end1, c1)} <= edges(dag)
    assert not {(a0, start0), (b0, start0), (a1, start1), (b1, start1)} & edges(dag)  # it waits for b's start only
    # the edges in the order an op-by-op build adds them: rank by rank, op by op, a collective's own first
    in_order = list(zip(dag.edge_src.tolist(), dag.edge_dst.tolist(), strict=True))
    assert in_order[:3] == [(a0, m0), (m0, b0), (start0, end0)]
    assert in_order[-8:] == [
        (m0, start0), (b0, c0), (end0, c0), (a1, m1), (m1, b1), (m1, start1), (b1, c1), (end1, c1)]
