"""`simulon profile gpu`: the plan uses the simulator's own kernel keys, outliers are dropped, the GPU YAML
keeps what it had and skips what is done, bad input exits 2, and (with torch) a CPU dry run is marked so that no
simulation takes its times for the GPU's, though its runs still cover every kernel."""

from __future__ import annotations

import importlib.util

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from helpers import cli, gpt_scenario
from simulon.cli.app import app
from simulon.cli.profile import gpu_identity, need_torch
from simulon.compute.populate import kernel_seconds
from simulon.compute.profile import PROFILE_REPEATS
from simulon.config.common import DType
from simulon.config.dc import GPUSpec, KernelRun
from simulon.config.loading import ConfigError
from simulon.pipeline import build_dag
from simulon.profiling.plan import SweepPoint, plan
from simulon.profiling.store import ProfileFile
from simulon.profiling.timing import without_outliers
from simulon.workload.kernels import Phase

HAS_TORCH = importlib.util.find_spec("torch") is not None
TINY = ["--hidden-size", "64", "--num-heads", "4", "--ffn-hidden-size", "128", "--seq-len", "32",
        "--vocab-size", "256", "--epoch-num", "3", "--warmup", "1", "--device", "cpu"]



def test_the_plan_records_exactly_the_keys_the_simulator_looks_up():
    point = SweepPoint.of_shape(hidden=64, heads=4, ffn=128, seq=32, batch=2, vocab=256, dtype=DType.bf16, tp=2,
                       activation="swiglu", experts=4, top_k=2)
    kernels, planned = plan(point)
    names = {p.spec.name for p in planned}
    assert {"attn_qkv", "attn_flash", "mlp_linear1", "mlp_gate", "mlp_act", "moe_expert_linear1", "embedding",
            "lm_head", "loss", "optimizer"} <= names
    for item in planned:
        assert item.params == {**dict(item.spec.shape), "phase": item.spec.phase.name, "dtype": "bf16"}
    phases = {(p.spec.name, p.spec.phase) for p in planned}
    for name, by_phase in kernels.table.items():  # every kernel the tracer emits, recompute aside
        assert {(name, ph) for ph in by_phase if ph != Phase.recompute} <= phases
    with pytest.raises(ValueError, match="tp 3"):
        plan(SweepPoint.of_shape(64, 4, 128, 32, 1, 256, DType.bf16, 3))


@given(st.lists(st.floats(1.0, 2.0), min_size=4, max_size=30), st.floats(50.0, 1e4))
def test_outliers_beyond_tukeys_fences_are_dropped(times, spike):
    kept = without_outliers([*times, spike])
    assert spike not in kept and set(kept) <= set(times)
    assert sorted(without_outliers([1.0, 1.0, 1.0, 1.0, 1.0])) == [1.0] * 5


def test_the_profile_file_keeps_what_it_had_and_skips_what_is_done(tmp_path):
    path = tmp_path / "h100.yaml"
    path.write_text("# my notes\nname: H100\nmemory_capacity_gb: 80\nkernel_runs:\n"
                    "- {kernel: mlp, params: {m: 1, n: 8, k: 8, dtype_bytes: 2, phase: fwd}, times_ms: [1.0]}\n")
    store = ProfileFile(path, {"name": "ignored"})
    one, two = ({"m": m, "n": 8, "k": 8, "dtype_bytes": 2, "phase": "fwd"} for m in (1, 2))
    assert store.has("mlp", one) and not store.has("mlp", two)
    store.add("mlp", two, [2.0])
    store.add("attn_flash", {"seq_q": 1 << 20, "phase": "fwd"}, None)
    store.save()
    text = path.read_text()
    assert text.startswith("# my notes\n")
    doc = yaml.safe_load(text)
    assert doc["name"] == "H100" and doc["memory_capacity_gb"] == 80
    assert [r["params"]["m"] for r in doc["kernel_runs"]] == [1, 2]
    assert doc["oom_kernel_runs"] == [{"kernel": "attn_flash", "params": {"seq_q": 1 << 20, "phase": "fwd"}}]
    assert ProfileFile(path, {}).has("attn_flash", {"seq_q": 1 << 20, "phase": "fwd"})
    assert not list(tmp_path.glob(".*.tmp"))
    GPUSpec.model_validate(doc)  # still a GPU the simulator loads


@pytest.mark.parametrize("memory", [[], ["--memory-capacity-gb", "96"]])
def test_a_new_profile_of_a_shipped_gpu_takes_its_spec_sheet_and_an_unknown_gpu_is_written_first(tmp_path, memory):
    """The H200's profile is a 141 GB H200 (the template's), not the option's old 80 GB default over it. A GPU no
    template names was asked for --memory-capacity-gb, and given it, refused for its spec sheet."""
    store = ProfileFile(tmp_path / "h200.yaml", gpu_identity(tmp_path / "h200.yaml", "H200-SXM5-141GB", None, None,
                                                             None))
    store.save()
    gpu = GPUSpec.model_validate({"from": str(tmp_path / "h200.yaml")})
    assert (gpu.memory_capacity_gb, gpu.vendor) == (141, "nvidia")
    assert gpu_identity(tmp_path / "m.yaml", "MI300X", None, 200.0, None) == {"name": "MI300X",
                                                                             "memory_capacity_gb": 200.0}
    run = cli("profile", "gpu", "--output", str(tmp_path / "g.yaml"), "--name", "my-asic", *memory, *TINY)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.startswith(f"error: {tmp_path / 'g.yaml'}: --name 'my-asic' names no shipped GPU template")
    assert "write the file first" in run.stderr and "--memory-capacity-gb" not in run.stderr
    assert not (tmp_path / "g.yaml").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--tp", "two"], "--tp: cannot read 'two'"),
    (["--seq-len", "0"], "--seq-len: '0': values must be positive"),
    (["--dtype", "int8"], "--dtype: 'int8'"),
    (["--device", "tpu"], "--device: expected cuda or cpu"),
])
def test_bad_flags_are_bad_input_before_anything_runs(tmp_path, args, message):
    result = CliRunner().invoke(app, ["profile", "gpu", "--output", str(tmp_path / "g.yaml"), *args])
    assert isinstance(result.exception, ConfigError) and str(result.exception).startswith(message)
    assert not (tmp_path / "g.yaml").exists()


def test_without_a_gpu_cuda_profiling_is_refused():
    if not HAS_TORCH:
        with pytest.raises(ConfigError, match=r"^simulon profile: timing kernels needs torch, .*simulon\[profile\]"):
            need_torch("cpu")  # not blamed on --device, which the user may not have given
        return
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    with pytest.raises(ConfigError, match="no CUDA GPU is visible; pass --device cpu"):
        need_torch("cuda")


def test_a_corrupt_profile_file_exits_2_with_one_line_and_is_left_alone(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text("- just\n- a list\n")
    run = cli("profile", "gpu", "--output", str(path), *TINY)
    assert run.returncode == 2 and run.stderr.startswith(f"error: {path}: (top level)"), run.stderr
    assert "Traceback" not in run.stderr and path.read_text() == "- just\n- a list\n"


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (simulon[profile])")
def test_a_cpu_profile_is_no_gpus_times_covers_every_kernel_and_reruns_skip_what_is_done(tmp_path):
    out = tmp_path / "h100.yaml"
    runner = CliRunner()
    first = runner.invoke(app, ["profile", "gpu", "--name", "H100-SXM5-80GB", "--output", str(out), *TINY,
                                "--tp", "1,2"])
    assert first.exit_code == 0, first.output
    doc = yaml.safe_load(out.read_text())
    assert doc["name"] == "H100-SXM5-80GB" and len(doc["kernel_runs"]) > 20
    assert all(r["times_ms"] and all(t > 0 for t in r["times_ms"]) for r in doc["kernel_runs"])
    again = runner.invoke(app, ["profile", "gpu", "--name", "H100-SXM5-80GB", "--output", str(out), *TINY,
                                "--tp", "2"])
    assert again.exit_code == 0 and " 0 timed" in again.output
    assert yaml.safe_load(out.read_text()) == doc

    with pytest.raises(ValueError, match="timed on a CPU"):  # a dry run is no GPU's times
        GPUSpec.model_validate({"from": str(out)})
    gpu = GPUSpec.model_validate({"from": str(out)}, context={KernelRun.CPU_TIMES: True})  # its plumbing
    sc = gpt_scenario(layers=2, hidden=64, heads=4, ffn=128, vocab=256, seq=32, gbs=4, tp=2)
    dag, _, _ = build_dag(sc)
    _, measured = kernel_seconds(dag, gpu, DType.bf16)
    assert measured == len(dag.kernel_specs)  # every kernel found (the optimizer by interpolation)


def test_a_model_template_gives_every_shape_and_expert_parallelism_divides_its_experts():
    point = SweepPoint({"from": "DeepSeek V3"}, seq=256, batch=1, dtype=DType.bf16, tp=2, ep=8)
    _, planned = plan(point)
    by_name = {(p.spec.name, p.spec.phase): dict(p.spec.shape) for p in planned}
    experts = by_name[("moe_expert_linear1", Phase.fwd)]
    assert experts["groups"] == 256 // 8 and experts["m"] == 256 * 8  # local experts; tokens x top-8
    assert by_name[("attn_flash", Phase.fwd)]["qk_dim"] == 192  # MLA: 128 no-position + 64 rotary
    assert ("attn_kv_down", Phase.fwd) in by_name and ("moe_shared_linear1", Phase.fwd) in by_name
    with pytest.raises(ValueError, match="ep 8 does not divide the model's no experts"):
        plan(SweepPoint({"from": "llama-3-8b"}, 256, 1, DType.bf16, 1, ep=8))


@pytest.mark.parametrize("template", ["nemotron-3-nano-30b-a3b", "llama-4-maverick"])
def test_a_hybrid_or_interleaved_model_is_planned_with_one_layer_of_each_kind(template):
    point = SweepPoint({"from": template}, seq=256, batch=1, dtype=DType.bf16, tp=2, ep=8)
    _, planned = plan(point)
    names = {p.spec.name for p in planned}
    assert {"moe_expert_linear1", "attn_flash"} <= names
    assert ("mamba_ssd_scan" in names) == template.startswith("nemotron")


def test_a_model_template_and_size_flags_together_are_bad_input(tmp_path):
    result = CliRunner().invoke(app, ["profile", "gpu", "--output", str(tmp_path / "g.yaml"), "--model",
                                      "llama-3-8b", "--hidden-size", "4096"])
    assert isinstance(result.exception, ConfigError)
    assert str(result.exception) == "--model takes every shape from the model template: leave out --hidden-size"
    assert not (tmp_path / "g.yaml").exists()


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (simulon[profile])")
def test_the_fused_activation_backwards_are_the_gradients_autograd_takes():
    import torch
    import torch.nn.functional as F

    from simulon.profiling.recipes import gelu, gelu_back, swiglu, swiglu_back

    torch.manual_seed(0)
    y = torch.randn(64, 2 * 48, dtype=torch.float64, requires_grad=True)
    g = torch.randn(64, 48, dtype=torch.float64)
    swiglu(y).backward(g)
    assert torch.allclose(swiglu_back(g, y.detach()), y.grad)
    gate, up = y.detach().chunk(2, -1)
    assert torch.allclose(swiglu(y.detach()), F.silu(gate) * up)

    x = torch.randn(64, 48, dtype=torch.float64, requires_grad=True)
    assert torch.allclose(gelu(x), F.gelu(x, approximate="tanh"), atol=1e-7)
    gelu(x).backward(g)
    assert torch.allclose(gelu_back(g, x.detach()), x.grad, atol=1e-7)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (simulon[profile])")
def test_the_activation_stand_in_reads_the_fused_kernels_bytes():
    """A gated MLP's activation reads the gate and up halves and writes one output (forward: 3 passes of rows x ffn,
    as the tracer counts a fused kernel), and reads them with the gradient and writes both halves' gradients
    (backward: 5 passes)."""
    import torch

    from simulon.profiling import recipes

    point = SweepPoint({"from": "llama-3-8b"}, seq=16, batch=1, dtype=DType.bf16, tp=8)
    kernels, planned = plan(point)
    specs = {(p.spec.name, p.spec.phase): p.spec for p in planned}
    up = specs[("mlp_linear1", Phase.fwd)]
    rows, width = int(up.param("m")), int(up.param("n"))
    assert specs[("mlp_act", Phase.fwd)].bytes == 3 * rows * width * 2
    assert specs[("mlp_act", Phase.bwd_ig)].bytes == 5 * rows * width * 2
    forward = recipes.build(specs[("mlp_act", Phase.fwd)], point, kernels, "cpu")()
    backward = recipes.build(specs[("mlp_act", Phase.bwd_ig)], point, kernels, "cpu")()
    assert forward.shape == (rows, width) and backward.shape == (rows, 2 * width)  # gate and up in, both grads out
    assert forward.dtype == backward.dtype == torch.bfloat16


def test_a_run_timed_in_a_loop_other_than_the_defaults_records_its_length(tmp_path):
    """`--warmup`/`--epoch-num` of one's own change the loop's clock: the run says how many ran back to back, which
    compute.profile carries from; at the defaults the field is left out."""
    path = tmp_path / "h100.yaml"
    store = ProfileFile(path, {"from": "h100-sxm"})
    store.add("mlp", {"m": 1, "phase": "fwd"}, [1.0], 7)
    store.add("mlp", {"m": 2, "phase": "fwd"}, [1.0], PROFILE_REPEATS)
    store.save()
    runs = yaml.safe_load(path.read_text())["kernel_runs"]
    assert runs[0]["back_to_back"] == 7 and "back_to_back" not in runs[1]


def test_a_hybrid_with_mtp_depths_is_planned_with_one_layer_of_each_kind_and_its_mtp_layer():
    # the '/' of its pattern was kept as a layer symbol: the one-layer model was refused
    pattern = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME/*E"
    point = SweepPoint({"from": "nemotron-3-nano-30b-a3b", "hybrid_pattern": pattern, "mtp_layers": 1}, seq=256,
                       batch=1, dtype=DType.bf16, tp=2, ep=8)
    _, planned = plan(point)
    assert {"mtp_eh_proj", "mamba_ssd_scan", "moe_expert_linear1"} <= {p.spec.name for p in planned}


@pytest.mark.parametrize(("dtype", "planned_in_bf16"), [(DType.mxfp4, True), (DType.fp8, False)])
def test_a_profile_plans_the_bf16_gemms_of_multi_token_prediction_layers_an_fp4_recipe_runs_in_bf16(dtype,
                                                                                                  planned_in_bf16):
    # Megatron-Core ignores fp4 in MTP layers: an mxfp4 step's MTP layer runs its attention and MLP GEMMs in bf16,
    # which the plan left out (only the LM head's bf16 GEMMs were timed)
    point = SweepPoint({"from": "llama-3-8b", "mtp_layers": 1}, seq=256, batch=1, dtype=dtype, tp=1)
    _, planned = plan(point)
    in_bf16 = {p.spec.name for p in planned if p.params.get("precision") == "bf16"}
    assert ({"attn_qkv", "mlp_linear1"} <= in_bf16) is planned_in_bf16
