"""framework: deepspeed runs the pipeline as DeepSpeed's PipelineEngine does (TrainSchedule): each step's sends and
receives in its order, blocking, every transfer starting once its receiver has reached the receive."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import gpt_scenario
from simulon.config.scenario import ScenarioConfig
from simulon.dag.nodes import NodeKind
from simulon.pipeline import build_dag, simulate
from simulon.workload.megatron import NCCL_SEND_BUFFER_BYTES, MegatronTracer, lockstep_index
from simulon.workload.program import ComputeOp, RecvOp, SendOp


def scenario(framework: str, seq: int = 512, gbs: int = 4, nic: str = "10Gbps", **extra) -> ScenarioConfig:
    sc = gpt_scenario(nodes=2, gpus_per_node=1, pp=2, seq=seq, gbs=gbs, nic=nic, extra_parallelism=extra)
    data = sc.model_dump(mode="json", exclude_none=True)
    data["workload"]["framework"] = framework
    return ScenarioConfig.model_validate(data)


def transfers(sc: ScenarioConfig, stage: int) -> list[str]:
    """The stage's sends (S) and receives (R) in program order, with micro-batch and direction (f, b)."""
    program = MegatronTracer(sc.workload, 2).stage_program(stage)
    return [f"{'S' if isinstance(op, SendOp) else 'R'}{op.microbatch}{'f' if op.phase.name == 'fwd' else 'b'}"
            for op in program.ops if isinstance(op, SendOp | RecvOp)]


def test_each_stage_exchanges_in_the_order_of_deepspeeds_train_schedule():
    sc = scenario("deepspeed")
    # stage 0: F0 | idle B step sends act 0 | F1 | B0: recv grad 0, send act 1 | F2 | B1: recv grad 1, send act 2 ...
    assert transfers(sc, 0) == ["S0f", "R0b", "S1f", "R1b", "S2f", "R2b", "S3f", "R3b"]
    # last stage: F0: recv act 0 | B0 | F1: send grad 0, recv act 1 | ... | the idle step after B3 sends grad 3
    assert transfers(sc, 1) == ["R0f", "S0b", "R1f", "S1b", "R2f", "S2b", "R3f", "S3b"]


def test_megatron_receives_complete_when_the_data_arrives_whatever_the_receiver_does():
    programs = MegatronTracer(scenario("megatron").workload, 2).stage_programs()
    assert all(op.waits == () for p in programs for op in p.ops if isinstance(op, RecvOp))


def test_every_transfer_waits_for_its_receiver_to_reach_the_receive():
    dag, _, _ = build_dag(scenario("deepspeed"))
    flows = np.flatnonzero((dag.kind == NodeKind.flow) & (dag.coll < 0))
    on_receiver = {int(d) for s, d in zip(dag.edge_src, dag.edge_dst, strict=True)
                   if dag.kind[d] == NodeKind.flow and dag.coll[d] < 0 and dag.gpu[s] == dag.peer[d]}
    unwaited = [(int(dag.peer[f]), int(dag.microbatch[f])) for f in flows if int(f) not in on_receiver]
    # the first activation too: the last stage zeroes its gradient buffers before it reaches the receive
    assert unwaited == []


def sender_waits_on_sends(sc: ScenarioConfig) -> bool:
    """Whether any later op of a stage waits for one of its own sends to complete."""
    for program in MegatronTracer(sc.workload, 2).stage_programs():
        sends = {i for i, op in enumerate(program.ops) if isinstance(op, SendOp)}
        if any(sends & set(op.waits) for op in program.ops if isinstance(op, ComputeOp | RecvOp)):
            return True
    return False


def test_a_send_holds_its_stage_only_when_its_message_overflows_nccls_buffer():
    small, large = scenario("deepspeed", seq=512), scenario("deepspeed", seq=4096)  # 1 MiB and 8 MiB of bf16
    assert 512 * 1024 * 2 <= NCCL_SEND_BUFFER_BYTES < 4096 * 1024 * 2
    assert not sender_waits_on_sends(small)
    assert sender_waits_on_sends(large)


def test_blocking_transfers_never_make_a_step_faster_than_megatrons():
    for seq in (512, 4096):
        deepspeed = simulate(scenario("deepspeed", seq=seq, gbs=8, nic="1Gbps")).result.iteration_time_ms
        megatron = simulate(scenario("megatron", seq=seq, gbs=8, nic="1Gbps")).result.iteration_time_ms
        assert deepspeed >= megatron * (1 - 1e-9)


def test_deepspeed_runs_plain_1f1b_only():
    with pytest.raises(ValueError, match="deepspeed"):
        scenario("deepspeed", gbs=8, vpp=2, layers_per_stage=None)


@pytest.mark.parametrize("fsdp", ["shard_grad_op", "full_shard"])
def test_deepspeeds_pipeline_engine_refuses_zero2_and_zero3_as_deepspeed_asserts(fsdp):
    """DeepSpeed's PipelineEngine asserts 'ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism'
    (deepspeed/runtime/pipe/engine.py); before, pp 2 with either simulated. One stage runs DeepSpeed's plain engine,
    where both are allowed."""
    with pytest.raises(ValueError, match=r"parallelism\.fsdp.*ZeRO stage 0 or 1"):
        scenario("deepspeed", fsdp=fsdp)
    one_stage = scenario("deepspeed").model_dump(mode="json", exclude_none=True)
    one_stage["workload"]["parallelism"].update(pp=1, fsdp=fsdp)
    assert ScenarioConfig.model_validate(one_stage).workload.parallelism.fsdp == fsdp


def test_a_pipeline_of_fewer_micro_batches_than_stages_sends_its_activation_in_the_idle_step_before_its_backward():
    # stage 0 with one micro-batch: F0 at step 0, an idle step 1 sends act 0, B0 at step 3 receives grad 0; receiving
    # first (as an adjacent backward step does) left both stages waiting on each other: the replay stalled
    sc = scenario("deepspeed", gbs=1)
    assert transfers(sc, 0) == ["S0f", "R0b"]
    assert transfers(sc, 1) == ["R0f", "S0b"]


@pytest.mark.parametrize("gbs", [1, 2, 3])
def test_deepspeed_simulates_any_micro_batch_count_and_more_micro_batches_never_take_less_time(gbs):
    fewer = simulate(scenario("deepspeed", gbs=gbs)).result.iteration_time_ms
    assert 0 < fewer < simulate(scenario("deepspeed", gbs=gbs + 1)).result.iteration_time_ms


def test_the_lockstep_steps_are_deepspeeds_train_schedule():
    stages, micro_batches = 4, 6
    for stage in range(stages):
        runs = sorted((lockstep_index(kind, mb, stage, stages), kind, mb)
                      for kind in "FB" for mb in range(micro_batches))
        assert len({step for step, _, _ in runs}) == len(runs)          # one step each
        assert runs[-1][0] < 2 * (micro_batches + stages - 1)            # TrainSchedule's step count
        assert all(step % 2 == (stage if kind == "F" else stage + 1) % 2 for step, kind, _ in runs)
