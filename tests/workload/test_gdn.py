"""Gated delta nets (Qwen3-Next, Qwen3.5; Megatron-Core's GatedDeltaNet on flash-linear-attention's chunked delta
rule) and gated attention: the kernels' FLOPs against the chunked algorithm's closed forms, the layer's place in the
step and its context-parallel all-to-alls, its parameters against the published model sizes, HuggingFace configs
read into the hybrid pattern, and what is refused."""

from __future__ import annotations

import json

import pytest

from helpers import estimate_over_replay
from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario
from simulon.config.workload import ModelSpec
from simulon.memory.activations import ActivationModel
from simulon.search.run import Search
from simulon.search.space import Strategy
from simulon.workload.gated_delta import GDN_SCAN
from simulon.workload.kernels import Phase
from simulon.workload.layer_kernels import LayerKernels
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import CollectiveOp, ComputeOp

GDN = {"key_heads": 4, "value_heads": 8, "key_head_dim": 128, "value_head_dim": 128, "conv_kernel": 4}
H = 1024


def gdn_model(pattern: str = "GE*E", gate: bool = True, **gdn) -> dict:
    return {"name": "test-gdn", "num_layers": len(pattern), "hidden_size": H, "num_heads": 8, "num_kv_heads": 2,
            "head_dim": 128, "ffn_hidden_size": 512, "vocab_size": 8192, "activation": "swiglu",
            "normalization": "rmsnorm", "hybrid_pattern": pattern, "attention_output_gate": gate,
            "gdn": {**GDN, **gdn},
            "moe": {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 256, "num_shared_experts": 1,
                    "shared_expert_ffn_hidden_size": 256}}


def gdn_scenario(tp: int = 1, cp: int = 1, seq: int = 4096, gbs: int = 8, **model):
    return parse_scenario({
        "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}},
        "workload": {"model": gdn_model(**model),
                     "parallelism": {"tp": tp, "cp": cp, "sequence_parallel": tp > 1},
                     "training": {"num_gpus": 8, "global_batch_size": gbs, "sequence_length": seq,
                                  "attention": "cudnn"}}})


def test_the_chunked_delta_rule_runs_its_closed_form_flops():
    """flash-linear-attention's chunk_gated_delta_rule at C 64, K = V = 128: (C + 16) K + 4 C K + 4 C V + 6 K V + C^2/2
    a token and value head forward, 18 C K + 10 C V + 16 K V + 4 C^2 backward (176,128 and 507,904; the solve's few
    hundred FLOPs on CUDA cores left out), of which the recomputation of w, u and the states, 2 C K + 2 C V + 4 K V
    (98,304), is hardware FLOPs alone, as every recomputation is."""
    kernels = LayerKernels.of(gdn_scenario(tp=2).workload)
    tokens, heads = 4096, 8 // 2
    products = [name for name in GDN_SCAN if kernels[name][Phase.fwd].kclass.name == "gemm"]
    assert products == ["gdn_kkt_solve", "gdn_wu", "gdn_state", "gdn_out"]
    forward = sum(kernels[name][Phase.fwd].flops for name in products)
    backward = sum(kernels[name][Phase.bwd_ig].flops for name in products)
    again = sum(kernels[name][Phase.bwd_ig].hardware_only_flops for name in products)
    assert forward == pytest.approx(176_128 * tokens * heads)
    assert backward == pytest.approx((507_904 - 98_304) * tokens * heads)
    assert again == pytest.approx(98_304 * tokens * heads)
    # in_proj: q, k, v, z, beta, alpha of this rank's heads; out_proj from its values
    width = 2 * 4 * 128 + 2 * 8 * 128 + 2 * 8
    assert kernels["gdn_in_proj"][Phase.fwd].flops == 2.0 * tokens * H * width / 2
    assert kernels["gdn_out_proj"][Phase.fwd].flops == 2.0 * tokens * H * 8 * 128 / 2


def test_qwen3_next_and_qwen35_have_their_published_sizes():
    for name, billions in (("qwen3-next-80b-a3b", 80.0), ("Qwen/Qwen3.5-35B-A3B", 35.0)):
        model = ModelSpec.model_validate({"from": name})
        workload = gdn_scenario().workload.model_copy(update={"model": model})
        kernels = LayerKernels.weights_of(workload)
        total = sum(sum(kernels.layer_params(model.layer_blocks(layer))) for layer in range(model.num_layers))
        total += (1 if model.tie_embeddings else 2) * model.vocab_size * model.hidden_size
        assert total / 1e9 == pytest.approx(billions, rel=0.02), name


def test_a_gated_delta_net_layer_runs_in_megatrons_order_with_its_all_to_alls():
    sc = gdn_scenario(tp=2, cp=2)
    ops = MegatronTracer(sc.workload, 8).stage_program(0).ops
    first = [op for op in ops if op.layer == 0 and op.microbatch == 0]
    forward = [op.kernel.name for op in first if isinstance(op, ComputeOp) and op.kernel.phase == Phase.fwd]
    assert forward == ["gdn_norm", "gdn_in_proj", "gdn_conv1d", *GDN_SCAN, "gdn_out_proj", "gdn_residual"]
    a2a = [op for op in first if isinstance(op, CollectiveOp) and op.label == "gdn_cp_a2a"]
    tokens = 4096 // 2
    width = (2 * 4 * 128 + 2 * 8 * 128 + 2 * 8) // 2
    assert sorted(op.nbytes for op in a2a) == sorted([tokens * width * 2, tokens * 8 * 128 // 2 * 2] * 2)


def test_gated_attention_makes_its_gate_with_the_queries():
    plain, gated = (LayerKernels.of(gdn_scenario(gate=gate).workload) for gate in (False, True))
    queries = 8 * 128 * H
    assert gated.weights(["attn_qkv"]) - plain.weights(["attn_qkv"]) == queries
    assert "attn_gate" in gated and "attn_gate" not in plain
    assert ActivationModel(gdn_scenario(gate=True).workload).layer(("attention",)).parts["attention output gate"] > 0


def test_the_search_estimate_follows_the_replay_of_a_gated_delta_net_hybrid():
    sc = gdn_scenario(seq=4096, gbs=8)
    search = Search(sc)
    for strategy in (Strategy(2, 1, 1, 4, 1, 1, 2, 1, True, "none", "distributed_optimizer", "bf16", False),
                     Strategy(2, 1, 1, 2, 2, 1, 2, 1, True, "none", "distributed_optimizer", "bf16", False)):
        assert 0.8 < estimate_over_replay(search, sc, strategy, 8) < 1.2, strategy


def test_a_qwen3_next_config_json_reads_into_the_hybrid_pattern(tmp_path):
    config = {"model_type": "qwen3_next", "num_hidden_layers": 8, "hidden_size": 2048, "num_attention_heads": 16,
              "num_key_value_heads": 2, "head_dim": 256, "intermediate_size": 5120, "vocab_size": 151936,
              "hidden_act": "silu", "rms_norm_eps": 1e-6, "num_experts": 512, "num_experts_per_tok": 10,
              "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "decoder_sparse_step": 1,
              "mlp_only_layers": [1], "linear_num_key_heads": 16, "linear_num_value_heads": 32,
              "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
              "full_attention_interval": 4}
    (tmp_path / "config.json").write_text(json.dumps(config))
    model = ModelSpec.model_validate({"from_hf": str(tmp_path / "config.json")})
    assert model.hybrid_pattern == "GEG-GE*EGEGEGE*E"  # layer 1 an MLP (mlp_only_layers), every fourth attention
    assert model.num_layers == 16 and model.attention_output_gate
    assert model.gdn.model_dump() == {**GDN, "key_heads": 16, "value_heads": 32, "chunk_size": 64}
    assert model.moe.layer_freq == 1


@pytest.mark.parametrize(("tp", "cp", "refused"), [
    (8, 1, "workload.parallelism.tp: 8 does not divide the gated delta net's key_heads 4"),
    (2, 4, "workload.parallelism.cp: 4 does not divide each tensor-parallel rank's 2 gated delta net key_heads"),
    (4, 2, "workload.parallelism.cp: 2 does not divide each tensor-parallel rank's 1 gated delta net key_heads"),
    (2, 2, None), (4, 1, None),
])
def test_heads_that_do_not_split_over_tp_and_cp_are_refused_naming_the_field(tp, cp, refused):
    if refused is None:
        assert gdn_scenario(tp=tp, cp=cp).workload.model.gdn.key_heads == 4
        return
    with pytest.raises(ConfigError, match=refused):
        gdn_scenario(tp=tp, cp=cp)


@pytest.mark.parametrize(("change", "field"), [
    ({"hybrid_pattern": "GE*E", "gdn": None}, "workload.model.hybrid_pattern: has G layers but the model has no gdn"),
    ({"hybrid_pattern": "ME*E", "mamba": {"num_heads": 16, "head_dim": 64}}, "workload.model.gdn: is given but no"),
    ({"gdn": {**GDN, "key_heads": 3}}, "workload.model.gdn.key_heads: 3 does not divide value_heads (8)"),
])
def test_a_bad_gated_delta_net_model_is_refused_naming_the_field(change, field):
    data = {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}},
            "workload": {"model": {**gdn_model(), **change},
                         "training": {"num_gpus": 8, "global_batch_size": 8, "sequence_length": 4096}}}
    with pytest.raises(ConfigError, match=field.replace("(", r"\(").replace(")", r"\)")):
        parse_scenario(data, "gdn.yaml")
