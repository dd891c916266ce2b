"""`simulon templates {list,show,resolve}`: every shipped template is listed with its figures, shown as shipped, and
a description resolves as a scenario's `from:` reads it; an unknown name or kind exits 2 with one line naming it,
and no text ends in a traceback.

The commands run in-process through the entry point's error handling (cli.errors.run_reporting_errors), as
tests/cli/test_fuzz.py runs them, so that exit status and stderr are what a user sees."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import run_simulon
from simulon.config.catalog import KINDS
from simulon.config.resolve import FRAMEWORK_NAMES
from simulon.config.templates import template_names, template_text


def one_line_refusal(code: int, out: str, err: str) -> str:
    assert code == 2, (code, out, err)
    assert out == "" and err.startswith("error: ") and err.count("\n") == 1, err
    return err


@pytest.fixture(scope="module")
def listed() -> dict[str, list[dict]]:
    code, out, err = run_simulon("templates", "list", "--json")
    assert code == 0, err
    return json.loads(out)


def test_list_holds_every_kind_and_every_shipped_template(listed):
    assert list(listed) == list(KINDS)
    for kind, folder in KINDS.items():
        expected = template_names(folder) if folder else [name for name, _ in FRAMEWORK_NAMES]
        assert sorted(row["name"] for row in listed[kind]) == sorted(expected), kind


def test_list_gives_the_figures_that_identify_each_template(listed):
    rows = {kind: {row["name"]: row for row in rows} for kind, rows in listed.items()}
    assert (rows["system"]["dgx-h100"]["gpu"], rows["system"]["dgx-h100"]["gpus_per_node"],
            rows["system"]["dgx-h100"]["nic"], rows["system"]["dgx-h100"]["nic_Gbps"]) == \
        ("h100-sxm", 8, "ConnectX-7-NDR", 400)
    assert rows["system"]["gb200-nvl72"]["domain_gpus"] == 72
    h100 = rows["gpu"]["h100-sxm"]
    assert (h100["bf16_tflops"], h100["memory_gb"], h100["hbm_TBps"], h100["tdp_w"]) == (989.4, 80, 3.35, 700)
    llama = rows["model"]["llama-3.1-8b"]
    assert (llama["layers"], llama["hidden"], round(llama["params_b"], 2)) == (32, 4096, 8.03)
    assert rows["model"]["llama-3.1-405b"]["params_b"] == pytest.approx(405.85, abs=0.01)  # Meta's "405B"
    assert rows["nic"]["connectx-7-400g"]["Gbps"] == 400
    assert rows["switch"]["quantum-2-qm9700"]["ports"] == 64
    assert rows["topology"]["rail-optimized-fat-tree"]["tiers"] == 2
    assert rows["framework"]["nemo"]["sequence_parallel"] is True


@pytest.mark.parametrize("kind", list(KINDS))
def test_list_of_one_kind_prints_a_table_naming_each_of_its_templates(kind):
    code, out, err = run_simulon("templates", "list", "--kind", kind)
    assert code == 0, err
    folder = KINDS[kind]
    for name in template_names(folder) if folder else [name for name, _ in FRAMEWORK_NAMES]:
        assert f" {name} " in out, name


@pytest.mark.parametrize(("kind", "stem"), [(kind, stem) for kind, folder in KINDS.items() if folder
                                            for stem in template_names(folder)])
def test_show_prints_the_yaml_as_shipped(kind, stem):
    code, out, err = run_simulon("templates", "show", stem, "--kind", kind)
    assert code == 0, err
    assert out == template_text(KINDS[kind], stem)
    assert yaml.safe_load(out) == yaml.safe_load(template_text(KINDS[kind], stem))


@pytest.mark.parametrize(("name", "stem"), [("H100", "h100-sxm"), ("Llama 3.1 70B", "llama-3.1-70b"),
                                            ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
                                            ("gb200-nvl72", "gb200-nvl72"), ("GB200", "gb200"), ("hpn", "alibaba-hpn"),
                                            ("CX7", "connectx-7-400g")])
def test_show_finds_a_template_by_its_name_alias_or_a_loose_spelling_of_any_kind(name, stem):
    code, out, err = run_simulon("templates", "show", name)
    assert code == 0, err
    assert any(out == template_text(folder, stem) for folder in KINDS.values() if folder and
               stem in template_names(folder))


def test_show_of_a_framework_prints_its_defaults_as_yaml():
    code, out, err = run_simulon("templates", "show", "NeMo")
    assert code == 0, err
    shown = yaml.safe_load(out)
    assert shown["name"] == "nemo" and shown["sequence_parallel"] is True and shown["grad_reduce_dtype"] == "bf16"


@pytest.mark.parametrize(("args", "said"), [
    (("show", "h100x", "--kind", "gpu"), "unknown gpu template 'h100x'; did you mean h100-sxm"),
    (("show", "dgx-h10"), "no template is called 'dgx-h10'; did you mean system dgx-h100"),
    (("show", "megatron"), "'megatron' as workload.framework names the pipeline engine alone"),
    (("show", "gpt3_1_3b"), "reads as gpt3-13b or as gpt3-1.3b"),
    (("show", "h100", "--kind", "widget"), "--kind: expected one of system, gpu, model"),
    (("list", "--kind", "widget"), "--kind: expected one of system, gpu, model"),
    (("resolve", "V100"), "V100 has no GPU template"),
    (("resolve", "H100 94GB"), "94 GB, which no H100 template has"),
    (("resolve", "hello world"), "nor does it name a model template or a framework"),
    (("resolve", "   "), "description: empty"),
    (("resolve", "H100 " + "9" * 40), "a number of 40 digits"),
])
def test_an_unknown_name_or_kind_exits_2_with_one_line_naming_it(args, said):
    assert said in one_line_refusal(*run_simulon("templates", *args))


@pytest.mark.parametrize(("text", "gpu", "system", "stated"), [
    ("8x H100 80GB SXM DGX", "h100-sxm", "dgx-h100", {"gpus": 8}),
    ("GB200 NVL72 rack", "gb200", "gb200-nvl72", {"nodes": 18}),
    ("4x DGX H100", "h100-sxm", "dgx-h100", {"nodes": 4}),
    ("A100-SXM4-40GB", "a100-sxm-40gb", "dgx-a100-320gb", {}),
    ("p5en.48xlarge", "h200-sxm", "aws-p5en", {}),
    ("MI300X platform", "mi300x", "mi300x-platform", {}),
])
def test_resolve_prints_the_gpu_and_system_a_description_names(text, gpu, system, stated):
    code, out, err = run_simulon("templates", "resolve", text, "--json")
    assert code == 0, err
    got = json.loads(out)
    assert (got["gpu"], got["system"], got["unresolved"]) == (gpu, system, [])
    assert {key: got[key] for key in stated} == stated
    code, out, err = run_simulon("templates", "resolve", text)
    assert code == 0, err
    assert f"GPU: {gpu}" in out and f"System: {system}" in out and "Not resolved: nothing" in out


def test_resolve_says_what_it_could_not_resolve_and_what_the_description_overrides():
    code, out, err = run_simulon("templates", "resolve", "DGX H100 frobnicator 8x200Gbps")
    assert code == 0, err
    assert "Not resolved: frobnicator" in out
    assert "NIC line rate 200Gbps as stated" in out


@pytest.mark.parametrize(("text", "key", "value"), [
    ("Llama 3.1 70B", "model", "llama-3.1-70b"),
    ("deepseek-ai/DeepSeek-V3", "model", "deepseek-v3"),
    ("NeMo 24.07", "framework", {"name": "nemo", "version": "24.7", "commit": None, "transformer_engine": False,
                                 "scenario_defaults": {"sequence_parallel": True, "tp_comm_overlap": True,
                                                       "distributed_optimizer": True, "attention": "cudnn",
                                                       "grad_reduce_dtype": "bf16"}}),
])
def test_resolve_names_a_model_or_a_framework(text, key, value):
    code, out, err = run_simulon("templates", "resolve", text, "--json")
    assert code == 0, err
    assert json.loads(out)[key] == value


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=60),
                 st.lists(st.sampled_from(["8x", "H100", "80GB", "SXM", "DGX", "GB200", "NVL72", "rack", "x4",
                                           "400Gbps", "NVLink4", "700W", "nodes", "2", "Llama", "3.1", "70B",
                                           "NeMo", "24.07", "(", ")", "/", "-", "PCIe", "Hopper", "MI300X"]),
                          max_size=8).map(" ".join)))
def test_resolving_any_text_exits_0_or_2_never_with_a_traceback(text):
    code, out, err = run_simulon("templates", "resolve", text, "--json")
    assert "Traceback" not in out + err
    if code == 0:
        assert json.loads(out)["text"] == text
    else:
        one_line_refusal(code, out, err)


@settings(max_examples=25, deadline=None)
@given(st.text(max_size=40))
def test_showing_any_name_exits_0_or_2_never_with_a_traceback(name):
    code, out, err = run_simulon("templates", "show", name)
    assert "Traceback" not in out + err
    if code:
        one_line_refusal(code, out, err)


def test_the_readme_names_every_kind_templates_list_takes_and_the_parameters_it_prints(listed):
    from helpers import ROOT

    readme = (ROOT / "README.md").read_text()
    line = next(line for line in readme.splitlines() if line.startswith("simulon templates list "))
    assert re.search(r"\[--kind ([a-z|]+)\]", line).group(1).split("|") == list(KINDS)
    said = re.search(r"DeepSeek-V3 (\d+)B", " ".join(readme.split())).group(1)
    assert f"{next(r['params_b'] for r in listed['model'] if r['name'] == 'deepseek-v3'):.0f}" == said


def test_resolve_says_which_defaults_a_scenario_naming_the_framework_takes():
    """As workload.framework, 'megatron' and 'deepspeed' are the pipeline engines and take no framework's defaults;
    Megatron-LM at a 1.x-3.x release is its 2020-22 code (config.frameworks.framework_defaults)."""
    def taken(text: str):
        code, out, err = run_simulon("templates", "resolve", text, "--json")
        assert code == 0, err
        return json.loads(out)["framework"]["scenario_defaults"]

    assert taken("megatron") is None and taken("DeepSpeed") is None
    assert taken("Megatron-LM v2.5")["attention"] == "unfused"
    assert taken("Megatron-LM")["attention"] == "cudnn"


def test_the_gpu_table_names_the_16_bit_type_of_each_dense_rate_and_a_pcie_node_no_nvlink_domain():
    """Turing lists no bf16 (gpu/rtx-2080-ti.yaml, gpu/titan-rtx.yaml): the table's "dense bf16 TFLOP/s" column showed
    their fp16 tensor rates, 53.8 and 130, as bf16's; and the Sailor nodes of PCIe-joined GPUs had an "NVLink domain"
    of 8."""
    code, out, err = run_simulon("templates", "list", "--kind", "gpu")
    assert code == 0, err
    assert "bf16 TFLOP/s" not in out
    rows = {line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:-1]]
            for line in out.splitlines() if line.startswith("│")}
    assert rows["rtx-2080-ti"][1:3] == ["53.8", "fp16"] and rows["titan-rtx"][1:3] == ["130", "fp16"]
    assert rows["h100-sxm"][1:3] == ["989", "bf16"]
    code, out, err = run_simulon("templates", "list", "--kind", "system")
    assert code == 0, err
    assert "NVLink domain" not in out and "scale-up domain (GPUs)" in out
