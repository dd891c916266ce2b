"""Users' own tables: rows whose hardware, model and framework are written in words no validator lists are
read through config.resolve and the loose model names, and a framework's version picks its defaults."""

from __future__ import annotations

import csv

import pytest

from simulon.config.frameworks import (
    MEGATRON_CORE_RUNS,
    MEGATRON_LM_2021,
    MEGATRON_LM_WITH_TE,
    NEMO_RECIPES,
    FrameworkDefaults,
    framework_defaults,
)
from simulon.validate.collectives import collective_cases
from simulon.validate.kernels import observation
from simulon.validate.report import shipped_table
from simulon.validate.training import scenario_from_row, validate_training

with open(shipped_table("training"), newline="") as handle:
    COLUMNS = next(csv.reader(handle))


def training_row(**values: str) -> dict[str, str]:
    return {**dict.fromkeys(COLUMNS, ""), "subset": "mine", **values}


@pytest.mark.parametrize(("framework", "defaults"), [
    ("Megatron-LM", MEGATRON_LM_2021), ("Megatron-LM v2.5", MEGATRON_LM_2021),
    ("Megatron-LM core_r0.9.0", MEGATRON_LM_WITH_TE), ("megatron_lm @1a2b3c4d", MEGATRON_LM_WITH_TE),
    ("Megatron-LM v3.0 + Transformer Engine 1.2", MEGATRON_LM_WITH_TE),
    ("NeMo 24.07 (Megatron-Core)", NEMO_RECIPES), ("Megatron-Core r0.8.0", MEGATRON_CORE_RUNS),
    ("my own trainer", FrameworkDefaults()),
])
def test_a_framework_named_with_a_version_gets_that_versions_defaults(framework, defaults):
    assert framework_defaults(framework) == defaults


def test_a_users_row_in_its_own_words_becomes_a_scenario_and_is_compared():
    row = training_row(hardware="8x H200 SXM (HGX H200, 8x 400G NDR)", num_gpus="8", model="meta-llama/Llama-3.1-8B",
                       layers="2", seq_len="2048", precision="bf16", framework="NeMo 24.07", tp="2", gbs="8",
                       mbs="1", iter_time_s="0.5")
    sc = scenario_from_row(row)
    assert sc.datacenter.node.gpu.name == "H200-SXM5-141GB" and sc.datacenter.datacenter.name == "hgx-h200"
    assert (sc.workload.model.hidden_size, sc.workload.model.num_layers) == (4096, 2)  # the template, truncated
    assert sc.workload.parallelism.sequence_parallel and sc.workload.parallelism.tp_comm_overlap  # NeMo's recipes
    report = validate_training([row])
    assert [r.index for r in report.rows] == [0] and report.rows[0].group == "hgx-h200"


def test_a_row_whose_hardware_cannot_be_resolved_is_skipped_with_what_was_not_understood():
    row = training_row(hardware="64x V100 32GB", num_gpus="64", model="GPT3-1.3B", seq_len="2048",
                       framework="Megatron-LM", iter_time_s="1")
    report = validate_training([row])
    assert not report.rows and "V100 has no GPU template" in report.skipped[0].reason


def test_collective_rows_on_systems_no_table_named_become_cases_on_their_templates():
    base = {"subset": "x", "collective": "all_reduce", "msg_bytes": "1073741824", "num_groups": "",
            "busbw_GBps": "100", "time_us": "", "notes": "", "nodes": ""}
    rows = [{**base, "hardware": "8x H800 SXM (HGX)", "num_gpus": "8", "group_size": "8"},
            {**base, "hardware": "GB200 NVL36 rack", "num_gpus": "32", "group_size": "32"}]
    h800, nvl36 = collective_cases(rows)[0]
    assert h800.system.family == "H800" and h800.datacenter().scale_up_bandwidth == pytest.approx(200e9)
    assert nvl36.system.family == "GB200" and nvl36.datacenter().num_gpus == 36  # a whole NVLink domain


def test_kernel_rows_on_gpus_no_table_listed_are_observed_on_their_templates():
    row = {"subset": "s", "kernel": "torch.matmul (best shape found)", "dtype": "bf16", "M": "8192", "N": "8192",
           "K": "8192", "batch": "", "kernel_tflops": "700", "notes": "900W 141GiB HBM3e version"}
    assert observation(0, {**row, "hardware": "NVIDIA GH200 SXM"}).gpu == "gh200-144gb"
    assert observation(0, {**row, "hardware": "NVIDIA GH200 96GB", "notes": ""}).gpu == "gh200"
    assert observation(0, {**row, "hardware": "AMD Instinct MI355X OAM"}).gpu == "mi355x"
    assert "Intel Gaudi is not modelled" in observation(0, {**row, "hardware": "Intel Gaudi 3"})


@pytest.mark.parametrize(("framework", "overlapped"), [
    ("Megatron-LM @23e00ed0 + TE 2.11 (NGC pytorch 26.01)", False), ("Megatron-LM v2.5", False),
    ("NeMo 24.07 (Megatron-Core)", True), ("Megatron-Core r0.8.0", True),
])
def test_megatron_lm_run_as_is_reduces_gradients_after_the_backward_and_recipes_overlap_them(framework, overlapped):
    """Megatron-LM's --overlap-grad-reduce and --overlap-param-gather are off unless given; NVIDIA's recipes and
    scaling runs give both."""
    row = training_row(hardware="8x B200 (1 node, NVLink5)", num_gpus="8", model="llama3-70b", layers="2",
                       seq_len="4096", precision="bf16", framework=framework, tp="2", gbs="8", mbs="1",
                       iter_time_s="0.5")
    parallelism = scenario_from_row(row).workload.parallelism
    assert parallelism.overlap_grad_reduce is overlapped and parallelism.gathers_overlapped is overlapped
