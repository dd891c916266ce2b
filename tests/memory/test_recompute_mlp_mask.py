"""Selective recomputation of the MLP, the MoE layer and the shared experts keeps what lies outside the checkpoint:
Megatron-Core checkpoints `self.mlp` (TransformerLayer._forward_mlp) and the MoE layer's forward
(MoELayer.forward), and the bias-dropout-add after either (`mlp_bda`) runs outside, so its 1-byte mask stays."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_workload
from simulon.config.hybrid import DENSE_LAYER, MOE_LAYER
from simulon.memory.activations import ActivationModel

S, B, H, A = 512, 2, 256, 4  # sequence, micro-batch, hidden, heads
SBH = S * B * H


def model(modules: list[str] | None, tp: int = 1, sp: bool = False, dropout: float = 0.1, moe: dict | None = None,
          ep: int = 1) -> ActivationModel:
    parallelism = {"sequence_parallel": sp, "recompute": "selective" if modules else "none",
                   **({"recompute_modules": modules} if modules else {})}
    wl = gpt_workload(gpus=8, tp=tp, ep=ep, seq=S, mbs=B, gbs=8 * B, hidden=H, heads=A, moe=moe,
                      extra_parallelism=parallelism, training={"attention": "flash"}, model={"dropout": dropout})
    return ActivationModel(wl)


def lse(tp: int = 1) -> float:
    """Flash attention's fp32 log-sum-exp, one per token and head of the rank."""
    return 4 * S * B * A / tp


def test_recomputing_the_mlp_keeps_its_dropout_mask():
    # 13sbh of attention (norm input 2, QKV GEMM input 2, Q K V 6, projection input 2, mask 1), the MLP norm's
    # input the checkpoint keeps (2sbh) and the mask of the dropout-add after the MLP (sbh): 16sbh
    layer = model(["mlp"]).layer(DENSE_LAYER)
    assert layer.parts["MLP dropout mask"] == pytest.approx(SBH)
    assert layer.total == pytest.approx(16 * SBH + lse())
    assert model(None).layer(DENSE_LAYER).total - layer.total == pytest.approx(18 * SBH)  # fc1, act, fc2 inputs


def test_recomputing_the_mlp_without_dropout_keeps_no_mask():
    assert model(["mlp"], dropout=0.0).layer(DENSE_LAYER).total == pytest.approx(14 * SBH + lse())


def test_recomputing_the_mlp_and_the_norms_keeps_the_mlp_checkpoints_input_and_the_mask():
    # the attention's QKV GEMM input (its norm's output) goes; the MLP's norm is fused into fc1 (the checkpoint's)
    assert model(["mlp", "layernorm"]).layer(DENSE_LAYER).total == pytest.approx(14 * SBH + lse())


@settings(max_examples=12, deadline=None)
@given(st.sampled_from([1, 2, 4]), st.booleans(), st.sampled_from([0.0, 0.1]))
def test_recomputing_the_mlp_keeps_the_closed_form(tp, sp, dropout):
    sp = sp and tp > 1
    mask = 1 if dropout else 0
    norms = (2 + 2 + mask) + (2 + mask)  # attention norm and GEMM inputs and mask; MLP norm input and mask
    expected = norms * SBH / (tp if sp else 1) + 8 * SBH / tp + lse(tp)  # Q K V and the projection input
    assert model(["mlp"], tp=tp, sp=sp, dropout=dropout).layer(DENSE_LAYER).total == pytest.approx(expected)


MOE = {"num_experts": 8, "top_k": 2}


def moe_parts(modules: list[str] | None, dropout: float = 0.1, moe: dict | None = None) -> dict[str, float]:
    parts = model(modules, ep=8, dropout=dropout, moe=moe or MOE).layer(MOE_LAYER).parts
    return {name: value for name, value in parts.items() if name.startswith("MoE")}


def test_an_moe_layer_keeps_the_dropout_mask_after_it():
    assert moe_parts(None)["MoE dropout mask"] == pytest.approx(SBH)
    assert moe_parts(None, dropout=0.0)["MoE dropout mask"] == 0.0


def test_recomputing_the_moe_layer_keeps_its_norms_input_and_output_and_the_mask():
    # the norm keeps its input; the checkpoint its input, the norm's output (MoE layers fuse no norm into a GEMM)
    assert moe_parts(["moe"]) == pytest.approx({"MoE norm input": 2 * SBH, "MoE checkpoint input": 2 * SBH,
                                                "MoE dropout mask": SBH})
    # the layernorm module discards the norm's output too
    assert moe_parts(["moe", "layernorm"]) == pytest.approx({"MoE norm input": 2 * SBH, "MoE dropout mask": SBH})


def test_recomputing_the_shared_experts_drops_their_activation_and_fc2_inputs_only():
    shared = {**MOE, "num_shared_experts": 1}
    kept = model(None, ep=8, moe=shared).layer(MOE_LAYER)
    recomputed = model(["shared_experts"], ep=8, moe=shared).layer(MOE_LAYER)
    # a 4h shared expert: its activation input (8sbh) and fc2 input (8sbh); the mask stays
    assert kept.total - recomputed.total == pytest.approx(16 * SBH)
    assert recomputed.parts["MoE dropout mask"] == pytest.approx(SBH)
