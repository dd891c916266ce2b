"""Under sequence parallelism Megatron-Core runs MLA's duplicated down projections on the rank's share of the sequence
and all-gathers the latents, not the hidden state, before the column-parallel up projections
(multi_latent_attention.py MLASelfAttention.get_query_key_value_tensors: `q_compressed: [s / TP, b, q_lora_rank]`,
the key's rotary part gathered by gather_from_sequence_parallel_region, the normed latents by the up projections'
TELayerNormColumnParallelLinear, quantized first in a narrow run). The tracer ran the down projections on every token
and gathered the 7168-wide hidden state: DeepSeek-V3 (5 layers, tp 4 sp, ep 4, 2 nodes of 8 H100s, sequence 4096)
stepped in 461.7 ms where the latents' gathers give 452.5."""

from __future__ import annotations

import pytest

from helpers import gpt_workload
from simulon.config.common import DType
from simulon.config.number_formats import number_format
from simulon.workload.kernels import Phase
from simulon.workload.layer_kernels import LayerKernels
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import CollectiveOp, ComputeOp

V3 = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}
"""DeepSeek-V3's multi-latent attention (deepseek-ai/DeepSeek-V3 config.json)."""
HIDDEN, HEADS, SEQ, LAYER = 7168, 128, 256, 1


def workload(tp: int, dtype: str, sp: bool = True):
    return gpt_workload(gpus=8, tp=tp, layers=2, hidden=HIDDEN, heads=HEADS, seq=SEQ, ffn=2048,
                        extra_model={"mla": V3}, extra_parallelism={"sequence_parallel": sp},
                        training={"dtype": dtype, "bf16_first_layers": 0, "bf16_last_layers": 0})


def gathered(dtype: str) -> float:
    """Bytes an element of a latent an up projection's module gathers: the quantized operand in a narrow run."""
    return 2.0 if dtype == "bf16" else number_format(DType(dtype)).gathered_operand_bytes(both_usages=False)


@pytest.mark.parametrize("tp", [2, 4, 8])
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_the_down_projections_and_latent_norms_run_on_the_ranks_share_of_the_sequence(tp, dtype):
    kernels = LayerKernels.of(workload(tp, dtype))
    rows = SEQ // tp
    kv_width = V3["kv_lora_rank"] + V3["qk_rope_head_dim"]
    for name, width in (("attn_q_down", V3["q_lora_rank"]), ("attn_kv_down", kv_width)):
        forward = kernels[name][Phase.fwd]
        assert (forward.param("m"), forward.param("n"), forward.param("k")) == (rows, width, HIDDEN)
        assert forward.flops == forward.hw_flops == 2 * rows * width * HIDDEN  # each rank's rows its own model FLOPs
        assert kernels[name][Phase.bwd_wg].param("k") == rows
    for name, width in (("attn_q_latent_norm", V3["q_lora_rank"]), ("attn_kv_latent_norm", V3["kv_lora_rank"])):
        assert kernels[name][Phase.fwd].bytes == 2 * 2 * rows * width  # read x, write y, 16 bits each
    for name in ("attn_q_up", "attn_kv_up"):  # the up projections read the gathered latents, every token
        assert kernels[name][Phase.fwd].param("m") == SEQ


@pytest.mark.parametrize("tp", [2, 4, 8])
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_sequence_parallelism_gathers_the_latents_not_the_hidden_state(tp, dtype):
    prog = MegatronTracer(workload(tp, dtype), 8).stage_program(0)
    ops = [op for op in prog.ops if op.layer == LAYER and op.microbatch == 0 and isinstance(op, CollectiveOp)]
    sizes = {(op.label, op.phase, op.ctype.name): op.nbytes for op in ops if op.label.startswith("attn_")}
    rope = 2.0 * SEQ * V3["qk_rope_head_dim"]
    q, kv = SEQ * V3["q_lora_rank"], SEQ * V3["kv_lora_rank"]
    expected = {
        ("attn_rope_gather", Phase.fwd, "AllGather"): rope,  # Megatron-Core's own gather, 16 bits
        ("attn_q_gather", Phase.fwd, "AllGather"): q * gathered(dtype),
        ("attn_kv_gather", Phase.fwd, "AllGather"): kv * gathered(dtype),
        ("attn_q_gather", Phase.bwd_wg, "AllGather"): q * gathered(dtype),  # re-gathered for the wgrad
        ("attn_kv_gather", Phase.bwd_wg, "AllGather"): kv * gathered(dtype),
        ("attn_rope_reduce", Phase.bwd_ig, "ReduceScatter"): rope,  # the gradients, in 16 bits
        ("attn_q_reduce", Phase.bwd_ig, "ReduceScatter"): 2.0 * q,
        ("attn_kv_reduce", Phase.bwd_ig, "ReduceScatter"): 2.0 * kv,
    }
    for key, nbytes in expected.items():
        assert sizes[key] == pytest.approx(nbytes), key
    assert not any(label == "attn_gather" for label, _, _ in sizes)  # no gather of the hidden state
    reduces = [key for key in sizes if key[0] == "attn_reduce"]  # the output projection's reduce-scatter alone
    assert reduces == [("attn_reduce", Phase.fwd, "ReduceScatter")]


def test_without_sequence_parallelism_the_up_projections_all_reduce_their_latents_gradients():
    prog = MegatronTracer(workload(4, "bf16", sp=False), 8).stage_program(0)
    ops = [op for op in prog.ops if op.layer == LAYER and op.microbatch == 0 and isinstance(op, CollectiveOp)]
    backward = sorted((op.label, op.nbytes) for op in ops if op.phase == Phase.bwd_ig and op.label.startswith("attn_"))
    assert backward == sorted([("attn_q_reduce", 2.0 * SEQ * V3["q_lora_rank"]),
                               ("attn_kv_reduce", 2.0 * SEQ * V3["kv_lora_rank"])])  # the rotary part is duplicated
    assert all(op.ctype.name == "AllReduce" for op in ops if op.label.startswith("attn_"))


def test_the_down_projections_backward_follows_the_latent_norms_on_the_ranks_rows():
    prog = MegatronTracer(workload(4, "bf16"), 8).stage_program(0)
    names = [op.kernel.name for op in prog.ops if op.layer == LAYER and op.microbatch == 0
             and isinstance(op, ComputeOp) and op.kernel.phase == Phase.bwd_ig]
    order = [n for n in names if n in ("attn_q_up", "attn_q_latent_norm", "attn_kv_up", "attn_kv_latent_norm",
                                       "attn_q_down", "attn_kv_down", "attn_norm")]
    assert order == ["attn_kv_up", "attn_kv_latent_norm", "attn_q_up", "attn_q_latent_norm", "attn_kv_down",
                     "attn_q_down", "attn_norm"]


@pytest.mark.parametrize("sp", [False, True])
def test_the_down_projections_gradients_are_summed_over_tp_under_sequence_parallelism_alone(sp):
    # each rank's gradient is of its own rows under sequence parallelism (finalize_model_grads sums the weights
    # TELinear 'duplicated' marks sequence_parallel); without it every rank's is of every token, the same
    wl = workload(4, "bf16", sp=sp)
    tracer = MegatronTracer(wl, 8)
    grads = [op for op in tracer.stage_program(0).ops
             if isinstance(op, CollectiveOp) and op.label == "tp_duplicated_grad_allreduce"]
    down = HIDDEN * (V3["q_lora_rank"] + V3["kv_lora_rank"] + V3["qk_rope_head_dim"])
    layers = len(tracer.layers.layers_of(0))
    assert [op.nbytes for op in grads] == ([layers * down * 4.0] if sp else [])


def test_recomputing_the_up_projections_re_runs_their_norms_and_gathers():
    # Megatron-Core's mla_up_proj checkpoint re-runs the up projections' TELayerNormColumnParallelLinear modules:
    # each latent's norm, its all-gather and the GEMM; the rotary part's gather is outside it
    wl = workload(4, "bf16")
    wl = wl.model_copy(update={"parallelism": wl.parallelism.model_copy(
        update={"recompute": "selective", "recompute_modules": ["mla_up_proj"]})})
    ops = [op for op in MegatronTracer(wl, 8).stage_program(0).ops if op.layer == LAYER and op.microbatch == 0]
    computed = [op.kernel.name for op in ops if isinstance(op, ComputeOp) and op.kernel.phase == Phase.recompute
                and "cast" not in op.kernel.name]
    assert computed == ["attn_q_latent_norm", "attn_q_up", "attn_kv_latent_norm", "attn_kv_up"]
    gathers = {op.label: op.nbytes for op in ops if isinstance(op, CollectiveOp) and op.phase == Phase.recompute}
    assert gathers == {"attn_q_gather": 2.0 * SEQ * V3["q_lora_rank"], "attn_kv_gather": 2.0 * SEQ * V3["kv_lora_rank"]}
