"""Bad input to the commands the first two passes left alone: sweep, search, plan-hetero, report, profile and the
validation tables. Each is refused before any work as bad input (exit status 2, one line naming the file or option,
the field and the problem, no traceback), or read and reported with finite numbers; never read without end, never
a fork of a hundred thousand processes, never an output half written.

Commands run in-process through the CLI's own error handling (run_reporting_errors), so that the exit status and
the one line a user sees are what is checked, without a Python start-up per case.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import SEED_SCENARIO, finite_json
from simulon.cli.app import app
from simulon.cli.errors import run_reporting_errors
from simulon.sweep.points import MAX_POINTS
from simulon.validate.report import Comparison, Skipped, ValidationReport, number, read_table, shipped_table

PROC = Path("/proc")
needs_proc = pytest.mark.skipif(not (PROC / "self").exists(), reason="no /proc: no folder where files cannot be made")
DEV_ZERO = Path("/dev/zero")
needs_dev_zero = pytest.mark.skipif(not DEV_ZERO.exists(), reason="no /dev/zero on this system")


def simulon(*args: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `simulon ARGS` as its entry point ends it."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            run_reporting_errors(lambda: app(list(args), prog_name="simulon", standalone_mode=False), list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def refused(*args: str) -> str:
    """The one line `simulon ARGS` refuses its input with (exit status 2, no traceback)."""
    code, out, err = simulon(*args)
    assert "Traceback" not in out + err and "internal error" not in err, err
    assert code == 2, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture
def seed(tmp_path) -> Path:
    path = tmp_path / "seed.yaml"
    path.write_text(SEED_SCENARIO.read_text())
    return path




# --- sweep ---------------------------------------------------------------------------------------------------------

@needs_dev_zero
@pytest.mark.parametrize("kind", ["dev-zero", "dev-null", "fifo"])
def test_a_sweep_csv_that_is_no_regular_file_is_refused_before_it_is_read(seed, tmp_path, kind):
    """-o /dev/zero read the device until MemoryError, a named pipe hung, and /dev/null ended in exit 1."""
    path = {"dev-zero": DEV_ZERO, "dev-null": Path("/dev/null"), "fifo": tmp_path / "pipe.csv"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    line = refused("sweep", str(seed), "--set", "training.micro_batch_size=1", "-o", str(path))
    assert f"-o {path}: not a regular file" in line, line


def test_a_sweep_of_more_points_than_it_runs_is_refused_before_any_is_validated(seed, tmp_path):
    """201 x 100 values once validated every point (minutes, gigabytes at a thousand by a thousand) first."""
    vocab = ",".join(str(32000 + i) for i in range(201))
    speeds = ",".join(f"{100 + i}Gbps" for i in range(100))
    line = refused("sweep", str(seed), "--set", f"model.vocab_size={vocab}", "--set",
                   f"network.scale_out.nic.speed={speeds}", "-o", str(tmp_path / "s.csv"))
    assert f"--set: 20,100 points (201 x 100 values), more than the {MAX_POINTS:,}" in line, line
    assert not (tmp_path / "s.csv").exists()


@pytest.mark.parametrize("value", ["[1,2", "{a: 1", "'open", "a: b: c"])
def test_a_swept_value_yaml_cannot_read_is_refused_in_one_line_naming_where(seed, tmp_path, value):
    """The YAML parser's several-line message was printed with its line breaks escaped."""
    line = refused("sweep", str(seed), "--set", f"training.micro_batch_size={value}", "-o", str(tmp_path / "s.csv"))
    assert line.startswith(f"error: --set training.micro_batch_size={value}: cannot read "), line
    assert "\\n" not in line and "<unicode string>" not in line, line


@pytest.mark.parametrize(("command", "option"), [("sweep", "--jobs"), ("search", "--workers"),
                                                  ("validate training", "--jobs"), ("validate collectives", "--jobs")])
def test_more_local_processes_than_the_machine_can_run_is_refused(seed, tmp_path, command, option):
    """search --workers 100000 cut its space into 400,000 parts over a pool of 100,000 forked processes."""
    args = {"sweep": [str(seed), "--set", "training.micro_batch_size=1", "-o", str(tmp_path / "s.csv")],
            "search": [str(seed), "--no-cache"], "validate training": [], "validate collectives": []}[command]
    line = refused(*command.split(), *args, option, "1000000")
    assert f"{option}: expected at most {4 * (os.cpu_count() or 1)} processes" in line, line
    assert "got 1000000" in line


# --- output paths --------------------------------------------------------------------------------------------------

@needs_proc
@pytest.mark.parametrize(("args", "option"), [
    (("report", "{seed}", "-o", "/proc/r.html"), "-o /proc/r.html"),
    (("simulate", "{seed}", "-o", "/proc/t.json"), "-o /proc/t.json"),
    (("sweep", "{seed}", "--set", "training.micro_batch_size=1", "-o", "/proc/s.csv"), "-o /proc/s.csv"),
    (("sweep", "{seed}", "--set", "training.micro_batch_size=1", "-o", "{tmp}/s.csv", "--plots", "/proc/p"),
     "--plots /proc/p"),
    (("search", "{seed}", "--cache", "/proc/cache"), "--cache /proc/cache"),
    (("search", "{seed}", "--no-cache", "-o", "{tmp}/r.csv", "--write-best", "/proc/b.yaml"),
     "--write-best /proc/b.yaml"),
    (("plan-hetero", "{seed}", "-o", "/proc/plan.yaml"), "-o /proc/plan.yaml"),
    (("profile", "gpu", "-o", "/proc/gpu.yaml"), "--output /proc/gpu.yaml"),
], ids=["report", "simulate", "sweep", "sweep-plots", "search-cache", "search-write-best", "plan-hetero", "profile"])
def test_an_output_in_a_folder_no_file_can_be_made_in_is_refused_before_the_work(seed, tmp_path, args, option):
    """Each once ran its whole simulation or search first and then failed to write (the search's cache with exit 1,
    its --write-best after writing -o)."""
    line = refused(*(a.format(seed=seed, tmp=tmp_path) for a in args))
    assert f"{option}: cannot create a file in folder '/proc'" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seed.yaml"]  # nothing else written


def test_an_output_below_a_file_is_told_the_file_is_no_folder(seed):
    line = refused("report", str(seed), "-o", f"{seed}/r.html")
    assert f"-o {seed}/r.html: '{seed}' is a file, not a folder" in line, line


# --- search --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "expected"), [
    (("--fix", "vpp=1", "--fix", "vpp=2"), "--fix vpp=2: vpp is already restricted by --fix vpp=1"),
    (("--tp", "1", "--fix", "tp=2"), "--fix tp=2: tp is already restricted by --tp 1"),
    (("--fix", "mbs=1", "--fix", "micro_batch_size=2"),
     "--fix micro_batch_size=2: micro_batch_size is already restricted by --fix mbs=1"),
])
def test_a_search_dimension_restricted_twice_is_refused_rather_than_the_last_silently_kept(seed, args, expected):
    assert expected in refused("search", str(seed), "--no-cache", *args)


@pytest.mark.parametrize("args", [("--fix", "tp=3"), ("--tp", "2,3")])
def test_a_tensor_parallel_size_the_search_never_tries_is_named_with_its_option(seed, args):
    """--fix tp=3 on nodes of four GPUs said only that no strategy fits, every one pruned by the rules."""
    line = refused("search", str(seed), "--no-cache", *args)
    assert "tp 3: never tried on this scenario (the search tries tp 1, 2, 4)" in line.replace("tp=3", "tp 3"), line


@settings(max_examples=12, deadline=None)
@given(price=st.sampled_from([math.inf, -math.inf, math.nan, 0.0, -1.0]) | st.floats(min_value=1.0000001e9))
def test_a_gpu_hour_price_that_is_not_a_finite_positive_price_is_refused(price):
    """--gpu-hour-price inf printed Infinity in --json, which is not JSON."""
    line = refused("search", str(SEED_SCENARIO), "--no-cache", "--gpu-hour-price", repr(price))
    assert "--gpu-hour-price: expected a positive price up to 1e+09" in line, line


# --- plan-hetero ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("change", "expected"), [
    ({"workload": None}, "workload: required to plan a pipeline placement"),
    ({"pp": 1, "dp": 4}, "workload.parallelism.pp: 1: there is no pipeline"),
    ({"vpp": 2}, "workload.parallelism.vpp: vpp = 2; the heterogeneous planner splits plain 1F1B pipelines"),
    # a layout of 8 virtual stages over pp 4 sets vpp 2 unwritten: the layout is what to change
    ({"pipeline_layout": "Et*3|t*5|(t*4|)*5t*4L"},
     "workload.parallelism.pipeline_layout: vpp = 2; the heterogeneous planner splits plain 1F1B pipelines"),
])
def test_a_scenario_the_planner_cannot_plan_is_refused_naming_the_file(tmp_path, change, expected):
    """These three messages once named neither the scenario nor any file."""
    data = yaml.safe_load((SEED_SCENARIO.parent / "hetero_plan_h100_a100.yaml").read_text())
    if "workload" in change:
        data.pop("workload")
    else:
        data["workload"]["parallelism"].update(change)
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    assert f"error: {path}: {expected}" in refused("plan-hetero", str(path))


# --- profile -------------------------------------------------------------------------------------------------------

@needs_dev_zero
def test_a_profile_output_that_is_a_device_is_refused_not_read_until_memory_runs_out(tmp_path):
    """-o /dev/zero read the device until the kernel killed the process."""
    assert "/dev/zero: cannot read it as YAML: not a regular file" in refused("profile", "gpu", "-o", str(DEV_ZERO))


def test_a_profile_output_that_is_a_folder_is_named_by_its_option(tmp_path):
    """It said '[Errno 21] Is a directory' as a YAML problem."""
    line = refused("profile", "gpu", "-o", str(tmp_path))
    assert f"--output {tmp_path}: is a folder; name the GPU YAML to write" in line, line


# --- validation tables ---------------------------------------------------------------------------------------------

def _table(name: str, rows: int, hardware: str = "") -> tuple[list[str], list[dict[str, str]]]:
    """The header and the first `rows` rows (of `hardware`, where given) of a shipped table."""
    with open(shipped_table(name), newline="") as f:
        reader = csv.DictReader(f)
        found = [row for row in reader if hardware in row["hardware"]][:rows]
    return list(found[0]), found


def _write(path: Path, header: list[str], rows: list[dict[str, str]]) -> Path:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    return path


NON_FINITE = (st.tuples(st.sampled_from(["", "+", "-"]), st.sampled_from(["nan", "inf", "infinity"]),
                        st.sampled_from([str.lower, str.upper, str.title])).map(lambda t: t[0] + t[2](t[1]))
              | st.tuples(st.sampled_from(["", "-"]), st.integers(min_value=309, max_value=10**6))
              .map(lambda t: f"{t[0]}1e{t[1]}"))
"""Cell text that float() reads as nan or an infinity: any case and sign, or past the largest float."""


@settings(max_examples=40)
@given(text=NON_FINITE)
def test_a_cell_that_is_no_finite_number_reads_as_no_number(text):
    assert number({"c": f" {text} "}, "c") is None


def test_a_finite_cell_still_reads_as_its_number():
    assert number({"c": "1.5e3"}, "c") == 1500.0 and number({"c": "-2"}, "c") == -2.0


@pytest.mark.parametrize(("kind", "column", "hardware"), [
    ("kernels", "kernel_tflops", "H100"), ("kernels", "M", "H100"), ("kernels", "K", "H100"),
    ("collectives", "time_us", "A100"), ("collectives", "group_size", "A100"), ("collectives", "msg_bytes", "A100"),
    ("collectives", "num_groups", "A100"),
])
@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "1e-320", "1e9"])
def test_a_table_cell_of_nonsense_magnitude_is_skipped_or_compared_with_finite_numbers(tmp_path, kind, column,
                                                                                      hardware, value):
    """inf or 1e400 in M, group_size or msg_bytes ended in OverflowError, NaN in group_size in ValueError, 1e-320 in
    kernel_tflops or time_us in ZeroDivisionError (exit 1); nan in kernel_tflops or time_us printed NaN in --json;
    a group size of 1e9 built a billion ranks until MemoryError."""
    header, rows = _table(kind, 2, hardware)
    path = _write(tmp_path / "t.csv", header, [{**row, column: value} for row in rows])
    code, out, err = simulon("validate", kind, "--csv", str(path), "--json")
    assert "Traceback" not in out + err and code in (0, 2), (code, err)
    if code == 0:
        assert finite_json(out)
    else:
        assert err.startswith(f"error: {path}: ") and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("tail", ["a,b,c\n", '"an unterminated quote,\n'], ids=["short-row", "open-quote"])
def test_a_row_shorter_than_the_header_reads_as_blank_cells(tmp_path, tail):
    """A short row's missing cells were None, and the validators ended in AttributeError (exit 1)."""
    header, rows = _table("kernels", 2, "H100")
    path = _write(tmp_path / "t.csv", header, rows)
    path.write_text(path.read_text() + tail)
    assert read_table(path)[-1][header[-1]] == ""
    code, out, err = simulon("validate", "kernels", "--csv", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)["skipped"][-1]["index"] == 2


def test_a_byte_order_mark_before_the_header_is_no_part_of_the_first_column(tmp_path):
    header, rows = _table("kernels", 1, "H100")
    path = _write(tmp_path / "t.csv", header, rows)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert next(iter(read_table(path)[0])) == header[0]


def test_a_cell_longer_than_the_csv_reader_takes_is_refused_naming_the_line(tmp_path):
    """The csv module's Error ended the command as an internal error."""
    header, rows = _table("kernels", 2, "H100")
    path = _write(tmp_path / "t.csv", header, rows)
    path.write_text(path.read_text() + "x," + "y" * 200_000 + "\n")
    line = refused("validate", "kernels", "--csv", str(path))
    assert f"error: {path}: line " in line and "field larger than field limit" in line, line


def test_a_collectives_table_without_a_needed_column_is_named_by_its_file(tmp_path):
    """The message said 'collectives table', not which file."""
    header, rows = _table("collectives", 1)
    path = _write(tmp_path / "c.csv", [c for c in header if c != "msg_bytes"],
                  [{k: v for k, v in row.items() if k != "msg_bytes"} for row in rows])
    assert f"error: {path}: column(s) msg_bytes missing" in refused("validate", "collectives", "--csv", str(path))


def test_a_comparison_whose_error_is_no_finite_number_is_reported_as_skipped():
    report = ValidationReport([Comparison(0, "s", "busbw_GBps", 0.0, 5.0), Comparison(1, "s", "busbw_GBps", 2.0, 3.0),
                               Comparison(2, "s", "busbw_GBps", 1e-320, 5.0)], [Skipped(3, "kept out")])
    usable = report.usable()
    assert [r.index for r in usable.rows] == [1]
    assert [s.index for s in usable.skipped] == [0, 2, 3]
    assert "give no finite error" in usable.skipped[0].reason
    assert finite_json(json.dumps(usable.to_dict()))


def test_the_seed_scenario_still_sweeps_into_a_regular_file(seed, tmp_path):
    out = tmp_path / "s.csv"
    code, _, err = simulon("sweep", str(seed), "--set", "training.micro_batch_size=1", "-o", str(out), "--jobs", "1",
                           "--json")
    assert code == 0, err
    lines = out.read_text().splitlines()
    assert lines[0].startswith("key,") and len(lines) == 2
