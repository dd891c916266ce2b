"""Hybrid Mamba models (Megatron-Core's hybrid pattern): each layer runs the blocks its symbol names, a Mamba
layer's FLOPs and parameters follow their closed forms, tensor parallelism reduces a Mamba layer's output as a
row-parallel GEMM's, the search's estimate follows the replay, and what is not modelled is refused in words; and
the placements of MoE layers among dense ones that place none or give the wrong count are refused."""

from __future__ import annotations

import importlib.util
import re
from collections import Counter

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import ROOT, cli, estimate_over_replay
from simulon.collective.types import CollType
from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario
from simulon.config.workload import MegatronWorkload
from simulon.memory.activations import ActivationModel
from simulon.pipeline import build_dag, simulate
from simulon.search.run import Search
from simulon.search.space import Space, Strategy
from simulon.workload.kernels import Phase
from simulon.workload.layer_kernels import LayerKernels
from simulon.workload.megatron import MegatronTracer
from simulon.workload.parameters import PipelineLayers
from simulon.workload.program import CollectiveOp, ComputeOp

H, HEADS, FFN, VOCAB = 512, 8, 1024, 8192
MAMBA = {"num_heads": 16, "head_dim": 64, "state_size": 64, "num_groups": 4, "conv_kernel": 4, "chunk_size": 128}


def hybrid(pattern: str = "M*M-", *, tp: int = 1, pp: int = 1, gbs: int = 4, seq: int = 512, nodes: int = 1,
           moe: dict | None = None, parallelism: dict | None = None, mamba: dict | None = None) -> dict:
    model = {"name": "test-hybrid", "num_layers": len(pattern.replace("|", "")), "hidden_size": H, "num_heads": HEADS,
             "num_kv_heads": 4, "ffn_hidden_size": FFN, "vocab_size": VOCAB, "activation": "squared_relu",
             "normalization": "rmsnorm", "hybrid_pattern": pattern, "mamba": mamba or MAMBA}
    if moe:
        model["moe"] = moe
    return {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": nodes}},
            "workload": {"model": model, "parallelism": {"tp": tp, "pp": pp, **(parallelism or {})},
                         "training": {"num_gpus": tp * pp * 2 if nodes == 1 else None, "global_batch_size": gbs,
                                      "sequence_length": seq}}}


def scenario(pattern: str = "M*M-", **knobs):
    data = hybrid(pattern, **knobs)
    if data["workload"]["training"]["num_gpus"] is None:
        del data["workload"]["training"]["num_gpus"]
    return parse_scenario(data)


def mamba_forward_flops(tokens: int, seq: int) -> float:
    """in_proj, out_proj and the SSD scan's products (Dao and Gu, arXiv 2405.21060 section 6), per forward: per
    chunk of q tokens and head the state B^T X (N x P from q) and the output C S + (C B^T) X (q x P from N + q), per
    chunk and group C B^T (q x q from N); a sequence's last chunk holds what is left of it."""
    heads, p, n, g, q = MAMBA["num_heads"], MAMBA["head_dim"], MAMBA["state_size"], MAMBA["num_groups"], \
        MAMBA["chunk_size"]
    inner = heads * p
    width = 2 * inner + 2 * g * n + heads
    chunks = [q] * (seq // q) + ([seq % q] if seq % q else [])
    scan = tokens // seq * sum(heads * (2 * n * p * c + 2 * c * p * (n + c)) + g * 2 * c * c * n for c in chunks)
    return 2 * tokens * H * width + 2 * tokens * inner * H + scan


def mamba_scan_flops(tokens: int, seq: int) -> float:
    """The SSD scan's products alone, per forward (mamba_forward_flops less in_proj and out_proj)."""
    inner = MAMBA["num_heads"] * MAMBA["head_dim"]
    width = 2 * inner + 2 * MAMBA["num_groups"] * MAMBA["state_size"] + MAMBA["num_heads"]
    return mamba_forward_flops(tokens, seq) - 2 * tokens * H * width - 2 * tokens * inner * H


@pytest.mark.parametrize(("tp", "pp", "seq"), [(1, 1, 512), (2, 1, 512), (1, 2, 512), (2, 2, 512), (1, 1, 500),
                                               (2, 2, 600)])
def test_a_hybrid_model_s_flops_are_the_sum_of_its_layers_closed_forms(tp, pp, seq):
    """A sequence of 500 tokens scans chunks of 128, 128, 128 and 116: its model FLOPs counted the last as 128
    (0.17% over the layers' closed forms)."""
    gbs = 4
    sc = scenario("M*M-", tp=tp, pp=pp, gbs=gbs, seq=seq)
    tokens, kv, d = gbs * seq, 4, H // HEADS
    attention = 2 * tokens * H * (HEADS + 2 * kv) * d + 4 * tokens * seq * H + 2 * tokens * H * H
    mlp = 2 * 2 * tokens * H * FFN
    expected = 3 * (2 * mamba_forward_flops(tokens, seq) + attention + mlp + 2 * tokens * H * VOCAB)
    dag, _, _ = build_dag(sc)
    assert dag.total_flops() == pytest.approx(expected, rel=1e-12)


def test_the_scans_backward_recomputation_counts_as_hardware_flops_not_model_flops():
    """_mamba_chunk_scan_combined_bwd re-runs each product of the forward before its gradients: hardware FLOPs, as
    every recomputation is, while the model FLOPs count the two gradient products (test above)."""
    sc = scenario("M*M-", gbs=4, seq=512)
    dag, _, _ = build_dag(sc)
    assert dag.total_flops(hardware=True) - dag.total_flops() == pytest.approx(2 * mamba_scan_flops(4 * 512, 512),
                                                                              rel=1e-12)


def test_each_layer_runs_the_blocks_its_symbol_names_in_megatron_s_order():
    sc = scenario("M*-E", moe={"num_experts": 4, "top_k": 2})
    program = MegatronTracer(sc.workload, 4).stage_program(0)
    by_layer: dict[int, list[str]] = {}
    for op in program.ops:
        if isinstance(op, ComputeOp) and op.kernel.phase == Phase.fwd and op.layer >= 0 and op.microbatch == 0:
            by_layer.setdefault(op.layer, []).append(op.kernel.name)
    assert by_layer[0] == ["mamba_norm", "mamba_in_proj", "mamba_conv1d", "mamba_ssd_cumsum", "mamba_ssd_chunk_state",
                           "mamba_ssd_state_passing", "mamba_ssd_bmm", "mamba_ssd_scan", "mamba_out_norm",
                           "mamba_out_proj", "mamba_residual"]
    # Megatron-Core copies the grouped query (8 heads in 4 groups) out of the QKV output, Transformer Engine the key
    # and value views
    assert by_layer[1] == ["attn_norm", "attn_qkv", "attn_query_copy", "attn_layout_copy", "attn_flash", "attn_proj",
                           "attn_residual"]
    assert by_layer[2] == ["mlp_norm", "mlp_linear1", "mlp_act", "mlp_linear2", "mlp_residual"]
    assert by_layer[3][0] == "mlp_norm" and by_layer[3][-1] == "mlp_residual"
    assert {name.split("_")[0] for name in by_layer[3][1:-1]} == {"moe"}
    backward = [op.kernel.name for op in program.ops if isinstance(op, ComputeOp) and op.layer == 0
                and op.microbatch == 0 and op.kernel.phase == Phase.bwd_ig]
    assert backward == ["mamba_residual", "mamba_out_proj", "mamba_out_norm", "mamba_ssd_scan", "mamba_ssd_bmm",
                        "mamba_ssd_state_passing", "mamba_ssd_chunk_state", "mamba_ssd_cumsum", "mamba_conv1d",
                        "mamba_in_proj", "mamba_norm"]


def megatron_mamba_params(h: int, heads: int, head_dim: int, state: int, groups: int, conv: int) -> int:
    """Megatron-Core's MambaLayer with RMSNorm: the fused pre-norm, in_proj (z, x, B, C, dt), conv1d's filter and
    bias over x, B and C, dt_bias, A_log and D per head, the output norm's weight, out_proj (mamba_mixer.py)."""
    inner = heads * head_dim
    return (h + h * (2 * inner + 2 * groups * state + heads) + (inner + 2 * groups * state) * (conv + 1)
            + 3 * heads + inner + inner * h)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_a_mamba_layer_holds_megatron_s_parameters_split_over_tp_but_its_norm(tp):
    wl = scenario(tp=tp).workload
    dense, expert = LayerKernels.of(wl).layer_params(("mamba",))
    whole = megatron_mamba_params(H, MAMBA["num_heads"], MAMBA["head_dim"], MAMBA["state_size"],
                                  MAMBA["num_groups"], MAMBA["conv_kernel"])
    assert expert == 0 and dense == (whole - H) / tp + H


@pytest.mark.parametrize(("template", "billions"), [
    ("nemotron-h-8b", 8.1), ("nemotron-nano-9b-v2", 8.9), ("nemotron-nano-12b-v2", 12.3), ("nemotron-h-56b", 56.3),
    ("nemotron-3-nano-30b-a3b", 31.6)])
def test_the_shipped_hybrid_models_hold_the_parameters_their_papers_state(template, billions):
    """Nemotron-H (arXiv 2504.03624) 8B and 56B, Nemotron Nano 2 (arXiv 2508.14444) 9B (8.89B) and 12B, Nemotron 3
    Nano (arXiv 2512.20848: 31.6B total)."""
    wl = MegatronWorkload.model_validate({"model": {"from": template},
                                          "training": {"global_batch_size": 1, "sequence_length": 4096}})
    kernels = LayerKernels.weights_of(wl)
    layers = sum(sum(kernels.layer_params(wl.model.layer_blocks(i))) for i in range(wl.model.num_layers))
    total = layers + 2 * kernels.vocab_params + wl.model.hidden_size  # untied embedding and LM head, final norm
    assert total / 1e9 == pytest.approx(billions, abs=0.05)


@pytest.mark.parametrize("sequence_parallel", [False, True])
def test_tensor_parallelism_reduces_a_mamba_layer_s_output_and_its_input_gradient(sequence_parallel):
    sc = scenario("MM", tp=2, parallelism={"sequence_parallel": sequence_parallel})
    ops = MegatronTracer(sc.workload, 4).stage_program(0).ops
    tp = Counter((op.label, op.ctype, op.phase) for op in ops if isinstance(op, CollectiveOp) and op.axis == "tp")
    micro = 2  # global batch 4 over dp 2
    if sequence_parallel:
        assert tp[("mamba_gather", CollType.AllGather, Phase.fwd)] == 2 * micro
        assert tp[("mamba_reduce", CollType.ReduceScatter, Phase.fwd)] == 2 * micro
        assert tp[("mamba_reduce", CollType.ReduceScatter, Phase.bwd_ig)] == 2 * micro
    else:
        assert tp[("mamba_reduce", CollType.AllReduce, Phase.fwd)] == 2 * micro
        assert tp[("mamba_reduce", CollType.AllReduce, Phase.bwd_ig)] == 2 * micro


def test_a_mamba_layer_keeps_what_the_memory_efficient_path_saves():
    wl = scenario("MM", tp=2).workload
    parts = ActivationModel(wl).layer(("mamba",)).parts
    rows, inner, groups, state, heads = 512, 1024 // 2, 4 // 2, MAMBA["state_size"], 16 // 2
    assert parts["Mamba scan input"] == 2 * rows * (2 * inner + 2 * groups * state + heads)
    assert parts["Mamba scan output"] == parts["Mamba gated output"] == parts["Mamba output projection input"] \
        == 2 * rows * inner
    assert parts["Mamba norm statistics"] == 4 * rows * groups
    full = scenario("MM", tp=2, parallelism={"recompute": "full"}).workload
    assert ActivationModel(full).layer(("mamba",)).parts == {"layer input": 2 * rows * H}


def test_selective_recomputation_of_norms_re_runs_only_the_norms_a_layer_has():
    sc = scenario("M*-", parallelism={"recompute": "selective", "recompute_modules": ["layernorm", "mlp"]}, gbs=2)
    ops = MegatronTracer(sc.workload, 2).stage_program(0).ops
    again = Counter((op.layer, op.kernel.name) for op in ops
                    if isinstance(op, ComputeOp) and op.kernel.phase == Phase.recompute)
    assert {name for layer, name in again if layer == 0} == set()
    assert {name for layer, name in again if layer == 1} == {"attn_norm"}
    assert {name for layer, name in again if layer == 2} == {"mlp_norm", "mlp_linear1", "mlp_act", "mlp_linear2"}


def test_the_search_s_estimate_follows_the_replay_on_a_hybrid_model():
    sc = scenario("M*M-M*M-", nodes=2, gbs=16, seq=1024)
    search = Search(sc)
    strategies = [Strategy(1, 1, 1, 16, 1, 1, 1, 1, False, "none", "distributed_optimizer", "bf16", False),
                  Strategy(4, 1, 1, 4, 1, 1, 4, 1, True, "none", "distributed_optimizer", "bf16", False),
                  Strategy(2, 2, 1, 4, 1, 1, 2, 1, True, "full", "distributed_optimizer", "bf16", False)]
    for strategy in strategies:
        assert 0.75 < estimate_over_replay(search, sc, strategy, 16) < 1.25, strategy


def test_the_search_offers_only_what_a_mamba_layer_can_be_split_into():
    sc = scenario("M*M-", nodes=2, gbs=16)
    kept = list(Space(sc.workload, 16, 8, fp8=False).strategies())
    assert kept and {s.tp for s in kept} <= {1, 2, 4}
    heads, groups = MAMBA["num_heads"], MAMBA["num_groups"]
    assert all(heads // s.tp % s.cp == 0 and (groups // s.tp % s.cp == 0 or s.cp % (groups // s.tp) == 0)
               for s in kept)
    assert {s.cp for s in kept} > {1}


def test_a_narrow_format_keeps_the_scan_in_bf16_and_casts_only_the_projections():
    sc = scenario("M*M-")
    wl = sc.workload.model_copy(update={"training": sc.workload.training.model_copy(update={"dtype": "fp8"})})
    table = LayerKernels.of(wl).table
    assert "mamba_in_proj_cast" in table and "mamba_out_proj_cast" in table
    for name in ("mamba_ssd_chunk_state", "mamba_ssd_bmm", "mamba_ssd_scan"):
        assert f"{name}_cast" not in table and table[name][Phase.fwd].param("precision") == "bf16"


BAD = [
    ({"hybrid_pattern": "M*M"}, "workload.model.hybrid_pattern: has 3 layer symbols, one per layer, but num_layers "
     "is 4"),
    ({"hybrid_pattern": "M*MD"}, "workload.model.hybrid_pattern: 'M*MD' has 'D'"),
    ({"hybrid_pattern": "M*MG"}, "workload.model.hybrid_pattern: has G layers but the model has no gdn block"),
    ({"hybrid_pattern": "M*||M-"}, "has an empty pipeline segment"),
    ({"hybrid_pattern": "M*M-/M-"}, "workload.model.mtp_layers: is needed with hybrid_pattern's 1 "
     "multi-token-prediction depth after '/': 1 to train them, 0 to leave them out"),
    ({"hybrid_pattern": "M*M-/M-/*-", "mtp_layers": 2}, "each depth is the same non-empty pattern"),
    ({"hybrid_pattern": "M*M-/MM", "mtp_layers": 1}, "repeats a block in the multi-token-prediction pattern 'MM'"),
    ({"hybrid_pattern": "E*E-"}, "workload.model.hybrid_pattern: has E layers but the model has no moe block"),
    ({"hybrid_pattern": "-*--", "mamba": MAMBA}, "workload.model.mamba: is given but no layer"),
    ({"hybrid_pattern": None}, "workload.model.hybrid_pattern: is needed with mamba"),
    ({"mamba": {**MAMBA, "num_groups": 3}}, "workload.model.mamba.num_groups: 3 does not divide num_heads (16)"),
]


@pytest.mark.parametrize(("change", "says"), BAD)
def test_a_bad_hybrid_model_is_exit_2_naming_the_field(tmp_path, change, says):
    data = hybrid()
    data["workload"]["model"].update(change)
    if data["workload"]["model"]["hybrid_pattern"] is None:
        del data["workload"]["model"]["hybrid_pattern"]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    run = cli("simulate", str(path))
    assert run.returncode == 2 and says in run.stderr and "Traceback" not in run.stderr, run.stderr


@pytest.mark.parametrize(("moe", "says"), [
    ({"layer_freq": [0, 1, 1]}, "workload.model.moe.layer_freq: has 3 entries, one per layer, but num_layers is 4"),
    ({"layer_freq": 9, "first_dense_layers": 1}, "workload.model.moe: no layer is a mixture-of-experts layer"),
    ({"layer_freq": 0}, "workload.model.moe.layer_freq"),
])
def test_a_moe_layer_placement_that_places_nothing_or_too_much_is_refused(moe, says):
    data = hybrid()
    model = data["workload"]["model"]
    for key in ("hybrid_pattern", "mamba"):
        del model[key]
    model["moe"] = {"num_experts": 4, "top_k": 2, **moe}
    with pytest.raises(ConfigError, match=says):
        parse_scenario(data)


@pytest.mark.parametrize(("parallelism", "mamba", "says"), [
    ({"tp": 8}, MAMBA, "workload.parallelism.tp: 8 does not divide the Mamba mixer's num_groups 4"),
    ({"cp": 4}, {**MAMBA, "num_heads": 6, "num_groups": 2}, "workload.parallelism.cp: 4 must divide each "
     "tensor-parallel rank's 6 Mamba heads"),
    ({"cp": 4, "tp": 2}, {**MAMBA, "num_groups": 6, "num_heads": 24}, "and divide or be a multiple of its 3 groups"),
])
def test_a_split_a_mamba_mixer_cannot_take_is_refused(parallelism, mamba, says):
    data = hybrid(mamba=mamba)
    data["workload"]["parallelism"].update(parallelism)
    data["workload"]["training"]["num_gpus"] = 8
    with pytest.raises(ConfigError, match=says):
        parse_scenario(data)


@settings(max_examples=40, deadline=None)
@given(pattern=st.text(alphabet="M*-EGx|", min_size=1, max_size=8))
def test_any_pattern_either_builds_the_layers_it_names_or_is_refused_naming_the_pattern(pattern):
    data = hybrid(pattern, moe={"num_experts": 4, "top_k": 2} if "E" in pattern else None)
    try:
        sc = parse_scenario(data)
    except ConfigError as error:
        assert "workload.model" in str(error)
        return
    model = sc.workload.model
    assert [model.layer_blocks(i) for i in range(model.num_layers)] == \
        [{"M": ("mamba",), "*": ("attention",), "-": ("mlp",), "E": ("moe",)}[c] for c in pattern.replace("|", "")]


@pytest.mark.parametrize(("tp", "cp"), [(1, 2), (2, 2), (1, 8), (2, 4)])
def test_context_parallelism_computes_the_mamba_layers_of_one_rank_over_the_whole_sequence(tp, cp):
    """The same model FLOPs as without it, where groups fewer than cp are repeated (tp 2 x cp 4: two groups for four
    ranks; tp 1 x cp 8: four for eight), and the all-to-alls of MambaContextParallel: z, x, B, C, dt and back."""
    flat = scenario("M*M-", tp=tp, gbs=16, seq=1024, nodes=2)
    split = scenario("M*M-", tp=tp, gbs=16, seq=1024, nodes=2, parallelism={"cp": cp})
    assert build_dag(split)[0].total_flops() == pytest.approx(build_dag(flat)[0].total_flops(), rel=1e-12)
    tracer = MegatronTracer(split.workload, 16)
    ops = tracer.stage_program(0).ops
    a2a = [op for op in ops if isinstance(op, CollectiveOp) and op.label == "mamba_cp_a2a"]
    micro = tracer.num_microbatches
    assert all(op.axis == "cp" and op.ctype == CollType.AllToAll for op in a2a)
    for phase in (Phase.fwd, Phase.bwd_ig):
        assert len([op for op in a2a if op.phase == phase]) == 6 * 2 * micro  # two Mamba layers
    first = [op.nbytes for op in a2a if op.phase == Phase.fwd][:6]
    tokens, inner, groups = 1024 // cp, 1024 // tp, MAMBA["num_groups"] // tp
    shared = tokens * max(groups, cp) * MAMBA["state_size"] * 2
    assert first == [2 * tokens * inner, 2 * tokens * inner, shared, shared,
                     2 * tokens * MAMBA["num_heads"] // tp, 2 * tokens * inner]


def test_context_parallelism_halves_what_a_mamba_layer_keeps_where_it_repeats_no_group():
    one = ActivationModel(scenario("MM").workload).layer(("mamba",)).parts
    two = ActivationModel(scenario("MM", parallelism={"cp": 2}).workload).layer(("mamba",)).parts
    assert two == pytest.approx({name: value / 2 for name, value in one.items()})


def test_the_search_s_estimate_follows_the_replay_of_a_context_parallel_hybrid():
    sc = scenario("M*M-M*M-", nodes=2, gbs=16, seq=4096)
    search = Search(sc)
    for strategy in (Strategy(1, 1, 1, 8, 2, 1, 1, 1, False, "none", "distributed_optimizer", "bf16", False),
                     Strategy(2, 1, 1, 2, 4, 1, 2, 1, True, "none", "distributed_optimizer", "bf16", False)):
        assert 0.75 < estimate_over_replay(search, sc, strategy, 16) < 1.25, strategy


@pytest.mark.parametrize(("pattern", "pp", "vpp", "counts"), [
    ("M*|M-", 2, 1, (2, 2)), ("M|*M-|M-|M", 2, 2, (1, 3, 2, 1)), ("M*M-|M-", 2, 1, (4, 2))])
def test_pipeline_marks_in_the_pattern_split_the_stages_as_megatron_s_segments(pattern, pp, vpp, counts):
    """Segment c * pp + s is stage s's chunk c (hybrid_layer_allocation.py select_pipeline_segment); vpp follows
    from the segments where it is not given."""
    sc = parse_scenario(hybrid(pattern, pp=pp, gbs=8))
    assert sc.workload.parallelism.vpp == vpp
    layers = PipelineLayers.of(sc.workload)
    assert layers.counts == counts
    assert [sc.workload.model.layer_blocks(i) for i in layers.layers_of(0, 0)] == \
        [{"M": ("mamba",), "*": ("attention",), "-": ("mlp",)}[c] for c in pattern.split("|")[0]]
    assert simulate(sc).result.iteration_time_ms > 0


@pytest.mark.parametrize(("change", "says"), [
    ({"layers_per_stage": [2, 2]}, "its '|' marks split the pipeline, and parallelism.layers_per_stage does too"),
    ({"vpp": 2}, "2 pipeline segments, but pp*vpp = 2*2 = 4 virtual stages"),
])
def test_pipeline_marks_and_another_split_or_a_vpp_they_do_not_make_are_refused(change, says):
    data = hybrid("M*|M-", pp=2, gbs=8)
    data["workload"]["parallelism"].update(change)
    with pytest.raises(ConfigError, match=r"workload\.model\.hybrid_pattern") as caught:
        parse_scenario(data)
    assert says in str(caught.value)


def test_the_readme_s_scan_against_flash_attention_figures_are_the_benchmark_s():
    """README: the scan of a Nemotron-H 8B layer on an H100 runs Nx faster than FlashAttention-2 at 8,192 and 16,384
    tokens (benchmarks/bench_hybrid.py, rounded to a tenth)."""
    spec = importlib.util.spec_from_file_location("bench_hybrid", ROOT / "benchmarks/bench_hybrid.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    readme = " ".join((ROOT / "README.md").read_text().split())
    said = re.search(r"runs ([\d.]+)x faster at 8,192 and ([\d.]+)x at 16,384", readme)
    ratios = [flash / scan for scan, flash in (bench.scan_and_flash_ms("H100", seq) for seq in (8192, 16384))]
    assert [f"{ratio:.1f}" for ratio in ratios] == list(said.groups())


@pytest.mark.parametrize(("template", "layers", "says"), [
    ("nemotron-h-8b", 26, "has 52 layer symbols, one per layer, but num_layers is 26: the pattern lays out every "
     "layer, so to change the depth give both, num_layers: N and a hybrid_pattern of N symbols"),
    ("qwen3-next-80b-a3b", 48, "has 96 layer symbols, one per layer, but num_layers is 48: the pattern lays out every "
     "layer, so to change the depth give both, num_layers: N and a hybrid_pattern of N symbols; a layer as "
     "HuggingFace counts a gated-delta-net model's (mixer, then MLP or experts) is two symbols here, so its 48 "
     "layers are 96"),
])
def test_num_layers_alone_over_a_hybrid_template_says_the_patterns_length_and_to_give_both(template, layers, says):
    # it said only that the lengths differ, naming the pattern the scenario never wrote
    data = {"workload": {"framework": "megatron", "model": {"from": template, "num_layers": layers},
                         "parallelism": {"tp": 1}, "training": {"global_batch_size": 8, "micro_batch_size": 1,
                                                                "sequence_length": 4096, "num_gpus": 8}}}
    with pytest.raises(ConfigError) as info:
        parse_scenario(data, "s.yaml")
    assert f"workload.model.hybrid_pattern: {says}" in str(info.value)


def test_a_hybrid_pattern_without_pipeline_marks_is_not_interleaved():
    """Megatron's hybrid model interleaves only a pattern cut by '|' (select_pipeline_segment raises for a vp_stage
    without pipes); simulon simulated vpp 2 over 'M*M-M*M-' split evenly. The run is refused naming vpp, the marked
    pattern runs, and the search enumerates no interleaved strategy for the unmarked one (its plain pp it keeps)."""
    data = hybrid("M*M-M*M-", pp=2, gbs=8)
    data["workload"]["parallelism"]["vpp"] = 2
    with pytest.raises(ConfigError, match=r"workload\.parallelism\.vpp") as caught:
        parse_scenario(data)
    assert "without '|' marks" in str(caught.value)
    assert parse_scenario(hybrid("M*|M-|M*|M-", pp=2, gbs=8)).workload.parallelism.vpp == 2
    kept = list(Space(parse_scenario(hybrid("M*M-M*M-", nodes=2, gbs=16)).workload, 16, 8, fp8=False).strategies())
    assert any(s.pp > 1 for s in kept) and all(s.vpp == 1 for s in kept)


def test_a_pattern_of_gated_delta_nets_and_attention_interleaves_as_a_gpt_does():
    """Qwen3-Next's and Qwen3.5's patterns (G, *, E: no Mamba layer) Megatron-Bridge builds as a GPTModel of per-layer
    specs (qwen3_next_bridge.py), not as the hybrid model whose vpp needs '|' marks: vpp 2 over pp 2 splits as a
    GPT's layers do."""
    from simulon.config.workload import ModelSpec, ParallelismSpec

    model = ModelSpec.model_validate({"from": "qwen3-next-80b-a3b"})
    assert model.hybrid_pattern is not None and model.mamba is None
    counts = model.stage_layers(ParallelismSpec(pp=2, vpp=2), mtp=False)
    assert len(counts) == 4 and sum(counts) == model.num_layers
