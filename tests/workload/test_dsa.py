"""DeepSeek sparse attention (DeepSeek-V3.2, Megatron-Core's DSAttention over AbsorbedMLASelfAttention): the keys
each query reads, the kernels' FLOPs and weights against closed forms, the indexer's place in the step, its
communication, its parameters, and what it changes against dense MLA."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from helpers import estimate_over_replay, gpt_scenario
from simulon.compute.analytical import AnalyticalModel
from simulon.config.common import DType
from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario
from simulon.config.workload import ModelSpec
from simulon.memory.activations import ActivationModel
from simulon.pipeline import simulate
from simulon.search.run import Search
from simulon.search.space import Space, Strategy
from simulon.workload.kernels import Phase, attention, attention_impl
from simulon.workload.layer_kernels import SPARSE_ATTENTION_FIT, LayerKernels, SparseKeys
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import CollectiveOp, ComputeOp

MLA = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}
DSA = {"index_heads": 64, "index_head_dim": 128, "index_topk": 2048}


def dsa_scenario(sparse: bool = True, topk: int = 2048, **knobs):
    """A DeepSeek-V3-shaped attention (7168 wide, 128 heads, MLA) in a small dense model."""
    mla = dict(MLA, **({"dsa": dict(DSA, index_topk=topk)} if sparse else {}))
    knobs = {"nodes": 1, "gpus_per_node": 8, "layers": 2, "hidden": 7168, "heads": 128, "ffn": 18432, "seq": 4096,
             "gbs": 8, **knobs}
    return gpt_scenario(extra_model={"mla": mla, "activation": "swiglu", "normalization": "rmsnorm"}, **knobs)


def attention_block_flops(kernels: LayerKernels, phase: Phase) -> float:
    return sum(kernels[name][phase].flops for name in kernels.block_kernels("attention")
               if phase in kernels[name])


@pytest.mark.parametrize(("seq", "topk", "keys", "causal"), [
    (4096, 4096, 4096, True), (2048, 4096, 2048, True),
    (8192, 2048, 1792, False),     # (2048 * 2049 / 2 + 6144 * 2048) / 8192 = 1792.06
    (131072, 2048, 2032, False),   # (2048 * 2049 / 2 + 129024 * 2048) / 131072 = 2032.0
])
def test_each_query_reads_its_topk_earlier_keys_on_average(seq, topk, keys, causal):
    """Read keys on average; model FLOPs count top-k a query, as a dense layer's count the whole sequence."""
    assert SparseKeys.of(seq, topk) == SparseKeys(keys, causal, min(topk, seq))


def executed(keys: SparseKeys) -> float:
    """Keys a query's kernel row computes: a causal kernel skips the masked half."""
    return keys.keys / 2 if keys.causal else keys.keys


@given(seq=st.integers(1, 1 << 20), topk=st.integers(1, 1 << 16))
def test_the_keys_read_grow_with_topk_up_to_the_causal_half(seq, topk):
    keys = executed(SparseKeys.of(seq, topk))
    assert keys <= min(topk, (seq + 1) / 2) + 0.5
    assert executed(SparseKeys.of(seq, topk + 1)) >= keys - 1  # rounding to whole keys, the causal kernel's s/2


def test_sparse_attention_runs_in_mla_mqa_form_over_the_selected_keys():
    sc = dsa_scenario(seq=8192, tp=2)
    kernels = LayerKernels.of(sc.workload)
    core = kernels["attn_flash"][Phase.fwd]
    b, s, n, keys, topk = 1, 8192, 128 // 2, 1792, 2048
    # one shared 576-wide key (the latent and its rotary part) and the 512-wide latent as value; model FLOPs count
    # top-k keys a query, the kernel reads their causal mean
    assert core.flops == 2.0 * b * n * s * topk * (576 + 512)
    assert core.hw_flops == 2.0 * b * n * s * keys * (576 + 512)
    assert core.param("kv_heads") == 1 and core.param("causal") is False
    # the indexer scores every earlier key: d_I x H_I per score, the whole matrix in model FLOPs, half executed; it
    # runs whole on both tensor-parallel ranks, so each counts half its model FLOPs
    logits = kernels["attn_index_logits"][Phase.fwd]
    assert logits.flops == 2.0 * s * s * 64 * 128 / 2
    assert logits.hw_flops == pytest.approx(2.0 * s * (s + 1) / 2 * 64 * 128, rel=1e-3)


def test_absorbed_up_projections_have_kv_ups_flops_and_weights():
    dense, sparse = LayerKernels.of(dsa_scenario(False, tp=2).workload), LayerKernels.of(dsa_scenario(tp=2).workload)
    for phase in (Phase.fwd, Phase.bwd_ig, Phase.bwd_wg):
        absorbed = sparse["attn_q_absorb"][phase].flops + sparse["attn_v_up"][phase].flops
        assert absorbed == dense["attn_kv_up"][phase].flops
    assert "attn_kv_up" not in sparse
    assert sparse.weights(["attn_q_absorb", "attn_v_up"]) == dense.weights(["attn_kv_up"])
    indexer = 1536 * 64 * 128 + 7168 * 128 + 7168 * 64 + 2 * 128  # wq_b, wk, weights_proj, k_norm (weight, bias)
    assert sparse.indexer_params == indexer  # whole on every tensor-parallel rank
    kind = ("attention", "mlp")
    assert sparse.layer_params(kind)[0] - dense.layer_params(kind)[0] == indexer


def test_deepseek_v32_is_deepseek_v3_with_an_indexer_in_every_layer():
    v3, v32 = ModelSpec.model_validate({"from": "deepseek-v3"}), ModelSpec.model_validate({"from": "DeepSeek-V3.2-Exp"})
    assert v32.mla.dsa.index_topk == 2048 and v3.mla.dsa is None
    assert v32.model_copy(update={"name": v3.name, "mla": v3.mla}) == v3
    sc = dsa_scenario(tp=1)
    kernels = LayerKernels.of(sc.workload.model_copy(update={"model": v32}))
    # 62 layers (61 and the MTP module's) of 13.96M: the 0.85B the checkpoint adds to DeepSeek-V3.1's
    assert 62 * kernels.indexer_params / 1e9 == pytest.approx(0.866, abs=0.001)


def test_from_hf_reads_the_indexer(tmp_path):
    config = {"num_hidden_layers": 4, "hidden_size": 7168, "num_attention_heads": 128, "intermediate_size": 18432,
              "vocab_size": 129280, "hidden_act": "silu", "rms_norm_eps": 1e-6, **MLA,
              "index_n_heads": 64, "index_head_dim": 128, "index_topk": 2048}
    (tmp_path / "config.json").write_text(json.dumps(config))
    model = ModelSpec.model_validate({"from_hf": str(tmp_path / "config.json")})
    assert model.mla.dsa.model_dump() == DSA


def test_the_indexer_runs_beside_the_attention_and_trains_its_weights_only():
    sc = dsa_scenario(tp=2, extra_parallelism={"sequence_parallel": True})
    tracer = MegatronTracer(sc.workload, 8)
    program = tracer.stage_program(0)
    ops = program.ops
    computed = [(op.kernel.name, op.kernel.phase) for op in ops if isinstance(op, ComputeOp) and op.layer == 0]
    names = [name for name, _ in computed]
    # forward order: the query latent's products, absorption, indexer, sparse attention, value up-projection
    order = [names.index(n) for n in ("attn_q_up", "attn_q_absorb", "attn_index_q", "attn_index_logits",
                                      "attn_index_topk", "attn_index_kl", "attn_flash", "attn_v_up", "attn_proj")]
    assert order == sorted(order)
    indexer = {phase for name, phase in computed if name in ("attn_index_q", "attn_index_k", "attn_index_weights")}
    assert indexer == {Phase.fwd, Phase.bwd_wg}  # detached inputs: no input gradient
    comms = {op.label: op for op in ops if isinstance(op, CollectiveOp) and op.layer == 0 and op.microbatch == 0}
    tokens = 4096
    assert comms["attn_index_gather"].nbytes == tokens * (7168 + 1536) * 2
    assert comms["attn_index_target_reduce"].nbytes == 4 * tokens * 2048
    grads = [op for op in ops if isinstance(op, CollectiveOp) and op.label == "tp_duplicated_grad_allreduce"]
    layers = len(tracer.layers.layers_of(0))
    kernels = LayerKernels.of(sc.workload)  # with MLA's down projections, summed over tp under sequence parallelism
    duplicated = kernels.indexer_params + kernels.weights(["attn_q_down", "attn_kv_down"])
    assert len(grads) == 1 and grads[0].nbytes == layers * duplicated * 4


def test_sparse_attention_pays_at_long_sequences_and_costs_at_short_ones():
    def step(sparse: bool, seq: int, tp: int = 1) -> float:
        sc = dsa_scenario(sparse, seq=seq, tp=tp, gpus_per_node=tp, gbs=1)
        training = sc.workload.training.model_copy(update={"attention": "cudnn"})  # both on cuDNN's fit
        return simulate(sc.model_copy(update={"workload": sc.workload.model_copy(update={"training": training})})
                        ).result.iteration_time_ms

    assert step(True, 131072) < 0.6 * step(False, 131072)
    # every tensor-parallel rank runs the whole indexer, whose scores grow with the square of the sequence too
    assert step(True, 65536, tp=8) / step(False, 65536, tp=8) > step(True, 65536) / step(False, 65536)
    # at 4,096 tokens the MQA form's 1,088 dims per key over 1,536 keys outweigh 320 over 2,048, and the indexer
    assert step(True, 4096) > step(False, 4096)


def test_a_larger_topk_is_never_faster():
    times = [simulate(dsa_scenario(topk=k, seq=16384, tp=8, gbs=1)).result.iteration_time_ms
             for k in (512, 2048, 8192)]
    assert times == sorted(times)


def test_fp8_leaves_the_absorbed_products_and_the_indexer_scores_in_bf16():
    sc = dsa_scenario(tp=2)
    wl = sc.workload.model_copy(update={"training": sc.workload.training.model_copy(update={"dtype": "fp8"})})
    kernels = LayerKernels.of(wl)
    for name in ("attn_q_absorb", "attn_v_up", "attn_index_logits"):
        assert kernels[name][Phase.fwd].param("precision") == "bf16"
    assert "precision" not in dict(kernels["attn_index_q"][Phase.fwd].shape)


def test_the_indexer_keeps_its_inputs_and_the_selected_indices_for_backward():
    sparse = ActivationModel(dsa_scenario(tp=2).workload).layer(("attention", "mlp")).parts
    assert sparse["selected key indices"] == 4096 * 2048 * 8
    assert sparse["indexer query, key, weights"] == 4096 * (64 * 128 + 128 + 64) * 2
    long = ActivationModel(dsa_scenario(seq=32768, tp=2).workload).layer(("attention", "mlp"))
    assert long.forward_transient >= 8192 * 32768 * 4  # the indexer's scores of one block of 8,192 queries
    recomputed = dsa_scenario(tp=2, extra_parallelism={"recompute": "selective", "recompute_modules": ["mla_up_proj"]})
    assert "absorbed query" not in ActivationModel(recomputed.workload).layer(("attention", "mlp")).parts


def test_the_search_keeps_dsa_unsplit_by_a_context_ring_and_its_estimate_follows_the_replay():
    sc = dsa_scenario(seq=8192, gbs=8, layers=2)
    assert {strategy.cp for strategy in Space(sc.workload, 8, 8, fp8=False).strategies()} == {1}
    search = Search(sc)
    for strategy in (Strategy(8, 1, 1, 1, 1, 1, 8, 1, True, "none", "distributed_optimizer", "bf16", False),
                     Strategy(4, 2, 1, 1, 1, 1, 4, 1, True, "none", "distributed_optimizer", "bf16", False)):
        assert 0.8 < estimate_over_replay(search, sc, strategy, 8) < 1.2, strategy


def test_context_parallelism_other_than_all_gather_is_refused_naming_the_field():
    data = dsa_scenario().model_dump(mode="json", exclude_none=True)
    data["workload"]["parallelism"]["cp"] = 2
    with pytest.raises(ConfigError) as info:
        parse_scenario(data, "dsa.yaml")
    assert "workload.parallelism.context_parallel_comm: 'p2p'" in str(info.value) and "all_gather" in str(info.value)


def test_context_parallelism_gathers_the_latent_keys_and_the_indexers_keys():
    sc = dsa_scenario(seq=16384, tp=2, extra_parallelism={"cp": 2, "context_parallel_comm": "all_gather",
                                                          "sequence_parallel": True})
    kernels = LayerKernels.of(sc.workload)
    core = kernels["attn_flash"][Phase.fwd]
    assert core.param("seq_q") == 8192 and core.param("seq_k") == SparseKeys.of(16384, 2048).keys  # whole sequence's
    assert kernels["attn_index_logits"][Phase.fwd].flops == 2.0 * 8192 * 16384 * 64 * 128 / 2  # one of tp 2
    ops = MegatronTracer(sc.workload, 8).stage_program(0).ops
    comms = {op.label: op for op in ops if isinstance(op, CollectiveOp) and op.layer == 0 and op.microbatch == 0}
    assert comms["cp_kv_gather"].nbytes == 2 * 8192 * (512 + 64) * 2  # one 576-wide key per token, its latent the value
    assert comms["attn_index_key_gather"].nbytes == 2 * 8192 * 128 * 2
    assert comms["attn_index_key_grad_scatter"].nbytes == comms["attn_index_key_gather"].nbytes
    search = Search(sc)
    assert {strategy.cp for strategy in Space(sc.workload, 8, 8, fp8=False).strategies()} > {1}
    strategy = Strategy(2, 1, 1, 2, 2, 1, 2, 1, True, "none", "distributed_optimizer", "bf16", False)
    assert 0.8 < estimate_over_replay(search, sc, strategy, 8) < 1.2


@given(head_dim=st.integers(1, 63))
def test_an_indexer_head_narrower_than_the_rotary_part_is_refused(head_dim):
    with pytest.raises(ValidationError, match=r"dsa\.index_head_dim"):
        ModelSpec.model_validate({"from": "deepseek-v3.2", "mla": dict(MLA, dsa=dict(DSA, index_head_dim=head_dim))})


@pytest.mark.parametrize(("system", "published"), [("hgx-h800", 640.0), ("dgx-b200", 1450.0)])
def test_sparse_attention_runs_near_flashmlas_published_prefill_rate(system, published):
    """FlashMLA's README: its sparse MLA prefill (MQA form, 128 heads, 576/512, top-2,048) reaches up to 640 TFLOP/s
    forward on an H800 SXM5 and 1,450 on a B200; nothing was fitted to these."""
    gpu = parse_scenario({"datacenter": {"from": system, "cluster": {"num_nodes": 1}}}).datacenter.groups[0].gpu
    spec = attention(Phase.fwd, 1, 128, 1, 16384, 2048, 576, 512, False, 2.0, SPARSE_ATTENTION_FIT)
    rate = spec.hw_flops / float(AnalyticalModel(gpu, DType.bf16).seconds([spec])[0]) / 1e12
    assert rate == pytest.approx(published, rel=0.1)


def test_the_sparse_kernels_run_at_the_chips_own_rate_whatever_the_runs_attention_library():
    flash = LayerKernels.of(dsa_scenario(tp=2).workload)  # the scenario's attention: FlashAttention-2
    assert flash.attention_impl == "flash"
    assert {attention_impl(flash[name][Phase.fwd]) for name in ("attn_flash", "attn_index_target", "attn_index_kl")} \
        == {SPARSE_ATTENTION_FIT}
