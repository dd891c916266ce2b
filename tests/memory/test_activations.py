"""Saved activations per layer against Korthikanti et al. 2022's closed forms, and their invariants."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import gpt_workload
from simulon.config.hybrid import DENSE_LAYER, MOE_LAYER
from simulon.memory.activations import ActivationModel

S, B, H, A = 2048, 2, 1024, 16  # sequence, micro-batch, hidden, heads


def layer_bytes(tp: int = 1, sp: bool = False, recompute: str = "none", attention: str = "unfused",
                mbs: int = B, dropout: float = 0.1, dtype: str = "bf16", modules: list[str] | None = None,
                **knobs) -> float:
    parallelism = {"sequence_parallel": sp, "recompute": recompute, **({"recompute_modules": modules}
                                                                       if modules else {})}
    wl = gpt_workload(gpus=8, tp=tp, seq=S, mbs=mbs, gbs=8 * mbs, hidden=H, heads=A, extra_parallelism=parallelism,
                      training={"attention": attention, "dtype": dtype}, model={"dropout": dropout}, **knobs)
    return ActivationModel(wl).layer(DENSE_LAYER).total


def deferred_bytes(tp: int = 1, sp: bool = False, recompute: str = "none", dtype: str = "bf16") -> float:
    wl = gpt_workload(gpus=8, tp=tp, seq=S, mbs=B, gbs=8 * B, hidden=H, heads=A, training={"dtype": dtype},
                      extra_parallelism={"sequence_parallel": sp, "recompute": recompute})
    return ActivationModel(wl).layer(DENSE_LAYER).deferred


def sbh(mbs: int = B) -> float:
    return S * mbs * H


def test_a_gpt_layer_keeps_sbh_times_34_plus_5as_over_h():
    assert layer_bytes() == pytest.approx(sbh() * (34 + 5 * A * S / H))


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_tensor_parallelism_divides_all_but_norms_and_dropout_masks(tp):
    assert layer_bytes(tp=tp) == pytest.approx(sbh() * (10 + 24 / tp + 5 * A * S / (H * tp)))


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_sequence_parallelism_divides_the_rest_too(tp):
    assert layer_bytes(tp=tp, sp=True) == pytest.approx(sbh() * (34 / tp + 5 * A * S / (H * tp)))


@pytest.mark.parametrize("tp", [1, 4])
def test_selective_recomputation_drops_the_attention_scores(tp):
    assert layer_bytes(tp=tp, sp=tp > 1, recompute="selective") == pytest.approx(sbh() * 34 / tp)


@pytest.mark.parametrize("tp", [1, 4])
def test_full_recomputation_keeps_only_the_layer_input(tp):
    assert layer_bytes(tp=tp, sp=tp > 1, recompute="full") == pytest.approx(2 * sbh() / tp)


def test_flash_attention_keeps_log_sum_exp_instead_of_the_score_matrix():
    assert layer_bytes(attention="flash") == pytest.approx(sbh() * 34 + 4 * S * B * A)


def test_a_model_without_dropout_keeps_no_masks_and_no_dropped_out_scores():
    assert layer_bytes(dropout=0.0) == pytest.approx(sbh() * 32 + 2 * A * S * S * B)


def test_selective_recomputation_of_core_attention_saves_only_the_softmax_statistics_under_flash_attention():
    # the checkpoint keeps Q, K and V, the projection keeps the kernel's output; only flash's fp32 log-sum-exp goes
    assert layer_bytes(attention="flash", recompute="selective") == pytest.approx(
        layer_bytes(attention="flash") - 4 * S * B * A)


def test_recomputing_the_mlp_input_drops_the_activation_and_fc2_inputs_and_keeps_fc1s():
    # Korthikanti et al.'s 8sbh GeLU input and 8sbh fc2 input go; fc1's 2sbh input stays, to re-run fc1 from
    kept = layer_bytes(attention="flash")
    assert layer_bytes(attention="flash", recompute="selective", modules=["mlp_in"]) == pytest.approx(kept - 16 * sbh())
    both = layer_bytes(attention="flash", recompute="selective", modules=["mlp_in", "layernorm"])
    assert both == pytest.approx(kept - 16 * sbh() - 2 * sbh() * 2)  # and both norms' outputs (2sbh each)


def test_recomputing_core_attentions_output_drops_it_and_its_softmax_statistics():
    # the 2sbh attention output (out_proj's input) and flash's fp32 log-sum-exp per head and token: core attention
    # re-runs to rebuild them, where Megatron's core_attn keeps its output
    kept = layer_bytes(attention="flash")
    assert layer_bytes(attention="flash", recompute="selective", modules=["context"]) == pytest.approx(
        kept - 2 * sbh() - 4 * S * B * A)


def test_fp8_keeps_the_gemm_inputs_in_one_byte():
    bf16, fp8 = layer_bytes(attention="flash"), layer_bytes(attention="flash", dtype="fp8")
    # the attention and MLP GEMM inputs (2sbh each) and fc2's (8sbh) halve; the projection adds its own sbh copy
    assert bf16 - fp8 == pytest.approx(sbh() * (1 + 1 + 4 - 1))


def test_a_deferred_weight_gradient_holds_32_of_a_gpt_layers_34_sbh_its_gemm_inputs_and_output_gradients():
    # inputs 2 + 2 + 2 + 8, output gradients 6 + 2 + 8 + 2 (the zero-bubble repository's w_mem = -32h a token)
    assert deferred_bytes() == pytest.approx(sbh() * 32)


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_a_deferred_weight_gradient_under_tensor_parallelism_holds_the_row_parallel_gemms_whole_output_gradients(tp):
    # without sequence parallelism QKV's and fc1's inputs are whole (2 + 2), the projection's and fc2's output
    # gradients too (2 + 2); the rest is split: inputs 2 + 8, output gradients 6 + 8
    assert deferred_bytes(tp=tp) == pytest.approx(sbh() * (8 + 24 / tp))
    # under sequence parallelism B re-gathers QKV's and fc1's inputs and hands W the whole sequence (Transformer
    # Engine's WeightGradStore keeps ln_out_total): the same bytes as without it
    assert deferred_bytes(tp=tp, sp=True) == pytest.approx(sbh() * (8 + 24 / tp))


@pytest.mark.parametrize("recompute", ["selective", "full"])
def test_recomputation_does_not_shrink_what_a_deferred_weight_gradient_holds(recompute):
    assert deferred_bytes(recompute=recompute) == deferred_bytes()


def test_fp8_holds_a_deferred_weight_gradients_inputs_in_one_byte_and_its_output_gradients_in_two():
    assert deferred_bytes() - deferred_bytes(dtype="fp8") == pytest.approx(sbh() * (1 + 1 + 1 + 4))


@pytest.mark.parametrize(("dtype", "copy"), [("mxfp8", 1 + 1 / 32), ("nvfp4", 0.5 + 1 / 16), ("mxfp4", 0.5 + 1 / 32)])
def test_a_block_scaled_format_holds_a_deferred_weight_gradients_output_gradients_in_both_quantized_copies(dtype,
                                                                                                          copy):
    # Transformer Engine's WeightGradStore keeps the quantized output gradient (row-wise for B, column-wise for W),
    # not the 16-bit one: inputs 2 + 2 + 2 + 8 sbh elements in one copy, output gradients 3 + 1 + 4 + 1 in two
    assert deferred_bytes(dtype=dtype) == pytest.approx(sbh() * (7 * copy + 9 * 2 * copy))


@given(st.sampled_from(["none", "selective", "full"]), st.sampled_from([1, 2, 4]), st.booleans(),
       st.sampled_from(["flash", "unfused"]))
def test_recomputation_never_raises_and_a_bigger_micro_batch_never_lowers_activation_memory(recompute, tp, sp,
                                                                                         attention):
    order = ["none", "selective", "full"]
    here = layer_bytes(tp=tp, sp=sp and tp > 1, recompute=recompute, attention=attention)
    for more in order[order.index(recompute) + 1:]:
        assert layer_bytes(tp=tp, sp=sp and tp > 1, recompute=more, attention=attention) <= here
    assert layer_bytes(tp=tp, sp=sp and tp > 1, recompute=recompute, attention=attention, mbs=2 * B) >= here


@given(st.sampled_from([["mlp"], ["layernorm"], ["core_attn", "mlp"], ["mlp_in"]]))
def test_recomputing_any_module_never_raises_what_a_layer_keeps(modules):
    plain = layer_bytes(attention="flash")
    assert layer_bytes(attention="flash", recompute="selective", modules=modules) <= plain


def test_experts_keep_top_k_copies_of_each_token_shared_over_expert_parallel_ranks():
    moe = {"num_experts": 8, "top_k": 2}
    wl = gpt_workload(gpus=8, ep=8, seq=S, mbs=B, gbs=8 * B, moe=moe, training={"attention": "flash"})
    acts = ActivationModel(wl)
    parts = acts.layer(MOE_LAYER).parts
    assert parts["dispatched tokens"] == pytest.approx(S * B * 2 * H * 2)
    assert parts["expert activation input"] == pytest.approx(S * B * 2 * 4 * H * 2)
