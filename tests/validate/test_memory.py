"""The memory model against the published per-GPU peaks of memory.csv: bounds a change must keep."""

from __future__ import annotations

import pytest

from simulon.validate.memory import scenario_from_row, validate_memory
from simulon.validate.report import mape, read_table, shipped_table

ROWS = read_table(shipped_table("memory"))


@pytest.fixture(scope="module")
def report():
    return validate_memory(ROWS)


def test_at_least_four_rows_in_five_are_evaluated(report):
    evaluated = {r.index for r in report.rows}
    assert len(evaluated) >= 0.8 * len(ROWS)
    assert len(evaluated) + len(report.skipped) == len(ROWS)


def test_megatron_allocated_memory_is_within_5_percent(report):
    rows = [r for r in report.rows if r.subset == "Megatron" and r.metric == "allocated_gib"]
    assert len(rows) >= 25 and mape(rows) <= 5.0


def test_simumax_b200_allocated_memory_is_within_3_percent(report):
    rows = [r for r in report.rows if r.group == "SimuMax" and r.metric == "allocated_gib"]
    assert len(rows) == 19 and mape(rows) <= 3.0


def test_reserved_memory_is_within_8_percent(report):
    rows = [r for r in report.rows if r.metric == "reserved_gib"]
    assert len(rows) >= 19 and mape(rows) <= 8.0


def test_the_megatron_family_is_within_5_percent_over_every_quantity_its_sources_measured(report):
    rows = [r for r in report.rows if r.subset == "Megatron"]
    assert {r.metric for r in rows} >= {"allocated_gib", "reserved_gib", "device_gib", "states+activations_gib"}
    assert mape(rows) <= 5.0


def test_a_prediction_does_not_read_the_measured_column():
    row = next(r for r in ROWS if r["source"] == "SimuMax")
    altered = {**row, "mem_gib": "1.0", "notes": row["notes"].replace("reserved=", "was=")}
    assert scenario_from_row(altered) == scenario_from_row(row)


def test_rows_the_model_cannot_express_say_why_and_hybrid_mamba_runs_are_evaluated(report):
    assert all(s.reason for s in report.skipped)
    nano = [i for i, row in enumerate(ROWS) if row["model"].startswith("Nemotron-3-Nano")]
    completed = [i for i in nano if "completed" in ROWS[i]["notes"]]
    assert len(nano) == 4 and len(completed) == 2
    by_index = {r.index: r for r in report.rows}
    assert all(abs(by_index[i].error_pct) <= 15.0 for i in completed)
    out_of_memory = {s.index: s.reason for s in report.skipped if s.index in nano}
    assert set(out_of_memory) == set(nano) - set(completed)
    assert all("ran out of memory" in reason for reason in out_of_memory.values())


USER_ROW = {"source": "our cluster", "locator": "", "model": "Llama3-8B", "hardware": "8x H100 80GB SXM",
            "framework": "Megatron-LM", "num_gpus": "8", "tp": "2", "pp": "1", "dp": "4", "cp": "1", "ep": "1",
            "vpp": "1", "sp": "", "recompute": "none", "zero_or_fsdp": "", "mbs": "1", "gbs": "32",
            "seq_len": "4096", "dtype": "bf16", "mem_gib": "40", "mem_kind": "allocated", "notes": ""}


def test_a_source_the_table_does_not_know_is_set_up_by_the_framework_its_row_names():
    megatron = scenario_from_row(USER_ROW).workload
    deepspeed = scenario_from_row({**USER_ROW, "framework": "DeepSpeed"}).workload
    assert megatron.parallelism.distributed_optimizer and megatron.parallelism.sequence_parallel
    assert not deepspeed.parallelism.distributed_optimizer and not deepspeed.parallelism.sequence_parallel
    named_by_source = scenario_from_row({**USER_ROW, "framework": "", "source": "DeepSpeed runs"}).workload
    assert named_by_source.parallelism == deepspeed.parallelism


def test_a_user_row_stands_on_the_system_its_hardware_describes():
    a100 = scenario_from_row({**USER_ROW, "hardware": "A100-SXM4-40GB"})
    h100 = scenario_from_row(USER_ROW)
    assert a100.datacenter.node.gpu.memory_capacity_gb == 40
    assert h100.datacenter.node.gpu.memory_capacity_gb == 80


@pytest.mark.parametrize("changes, reason", [
    ({"framework": ""}, "names no framework"),
    ({"hardware": "Foo 9000"}, "hardware: 'Foo 9000' names no shipped GPU"),
])
def test_a_user_row_without_a_framework_or_a_known_gpu_is_skipped_saying_which(changes, reason):
    report = validate_memory([{**USER_ROW, **changes}, USER_ROW])
    assert [r.index for r in report.rows] == [1]
    assert [s.index for s in report.skipped] == [0] and reason in report.skipped[0].reason


@pytest.mark.parametrize("figure, reason", [
    ("abc", "notes: reserved=abc GiB: 'abc' is not a number"),
    ("-5", "notes: reserved=-5 GiB: -5 GiB is no memory peak (it must be positive)"),
    ("10", "notes: reserved=10 GiB is below the allocated 40 GiB (mem_gib): an allocator reserves at least what it "
           "allocates"),
])
def test_a_reserved_figure_in_the_notes_that_no_allocator_reserved_skips_the_row_naming_the_notes(figure, reason):
    report = validate_memory([{**USER_ROW, "notes": f"reserved={figure} GiB"}, USER_ROW])
    assert [r.index for r in report.rows] == [1]
    assert [(s.index, s.reason) for s in report.skipped] == [(0, reason)]


def test_a_reserved_figure_in_the_notes_is_compared_as_a_second_measurement_of_the_run():
    report = validate_memory([{**USER_ROW, "notes": "reserved=44.5 GiB"}])
    assert [(r.metric, r.measured) for r in report.rows] == [("allocated_gib", 40.0), ("reserved_gib", 44.5)]


@pytest.mark.parametrize("hardware, reason", [
    ("Mystery GPU", "hardware: 'Mystery GPU' names no shipped GPU"),
    ("H100-80GB", "hardware 'H100-80GB' names a H100 GPU, but the source's runs stand on dgx-b200"),
])
def test_a_known_sources_row_whose_hardware_names_no_gpu_or_another_one_than_its_systems_is_skipped(hardware, reason):
    row = next(r for r in ROWS if r["source"] == "SimuMax")
    report = validate_memory([{**row, "hardware": hardware}, row])
    assert {r.index for r in report.rows} == {1}
    assert [s.index for s in report.skipped] == [0] and report.skipped[0].reason.startswith(reason)


@pytest.mark.parametrize("hardware", ["", "unknown", "8-GPU node (unspecified)", "B200 (one node)"])
def test_a_known_sources_row_whose_hardware_names_no_gpu_at_all_or_its_systems_stands_on_that_system(hardware):
    row = next(r for r in ROWS if r["source"] == "SimuMax")
    assert validate_memory([{**row, "hardware": hardware}]).rows == validate_memory([row]).rows
