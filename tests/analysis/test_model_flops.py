"""Model FLOPs of a simulated step against Megatron-LM's closed form, and the throughput figures against the step.

The closed forms are Megatron-LM's `num_floating_point_operations` (megatron/training/training.py at d98e8a6: the
GQA/MHA projections at lines 1140-1170, MLA at 1079-1137, dense and MoE MLPs, MTP and the logits at 1255-1303, the
hybrid model's Mamba layers at 885-905), written out here per token, with simulon's documented departures from it
(README, `--json`'s `tflops_per_gpu`): attention counted whole, not causal-halved (Narayanan et al., SC'21: 72 B s l h^2
(1 + s / 6h + V / 12hl) counts the whole score matrix; Megatron's line 1168 halves it), the MoE router's GEMM counted
as every GEMM is (Megatron leaves out its h x experts), norms not counted (Megatron's MLA `+ 1` terms and MTP's `3 h`),
a Mamba-2 layer's scan counted as its SSD matrix products (Megatron's line 902 estimates it at 7 d_in N, a figure its
comment says is to be updated) and a sliding-window layer's keys as its window (Megatron counts every layer whole)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.config import ScenarioConfig
from simulon.pipeline import simulate, simulate_sampled

SEQ = 4096


def scenario(model: str | dict, parallelism: dict | None = None, gpus: int = 1, seq: int = SEQ, gbs: int = 1,
             mbs: int = 1) -> ScenarioConfig:
    """A step of `model` on `gpus` H100s of one node (eight or fewer) or of eight-GPU nodes."""
    return ScenarioConfig.model_validate({
        "datacenter": {"cluster": {"num_nodes": max(1, gpus // 8)},
                       "node": {"gpus_per_node": min(8, gpus), "gpu": "H100"},
                       "network": {"scale_up": {"switch": {"port_speed": "2880Gbps", "latency": "0.5us"}},
                                   "scale_out": {"nic": {"speed": "400Gbps", "latency": "2us"}}}},
        "workload": {"framework": "megatron", "model": model, "parallelism": parallelism or {},
                     "training": {"num_gpus": gpus, "global_batch_size": gbs, "micro_batch_size": mbs,
                                  "sequence_length": seq}}})


def flops_per_token(sc: ScenarioConfig) -> float:
    """The simulated step's model FLOPs over its tokens."""
    train = sc.workload.training
    return simulate(sc).result.step_flops() / (train.global_batch_size * train.sequence_length)


def attention_block(h: int, heads: int, groups: int, head: int, seq: int, gate: bool = False) -> float:
    """Forward FLOPs a token of one GQA attention block: Megatron's lines 1140-1170 (QKV, output gate and output
    projections) and its core term with the whole score matrix (QK^T and the values, 2 x 2 x heads x head x seq)."""
    q, kv = heads * head, groups * head
    return 2 * h * (q + 2 * kv + (q if gate else 0)) + 2 * q * h + 4 * q * seq


def mlp_block(h: int, ffn: int, gated: bool) -> float:
    """Forward FLOPs a token of an MLP: 2 h ffn a GEMM, three GEMMs gated (Megatron's ffn_expansion_factor)."""
    return 2 * h * ffn * (3 if gated else 2)


def dense_model(layers: int, h: int, heads: int, groups: int, head: int, ffn: int, vocab: int, seq: int,
                gated: bool) -> float:
    """Training FLOPs a token (forward and backward, 3x the forward) of a dense GQA decoder with its logits."""
    return 3 * (layers * (attention_block(h, heads, groups, head, seq) + mlp_block(h, ffn, gated)) + 2 * h * vocab)


@st.composite
def dense_shapes(draw: st.DrawFn) -> dict:
    groups = draw(st.sampled_from([1, 2, 4]))
    heads = groups * draw(st.sampled_from([1, 2, 4]))
    head = draw(st.sampled_from([32, 64, 128]))
    return {"num_layers": draw(st.integers(1, 3)), "hidden_size": draw(st.sampled_from([256, 512, 768, 1024])),
            "num_heads": heads, "num_kv_heads": groups, "head_dim": head,
            "ffn_hidden_size": draw(st.sampled_from([512, 1000, 2048, 2816])),
            "vocab_size": draw(st.sampled_from([1000, 32000, 50257])),
            "activation": draw(st.sampled_from(["gelu", "swiglu", "squared_relu", "geglu"])),
            "tie_embeddings": draw(st.booleans()), "seq": draw(st.sampled_from([128, 512, 2048, 3000]))}


@settings(max_examples=25, deadline=None)
@given(dense_shapes())
def test_a_dense_models_flops_a_token_are_megatrons_closed_form_with_attention_whole(shape: dict) -> None:
    seq = shape.pop("seq")
    model = {"name": "dense", **shape}
    expected = dense_model(shape["num_layers"], shape["hidden_size"], shape["num_heads"], shape["num_kv_heads"],
                           shape["head_dim"], shape["ffn_hidden_size"], shape["vocab_size"], seq,
                           shape["activation"] in ("swiglu", "geglu"))
    assert flops_per_token(scenario(model, seq=seq)) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("template", "shape"), [
    # Llama 3 8B and 70B (Grattafiori et al. 2024, Table 3): GQA with 8 groups, SwiGLU, untied 128,256 vocabulary.
    ("llama-3-8b", (32, 4096, 32, 8, 128, 14336, 128256, True)),
    ("llama-3-70b", (80, 8192, 64, 8, 128, 28672, 128256, True)),
    # GPT-3 175B (Brown et al. 2020, Table 2.1): MHA, GeLU, tied 50,257 vocabulary (its logits GEMM counted all
    # the same, as Megatron's line 1298 does).
    ("gpt3-175b", (96, 12288, 96, 96, 128, 49152, 50257, False)),
])
def test_a_dense_templates_flops_a_token_are_megatrons_closed_form(template: str, shape: tuple) -> None:
    assert flops_per_token(scenario(template)) == pytest.approx(dense_model(*shape[:6], shape[6], SEQ, shape[7]),
                                                                 rel=1e-12)


def test_llama_3_8b_at_4k_counts_51_47_gflops_a_token() -> None:
    """The closed form's figure, worked: 6 (32 (4096 x 6144 + 4096^2 + 3 x 4096 x 14336 + 2 x 4096 x 4096)
    + 4096 x 128256) = 51.470 GFLOPs a token at 4,096 tokens (the causal-halved count of Megatron's current
    line 1168 gives 48.249)."""
    assert flops_per_token(scenario("llama-3-8b")) == pytest.approx(51.470401536e9, rel=1e-12)


def moe_block(h: int, experts: int, top_k: int, expert_ffn: int, shared_ffn: int = 0) -> float:
    """Forward FLOPs a token of an MoE MLP (Megatron's routed and shared experts, lines 1255-1285, gated), with
    the router's h x experts GEMM that Megatron leaves out."""
    return mlp_block(h, expert_ffn * top_k + shared_ffn, True) + 2 * h * experts


def test_mixtral_and_qwen3_moe_count_top_k_experts_a_token_and_the_router() -> None:
    mixtral = 3 * (32 * (attention_block(4096, 32, 8, 128, SEQ) + moe_block(4096, 8, 2, 14336)) + 2 * 4096 * 32000)
    qwen3 = 3 * (48 * (attention_block(2048, 32, 4, 128, SEQ) + moe_block(2048, 128, 8, 768)) + 2 * 2048 * 151936)
    assert flops_per_token(scenario("mixtral-8x7b")) == pytest.approx(mixtral, rel=1e-12)
    assert flops_per_token(scenario("qwen3-30b-a3b")) == pytest.approx(qwen3, rel=1e-12)


def test_deepseek_v3_counts_mla_three_dense_layers_the_moe_layers_and_its_mtp_module() -> None:
    """Megatron's MLA term (lines 1079-1137) without its norms' `+ 1`, 3 dense layers, 58 MoE layers of 8 routed
    and 1 shared expert, and the MTP module (lines 1042-1050, 1288-1303): one more MoE layer, its 2h x h eh_proj and
    its logits."""
    h, heads, q_rank, kv_rank, nope, rope, v = 7168, 128, 1536, 512, 128, 64, 128
    projections = 2 * (q_rank * (h + heads * (nope + rope)) + kv_rank * (h + heads * (nope + v)) + h * rope
                       + heads * v * h)
    core = 2 * heads * (nope + rope + v) * SEQ
    moe = moe_block(h, 256, 8, 2048, 2048)
    forward = (62 * (projections + core) + 3 * mlp_block(h, 18432, True) + 59 * moe + 2 * 2 * h * h
               + 2 * 2 * h * 129280)
    assert flops_per_token(scenario("deepseek-v3")) == pytest.approx(3 * forward, rel=1e-12)


def test_nemotron_h_8b_counts_its_mamba_attention_and_mlp_layers() -> None:
    """Megatron's hybrid_flops (lines 964-1007): 24 Mamba-2, 4 attention and 24 squared-ReLU MLP layers and the
    logits; a Mamba layer's in_proj (z, x, B, C, dt) and out_proj as Megatron's lines 895-903 count them, its scan
    as the SSD's products (Dao and Gu 2024, section 6) on chunks of Q: B^T X and C S at 2 N P a token and head, C B^T
    at 2 N Q a token and group, (C B^T) X at 2 Q P a token and head (Megatron's 7 d_in N estimate counts 0.12%
    more of the model; its d_in is 2 h, line 889, which Nemotron-H's 128 heads of 64 are, and Nemotron 3 Nano's 64
    of 64 at h 2,688 are not)."""
    h, heads, head, state, groups, chunk = 4096, 128, 64, 128, 8, 128
    d_in = heads * head
    in_proj = 2 * h * (2 * d_in + 2 * groups * state + heads)
    scan = 2 * d_in * state * 2 + 2 * groups * state * chunk + 2 * d_in * chunk
    mamba = in_proj + scan + 2 * d_in * h
    forward = 24 * mamba + 4 * attention_block(h, 32, 8, 128, SEQ) + 24 * mlp_block(h, 21504, False) + 2 * h * 131072
    assert flops_per_token(scenario("nemotron-h-8b")) == pytest.approx(3 * forward, rel=1e-12)


def test_gpt_oss_counts_a_windowed_layers_keys_as_its_window() -> None:
    """GPT-OSS 20B: 24 MoE layers (32 experts, top 4), every other layer attending to a 128-token window, whose
    keys a query it counts where Megatron (which has no window term) counts the sequence's: 91.2% of Megatron's
    figure at 4,096 tokens."""
    h, heads, groups, head = 2880, 64, 8, 64

    def layer(keys: int) -> float:
        return attention_block(h, heads, groups, head, keys) + moe_block(h, 32, 4, 2880)

    assert flops_per_token(scenario("gpt-oss-20b")) == pytest.approx(
        3 * (12 * layer(SEQ) + 12 * layer(128) + 2 * h * 201088), rel=1e-12)


@pytest.mark.parametrize(("model", "layouts"), [
    ({"from": "llama-3-8b", "num_layers": 4}, [({"tp": 2, "sequence_parallel": True}, 2), ({"cp": 2}, 2),
                                               ({"pp": 2, "vpp": 2}, 2), ({"tp": 2, "pp": 2, "cp": 2}, 8)]),
    ({"from": "mixtral-8x7b", "num_layers": 4}, [({"ep": 2}, 2), ({"tp": 2, "ep": 2, "expert_tensor_parallel": 1}, 4),
                                                 ({"ep": 2, "recompute": "full"}, 2)]),
    ({"from": "deepseek-v3", "num_layers": 5}, [({"tp": 2, "sequence_parallel": True}, 2), ({"cp": 2}, 2),
                                                ({"ep": 2}, 2), ({"pp": 2}, 2)]),
    ("nemotron-h-8b", [({"tp": 2, "sequence_parallel": True}, 2), ({"cp": 2}, 2), ({"tp": 2, "pp": 2, "cp": 2}, 8)]),
])
def test_model_flops_do_not_depend_on_how_the_model_is_split(model: str | dict, layouts: list) -> None:
    whole = flops_per_token(scenario(model, gbs=8))
    for parallelism, gpus in layouts:
        assert flops_per_token(scenario(model, parallelism, gpus, gbs=8)) == pytest.approx(whole, rel=1e-12), \
            parallelism


def test_throughput_and_utilisation_are_the_steps_tokens_and_flops_over_its_time() -> None:
    """tokens_per_s x step = global batch x sequence; tflops_per_gpu x GPUs x step = the closed form's FLOPs of
    the step; mfu = tflops_per_gpu over the dense bf16 peak; so also for a step extrapolated from fewer
    micro-batches (sampling.extrapolate)."""
    model = {"from": "llama-3-8b", "num_layers": 4}
    sc = scenario(model, {"pp": 2}, 4, gbs=64)
    tokens = 64 * SEQ
    expected = tokens * dense_model(4, 4096, 32, 8, 128, 14336, 128256, SEQ, True)
    peak = sc.datacenter.node.gpu.peak_flops(sc.workload.training.dtype)
    for result in (simulate(sc).result, simulate_sampled(sc, (4, 6)).result):
        seconds = result.iteration_time_ms / 1e3
        assert result.tokens_per_s * seconds == pytest.approx(tokens, rel=1e-12)
        assert result.tflops_per_gpu * 1e12 * result.num_gpus * seconds == pytest.approx(expected, rel=1e-12)
        assert result.mfu == pytest.approx(result.tflops_per_gpu * 1e12 / peak, rel=1e-12)


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_a_capacity_factors_padding_counts_as_hardware_flops_not_model_flops(recompute: str) -> None:
    """Mixtral's 4 layers at capacity factor 1.25 on ep 2: each expert GEMM runs 1.25x its top_k tokens. Model FLOPs
    count top_k's (as Megatron's line 1266 does); hardware FLOPs count the padded rows as well (README, `--json`:
    recomputation and padding are hardware FLOPs only), the re-run forward's too under full recomputation."""
    h, ffn, layers = 4096, 14336, 4
    model = {"from": "mixtral-8x7b", "num_layers": layers}
    padded = {**model, "moe": {"capacity_factor": 1.25}}
    parallelism = {"ep": 2, "recompute": recompute}
    tokens = 8 * SEQ
    plain = simulate(scenario(model, parallelism, 2, gbs=8)).result
    result = simulate(scenario(padded, parallelism, 2, gbs=8)).result
    experts = layers * mlp_block(h, ffn * 2, True) * tokens  # a forward's top_k expert GEMMs over the step
    assert result.step_flops() == pytest.approx(plain.step_flops(), rel=1e-12)
    rerun = 1 if recompute == "full" else 0
    assert result.step_flops(hardware=True) - plain.step_flops(hardware=True) == pytest.approx(
        0.25 * experts * (3 + rerun), rel=1e-9)


@st.composite
def mla_moe_shapes(draw: st.DrawFn) -> dict:
    heads = draw(st.sampled_from([4, 8, 16]))
    experts = draw(st.sampled_from([4, 8, 16]))
    layers = draw(st.integers(2, 3))
    shared = draw(st.sampled_from([{}, {"num_shared_experts": 1, "shared_expert_ffn_hidden_size": 512}]))
    return {"num_layers": layers, "hidden_size": draw(st.sampled_from([512, 1024])), "num_heads": heads,
            "ffn_hidden_size": draw(st.sampled_from([1024, 2816])), "vocab_size": draw(st.sampled_from([8192, 32000])),
            "activation": "swiglu", "mtp_layers": draw(st.integers(0, 1)),
            "mla": {"q_lora_rank": draw(st.sampled_from([None, 256, 384])),
                    "kv_lora_rank": draw(st.sampled_from([128, 256])),
                    "qk_nope_head_dim": draw(st.sampled_from([32, 64])),
                    "qk_rope_head_dim": draw(st.sampled_from([16, 32])), "v_head_dim": draw(st.sampled_from([32, 64]))},
            "moe": {"num_experts": experts, "top_k": draw(st.sampled_from([1, 2, 4])),
                    "expert_ffn_hidden_size": draw(st.sampled_from([256, 512])),
                    **shared, "first_dense_layers": draw(st.integers(0, layers - 1))},
            "seq": draw(st.sampled_from([256, 1024, 2048]))}


@settings(max_examples=15, deadline=None)
@given(mla_moe_shapes())
def test_an_mla_moe_models_flops_a_token_are_megatrons_closed_form(shape: dict) -> None:
    """Megatron's MLA term (lines 1079-1137, its norms' `+ 1` left out), its dense and MoE MLPs with the router's
    GEMM, and the MTP module as a layer like the last (lines 1042-1050) with its eh_proj and logits."""
    seq = shape.pop("seq")
    h, n, mla, moe = shape["hidden_size"], shape["num_heads"], shape["mla"], shape["moe"]
    nope, rope, v, kv_rank, q_rank = (mla[key] for key in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                                                            "kv_lora_rank", "q_lora_rank"))
    query = q_rank * (h + n * (nope + rope)) if q_rank else h * n * (nope + rope)
    attention = 2 * (query + kv_rank * (h + n * (nope + v)) + h * rope + n * v * h) + 2 * n * (nope + rope + v) * seq
    routed = moe_block(h, moe["num_experts"], moe["top_k"], moe["expert_ffn_hidden_size"],
                       moe.get("shared_expert_ffn_hidden_size", 0))
    layers, dense, mtp = shape["num_layers"], moe["first_dense_layers"], shape["mtp_layers"]
    forward = ((layers + mtp) * attention + dense * mlp_block(h, shape["ffn_hidden_size"], True)
               + (layers - dense + mtp) * routed + mtp * 2 * 2 * h * h + (1 + mtp) * 2 * h * shape["vocab_size"])
    assert flops_per_token(scenario({"name": "mla-moe", **shape}, seq=seq)) == pytest.approx(3 * forward, rel=1e-12)


@pytest.mark.parametrize(("tp", "divisor", "padded"), [(1, None, 50257), (2, None, 50258), (1, 128, 50304),
                                                      (8, 128, 51200)])
def test_the_logits_count_the_vocabulary_as_megatron_pads_it(tp: int, divisor: int | None, padded: int) -> None:
    """Megatron's logit term (line 1298) takes padded_vocab_size: the vocabulary rounded up to a multiple of
    make_vocab_size_divisible_by x tp (_vocab_size_with_padding); unset, simulon pads to tp only."""
    model = {"from": "gpt3-175b", "num_layers": 2}
    sc = scenario(model, {"tp": tp}, tp, gbs=8)
    sc = sc.model_copy(update={"workload": sc.workload.model_copy(update={"training": sc.workload.training.model_copy(
        update={"make_vocab_size_divisible_by": divisor})})})
    h = 12288
    expected = 3 * (2 * (attention_block(h, 96, 96, 128, SEQ) + mlp_block(h, 4 * h, False)) + 2 * h * padded)
    assert flops_per_token(sc) == pytest.approx(expected, rel=1e-12)
