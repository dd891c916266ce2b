"""Sliding-window attention (model.sliding_window; Megatron-Core's window_size and window_attn_skip_freq, HF
sliding_window and layer_types): a windowed layer's query attends its window of latest keys, its FLOPs those of the
band, a tiled kernel walking the key blocks the band straddles; every full_every-th layer attends to everything."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from helpers import cli, gpt_scenario
from simulon.compute.analytical import AnalyticalModel
from simulon.config.common import DType
from simulon.config.dc import GPUSpec
from simulon.config.workload import ModelSpec
from simulon.workload.kernels import Phase, attention
from simulon.workload.layer_kernels import LayerKernels, SparseKeys
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import ComputeOp


def scenario(window: dict | None, seq: int = 2048, **extra):
    model = {"sliding_window": window} if window else {}
    return gpt_scenario(nodes=1, gpus_per_node=4, layers=4, hidden=1024, heads=16, seq=seq, gbs=4,
                        extra_model=model, extra_parallelism=extra)


@given(layer=st.integers(0, 200), every=st.integers(0, 8))
def test_every_full_every_th_layer_counting_from_one_attends_to_everything(layer, every):
    window = ModelSpec.model_validate({"from": "gpt-oss-20b", "sliding_window": {"size": 128, "full_every": every}})
    assert window.sliding_window.windowed(layer) == (every == 0 or (layer + 1) % every != 0)
    if layer >= window.num_layers:  # a multi-token-prediction layer attends as the decoder's last
        assert window.windowed(layer) == window.windowed(window.num_layers - 1)


def test_gpt_oss_alternates_windowed_and_full_layers_from_a_windowed_first():
    model = ModelSpec.model_validate({"from": "gpt-oss-120b"})
    assert [model.windowed(i) for i in range(4)] == [True, False, True, False]


@pytest.mark.parametrize(("seq", "window"), [(2048, 128), (4096, 1000), (8192, 4096)])
def test_a_windowed_layers_attention_executes_its_band_and_counts_its_window_as_model_flops(seq, window):
    """Model FLOPs count `window` keys a query, as a full layer's count the whole sequence (Narayanan et al.'s full
    score matrix): continuous where the window reaches the sequence."""
    sc = scenario({"size": window, "full_every": 2}, seq=seq)
    kernels = LayerKernels.of(sc.workload)
    windowed, full = (kernels.at(layer)["attn_flash"][Phase.fwd] for layer in (0, 1))
    heads, dims = 16, 2 * 64
    keys = (window * (window + 1) / 2 + (seq - window) * window) / seq  # query i attends min(i + 1, window) keys
    assert windowed.hw_flops == pytest.approx(2 * heads * seq * round(keys) * dims)  # the band is the mask
    assert windowed.flops == pytest.approx(2 * heads * seq * window * dims)
    assert full.flops == 2 * heads * seq * seq * dims and full.hw_flops == full.flops / 2  # causal


def test_a_window_as_long_as_the_sequence_is_plain_causal_attention():
    sc = scenario({"size": 4096, "full_every": 0}, seq=2048)
    plain = scenario(None, seq=2048)
    assert LayerKernels.of(sc.workload).at(0)["attn_flash"] == LayerKernels.of(plain.workload)["attn_flash"]


def test_only_the_windowed_layers_of_the_program_run_the_windowed_kernel():
    (program, *_) = MegatronTracer(scenario({"size": 128, "full_every": 2}).workload, 4).stage_programs()
    windows = {op.layer: dict(op.kernel.shape).get("window", 0) for op in program.ops
               if isinstance(op, ComputeOp) and op.kernel.name == "attn_flash"}
    assert windows == {0: 128, 1: 0, 2: 128, 3: 0}


@pytest.mark.parametrize("gpu", ["h100-sxm", "b200"])
def test_a_windowed_kernel_grows_with_the_sequence_not_its_square_and_never_outlasts_full_attention(gpu):
    model = AnalyticalModel(GPUSpec.model_validate({"from": gpu}), DType.bf16)

    def seconds(seq: int, window: int) -> float:
        keys = SparseKeys.of(seq, window)
        specs = [attention(phase, 4, 32, 8, seq, keys.keys, 64, 64, False, 2.0, "cudnn", window) if window < seq
                 else attention(phase, 4, 32, 8, seq, seq, 64, 64, True, 2.0, "cudnn")
                 for phase in (Phase.fwd, Phase.bwd_ig)]
        return float(model.seconds(specs).sum())

    for seq in (4096, 16384):
        assert seconds(seq, 128) < seconds(seq, seq)
        assert seconds(2 * seq, 128) == pytest.approx(2 * seconds(seq, 128), rel=0.1)  # linear in the sequence
    assert seconds(32768, 32768) > 3 * seconds(16384, 16384)                           # full: quadratic
    assert seconds(8192, 512) < seconds(8192, 2048) < seconds(8192, 8192)


def test_windows_make_the_step_faster_than_full_attention():
    from simulon.pipeline import simulate

    assert simulate(scenario({"size": 128, "full_every": 0}, seq=8192)).result.iteration_time_ms < \
        simulate(scenario(None, seq=8192)).result.iteration_time_ms


@pytest.mark.parametrize("comm", [None, "p2p", "all_gather", "a2a+p2p"])
def test_a_window_with_context_parallelism_by_ring_or_gather_is_exit_2_naming_the_field(tmp_path, comm):
    data = scenario({"size": 128, "full_every": 2}).model_dump(mode="json", exclude_none=True)
    data["workload"]["parallelism"].update(cp=4, **({"context_parallel_comm": comm} if comm else {}))
    if comm == "a2a+p2p":
        data["workload"]["parallelism"]["hierarchical_context_parallel_sizes"] = [2, 2]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    run = cli("simulate", str(path))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "workload.parallelism.context_parallel_comm" in run.stderr and "sliding" in run.stderr, run.stderr


def test_a_window_with_context_parallelism_by_all_to_all_attends_the_whole_sequence_for_a_share_of_the_heads():
    # Megatron-Bridge's GPT-OSS recipes run cp 2 with cp_comm_type a2a
    alone = LayerKernels.of(scenario({"size": 128, "full_every": 2}, seq=4096).workload)
    split = LayerKernels.of(scenario({"size": 128, "full_every": 2}, seq=4096, cp=2,
                                     context_parallel_comm="a2a").workload)
    for layer in (0, 1):  # windowed, full
        one, two = (k.at(layer)["attn_flash"][Phase.fwd] for k in (alone, split))
        assert two.flops == one.flops / 2  # half the heads, the whole sequence, the same band
        assert dict(two.shape).get("window", 0) == dict(one.shape).get("window", 0)
    assert dict(split.at(0)["attn_flash"][Phase.fwd].shape)["window"] == 128


def test_a_search_over_a_windowed_model_tries_context_parallelism_only_by_all_to_all():
    from simulon.search.space import Space

    ring = scenario({"size": 128, "full_every": 2}).workload
    a2a = scenario({"size": 128, "full_every": 2}, context_parallel_comm="a2a").workload
    assert Space(ring, 4, 4, False).contexts(1) == (1,)
    assert max(Space(a2a, 4, 4, False).contexts(1)) > 1


GPT_OSS = {"model_type": "gpt_oss", "hidden_act": "silu", "hidden_size": 2880, "intermediate_size": 2880,
           "head_dim": 64, "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 24,
           "num_local_experts": 32, "num_experts_per_tok": 4, "sliding_window": 128, "rms_norm_eps": 1e-05,
           "tie_word_embeddings": False, "vocab_size": 201088}


@pytest.mark.parametrize(("keys", "window"), [
    ({}, {"size": 128, "full_every": 2}),  # GptOssConfig's default layer_types
    ({"layer_types": ["sliding_attention"] * 5 + ["full_attention"]} | {"num_hidden_layers": 6},
     {"size": 128, "full_every": 6}),
    ({"layer_types": ["sliding_attention"] * 24}, {"size": 128, "full_every": 0}),
    ({"layer_types": ["full_attention"] * 24}, None),
    ({"model_type": "llama"}, None),  # a window the file states but no layer uses
])
def test_a_hf_config_gives_its_sliding_window(tmp_path, keys, window):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GPT_OSS | keys))
    model = ModelSpec.model_validate({"from_hf": str(path)})
    assert (model.sliding_window.model_dump(exclude={"chunked"}) if model.sliding_window else None) == window
    assert model.sliding_window is None or not model.sliding_window.chunked  # a window, not Llama 4's chunks


def test_full_attention_layers_a_window_cannot_describe_are_refused_naming_the_key(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GPT_OSS | {"layer_types": ["full_attention", "sliding_attention"] * 12}))
    with pytest.raises(ValueError, match="layer_types"):
        ModelSpec.model_validate({"from_hf": str(path)})
