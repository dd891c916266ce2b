"""MLA's low-rank down projections run whole on every tensor-parallel rank (workload.layer_kernels.DOWN_PROJECTIONS):
their copies take time but are one model FLOP, so a step's model FLOPs, and its MFU against the search's count at
tp 1, do not grow with tp (they did: 773 TFLOP at tp 1, 857 at tp 8 on a 4-layer DeepSeek-V3)."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.pipeline import simulate
from simulon.workload.layer_kernels import DOWN_PROJECTIONS, LayerKernels

MLA = {"q_lora_rank": 256, "kv_lora_rank": 128, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32}


def step_model_flops(tp: int, sp: bool) -> float:
    sc = gpt_scenario(tp=tp, layers=2, hidden=1024, heads=16, seq=512, gbs=4, extra_model={"mla": MLA},
                      extra_parallelism={"sequence_parallel": sp} if tp > 1 else None)
    result = simulate(sc).result
    return result.tflops_per_gpu * result.iteration_time_ms * result.num_gpus


@pytest.mark.parametrize("sp", [False, True])
def test_a_step_of_an_mla_model_has_the_same_model_flops_at_every_tp(sp):
    one = step_model_flops(1, False)
    for tp in (2, 4):
        assert step_model_flops(tp, sp) == pytest.approx(one, rel=2e-3)


def test_the_down_projections_copies_are_hardware_flops_and_their_model_flops_are_shared():
    tokens, hidden = 512, 1024
    for tp in (1, 4):
        kernels = LayerKernels.of(gpt_scenario(tp=tp, layers=2, hidden=hidden, seq=tokens,
                                               extra_model={"mla": MLA}).workload)
        for name, width in zip(DOWN_PROJECTIONS, (MLA["q_lora_rank"], MLA["kv_lora_rank"] + MLA["qk_rope_head_dim"]),
                               strict=True):
            forward = kernels[name][0]
            assert forward.hw_flops == 2 * tokens * hidden * width  # every rank runs it whole
            assert forward.flops == pytest.approx(forward.hw_flops / tp)
