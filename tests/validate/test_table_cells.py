"""How the four validators read a table's columns and cells (validate/report.py table_rows, cell_number, bad_cell):
informational columns a table lacks read as blank, a missing column a validator needs is one bad-input message, a
numeric cell that is not its column's number skips its row naming the column, and the kernels and collectives
validators read dtypes and collective names as users write them."""

from __future__ import annotations

import csv
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import cli
from simulon.collective.types import COLLECTIVE_NAMES
from simulon.config.common import DType
from simulon.config.errors import ConfigError
from simulon.validate.collectives import case_of, collective_cases, validate_collectives
from simulon.validate.kernels import observation, validate_kernels
from simulon.validate.memory import validate_memory
from simulon.validate.report import BadCell, bad_cell, cell_number, read_table, shipped_table
from simulon.validate.training import validate_training

MEMORY_ROW = {
    "source": "SimuMax B200", "locator": "", "model": "Llama3-8B", "hardware": "B200", "num_gpus": "8", "tp": "1",
    "pp": "1", "dp": "8", "cp": "1", "ep": "1", "vpp": "", "sp": "", "recompute": "", "zero_or_fsdp": "distopt",
    "mbs": "1", "gbs": "8", "seq_len": "4096", "dtype": "bf16", "mem_gib": "60", "mem_kind": "allocated", "notes": "",
}
GEMM_ROW = {"hardware": "H100-SXM5-80GB", "kernel": "GEMM", "dtype": "bf16", "M": "8192", "N": "8192", "K": "8192",
            "batch": "", "kernel_tflops": "600"}
ATTENTION_ROW = {"hardware": "A100-SXM4-80GB", "kernel": "attention fwd+bwd [FlashAttention-2]", "dtype": "fp16/bf16",
                 "M": "512", "N": "", "K": "", "batch": "32", "head_dim": "64", "causal": "False",
                 "kernel_tflops": "132", "notes": "hidden dim 2048 (32 heads), batch = 16k/seqlen (README)"}


@pytest.fixture(scope="module")
def collective_row() -> dict[str, str]:
    """An all-reduce row of the shipped table with a message size, a group and a time, and no bandwidth cells (its
    time gives its bus bandwidth: the tests relabel its collective and group, which the published bandwidths
    would then contradict)."""
    row = next(r for r in read_table(shipped_table("collectives")) if r["collective"] == "all_reduce"
               and r["msg_bytes"].strip() and r["group_size"].strip() and r["time_us"].strip())
    return {**row, "busbw_GBps": "", "algbw_GBps": ""}


def write(path, rows: list[dict[str, str]], delimiter: str = ",") -> str:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)
    return str(path)


# 1. columns: informational ones optional, needed ones one message


@pytest.mark.parametrize("dropped", [("notes",), ("source_locator", "subset"), ("notes", "source", "source_locator",
                                                                                 "subset")])
def test_a_training_table_without_informational_columns_reads_them_as_blank(dropped):
    row = {"hardware": "DGX H100", "model": "Llama-2 7B", "num_gpus": "8", "seq_len": "4096", "tp": "two",
           "iter_time_s": "1.0", "notes": "", "source": "", "source_locator": "", "subset": "s"}
    report = validate_training([{k: v for k, v in row.items() if k not in dropped}])
    assert [s.reason for s in report.skipped] == ["tp: 'two' is not a number"]  # read, not a KeyError


@pytest.mark.parametrize("dropped", ["notes", "mem_kind", "dtype", "recompute", "ep"])
def test_a_memory_table_without_informational_columns_reads_them_as_blank(dropped):
    report = validate_memory([{k: v for k, v in MEMORY_ROW.items() if k != dropped}])
    assert len(report.rows) >= 1 and not report.skipped


@pytest.mark.parametrize(("validator", "header", "missing"), [
    (validate_training, "hardware,model,iter_time_s", "num_gpus, seq_len"),
    (validate_training, "hardware,model,num_gpus,seq_len", "one of iter_time_s/"),
    (validate_memory, "model,mbs,mem_gib", "source"),
    (validate_kernels, "hardware,kernel,dtype,M,N,K,batch", "one of kernel_tflops/time_us"),
    (validate_collectives, "hardware,collective,msg_bytes,group_size", "one of busbw_GBps/algbw_GBps/time_us"),
    (validate_collectives, "hardware,collective,group_size,busbw_GBps", "msg_bytes"),
])
def test_a_table_lacking_a_column_every_row_needs_is_one_message_naming_it(validator, header, missing):
    columns = header.split(",")
    with pytest.raises(ConfigError, match=r"^t\.csv: column\(s\) .*missing: not a \w+ table$") as raised:
        validator([dict.fromkeys(columns, "1")], source="t.csv")
    assert missing in str(raised.value)


def test_a_semicolon_separated_memory_table_is_bad_input_saying_so(tmp_path):
    run = cli("validate", "memory", "--csv", write(tmp_path / "m.csv", [MEMORY_ROW], delimiter=";"))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "column(s) source, model, mbs, mem_gib missing" in run.stderr
    assert "comma-separated" in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_a_memory_table_without_notes_runs_from_the_command_line(tmp_path):
    run = cli("validate", "memory", "--json", "--csv",
              write(tmp_path / "m.csv", [{k: v for k, v in MEMORY_ROW.items() if k != "notes"}]))
    assert run.returncode == 0, run.stderr


# 2. numeric cells: one parser


@given(st.text().filter(lambda t: t.strip().lower() not in ("", "unknown")), st.booleans())
def test_any_non_numeric_text_in_a_numeric_column_skips_the_row_naming_the_column(text, whole):
    try:
        float(text)
        return  # a number's text: the next test
    except ValueError:
        pass
    with pytest.raises(BadCell, match=r"^pp: .* is not a number$"):
        cell_number({"pp": text}, "pp", whole)
    assert bad_cell({"tp": "2", "pp": text}, whole=("tp", "pp")).startswith("pp: ")


@given(st.integers())
def test_any_integer_text_round_trips(value):
    if len(str(abs(value))) <= 300:
        assert cell_number({"tp": str(value)}, "tp", whole=True) == value
        assert cell_number({"tp": f" {value} "}, "tp") == value


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_a_measurement_reads_as_its_float_and_a_fraction_is_no_count(value):
    assert cell_number({"x": repr(value)}, "x") == value
    if value != int(value):
        with pytest.raises(BadCell, match=r"is not a whole number$"):
            cell_number({"x": repr(value)}, "x", whole=True)


@pytest.mark.parametrize("text", ["", "  ", "unknown", "Unknown"])
def test_a_cell_not_given_stays_not_given(text):
    assert cell_number({"x": text}, "x") is None and cell_number({}, "x") is None
    assert bad_cell({"x": text}, ["x"]) is None


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e400", "1_000"])
def test_text_python_reads_as_a_float_but_measuring_nothing_is_not_a_number(text):
    with pytest.raises(BadCell, match="is not a number"):
        cell_number({"x": text}, "x")


@pytest.mark.parametrize(("column", "text", "reason"), [
    ("pp", "two", "pp: 'two' is not a number"),
    ("ep", "8.5", "ep: '8.5' is not a whole number"),
    ("iter_time_s", "843 ms", "iter_time_s: '843 ms' is not a number"),
    ("gbs", "lots", "gbs: 'lots' is not a number"),
])
def test_a_training_row_whose_numeric_cell_does_not_read_is_skipped_naming_it(column, text, reason):
    row = {"hardware": "DGX H100", "model": "Llama-2 7B", "num_gpus": "8", "seq_len": "4096", "iter_time_s": "1.0",
           column: text}
    assert [(s.index, s.reason) for s in validate_training([row]).skipped] == [(0, reason)]


def test_a_training_batch_in_tokens_is_no_bad_cell():
    row = {"hardware": "x", "model": "m", "num_gpus": "8", "seq_len": "2048", "iter_time_s": "1", "gbs": "0.5M tokens"}
    assert not validate_training([row]).skipped[0].reason.startswith("gbs")


def test_a_memory_row_whose_count_is_a_fraction_is_skipped_naming_it():
    report = validate_memory([{**MEMORY_ROW, "tp": "1.5"}])
    assert not report.rows and report.skipped[0].reason == "tp: '1.5' is not a whole number"


@pytest.mark.parametrize(("column", "text", "reason"), [
    ("msg_bytes", "1MiB", "msg_bytes: '1MiB' is not a number"),
    ("group_size", "8.5", "group_size: '8.5' is not a whole number"),
    ("time_us", "43 us", "time_us: '43 us' is not a number"),
])
def test_a_collectives_row_whose_numeric_cell_does_not_read_is_skipped_naming_it(collective_row, column, text,
                                                                                   reason):
    assert case_of(0, {**collective_row, column: text}) == reason
    cases, skipped = collective_cases([{**collective_row, column: text}])
    assert not cases and [s.reason for s in skipped] == [reason]


@pytest.mark.parametrize(("column", "text"), [("M", "8k"), ("kernel_tflops", "600 TFLOP/s"), ("batch", "2.5")])
def test_a_kernels_row_whose_numeric_cell_does_not_read_is_skipped_naming_it(column, text):
    assert observation(0, {**GEMM_ROW, column: text}).startswith(f"{column}: {text!r} is not a ")


# 3. kernels: dtypes as users write them


@pytest.mark.parametrize(("text", "dtype"), [("BF16", DType.bf16), ("bfloat16", DType.bf16),
                                             ("torch.bfloat16", DType.bf16), ("half", DType.fp16),
                                             ("float16", DType.fp16), ("fp8", DType.fp8)])
def test_kernels_read_a_dtype_as_users_write_it(text, dtype):
    obs = observation(0, {**GEMM_ROW, "dtype": text})
    assert not isinstance(obs, str), obs
    assert obs.dtype == dtype


def test_kernels_read_float32_as_fp32_and_still_refuse_an_unknown_dtype():
    assert "fp32 peak" in observation(0, {**GEMM_ROW, "dtype": "float32"})  # read as fp32: 600 TFLOP/s is above it
    assert observation(0, {**GEMM_ROW, "dtype": "fp9"}) == "dtype 'fp9' is not modelled"


# 4. collectives: names as the CLI's --op writes them


@pytest.mark.parametrize("name", ["allreduce", "AllReduce", "all-reduce", "all_reduce", "All Reduce"])
def test_collectives_read_all_reduce_however_written(collective_row, name):
    found = case_of(0, {**collective_row, "collective": name})
    assert not isinstance(found, str), found
    assert found[1].ctype.name == "AllReduce"


@pytest.mark.parametrize(("name", "ctype"), [*((name, t.name) for name, t in COLLECTIVE_NAMES.items()),
                                             ("reduce_scatter", "ReduceScatter"), ("all-to-all", "AllToAll"),
                                             ("collective_permute (p2p ring shift)", "SendRecv")])
def test_collectives_read_every_op_name_the_cli_takes(collective_row, name, ctype):
    found = case_of(0, {**collective_row, "collective": name})
    assert not isinstance(found, str), found
    assert found[1].ctype.name == ctype


def test_a_collective_simulon_does_not_model_is_still_skipped(collective_row):
    assert case_of(0, {**collective_row, "collective": "broadcast"}) == \
        "collective 'broadcast' is not one simulon models"


# 5. kernels: an attention row's heads column


def test_an_attention_row_takes_its_heads_from_the_heads_column():
    from_notes = observation(0, ATTENTION_ROW)
    from_column = observation(0, {**ATTENTION_ROW, "notes": "", "heads": "32"})
    assert not isinstance(from_column, str), from_column
    assert from_column.flops == from_notes.flops and from_column.specs == from_notes.specs
    doubled = observation(0, {**ATTENTION_ROW, "heads": "64"})  # the column wins over the notes
    assert math.isclose(doubled.flops, 2 * from_notes.flops)


def test_an_attention_row_without_heads_anywhere_is_skipped_saying_so():
    assert "number of heads" in observation(0, {**ATTENTION_ROW, "notes": ""})


# 4. rows that contradict themselves: more GPUs at work than the row states


@pytest.mark.parametrize(("changes", "reason"), [
    ({"group_size": "16", "num_groups": "", "num_gpus": "8", "nodes": ""}, "a group of 16 on 8 GPUs"),
    ({"group_size": "8", "num_groups": "3", "num_gpus": "16", "nodes": ""}, "3 groups of 8 on 16 GPUs"),
    ({"group_size": "16", "num_groups": "", "num_gpus": "", "nodes": "1"}, "a group of 16 on 1 node of 8 GPUs"),
    ({"group_size": "8", "num_groups": "", "num_gpus": "16", "nodes": "1"}, "16 GPUs on 1 node of 8 GPUs"),
    ({"group_size": "16", "num_groups": "", "num_gpus": "", "nodes": "", "hardware": "1x DGX H100"},
     "a group of 16 on 1 node of 8 GPUs"),
])
def test_a_collectives_row_using_more_gpus_than_it_states_is_skipped_saying_so(collective_row, changes, reason):
    assert case_of(0, {**collective_row, **changes}) == f"{reason}: the row contradicts itself"


@pytest.mark.parametrize("changes", [{"group_size": "8", "num_gpus": "16", "nodes": "2"},
                                     {"group_size": "4", "num_gpus": "", "nodes": "1"}])
def test_a_collectives_row_measured_on_some_of_its_gpus_is_compared(collective_row, changes):
    assert not isinstance(case_of(0, {**collective_row, "num_groups": "", **changes}), str)


def test_a_training_row_on_more_gpus_than_its_nodes_hold_is_skipped_saying_so():
    row = {"hardware": "DGX H100", "model": "Llama-2 7B", "num_gpus": "16", "nodes": "1", "seq_len": "4096",
           "tp": "1", "pp": "1", "iter_time_s": "1.0"}
    assert [s.reason for s in validate_training([row]).skipped] == [
        "16 GPUs on 1 node of 8 GPUs: the row contradicts itself"]
    assert validate_training([{**row, "nodes": "2"}]).rows
    stated = validate_training([{**row, "nodes": "", "hardware": "1x DGX H100"}])
    assert [s.reason for s in stated.skipped] == ["16 GPUs on 1 node of 8 GPUs: the row contradicts itself"]
