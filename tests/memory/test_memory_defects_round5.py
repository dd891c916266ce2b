"""What recomputation re-creates in a layer's backward, micro-batches in flight under interleaved schedules, and
the activation figures of a stage whose peak is the optimizer step's.

Closed forms from Korthikanti et al. 2022 (arXiv 2205.05198), in bytes with 16-bit activations and 1-byte masks:
unfused core attention keeps 5as^2b/t per layer (softmax output 2as^2b, dropout mask as^2b, dropout output 2as^2b,
over t tensor-parallel ranks); the MLP keeps fc1's input 2sbh, the GeLU's input 8sbh and fc2's input 8sbh.
"""

from __future__ import annotations

import pytest

from helpers import gpt_workload
from simulon.config.hybrid import DENSE_LAYER, MOE_LAYER
from simulon.config.units import GiB
from simulon.memory import MemoryModel
from simulon.memory.activations import ActivationModel
from simulon.workload.schedule import make_scheduler

S, B, H, A = 2048, 2, 1024, 16  # sequence, micro-batch, hidden, heads


def acts(tp: int = 1, recompute: str = "none", attention: str = "unfused", modules: list[str] | None = None,
         **knobs) -> ActivationModel:
    parallelism = {"recompute": recompute, **({"recompute_modules": modules} if modules else {})}
    wl = gpt_workload(gpus=8, tp=tp, seq=S, mbs=B, gbs=8 * B, hidden=H, heads=A, extra_parallelism=parallelism,
                      training={"attention": attention}, model={"dropout": 0.1}, **knobs)
    return ActivationModel(wl)


def backward(kind=DENSE_LAYER, **knobs) -> float:
    return acts(**knobs).layer(kind).backward_transient


def sbh() -> float:
    return S * B * H


# ---- 1. what recomputation re-creates is live in the layer's backward ----

@pytest.mark.parametrize("tp", [1, 2, 4])
def test_recomputed_unfused_core_attention_holds_its_5as2b_over_t_again_in_the_layers_backward(tp):
    recomputed = backward(tp=tp, recompute="selective", modules=["core_attn"])
    assert recomputed - backward(tp=tp) == pytest.approx(5 * A * S * S * B / tp)


def test_recomputed_mlp_holds_its_fc1_gelu_and_fc2_inputs_again_in_the_layers_backward():
    # flash attention: the attention block re-creates nothing, so the MLP's 2sbh + 8sbh + 8sbh is all there is
    recomputed = backward(attention="flash", recompute="selective", modules=["mlp"])
    assert recomputed - backward(attention="flash") == pytest.approx(18 * sbh())


def test_recomputed_moe_layer_holds_what_it_did_not_keep_again_in_the_layers_backward():
    moe = {"num_experts": 8, "top_k": 2}
    plain = acts(attention="flash", moe=moe, ep=8).layer(MOE_LAYER)
    recomputed = acts(attention="flash", recompute="selective", modules=["moe"], moe=moe, ep=8).layer(MOE_LAYER)
    dropped = plain.total - recomputed.total
    assert dropped > 0
    assert recomputed.backward_transient - plain.backward_transient == pytest.approx(dropped)


def test_selective_recomputation_re_creates_one_module_at_a_time_not_their_sum():
    # each checkpoint re-runs just before its own backward: attention's 5as^2b outweighs the MLP's 18sbh here
    both = backward(recompute="selective", modules=["core_attn", "mlp"])
    assert both - backward() == pytest.approx(5 * A * S * S * B)


def test_recomputed_flash_attention_re_creates_only_its_softmax_statistics():
    recomputed = backward(attention="flash", recompute="selective", modules=["core_attn"])
    assert recomputed - backward(attention="flash") == pytest.approx(4 * S * B * A)  # fp32 per query and head


def test_full_recomputation_re_creates_the_layer_but_not_its_kept_input_twice():
    # the layer keeps sbh(34 + 5as/h); its 2sbh input is the checkpoint's, kept already
    recomputed = backward(recompute="full")
    assert recomputed - backward() == pytest.approx(sbh() * (34 + 5 * A * S / H) - 2 * sbh())


def test_a_stage_with_recomputed_unfused_attention_peaks_with_the_attention_scores_live():
    wl = gpt_workload(gpus=1, seq=8192, mbs=1, gbs=1, hidden=4096, heads=32, layers=2,
                      extra_parallelism={"recompute": "selective"}, training={"attention": "unfused"},
                      model={"dropout": 0.1})
    stage = MemoryModel(wl, 1, 80 * GiB).stage(0)
    assert stage.terms["layer transient"] > 5 * 32 * 8192 * 8192  # 5as^2b: 10 GiB of one layer's scores


# ---- 2. micro-batches in flight under interleaved schedules ----

def interleaved(pp: int = 4, vpp: int = 2, microbatches: int = 8, layers: int = 8) -> MemoryModel:
    wl = gpt_workload(gpus=pp, pp=pp, layers=layers, gbs=microbatches, extra_parallelism={"vpp": vpp})
    return MemoryModel(wl, pp, 80 * GiB)


def chunk_passes_at_peak(stage: int, pp: int, vpp: int, microbatches: int) -> int:
    live = peak = 0
    for step in make_scheduler("interleaved_1f1b", vpp).steps(stage, pp, microbatches):
        live += 1 if step.kind == "F" else -1
        peak = max(peak, live)
    return peak


@pytest.mark.parametrize("pp, vpp, microbatches", [(4, 2, 8), (4, 4, 8), (8, 2, 16)])
def test_interleaved_stage_holds_its_chunk_passes_over_vpp_micro_batches(pp, vpp, microbatches):
    memory = interleaved(pp, vpp, microbatches, layers=pp * vpp * 2)
    for s in range(1, pp - 1):  # middle stages: every chunk keeps the same
        in_flight = memory.stage(s).microbatches_in_flight
        assert in_flight == pytest.approx(chunk_passes_at_peak(s, pp, vpp, microbatches) / vpp)


def test_interleaved_stages_never_hold_more_micro_batches_than_the_step_runs():
    memory = interleaved(4, 2, 8)
    for s in range(4):
        assert 0 < memory.stage(s).microbatches_in_flight <= 8


def test_micro_batches_in_flight_weigh_chunks_of_different_sizes_by_what_they_keep():
    # stage 0's first chunk holds the embedding besides its layer, the last stage's last chunk the LM head
    memory = interleaved(4, 2, 8)
    for s in (0, 3):
        stage = memory.stage(s)
        one_microbatch = sum(stage.unit_kept.values())  # every chunk of the stage, once
        assert stage.microbatches_in_flight == pytest.approx(stage.kept_activations / one_microbatch)


# ---- 3. a stage whose peak is the optimizer step's ----

def test_a_stage_peaking_at_the_optimizer_step_reports_no_activations_in_flight():
    wl = gpt_workload(gpus=2, pp=2, layers=8, hidden=4096, heads=32, vocab=51200, seq=2048, mbs=4, gbs=64,
                      extra_parallelism={"recompute": "full", "layers_per_stage": [7, 1]},
                      training={"attention": "flash", "grad_reduce_dtype": "bf16"})
    stage = MemoryModel(wl, 2, 80 * GiB).stage(0)
    assert "optimizer step transient" in stage.terms and "activations" not in stage.terms
    assert stage.microbatches_in_flight == 0.0 and stage.kept_activations == 0.0
    assert stage.to_json()["kept_activations_bytes"] == 0.0
