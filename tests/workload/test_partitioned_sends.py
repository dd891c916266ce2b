"""Pipeline sends partitioned over tensor-parallel ranks (DeepSpeed's PipelineEngine, pipe_partitioned and
grad_partitioned): each rank sends 1/tp of the activation and the receiver all-gathers it over tp."""

from __future__ import annotations

from helpers import gpt_scenario
from simulon.pipeline import simulate
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import CollectiveOp, RecvOp, SendOp


def programs(send: str, tp: int = 4):
    sc = gpt_scenario(nodes=2, gpus_per_node=4, tp=tp, pp=2, nic="10Gbps",
                      extra_parallelism={"pipeline_send": send})
    return sc, MegatronTracer(sc.workload, 8).stage_programs()


def test_each_rank_sends_its_tp_share_and_the_receiver_gathers_the_whole():
    _, full = programs("full")
    _, parts = programs("partitioned")
    full_sends = [op.nbytes for p in full for op in p.ops if isinstance(op, SendOp)]
    part_sends = [op.nbytes for p in parts for op in p.ops if isinstance(op, SendOp)]
    assert len(full_sends) == len(part_sends) > 0
    assert all(b == a / 4 for a, b in zip(full_sends, part_sends, strict=True))
    gathers = [op for p in parts for op in p.ops if isinstance(op, CollectiveOp) and op.label == "pp_recv_gather"]
    receives = [op for p in parts for op in p.ops if isinstance(op, RecvOp)]
    assert len(gathers) == len(receives) and all(g.axis == "tp" and g.nbytes == full_sends[0] for g in gathers)
    assert not any(isinstance(op, CollectiveOp) and op.label == "pp_recv_gather" for p in full for op in p.ops)


def test_without_tensor_parallelism_partitioning_changes_nothing():
    _, full = programs("full", tp=1)
    _, parts = programs("partitioned", tp=1)
    assert [op for p in full for op in p.ops] == [op for p in parts for op in p.ops]


def test_partitioned_sends_are_faster_where_the_link_between_stages_is_slow():
    full = simulate(programs("full")[0]).result.iteration_time_ms
    partitioned = simulate(programs("partitioned")[0]).result.iteration_time_ms
    assert partitioned < full
