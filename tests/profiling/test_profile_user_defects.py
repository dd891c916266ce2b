"""A user's profile file, written by `simulon profile gpu` or by hand, is checked before it is timed into or used:
CPU times (`--device cpu`, a dry run) are never a GPU's, the help shows its defaults, an existing file must be a GPU
file of the GPU the options name, a new one a GPU that loads, and a run whose parameters the compute model cannot
read is refused naming it, each in one line with exit status 2 and nothing written."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from helpers import cli, one_gpu_scenario
from simulon.cli.app import app
from simulon.config.dc import GPUSpec, KernelRun
from simulon.config.errors import ConfigError
from simulon.profiling.store import ProfileFile

HAS_TORCH = importlib.util.find_spec("torch") is not None
TINY = ["--hidden-size", "64", "--num-heads", "4", "--ffn-hidden-size", "128", "--seq-len", "32",
        "--vocab-size", "256", "--epoch-num", "3", "--warmup", "1", "--device", "cpu"]
GEMM = {"m": 128, "n": 768, "k": 256, "groups": 1, "dtype_bytes": 4.0, "phase": "fwd", "dtype": "fp32"}
ATTENTION = {"batch": 1, "heads": 4, "kv_heads": 4, "seq_q": 128, "seq_k": 128, "qk_dim": 64, "v_dim": 64,
             "causal": True, "dtype_bytes": 4.0, "phase": "fwd", "dtype": "fp32"}


def gpu_file(path: Path, *runs: dict, **fields) -> Path:
    path.write_text(yaml.safe_dump({"from": "h100-sxm", "name": "H100", **fields, "kernel_runs": list(runs)},
                                   sort_keys=False))
    return path


def run(kernel: str, params: dict, times: list[float] | None = None, **more) -> dict:
    return {"kernel": kernel, "params": params, "times_ms": times or [1.0], **more}


def scenario(path: Path, gpu: Path) -> Path:
    """A one-GPU fp32 scenario of a tiny model on the GPU file `gpu`."""
    return one_gpu_scenario(path, gpu, dtype="fp32")


def refused(proc, *parts: str) -> str:
    """The one line a refused command printed (exit 2, no traceback), holding each of `parts`."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    for part in parts:
        assert part in proc.stderr, proc.stderr
    return proc.stderr.strip()


# A. a profile timed on a CPU


def test_a_run_timed_on_a_cpu_is_refused_by_simulate_naming_the_file(tmp_path):
    gpu = gpu_file(tmp_path / "cpu.yaml", run("attn_qkv", GEMM, [2196.0], device="cpu"))
    line = refused(cli("simulate", str(scenario(tmp_path / "sc.yaml", gpu))), str(gpu), "kernel_runs[0].device",
                   "timed on a CPU")
    assert "--device cpu" in line


def test_a_run_timed_on_a_cpu_is_refused_by_validate_profile(tmp_path):
    gpu = gpu_file(tmp_path / "cpu.yaml", run("attn_qkv", GEMM, device="cpu"))
    refused(cli("validate", "profile", str(gpu)), f"{gpu}: kernel_runs[0].device: timed on a CPU")


def test_a_run_timed_on_a_gpu_loads_as_before_and_no_other_device_is_read():
    assert GPUSpec.model_validate({"from": "h100-sxm", "kernel_runs": [run("mlp", GEMM)]}).kernel_runs[0].device \
        == "cuda"
    with pytest.raises(ValueError, match="device"):
        GPUSpec.model_validate({"from": "h100-sxm", "kernel_runs": [run("mlp", GEMM, device="tpu")]})


def test_a_dry_run_marks_its_runs_as_timed_on_the_cpu_and_only_the_profiler_reads_them_back(tmp_path):
    path = tmp_path / "dry.yaml"
    store = ProfileFile(path, {"name": "H100"}, device="cpu")
    store.add("attn_qkv", GEMM, [2196.0])
    store.add("attn_flash", ATTENTION, None)
    store.save()
    doc = yaml.safe_load(path.read_text())
    assert [r["device"] for r in doc["kernel_runs"] + doc["oom_kernel_runs"]] == ["cpu", "cpu"]
    with pytest.raises(ValueError, match="timed on a CPU"):
        GPUSpec.model_validate({"from": str(path)})
    loaded = GPUSpec.model_validate({"from": str(path)}, context={KernelRun.CPU_TIMES: True})
    assert loaded.kernel_runs[0].times_ms == [2196.0]
    assert ProfileFile(path, {}, device="cpu").has("attn_qkv", GEMM)  # a dry run resumes


@pytest.mark.parametrize(("had", "adding"), [("cpu", "cuda"), ("cuda", "cpu")])
def test_runs_of_one_device_are_never_appended_to_a_file_of_the_other(tmp_path, had, adding):
    path = gpu_file(tmp_path / "g.yaml", run("attn_qkv", GEMM, **({"device": "cpu"} if had == "cpu" else {})))
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: its kernel runs were timed on "):
        ProfileFile(path, {}, device=adding)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (simulon[profile])")
def test_a_cpu_dry_run_of_the_profiler_is_never_simulated_as_the_gpu_it_names(tmp_path):
    out = tmp_path / "h100.yaml"
    result = CliRunner().invoke(app, ["profile", "gpu", "--output", str(out), *TINY])
    assert result.exit_code == 0 and "dry run" in result.output, result.output
    assert all(r["device"] == "cpu" for r in yaml.safe_load(out.read_text())["kernel_runs"])
    refused(cli("simulate", str(scenario(tmp_path / "sc.yaml", out))), str(out), "timed on a CPU")


# B. the help


def test_the_help_shows_every_default_written_in_square_brackets():
    result = CliRunner().invoke(app, ["profile", "gpu", "--help"])
    text = " ".join(result.output.replace("│", " ").split())
    for shown in ("GPU vendor [default: the template's]", "GPU memory (GB) [default: the template's]",
                  "[default: 4096]", "[default: 32]", "[default: 16384]", "[default: 32000]", "[default: gelu]",
                  "[default: layernorm]", "experts per token [default: 2]", "[default: an existing OUTPUT's, else"):
        assert shown in text, shown


# C. the GPU the options name


@pytest.mark.parametrize(("args", "option"), [(["--name", "H200", "--tdp-w", "123"], "--name H200"),
                                              (["--tdp-w", "123"], "--tdp-w 123.0"),
                                              (["--memory-capacity-gb", "40"], "--memory-capacity-gb 40.0"),
                                              (["--vendor", "amd"], "--vendor amd")])
def test_options_naming_another_gpu_than_the_existing_file_are_refused_and_the_file_is_left_alone(tmp_path, args,
                                                                                                 option):
    path = tmp_path / "a100.yaml"
    path.write_text("from: a100-sxm-80gb\nname: A100\n")
    line = refused(cli("profile", "gpu", "--output", str(path), *args, *TINY), f"{path}: {option} contradicts")
    assert "profile file is one GPU's" in line
    assert path.read_text() == "from: a100-sxm-80gb\nname: A100\n"


def test_options_that_agree_with_the_existing_file_are_accepted(tmp_path):
    path = tmp_path / "a100.yaml"
    path.write_text("from: a100-sxm-80gb\nname: A100\n")
    store = ProfileFile(path, {}, device="cpu")
    store.check_identity({"--name": "A100-SXM4-80GB", "--vendor": "nvidia", "--memory-capacity-gb": 80.0,
                          "--tdp-w": None})  # the template's own name names the same GPU


# D. a GPU no template names


def test_a_new_gpu_no_template_names_is_refused_before_timing_saying_what_the_file_would_lack(tmp_path):
    path = tmp_path / "my.yaml"
    line = refused(cli("profile", "gpu", "--output", str(path), "--name", "MyGPU", "--memory-capacity-gb", "80",
                       *TINY), f"{path}: --name 'MyGPU' names no shipped GPU template")
    assert "memory_bandwidth" in line and "peak_tflops" in line and "write the file first" in line
    assert not path.exists()


def test_a_file_written_first_with_a_custom_gpus_spec_sheet_is_profiled_into(tmp_path):
    path = tmp_path / "my.yaml"
    path.write_text("name: MyGPU\nmemory_capacity_gb: 80\nmemory_bandwidth: 2TBps\npeak_tflops: {bf16: 500}\n")
    store = ProfileFile(path, {}, device="cpu")
    store.check_identity({"--name": "MyGPU", "--vendor": None, "--memory-capacity-gb": 80.0, "--tdp-w": None})
    assert store.gpu.memory_bandwidth > 0


# E. an existing file that is no GPU


@pytest.mark.parametrize(("text", "message"), [
    ("kernel_runs: [5]\n", "kernel_runs[0]: expected a mapping"),
    ("from: h100-sxmm\nfoo: 1\n", "(top level): unknown gpu template 'h100-sxmm'"),
    ("from: h100-sxm\nkernel_runs:\n- {kernel: mlp, params: {m: 1}, times_ms: [0.0]}\n", "kernel_runs[0].times_ms"),
])
def test_an_existing_file_that_is_no_gpu_is_refused_with_the_loaders_message_before_timing(tmp_path, text, message):
    path = tmp_path / "g.yaml"
    path.write_text(text)
    refused(cli("profile", "gpu", "--output", str(path), *TINY), f"{path}: {message}")
    assert path.read_text() == text


# F. parameters the kernel class needs


@pytest.mark.parametrize(("kernel", "params", "field"), [
    ("attn_qkv", {k: v for k, v in GEMM.items() if k != "dtype_bytes"}, "dtype_bytes"),
    ("attn_flash", {k: v for k, v in ATTENTION.items() if k != "qk_dim"}, "qk_dim"),
    ("attn_norm", {"phase": "fwd", "dtype": "fp32"}, "bytes"),
])
def test_a_run_missing_a_parameter_its_kernel_class_needs_is_refused_naming_it(tmp_path, kernel, params, field):
    gpu = gpu_file(tmp_path / "g.yaml", run(kernel, params))
    for proc in (cli("simulate", str(scenario(tmp_path / "sc.yaml", gpu))), cli("validate", "profile", str(gpu))):
        refused(proc, f"kernel_runs[0].params.{field}: missing")


@pytest.mark.parametrize(("value", "shown"), [("128", "'128' (str)"), (True, "True (bool)")])
def test_a_shape_parameter_given_as_text_or_a_flag_is_refused_naming_it(tmp_path, value, shown):
    gpu = gpu_file(tmp_path / "g.yaml", run("attn_qkv", {**GEMM, "m": value}))
    for proc in (cli("simulate", str(scenario(tmp_path / "sc.yaml", gpu))), cli("validate", "profile", str(gpu))):
        refused(proc, str(gpu), f"kernel_runs[0].params.m: expected a number, got {shown}")


# G. times and sizes of zero


@pytest.mark.parametrize(("times", "params", "field"), [
    ([0.0], GEMM, "kernel_runs[0].times_ms: 0.0 ms is no"),
    ([1.0, -2.0], GEMM, "kernel_runs[0].times_ms[1]: must be at least 0"),
    ([1.0], {**GEMM, "groups": 0}, "params.groups: 0 is no size"),
    ([1.0], {**GEMM, "m": 0}, "params.m: 0 is no size"),
])
def test_a_time_or_a_size_of_zero_is_refused_where_the_file_is_read(tmp_path, times, params, field):
    gpu = gpu_file(tmp_path / "g.yaml", run("attn_qkv", params, times))
    for proc in (cli("simulate", str(scenario(tmp_path / "sc.yaml", gpu))), cli("validate", "profile", str(gpu))):
        refused(proc, str(gpu), field)


def test_a_memory_kernel_of_zero_bytes_is_still_read():
    assert GPUSpec.model_validate({"from": "h100-sxm", "kernel_runs": [run("grad_zero", {"bytes": 0})]})


# H. validate profile with nothing to compare


def test_validate_profile_with_no_comparable_run_says_so_and_exits_2(tmp_path):
    # a run of dtype fp4 was timed for training in fp4, which is nvfp4 (config.common.training_dtype)
    gpu = gpu_file(tmp_path / "g.yaml", run("attn_qkv", {**GEMM, "dtype": "fp4"}))
    line = refused(cli("validate", "profile", str(gpu)), "kernel_runs: no run could be compared (1 skipped: "
                   "kernel_runs[0]: dtype fp4, read as nvfp4: GPU H100 has no nvfp4 peak")
    assert "nan" not in line


def test_validate_profile_names_a_skipped_run_by_its_place_in_kernel_runs_not_a_spreadsheet_row(tmp_path):
    gpu = gpu_file(tmp_path / "g.yaml", run("attn_qkv", GEMM), run("attn_qkv", {**GEMM, "dtype": "fp4"}))
    proc = cli("validate", "profile", str(gpu))
    assert proc.returncode == 0, proc.stderr
    said = "skipped 1 (kernel_runs[1]): dtype fp4, read as nvfp4: GPU H100 has no nvfp4 peak"
    assert said in proc.stdout, proc.stdout
    assert "spreadsheet" not in proc.stdout and "row 3" not in proc.stdout


# I. shapes no kernel has


@pytest.mark.parametrize(("params", "field"), [
    ({**ATTENTION, "impl": "magic"}, "params.impl: 'magic' is no attention library simulon models (one of flash"),
    ({**ATTENTION, "batch": 1e19}, "params.batch: 1e+19 is more than 16,777,216 samples"),
    ({**ATTENTION, "seq_q": 1e23}, "params.seq_q: 1e+23 is more than 16,777,216 tokens"),
    ({**ATTENTION, "qk_dim": 2**21}, "params.qk_dim: 2,097,152 is more than 1,048,576 elements"),
    ({**ATTENTION, "heads": 32, "kv_heads": 3}, "params.kv_heads: 3 key-value heads do not divide 32 heads"),
    ({**ATTENTION, "heads": 4.5}, "params.heads: 4.5 is not a whole number of heads"),
    ({**ATTENTION, "causal": "maybe"}, "params.causal: expected true or false, got 'maybe'"),
    ({**GEMM, "m": 1e23}, "params.m: 1e+23 is more than 281,474,976,710,656 rows"),
    ({**GEMM, "groups": 1e15}, "params.groups: 1,000,000,000,000,000 is more than 65,536 experts"),
    ({"bytes": 1e300, "phase": "fwd", "dtype": "fp32"}, "params.bytes: 1e+300 is more than"),
])
def test_a_shape_no_kernel_has_is_refused_naming_the_parameter_where_the_file_is_read(tmp_path, params, field):
    gpu = gpu_file(tmp_path / "g.yaml", run("attn_flash" if "seq_q" in params else "attn_qkv", params))
    for proc in (cli("simulate", str(scenario(tmp_path / "sc.yaml", gpu))), cli("validate", "profile", str(gpu))):
        refused(proc, str(gpu), f"kernel_runs[0].{field}")


@pytest.mark.parametrize("impl", ["flash", "cudnn", "xformers", "pytorch"])
def test_every_attention_library_a_scenario_names_is_read_in_a_profile(impl):
    gpu = GPUSpec.model_validate({"from": "h100-sxm", "kernel_runs": [run("attn_flash", {**ATTENTION, "impl": impl})]})
    assert gpu.kernel_runs[0].params["impl"] == impl


# J. a file of another kind


def test_a_scenario_given_as_a_gpu_profile_is_refused_as_a_scenario_not_for_its_keys(tmp_path):
    path = scenario(tmp_path / "sc.yaml", gpu_file(tmp_path / "g.yaml", run("attn_qkv", GEMM)))
    text = path.read_text()
    says = "is a scenario (its top level holds datacenter and workload), not a gpu file"
    for proc in (cli("validate", "profile", str(path)), cli("profile", "gpu", "--output", str(path), *TINY)):
        line = refused(proc, str(path))
        assert "is a scenario (its top level holds datacenter and workload), not a g" in line.lower()
        assert "unknown key" not in line and "belongs in" not in line
    assert path.read_text() == text
    bad = scenario(tmp_path / "uses.yaml", path)  # a scenario whose GPU is a scenario file
    refused(cli("simulate", str(bad)), str(bad), "datacenter.node.gpu", f"{str(path)!r} {says}")


def test_a_datacenter_given_as_a_gpu_is_refused_as_a_datacenter(tmp_path):
    dc = tmp_path / "dc.yaml"
    dc.write_text(yaml.safe_dump({"from": "dgx-h100", "cluster": {"num_nodes": 2}}))
    refused(cli("validate", "profile", str(dc)), "is a datacenter (its top level holds cluster), not a gpu file")


def test_a_gpu_file_named_without_a_yaml_suffix_is_read_as_the_file_it_is_not_as_a_template_name(tmp_path):
    """`validate profile my-h100` in the file's folder said "unknown gpu template 'my-h100'; did you mean h100-sxm"
    (as $PWD/my-h100 was read), and a folder was 'no such file'."""
    gpu_file(tmp_path / "my-h100", run("attn_qkv", GEMM))
    done = cli("validate", "profile", "my-h100", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [row["subset"] for row in json.loads(done.stdout)["rows"]] == ["attn_qkv fwd fp32"]
    assert refused(cli("validate", "profile", str(tmp_path))) == f"error: {tmp_path}: cannot read: Is a directory"


def test_progress_lines_number_each_point_as_the_sweep_does_a_skipped_one_keeping_its_number(tmp_path, monkeypatch):
    """--tp 1,3,2 over 4 heads: point 2 (tp 3) is skipped. The timed points were renumbered 1/2 and 2/2 after the
    skipped '2/3', so 'point 2' named two points; now they are 1/3 and 3/3 (torch stood in for: the numbering is the
    CLI's)."""
    import simulon.cli.profile as profile_cli
    import simulon.profiling.run as profile_run

    monkeypatch.setattr(profile_cli, "need_torch", lambda device: None)
    monkeypatch.setattr(profile_run, "profile_point", lambda point, *args: profile_run.PointResult(timed=1))
    result = CliRunner().invoke(app, ["profile", "gpu", "-o", str(tmp_path / "gpu.yaml"), *TINY, "--tp", "1,3,2"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("point ")]
    assert [line.split(" (")[0] for line in lines] == ["point 2/3", "point 1/3", "point 3/3"]
    assert "tp 3" in lines[0] and "skipped" in lines[0]
    assert "tp 1)" in lines[1] and "tp 2)" in lines[2]
