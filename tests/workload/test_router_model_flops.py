"""An MoE router without sequence parallelism scores every token on every tensor-parallel rank: the copies take time
but are one model FLOP, so a step's model FLOPs, and its MFU, do not grow with tp (they did by the router's FLOPs
times tp - 1: 12,511 GFLOP at tp 4 against 12,502 at tp 1 on a 4-layer model of 8 experts)."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.pipeline import simulate
from simulon.workload.layer_kernels import LayerKernels

MOE = {"num_experts": 8, "top_k": 2}


def scenario(tp: int, sp: bool):
    return gpt_scenario(nodes=1, gpus_per_node=4, tp=tp, layers=2, hidden=1024, heads=16, seq=512, gbs=4 // tp * 2,
                        moe=MOE, extra_parallelism={"sequence_parallel": sp} if tp > 1 else None,
                        framework="megatron" if sp or tp == 1 else "deepspeed")  # Megatron-Core needs sp for MoE


def step_model_flops(tp: int, sp: bool) -> float:
    result = simulate(scenario(tp, sp)).result
    return result.step_flops() / (result.num_gpus // tp)  # one tensor-parallel group's share of the step


@pytest.mark.parametrize("sp", [False, True])
def test_a_step_of_an_moe_model_has_the_same_model_flops_per_replica_at_every_tp(sp):
    one = step_model_flops(1, False)
    for tp in (2, 4):
        assert step_model_flops(tp, sp) == pytest.approx(one, rel=1e-9)


@pytest.mark.parametrize("sp", [False, True])
def test_the_routers_copies_are_hardware_flops_and_its_model_flops_are_the_ranks_share(sp):
    tokens, hidden, tp = 512, 1024, 4
    forward = LayerKernels.of(scenario(tp, sp).workload)["moe_route"][0]
    rows = tokens // tp if sp else tokens
    assert forward.hw_flops == 2 * rows * hidden * MOE["num_experts"]
    assert forward.flops == pytest.approx(2 * tokens // tp * hidden * MOE["num_experts"])
