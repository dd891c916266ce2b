"""Odd but plausible input written by hand: custom GPUs and fabrics, template chains, HuggingFace configs, training
blocks and the result files `diff` and `plot` read. Each is either simulated or refused as bad input: exit status 2
and one line naming the file, the field and the problem, never a traceback, a hang or a number from nonsense.

Scenarios are checked in-process with `parse_scenario` where the message is what matters; the CLI runs only where
the exit status, a written file or a process reading without end is the point.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import SEED_SCENARIO, cli, merge, seed_dict
from simulon.config.common import DType, dtype_named
from simulon.config.loading import ConfigError, parse_scenario

DEV_ZERO = Path("/dev/zero")
needs_dev_zero = pytest.mark.skipif(not DEV_ZERO.exists(), reason="no /dev/zero on this system")

CUSTOM_GPU = {"name": "MyGPU", "memory_capacity_gb": 80, "memory_bandwidth": "3TBps",
              "peak_tflops": {"bf16": 900, "fp8": 1800}, "nvlink_bandwidth": "450GBps"}
LLAMA_CONFIG = {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 16,
                "num_key_value_heads": 4, "intermediate_size": 2816, "vocab_size": 32000, "hidden_act": "silu",
                "rms_norm_eps": 1e-5}


def refused(data: dict, base_dir: Path | None = None) -> str:
    """The one-line message parse_scenario refuses `data` with (the test fails if it is accepted)."""
    with pytest.raises(ConfigError) as caught:
        parse_scenario(data, "s.yaml", base_dir)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("s.yaml: "), message
    return message


def with_gpu(gpu: dict) -> dict:
    """The seed scenario with its GPU block replaced by `gpu`."""
    data = seed_dict()
    data["datacenter"]["node"]["gpu"] = gpu
    return data


def assert_bad_input(proc: subprocess.CompletedProcess, *expected: str) -> None:
    """Exit 2, one 'error: ' line on stderr holding every expected piece, no traceback."""
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for piece in expected:
        assert piece in lines[0], (piece, lines[0])


# --- custom GPUs ---------------------------------------------------------------------------------------------------

@settings(max_examples=25)
@given(peak=st.floats(min_value=0.0, max_value=0.0099, allow_subnormal=True) | st.just(1e-30) | st.just(float("nan")))
def test_a_gpu_peak_too_small_to_time_a_step_is_refused_naming_the_dtype(peak):
    """A dense peak of 1e-30 TFLOP/s once timed the seed's step at 1.7e35 ms with 0 tokens/s."""
    message = refused(with_gpu({**CUSTOM_GPU, "peak_tflops": {"bf16": peak}}))
    assert "datacenter.node.gpu.peak_tflops.bf16: must be at least 0.01 TFLOP/s" in message, message


@pytest.mark.parametrize("tdp", [0, -5, 1e-9, 0.5])
def test_a_gpu_tdp_below_a_watt_is_refused_naming_the_field(tdp):
    """A TDP of 1e-9 W once slowed a GPU that borrows another's fit to a step of 46 hours."""
    message = refused(with_gpu({**CUSTOM_GPU, "tdp_w": tdp}))
    assert "datacenter.node.gpu.tdp_w: must be at least 1 W" in message, message


def test_the_smallest_peak_and_tdp_allowed_still_give_a_finite_step():
    sc = parse_scenario(with_gpu({**CUSTOM_GPU, "peak_tflops": {"bf16": 0.01}, "tdp_w": 1}), "s.yaml")
    assert sc.datacenter.node.gpu.peak_tflops[DType.bf16] == 0.01 and sc.datacenter.node.gpu.tdp_w == 1


# --- fabrics -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("topology", [
    {"tiers": 1, "spines": 4},
    {"tiers": 1, "spines": 2, "cores": 4, "nics_per_leaf": 2, "leaves_per_pod": 1},
    {"tiers": 2, "nics_per_leaf": 8, "spines": 2, "cores": 4, "leaves_per_pod": 1},
], ids=["one-tier-with-spines", "one-tier-with-every-count", "two-tier-with-cores"])
def test_topology_draws_a_fabric_whose_spec_counts_switches_of_tiers_it_does_not_have(tmp_path, topology):
    """`tiers: 1, spines: 4` simulated and printed, but `--draw` ended in an internal error (KeyError: 'spine')."""
    data = merge(seed_dict(), {"datacenter": {"cluster": {"num_nodes": 2}, "node": {"gpus_per_node": 8},
                                              "network": {"scale_out": {"topology": topology}}}})
    data.pop("workload")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    proc = cli("topology", "s.yaml", "--draw", "t.svg", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    svg = (tmp_path / "t.svg").read_text()
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    drawn = {1: ("L0",), 2: ("L0", "S0")}[topology["tiers"]]   # box titles: leaf L0, spine S0, core C0
    assert all(f"<title>{box}</title>" in svg for box in drawn), svg[:500]
    assert "<title>C0</title>" not in svg and (topology["tiers"] > 1 or "<title>S0</title>" not in svg)


# --- template chains -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("files", [
    {"a.yaml": "from: b.yaml\nname: A\n", "b.yaml": "from: a.yaml\nname: B\n"},
    {"a.yaml": "from: a.yaml\nname: A\n"},
    {"a.yaml": "from: sub/c.yaml\n", "sub/c.yaml": "from: ../a.yaml\n"},
], ids=["two-files", "itself", "through-a-folder"])
def test_template_files_that_start_from_one_another_are_refused_as_a_loop(tmp_path, files):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    message = refused(with_gpu({"from": "a.yaml"}), tmp_path)
    assert "datacenter.node.gpu: template files start from one another in a loop" in message, message
    assert "a.yaml" in message


def test_a_template_chain_without_a_loop_still_resolves(tmp_path):
    (tmp_path / "a.yaml").write_text("from: b.yaml\n")
    (tmp_path / "b.yaml").write_text("from: H100\nname: my-h100\nmemory_capacity_gb: 64\n")
    gpu = parse_scenario(with_gpu({"from": "a.yaml"}), "s.yaml", tmp_path).datacenter.node.gpu
    assert gpu.name == "my-h100" and gpu.memory_capacity_gb == 64


# --- HuggingFace configs and training blocks ------------------------------------------------------------------------

def with_hf(tmp_path: Path, config: dict) -> dict:
    (tmp_path / "config.json").write_text(json.dumps(config))
    data = seed_dict()
    data["workload"]["model"] = {"from_hf": "config.json"}
    return data


@pytest.mark.parametrize("key", ["hidden_act", "mlp_hidden_act", "activation_function"])
def test_an_hf_activation_transformers_does_not_have_is_refused_naming_the_file_and_key(tmp_path, key):
    """hidden_act: banana was read as GELU and simulated."""
    config = {k: v for k, v in LLAMA_CONFIG.items() if k != "hidden_act"}
    message = refused(with_hf(tmp_path, {**config, key: "banana"}), tmp_path)
    assert f"HuggingFace config '{tmp_path / 'config.json'}': key '{key}' names no activation" in message, message
    assert "'banana'" in message


@pytest.mark.parametrize(("activation", "read_as"), [
    ("gelu_new", "geglu"), ("gelu_pytorch_tanh", "geglu"), ("relu2", "swiglu"), ("silu", "swiglu"),
    ("swish", "swiglu"), ("relu", "swiglu")])
def test_the_activations_hf_configs_name_are_still_read_a_llamas_mlp_gated_whatever_its_activation(
        tmp_path, activation, read_as):
    sc = parse_scenario(with_hf(tmp_path, {**LLAMA_CONFIG, "hidden_act": activation}), "s.yaml", tmp_path)
    assert sc.workload.model.activation == read_as  # HF's LlamaMLP has gate_proj whatever its act_fn


def test_an_empty_recompute_module_list_is_refused_rather_than_read_as_core_attention():
    """recompute: selective with recompute_modules: [] re-ran core attention, Megatron's default."""
    data = merge(seed_dict(), {"workload": {"parallelism": {"recompute": "selective", "recompute_modules": []}}})
    message = refused(data)
    assert "workload.parallelism.recompute_modules: lists no module" in message, message


@pytest.mark.parametrize(("recompute", "setting", "value", "mode"), [
    ("full", "recompute_modules", ["mlp"], "selective"), ("none", "recompute_modules", ["core_attn"], "selective"),
    ("selective", "recompute_num_layers", 1, "full"), ("none", "recompute_num_layers", 2, "full")])
def test_a_recompute_setting_of_another_mode_is_refused_rather_than_silently_not_done(recompute, setting, value, mode):
    """recompute: full with recompute_modules: [mlp] ran full recomputation and ignored the list (Megatron-Core's
    TransformerConfig refuses recompute_num_layers under selective granularity)."""
    data = merge(seed_dict(), {"workload": {"parallelism": {"recompute": recompute, setting: value}}})
    message = refused(data)
    assert f"workload.parallelism.{setting}: applies to recompute: {mode} only, but recompute is '{recompute}'" in (
        message), message


@settings(max_examples=30)
@given(dtype=st.sampled_from(list(DType)), flips=st.lists(st.booleans(), min_size=5, max_size=5))
def test_a_dtype_written_in_any_case_is_the_dtype(dtype, flips):
    written = "".join(c.upper() if flip else c for c, flip in zip(dtype.value, flips * 2, strict=False))
    assert dtype_named(written) == dtype


@pytest.mark.parametrize(("written", "dtype"), [
    ("bfloat16", DType.bf16), ("torch.bfloat16", DType.bf16), ("float16", DType.fp16), ("half", DType.fp16),
    ("fp8-e4m3", DType.fp8), ("FP8 E5M2", DType.fp8), ("float8_e4m3fn", DType.fp8), ("float32", DType.fp32),
    ("float8_e4m3", DType.fp8), ("fp8_e4m3fn", DType.fp8), ("torch.float8_e4m3fnuz", DType.fp8),
    ("float8_e5m2fnuz", DType.fp8), ("MX-FP8", DType.mxfp8), ("NV_FP4", DType.nvfp4)])
def test_a_dtype_written_as_frameworks_spell_it_is_the_dtype(written, dtype):
    assert dtype_named(written) == dtype
    if dtype in (DType.bf16, DType.fp16, DType.fp8, DType.fp32):  # the peaks the seed's H100 lists
        sc = parse_scenario(merge(seed_dict(), {"workload": {"training": {"dtype": written}}}), "s.yaml")
        assert sc.workload.training.dtype == dtype


def test_an_option_refused_from_a_fixed_set_suggests_the_close_one():
    message = refused(merge(seed_dict(), {"workload": {"parallelism": {"recompute": "FULL"}}}))
    assert message.endswith("got the text 'FULL' (did you mean 'full'?)"), message
    message = refused(merge(seed_dict(), {"workload": {"training": {"dtype": "bf61"}}}))
    assert message.endswith("got the text 'bf61' (did you mean 'bf16'?)"), message
    assert "did you mean" not in refused(merge(seed_dict(), {"workload": {"training": {"dtype": "e3m4"}}}))


# --- inputs that are no files: read without end, until the process was killed ---------------------------------------

@needs_dev_zero
def test_a_device_given_as_a_result_or_config_is_refused_before_it_is_read(tmp_path):
    """`diff a.json /dev/zero` and `plot /dev/zero` were killed for memory (exit 137), `plot --measured /dev/zero`
    never ended, and `from_hf: /dev/zero` ran out of memory."""
    result = tmp_path / "a.json"
    collective = tmp_path / "c.json"
    proc = cli("simulate", str(SEED_SCENARIO), "--json", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result.write_text(proc.stdout)
    collective.write_text(json.dumps([{"size_bytes": 1024, "time_us": 10.0, "algbw_GBps": 0.1, "busbw_GBps": 0.15,
                                       "op": "allreduce", "group_size": 4}]))
    hf = with_hf(tmp_path, LLAMA_CONFIG)
    hf["workload"]["model"]["from_hf"] = str(DEV_ZERO)
    (tmp_path / "hf.yaml").write_text(yaml.safe_dump(hf))
    for args, expected in [
        (("diff", "a.json", str(DEV_ZERO)), "error: /dev/zero: cannot read: not a regular file"),
        (("plot", str(DEV_ZERO), "--kind", "breakdown", "-o", "p.png"), "error: /dev/zero: cannot read: not a "
         "regular file"),
        (("plot", str(DEV_ZERO), "--kind", "steps", "-o", "p.png"), "error: /dev/zero: cannot read: not a regular"),
        (("plot", "c.json", "--kind", "busbw", "--measured", str(DEV_ZERO), "-o", "p.png"),
         "error: --measured /dev/zero: cannot read: not a regular file"),
        (("simulate", "hf.yaml"), "hf.yaml: workload.model: cannot read HuggingFace config '/dev/zero': not a "
         "regular file"),
    ]:
        assert_bad_input(cli(*args, cwd=tmp_path, timeout=60), expected)
        assert not (tmp_path / "p.png").exists()


def test_a_value_of_no_branch_of_a_union_is_named_by_its_field_not_by_the_branchs_type():
    """stage_groups (whole numbers, or lists of them per replica) named `stage_groups[0].int`: pydantic's tag of the
    union branch, no field the author wrote; its two branches failing at one place counted as two problems."""
    data = merge(seed_dict(), {"workload": {"training": {"stage_groups": ["a", 0]}}})
    message = refused(data)
    assert message.startswith("s.yaml: workload.training.stage_groups[0]: expected a whole number"), message
    assert ".int" not in message and "list[" not in message and "more problem" not in message, message
