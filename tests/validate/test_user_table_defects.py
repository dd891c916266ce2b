"""Defects a tester found feeding the validators tables and profiles of their own: each reproduced, and the row (or
kernel run) skipped with a reason naming the cell, not compared, crashed on or read wrongly."""

from __future__ import annotations

import pytest
import yaml

from helpers import SEED_SCENARIO, cli
from simulon.collective.metrics import bus_bandwidth_factor
from simulon.config.dc import GPUSpec
from simulon.validate.collectives import (
    MEASURED,
    case_of,
    collective_cases,
    disagreeing_cells,
    table_collective,
)
from simulon.validate.kernels import observation
from simulon.validate.memory import MEMORY_MARGIN, most_memory_gib, validate_memory
from simulon.validate.report import AGREEMENT, number, read_table, shipped_table

MEMORY_ROW = {
    "source": "SimuMax B200", "locator": "", "model": "Llama3-8B", "hardware": "B200", "num_gpus": "8", "tp": "1",
    "pp": "1", "dp": "8", "cp": "1", "ep": "1", "vpp": "", "sp": "", "recompute": "", "zero_or_fsdp": "distopt",
    "mbs": "1", "gbs": "8", "seq_len": "4096", "dtype": "bf16", "mem_gib": "60", "mem_kind": "allocated", "notes": "",
}
ATTENTION_ROW = {"hardware": "A100-SXM4-80GB", "kernel": "attention fwd+bwd [FlashAttention-2]", "dtype": "fp16/bf16",
                 "M": "512", "N": "", "K": "", "batch": "32", "head_dim": "64", "causal": "False",
                 "kernel_tflops": "132", "notes": "hidden dim 2048 (32 heads), batch = 16k/seqlen (README)"}
ALL_REDUCE = {"hardware": "8x H100 SXM5 80GB", "collective": "all_reduce", "msg_bytes": "1073741824",
              "group_size": "8", "busbw_GBps": "360", "algbw_GBps": "", "time_us": "", "num_groups": "",
              "num_gpus": "", "nodes": "", "notes": "", "source": "", "subset": ""}
NORM_TIMES = [0.0638, 0.0613, 0.0623]


def test_a_profiled_run_of_a_dtype_simulon_does_not_know_is_refused_naming_the_param_by_validate_and_simulate(
        tmp_path):
    """validate profile skipped such a run while a scenario using the profile took it without a word: both refuse
    the file now, naming the run's param (config.dc.KernelRun)."""
    runs = [{"kernel": "attn_norm", "params": {"bytes": 134217728, "dtype": "int3", "phase": "fwd"},
             "times_ms": NORM_TIMES},
            {"kernel": "mlp_norm", "params": {"bytes": 134217728, "dtype": "bf16", "phase": "fwd"},
             "times_ms": NORM_TIMES}]
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump({"from": "h100-sxm", "kernel_runs": runs}))
    scenario = tmp_path / "s.yaml"
    data = yaml.safe_load(SEED_SCENARIO.read_text())
    data["datacenter"]["node"]["gpu"] = {"from": str(path)}
    scenario.write_text(yaml.safe_dump(data))
    for run in (cli("validate", "profile", str(path), "--json"), cli("simulate", str(scenario))):
        assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
        assert run.stderr.strip().endswith("kernel_runs[0].params.dtype: 'int3' is not a dtype (one of fp32, tf32, "
                                           "fp16, bf16, fp8, fp4, mxfp8, mxfp4, nvfp4)"), run.stderr


def test_a_profiled_run_without_times_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"times_ms: empty"):
        GPUSpec.model_validate({"from": "h100-sxm", "kernel_runs": [
            {"kernel": "attn_norm", "params": {"bytes": 1024, "phase": "fwd"}, "times_ms": []}]})


@pytest.mark.parametrize("stated", ["True", "true", "TRUE", "yes", "Yes"])
def test_a_causal_cell_is_read_as_a_yes_no_flag_in_any_spelling(stated):
    causal = observation(0, {**ATTENTION_ROW, "causal": stated})
    plain = observation(0, {**ATTENTION_ROW, "causal": "false"})
    assert not isinstance(causal, str) and not isinstance(plain, str)
    assert causal.flops == pytest.approx(plain.flops / 2)  # flash-attention's benchmark halves a causal count
    assert all(dict(s.shape)["causal"] for s in causal.specs) and not any(dict(s.shape)["causal"] for s in plain.specs)
    assert observation(0, {**ATTENTION_ROW, "causal": ""}).flops == plain.flops  # blank: not causal


def test_an_unreadable_causal_cell_skips_the_row_naming_it():
    assert observation(0, {**ATTENTION_ROW, "causal": "maybe"}) == \
        "causal: 'maybe' is not a yes/no flag (yes, true, no or false, any case)"


@pytest.mark.parametrize(("cells", "reason"), [
    ({"M": "1e23"}, "M: 1e+23 is more than 16,777,216 tokens"),
    ({"M": "10000000000"}, "M: 10,000,000,000 is more than 16,777,216 tokens"),
    ({"batch": str(2**63)}, "batch: 9.22e+18 is more than 16,777,216 samples"),
    ({"head_dim": "2097152"}, "head_dim: 2,097,152 is more than 1,048,576 elements"),
])
def test_an_attention_row_of_a_shape_no_kernel_has_is_skipped_naming_the_column(cells, reason):
    assert observation(0, {**ATTENTION_ROW, **cells}) == reason


def test_a_gemm_row_of_a_shape_no_kernel_has_is_skipped_naming_the_column():
    row = {**ATTENTION_ROW, "kernel": "GEMM", "dtype": "bf16", "M": "1e30", "N": "1024", "K": "1024", "batch": ""}
    assert observation(0, row) == "M (times batch): 1e+30 is more than 281,474,976,710,656 rows"
    assert not isinstance(observation(0, {**row, "M": "1024"}), str)


def test_a_collectives_row_whose_measured_cells_contradict_each_other_is_skipped_saying_how():
    reason = case_of(0, {**ALL_REDUCE, "algbw_GBps": "100", "time_us": "1"})
    assert reason == (
        "measured cells contradict each other beyond their rounding and 5%: busbw_GBps 360 and algbw_GBps 100 "
        "(175 GB/s busbw at the bus factor 1.75) are 2.06x apart; busbw_GBps 360 and time_us 1 (1,879,048 GB/s busbw "
        "for 1073741824 bytes) are 5,220x apart; algbw_GBps 100 (175 GB/s busbw at the bus factor 1.75) and time_us 1 "
        "(1,879,048 GB/s busbw for 1073741824 bytes) are 10,737x apart")
    agreeing = case_of(0, {**ALL_REDUCE, "busbw_GBps": "360.00", "algbw_GBps": "205.71", "time_us": "5219.6"})
    assert not isinstance(agreeing, str) and agreeing[3] == pytest.approx(360.0, rel=1e-4)


@pytest.mark.parametrize(("busbw", "algbw", "time_us", "size"), [
    ("0.00", "0.00", "25.3", "8"),        # nccl-tests' smallest sizes: 2-decimal bandwidths of 0
    ("0.01", "0.01", "147.1", "1024"),    # 0.0070 GB/s algbw printed as 0.01
    ("330.58", "176.31", "24361", "4294967296"),
])
def test_bandwidths_and_times_rounded_as_the_tables_print_them_agree(busbw, algbw, time_us, size):
    row = {**ALL_REDUCE, "busbw_GBps": busbw, "algbw_GBps": algbw, "time_us": time_us, "msg_bytes": size}
    assert disagreeing_cells(row, 2 * 15 / 16, float(size)) is None
    off = {**row, "busbw_GBps": f"{float(busbw) * (1 + 3 * AGREEMENT) + 0.02:.2f}"}
    assert "busbw_GBps" in (disagreeing_cells(off, 2 * 15 / 16, float(size)) or "")


def test_no_row_of_the_shipped_collectives_table_contradicts_itself():
    checked = 0
    for row in read_table(shipped_table("collectives")):
        ctype, n, size = table_collective(row["collective"]), number(row, "group_size"), number(row, "msg_bytes")
        if ctype is None or n is None or n < 2 or sum(number(row, c) is not None for c in MEASURED) < 2:
            continue
        assert disagreeing_cells(row, bus_bandwidth_factor(ctype, int(n)), size) is None, row
        checked += 1
    assert checked > 900


def test_a_negative_message_size_is_named_as_such():
    assert case_of(0, {**ALL_REDUCE, "msg_bytes": "-1024"}) == \
        "msg_bytes: -1024 is no message size (it must be positive)"


def test_a_memory_figure_not_positive_or_far_above_any_gpus_memory_is_skipped(tmp_path):
    rows = [{**MEMORY_ROW, "mem_gib": v} for v in ("-5", "0", "1e300")] + [{**MEMORY_ROW, "mbs": "0"}, MEMORY_ROW]
    report = validate_memory(rows)
    assert most_memory_gib() == pytest.approx(MEMORY_MARGIN * 288e9 / 2**30)  # the MI355X's and B300's 288 GB
    assert [(s.index, s.reason) for s in report.skipped] == [
        (0, "mem_gib: -5 is negative (a measurement is 0 or more)"),
        (1, "mem_gib: 0 GiB is no memory peak (it must be positive)"),
        (2, "mem_gib: 1e+300 GiB is over 1,073 GiB, 4x the largest shipped GPU's memory (268 GiB): no GPU's peak"),
        (3, "mbs: 0 is not a count (it must be at least 1)"),
    ]
    assert [r.index for r in report.rows] == [4]


@pytest.mark.parametrize(("cells", "reason"), [
    ({"tp": "0"}, "tp: 0 is not a count (it must be at least 1)"),
    ({"pp": "0"}, "pp: 0 is not a count (it must be at least 1)"),
    ({"vpp": "0"}, "vpp: 0 is not a count (it must be at least 1)"),
    ({"zero_or_fsdp": "zero-4"}, "zero_or_fsdp: 'zero-4' is none of ZeRO-1/2/3, FULL_SHARD, SHARD_GRAD_OP, FSDP=N, "
                                 "distopt, DDP and none"),
])
def test_a_memory_row_with_a_degree_of_0_or_an_unknown_sharding_is_skipped_naming_the_cell(cells, reason):
    """tp 0 was compared as tp 1, pp 0 refused as 'tp*pp*cp*dp = 4', and 'zero-4' read as the source's default."""
    report = validate_memory([{**MEMORY_ROW, **cells}, MEMORY_ROW])
    assert [(s.index, s.reason) for s in report.skipped] == [(0, reason)]
    assert [r.index for r in report.rows] == [1]


def test_a_short_row_says_it_has_fewer_cells_than_the_header(tmp_path):
    header = list(ALL_REDUCE)
    path = tmp_path / "c.csv"
    path.write_text(",".join(header) + "\n" + ",".join(ALL_REDUCE.values()) + "\n8x H100 SXM5 80GB\n")
    _, skipped = collective_cases(read_table(path))
    assert [(s.index, s.reason) for s in skipped] == [
        (1, f"the row has 1 cells, fewer than the header's {len(header)}: it lacks collective, msg_bytes, group_size, "
            "busbw_GBps, algbw_GBps, time_us")]
    short_of_notes = path.with_name("d.csv")
    short_of_notes.write_text(",".join(header) + "\n" + ",".join(list(ALL_REDUCE.values())[:-3]) + "\n")
    assert not collective_cases(read_table(short_of_notes))[1]  # short only of cells it does not need: read


def test_a_row_with_more_cells_than_the_header_is_skipped_not_read_without_them(tmp_path):
    """An unquoted comma in the notes cut a memory row's reserved figure off into a cell past the header, and the row
    was compared without it (allocated alone); a kernels, collectives, training or hetero row alike."""
    header = list(MEMORY_ROW)
    path = tmp_path / "m.csv"
    notes = "measured by torch, reserved=64 GiB"
    path.write_text(",".join(header) + "\n" + ",".join([*list(MEMORY_ROW.values())[:-1], notes]) + "\n"
                    + ",".join(MEMORY_ROW.values()) + "\n")
    report = validate_memory(read_table(path))
    assert [(s.index, s.reason) for s in report.skipped] == [
        (0, f"the row has {len(header) + 1} cells, more than the header's {len(header)} (' reserved=64 GiB' past its "
            "last column): a cell holding a comma must be quoted")]
    assert [r.index for r in report.rows] == [1]


def test_a_header_with_spaces_around_its_names_reads_its_columns(tmp_path):
    """'source, model ,...' was refused as 'column(s) model missing: not a memory table'."""
    path = tmp_path / "m.csv"
    path.write_text(", ".join(MEMORY_ROW) + "\n" + ",".join(MEMORY_ROW.values()) + "\n")
    rows = read_table(path)
    assert list(rows[0]) == list(MEMORY_ROW)
    assert [r.index for r in validate_memory(rows).rows] == [0]


def test_a_header_naming_a_column_twice_is_refused_naming_both_positions(tmp_path):
    """The csv module keeps a repeated column's last cell, so the first was silently ignored."""
    path = tmp_path / "k.csv"
    path.write_text("hardware,kernel,dtype,M,N,K,batch,kernel_tflops,kernel\n"
                    "H100 SXM,GEMM,bf16,4096,4096,4096,,600,x\n")
    with pytest.raises(ValueError, match=r"line 1: column 'kernel' appears twice in the header \(columns 2 and 9\)"):
        read_table(path)
    run = cli("validate", "kernels", "--csv", str(path))
    assert run.returncode == 2 and "Traceback" not in run.stderr and "appears twice" in run.stderr, run.stderr
    blank = tmp_path / "blank.csv"  # trailing commas leave empty column names: no column is ignored
    blank.write_text("a,b,,\n1,2,,\n")
    assert read_table(blank) == [{"a": "1", "b": "2", "": ""}]


@pytest.mark.parametrize("kernel", ["gemm (te/cublas, as used by megatron)", "GEMM (TE/cuBLAS, as used by Megatron)",
                                    "Gemm"])
def test_a_kernel_description_is_read_in_any_case(kernel):
    gemm = {"hardware": "H100 SXM", "kernel": kernel, "dtype": "bf16", "M": "8192", "N": "8192", "K": "8192",
            "batch": "", "kernel_tflops": "600"}
    obs = observation(0, gemm)
    assert not isinstance(obs, str), obs
    assert obs.flops == 2 * 8192**3 and obs.family == "gemm"
    grouped = observation(0, {**gemm, "kernel": "Grouped gemm (BWD_GRAD_W)", "batch": "8"})
    assert not isinstance(grouped, str) and grouped.family == "grouped_gemm", grouped
    flash = observation(0, {**ATTENTION_ROW, "kernel": "Attention FWD+BWD [flashattention-2]"})
    assert observation(0, ATTENTION_ROW) == flash


@pytest.mark.parametrize(("kind", "read_as"), [("ALLOCATED", "allocated"), ("Reserved", "reserved"),
                                               ("unknown", "device"), ("", "device"), ("max_allocated", None),
                                               ("nvidia-smi", None)])
def test_a_mem_kind_is_read_in_any_case_and_another_word_is_skipped_naming_it(kind, read_as):
    """'max_allocated' was compared with the device's use (nvidia-smi's), simulon's figure for an unknown kind."""
    report = validate_memory([{**MEMORY_ROW, "mem_kind": kind}])
    if read_as is None:
        assert [s.reason for s in report.skipped] == [f"mem_kind {kind!r} is none of allocated, reserved, unknown"]
    else:
        assert not report.skipped and [r.metric for r in report.rows] == [f"{read_as}_gib"]


def dgx_cloud_llama_row() -> dict[str, str]:
    """The shipped training table's 8-GPU DGX Cloud Llama 3.1 8B row, whole."""
    rows = read_table(shipped_table("training"))
    return dict(next(r for r in rows if r["subset"] == "dgxc_benchmarking_v24.11.1" and r["num_gpus"] == "8"))


@pytest.mark.parametrize(("column", "cell", "reason"), [
    ("tp", "0", "tp: 0 is not a count (it must be at least 1)"),      # divided by zero: an internal error
    ("cp", "0", "cp: 0 is not a count (it must be at least 1)"),
    ("gbs", "0", "gbs: 0 is not a count (it must be at least 1)"),    # read as no batch given: a 96.5% error
    ("dp", "3", "dp: 3 disagrees with num_gpus / (tp x pp x cp) = 8 / 2 = 4"),
    ("recompute", "bogus", "recompute: 'bogus' is none of none, full or selective"),
    ("sp", "maybe", "sp: 'maybe' is neither yes nor no"),
    ("zero_or_fsdp", "bogus", "zero_or_fsdp: 'bogus' is none of ZeRO-1/2/3, FULL_SHARD"),
    ("framework", "bogus", "framework: 'bogus' names no framework simulon knows"),
    ("etp", "3", "etp: 3 splits the experts of a model without them")])                 # was left unread
def test_a_training_row_whose_cell_is_impossible_or_unreadable_is_skipped_naming_the_cell(column, cell, reason):
    from simulon.validate.training import validate_training
    row = {**dgx_cloud_llama_row(), column: cell}
    report = validate_training([row], memory_limit=None)
    assert not report.rows and report.skipped[0].reason.startswith(reason), report.skipped


@pytest.mark.parametrize(("precision", "dtype", "fp8_params"), [("FP8", "fp8", True), ("", "bf16", False),
                                                               ("BF16", "bf16", False)])
def test_a_recipes_fp8_only_settings_follow_the_rows_precision(precision, dtype, fp8_params):
    """NeMo's fine-tuning recipe keeps fp8 parameters in its FP8 runs; the same row with a blank precision (read as
    bf16) was skipped naming fp8_params, where it is a bf16 run."""
    from simulon.validate.training import scenario_from_row
    rows = read_table(shipped_table("training"))
    row = {**next(r for r in rows if r["subset"] == "nemo_24.07_finetune_fp8_h100"), "precision": precision}
    training = scenario_from_row(row).workload.training
    assert (training.dtype.value, training.fp8_params) == (dtype, fp8_params)


def test_a_memory_row_whose_sp_cell_is_neither_yes_nor_no_is_skipped_naming_it_as_a_training_row_is():
    report = validate_memory([{**MEMORY_ROW, "sp": "perhaps"}])  # was read as not given
    assert not report.rows and report.skipped[0].reason == "sp: 'perhaps' is neither yes nor no"
    assert validate_memory([{**MEMORY_ROW, "sp": "unknown"}]).rows


@pytest.mark.parametrize("model", ["gpt-oss-20b", "Mixtral-8x7B"])
def test_a_memory_row_of_an_moe_model_whose_expert_parallelism_is_unknown_is_skipped_whatever_its_name(model):
    """Only names holding 'mixtral', 'moe' or 'a<N>b' were skipped: GPT-OSS 20B (32 experts) ran at ep 1."""
    row = {**MEMORY_ROW, "model": model, "ep": "unknown"}
    report = validate_memory([row])
    assert not report.rows and report.skipped[0].reason == "row does not give the expert parallelism of an MoE model"
    assert validate_memory([{**row, "model": "Llama3-8B"}]).rows  # a dense model needs none


def test_a_memory_row_whose_recompute_cell_names_no_recomputation_is_skipped_not_read_as_none():
    report = validate_memory([{**MEMORY_ROW, "recompute": "bogus"}])
    assert not report.rows and "recompute: 'bogus' is none of none, full or selective" in report.skipped[0].reason
    assert validate_memory([{**MEMORY_ROW, "recompute": "selective(core_attn)"}]).rows


@pytest.mark.parametrize("group", ["0", "1", "-2"])
def test_a_group_of_fewer_than_two_gpus_is_named_as_such_not_as_a_missing_message_size(group):
    assert case_of(0, {**ALL_REDUCE, "group_size": group}) == \
        f"group_size: {group} is no group a collective runs over (it must be at least 2)"


@pytest.mark.parametrize(("cells", "reason"), [
    ({"busbw_GBps": "-1", "time_us": "3000"}, "busbw_GBps: -1 is negative (a measurement is 0 or more)"),
    ({"time_us": "-3000"}, "time_us: -3000 is negative (a measurement is 0 or more)"),
    ({"num_gpus": "0"}, "num_gpus: 0 is not a count (it must be at least 1 where given)"),
    ({"nodes": "0"}, "nodes: 0 is not a count (it must be at least 1 where given)"),
])
def test_a_collectives_row_with_a_negative_measurement_or_no_gpus_is_skipped_naming_the_cell(cells, reason):
    """A bus bandwidth of -1 beside the time the row was compared on, and 0 GPUs or nodes, passed."""
    assert case_of(0, {**ALL_REDUCE, **cells}) == reason


@pytest.mark.parametrize("column", ["tflops_per_gpu", "mfu_pct"])
def test_a_training_row_with_a_negative_measurement_beside_the_one_compared_is_skipped(column):
    from simulon.validate.training import validate_training
    report = validate_training([{**dgx_cloud_llama_row(), column: "-5"}], memory_limit=None)
    assert not report.rows and report.skipped[0].reason == f"{column}: -5 is negative (a measurement is 0 or more)"


def test_a_kernels_row_with_a_negative_time_is_skipped_naming_it():
    assert observation(0, {**ATTENTION_ROW, "time_us": "-1"}) == "time_us: -1 is negative (a measurement is 0 or more)"


def test_a_table_whose_rows_were_all_skipped_for_one_reason_is_not_asked_whether_it_is_a_table(tmp_path):
    path = tmp_path / "c.csv"
    header = list(ALL_REDUCE)
    path.write_text(",".join(header) + "\n" + ",".join({**ALL_REDUCE, "nodes": "0"}[c] for c in header) + "\n")
    run = cli("validate", "collectives", "--csv", str(path))
    assert run.returncode == 2 and "nodes: 0 is not a count" in run.stderr and "is this a table" not in run.stderr
