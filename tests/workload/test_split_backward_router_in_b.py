"""A split backward (ZB-H1 here) computes the MoE router's weight gradient in B, beside its input gradient, as
Megatron-Core does (RouterGatingLinearFunction.backward returns grad_weight with grad_input; MoELayer.backward_dw
delays the experts' and the shared experts' weight gradients only), and defers the experts' into W."""

from __future__ import annotations

from helpers import gpt_scenario
from simulon.workload.kernels import Phase
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import ComputeOp

MOE = {"num_experts": 4, "top_k": 2}


def positions(schedule: str) -> dict[tuple[str, Phase, int], int]:
    sc = gpt_scenario(nodes=1, gpus_per_node=4, pp=2, layers=4, gbs=8, moe=MOE,
                      extra_parallelism={"pipeline_schedule": schedule})
    ops = MegatronTracer(sc.workload, 4).stage_program(0).ops
    return {(op.kernel.name, op.kernel.phase, op.layer): i for i, op in enumerate(ops)
            if isinstance(op, ComputeOp) and op.microbatch == 0}


def test_zb_h1_runs_the_routers_weight_gradient_in_b_and_the_experts_in_w():
    at = positions("zb_h1")
    for layer in (0, 1):
        b_end = at["attn_qkv", Phase.bwd_ig, layer]  # the layer's B runs on to its attention's input gradient
        assert at["moe_route", Phase.bwd_ig, layer] < at["moe_route", Phase.bwd_wg, layer] < b_end
        assert at["moe_expert_linear1", Phase.bwd_wg, layer] > b_end
