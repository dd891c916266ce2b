"""What multi-head latent attention keeps for backward, in closed form against Megatron-Core's MLA with Transformer
Engine (the spec with qk_layernorm, DeepSeek's): the down projections (linear_q_down_proj, linear_kv_down_proj) are
two Linears reading one norm output, one 16-bit tensor in bf16 and a quantized copy each in a narrow format (each has
its own quantizer); the up projections are LayerNormLinears keeping their 16-bit input (the latent, for the norm's
backward) and their norm's output as the weight gradient reads it (quantized in a narrow format)."""

from __future__ import annotations

import pytest

from simulon.config.loading import parse_scenario
from simulon.memory.activations import ActivationModel
from simulon.workload.kernels import Phase
from simulon.workload.layer_kernels import LayerKernels

SEQ = 4096
ONE_COPY = {"bf16": 2.0, "fp8": 1.0, "mxfp8": 1 + 1 / 32}


def deepseek(dtype: str):
    return parse_scenario({"datacenter": {"from": "dgx-b200", "cluster": {"num_nodes": 1}},
                           "workload": {"model": {"from": "deepseek-v3", "num_layers": 4}, "parallelism": {"tp": 1},
                                        "training": {"num_gpus": 8, "global_batch_size": 8, "sequence_length": SEQ,
                                                     "dtype": dtype}}}, "s.yaml").workload


def attention_parts(dtype: str) -> tuple[dict[str, float], object]:
    wl = deepseek(dtype)
    return ActivationModel(wl).layer(("attention",)).parts, wl.model


@pytest.mark.parametrize("dtype", sorted(ONE_COPY))
def test_the_down_projections_keep_one_16_bit_input_or_a_quantized_copy_each(dtype):
    parts, model = attention_parts(dtype)
    copies = 1 if dtype == "bf16" else 2
    assert parts["attention GEMM input"] == pytest.approx(copies * SEQ * model.hidden_size * ONE_COPY[dtype])


@pytest.mark.parametrize("dtype", sorted(ONE_COPY))
def test_the_up_projections_keep_the_16_bit_latents_and_their_norms_output_as_the_wgrad_reads_it(dtype):
    parts, model = attention_parts(dtype)
    mla, g = model.mla, ONE_COPY[dtype]
    latents = (mla.kv_lora_rank + mla.qk_rope_head_dim) * 2 + mla.kv_lora_rank * g + mla.q_lora_rank * (2 + g)
    assert parts["attention latents"] == pytest.approx(SEQ * latents)


def test_a_pending_fp8_weight_gradient_holds_each_down_projections_own_copy():
    # per-tensor fp8 on a TN-only GPU holds each output gradient in two 1-byte copies, bf16's two bytes; its inputs
    # are one byte an element where bf16's are two, and the two down projections hold a copy each where bf16's share
    # one tensor: fp8 holds sequence x (kv latent + query latent + heads x value) bytes fewer, and no hidden-size term
    kind = ("attention",)
    fp8, bf16 = ActivationModel(deepseek("fp8")), ActivationModel(deepseek("bf16"))
    mla, heads = fp8.model.mla, fp8.model.num_heads
    fewer = SEQ * (mla.kv_lora_rank + mla.q_lora_rank + heads * mla.v_head_dim)
    assert bf16.layer(kind).deferred - fp8.layer(kind).deferred == pytest.approx(fewer)


@pytest.mark.parametrize("dtype", ["fp8", "mxfp8"])
def test_each_down_projection_casts_the_norms_output_in_the_forward(dtype):
    k = LayerKernels.of(deepseek(dtype))
    assert Phase.fwd in k["attn_q_down_cast"] and Phase.fwd in k["attn_kv_down_cast"]


def test_a_query_projection_without_a_latent_holds_its_regathered_input_for_a_pending_w():
    # Moonlight's MLA has no query latent: its query projection is a column-parallel Linear that re-gathers its
    # input in B under sequence parallelism and stores the whole sequence for W (linear.py
    # `wgrad_store.put([inputmat_total, grad_output], wgrad_gemm)`); without sequence parallelism it reads the one
    # tensor the key-value down projection holds, which reads the rank's rows alone either way
    def deferred(sp: bool) -> tuple[float, int]:
        wl = parse_scenario({"datacenter": {"from": "dgx-b200", "cluster": {"num_nodes": 1}},
                             "workload": {"model": {"from": "deepseek-v3", "num_layers": 4, "moe": None,
                                                    "mla": {"q_lora_rank": None}},
                                          "parallelism": {"tp": 2, "sequence_parallel": sp},
                                          "training": {"num_gpus": 8, "global_batch_size": 8,
                                                       "sequence_length": SEQ, "dtype": "bf16"}}}, "s.yaml").workload
        return ActivationModel(wl).layer(("attention",)).deferred, wl.model.hidden_size

    (on, h), (off, _) = deferred(True), deferred(False)
    assert on - off == pytest.approx(SEQ * h * 2 - SEQ / 2 * h * 2)
