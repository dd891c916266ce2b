"""`simulon plot RESULT --kind K -o out.png|svg` draws every kind from the real output of the command it reads,
as a valid PNG or SVG whose bytes are the same on every render; bad input ends with exit status 2 and one line
naming the file and the problem, and writes nothing."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from helpers import cli
from simulon.plots import KINDS, render

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
READS = {"breakdown": "simulate", "gantt": "simulate", "memory": "simulate", "links": "simulate", "busbw": "collective",
         "validation": "validate", "scaling": "sweep", "steps": "sweep"}
"""Which result each plot kind reads."""


def test_every_registered_kind_has_a_result_to_read():
    assert set(KINDS) == set(READS)


@pytest.mark.parametrize("kind", sorted(READS))
@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_each_kind_renders_a_valid_file_identical_on_a_second_render(kind, suffix, results, tmp_path):
    first, second = tmp_path / f"a.{suffix}", tmp_path / f"b.{suffix}"
    for out in (first, second):
        render(kind, results[READS[kind]], out)
    data = first.read_bytes()
    if suffix == "png":
        assert data.startswith(PNG_SIGNATURE) and len(data) > 5_000
        assert b"Software" not in data and b"Creation Time" not in data
    else:
        root = ET.fromstring(data)
        assert root.tag.endswith("svg") and b"<dc:date>" not in data
    assert second.read_bytes() == data


def test_the_command_writes_the_plot_and_says_where(results, tmp_path):
    out = tmp_path / "gantt.svg"
    done = cli("plot", str(results["simulate"]), "--kind", "gantt", "-o", str(out))
    assert done.returncode == 0 and done.stdout == f"Plot written to {out}\n"
    assert ET.fromstring(out.read_bytes()).tag.endswith("svg")


def test_the_busbw_plot_overlays_the_measured_rows_of_the_same_collective_and_group(results, tmp_path):
    from simulon.plots.collective import Measured, measured_series
    from simulon.validate.report import shipped_table

    series = measured_series(Measured(shipped_table("collectives"), subset="mleng_a100_node_nccl_tests"),
                             "allreduce", 8)
    assert len(series) == 1 and len(next(iter(series.values()))) == 20  # the table's 20 all_reduce sizes
    out = tmp_path / "busbw.png"
    done = cli("plot", str(results["collective"]), "--kind", "busbw", "-o", str(out), "--measured",
               str(shipped_table("collectives")), "--subset", "mleng_a100_node_nccl_tests")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("column", ["busbw_GBps", "algbw_GBps", "time_us"])
def test_a_measured_table_of_one_measured_column_is_drawn_as_validate_reads_it(column, tmp_path):
    """A user's sweep that gives only the time (or only algbw) was refused ('expected the columns collective,
    msg_bytes and busbw_GBps'), though `validate collectives` compares such a table: an all-reduce over 8 GPUs of
    1 GiB in 10 ms is 107.4 GB/s algorithm and 187.9 GB/s bus bandwidth, whichever column says it."""
    from simulon.plots.collective import Measured, measured_series

    size, seconds = 2**30, 0.01
    algbw = size / seconds / 1e9
    value = {"busbw_GBps": algbw * 2 * 7 / 8, "algbw_GBps": algbw, "time_us": seconds * 1e6}[column]
    table = tmp_path / "mine.csv"
    table.write_text(f"hardware,collective,msg_bytes,group_size,{column}\nDGX H100,all_reduce,{size},8,{value}\n")
    (points,) = measured_series(Measured(table), "allreduce", 8).values()
    assert points == [(size, pytest.approx(algbw * 2 * 7 / 8))]


def test_measured_rows_of_another_group_size_are_refused_by_name(results, tmp_path):
    from simulon.validate.report import shipped_table

    out = tmp_path / "busbw.png"
    done = cli("plot", str(results["collective"]), "--kind", "busbw", "-o", str(out), "--measured",
               str(shipped_table("collectives")), "--subset", "gcp_a3mega_2node_h100_all_reduce")
    assert json.loads(results["collective"].read_text())[0]["group_size"] == 8  # the A3 Mega rows are over 16
    assert done.returncode == 2 and "no row measures allreduce over 8 GPUs" in done.stderr
    assert not out.exists()


@pytest.mark.parametrize(("content", "kind", "expected"), [
    ("{not json", "breakdown", "not JSON"),
    ('{"iteration_time_ms": 1}', "breakdown", "per_gpu: missing"),
    ('[{"size_bytes": 1, "busbw_GBps": 2}]', "gantt", "schedule: missing"),
    ('{"per_gpu": [{"gpu": 0, "stage": "x"}]}', "breakdown", "per_gpu[0].stage: expected a number"),
    ('{"rows": []}', "validation", "rows: empty"),
    ('{"a": 1}', "busbw", "expected a non-empty JSON list"),
])
def test_a_bad_result_file_exits_2_naming_the_file_and_the_field(content, kind, expected, tmp_path):
    result, out = tmp_path / "result.json", tmp_path / "out.png"
    result.write_text(content)
    done = cli("plot", str(result), "--kind", kind, "-o", str(out))
    assert done.returncode == 2 and done.stderr.startswith(f"error: {result}") and expected in done.stderr
    assert "Traceback" not in done.stderr and not out.exists()


@pytest.mark.parametrize(("args", "expected"), [
    (("--kind", "pie", "-o", "out.png"), "--kind: expected one of breakdown"),
    (("--kind", "gantt", "-o", "out.pdf"), "-o out.pdf: expected a file name ending in .png or .svg"),
    (("--kind", "gantt", "-o", "missing/out.png"), "folder 'missing' does not exist"),
    (("--kind", "gantt", "-o", "out.png", "--measured", "x.csv"), "--measured: only the busbw plot"),
])
def test_a_bad_option_exits_2_with_one_line(args, expected, results, tmp_path):
    done = cli("plot", str(results["simulate"]), *args, cwd=tmp_path)
    assert done.returncode == 2 and expected in done.stderr and done.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("kind", "where", "field"), [
    ("breakdown", (), "iteration_time_ms"), ("breakdown", (), "num_gpus"),
    ("gantt", ("schedule",), "iteration_time_ms"),
])
def test_a_headline_number_that_is_text_exits_2_naming_the_field_as_diff_does(kind, where, field, results, tmp_path):
    data = json.loads(results["simulate"].read_text())
    block = data
    for key in where:
        block = block[key]
    block[field] = "fast"
    result, out = tmp_path / "result.json", tmp_path / "out.png"
    result.write_text(json.dumps(data))
    done = cli("plot", str(result), "--kind", kind, "-o", str(out))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"{field}: expected a number, got 'fast'" in done.stderr and str(result) in done.stderr
    assert not out.exists()


def test_a_missing_result_file_exits_2(tmp_path):
    done = cli("plot", str(tmp_path / "none.json"), "--kind", "gantt", "-o", str(tmp_path / "g.png"))
    assert done.returncode == 2 and "none.json: cannot read" in done.stderr


def test_simulating_does_not_import_matplotlib(results):
    import subprocess
    import sys

    code = ("import sys\nfrom simulon.cli.app import app\n"
            f"app(['simulate', {str(results['simulate'].parent / 'small.yaml')!r}, '--json'], standalone_mode=False)\n"
            "print('matplotlib' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "False"


def test_a_validation_panel_with_more_subsets_than_colours_is_coloured_by_its_rows_group():
    """A GPU profile's report has a subset per kernel, phase and dtype (170 on the H200's): its legend names the
    kernel families instead, each with its rows and MAPE; a panel of few subsets keeps them."""
    from simulon.plots.validation import validation

    def row(i: int, subset: str, group: str, metric: str = "kernel_ms") -> dict:
        return {"index": i, "subset": subset, "metric": metric, "measured": 1.0, "predicted": 1.0 + i % 3 / 10,
                "group": group, "error_pct": 10.0 * (i % 3)}

    many = [row(i, f"kernel{i} fwd bf16", ("gemm bf16", "attention", "memory")[i % 3]) for i in range(30)]
    few = [row(100 + i, f"table {i % 2}", "H100", "iter_time_s") for i in range(6)]
    fig = validation({"rows": many + few, "mape_pct": 10.0}, "report.json")
    legends = {ax.get_xlabel(): [t.get_text() for t in ax.get_legend().get_texts()] for ax in fig.axes}
    assert legends["measured kernel_ms"] == ["+-20%", "attention (10, MAPE 10.0%)", "gemm bf16 (10, MAPE 0.0%)",
                                             "memory (10, MAPE 20.0%)"]
    assert legends["measured iter_time_s"] == ["+-20%", "table 0 (3, MAPE 10.0%)", "table 1 (3, MAPE 10.0%)"]


def test_validate_plot_draws_a_profiles_kernel_families_while_its_json_keeps_the_design_format(tmp_path):
    from simulon.validate.profile import SHIPPED_PROFILES

    profile = SHIPPED_PROFILES / "h200-sxm5-141gb.yaml"
    done = cli("validate", "profile", str(profile), "--json", "--plot", str(tmp_path / "p.svg"))
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)["rows"][0]) == {"index", "subset", "metric", "measured", "predicted",
                                                        "error_pct"}
    text = (tmp_path / "p.svg").read_text()  # matplotlib writes each label beside its glyphs as a comment
    assert "gemm bf16 (618, MAPE" in text and "attn_flash fwd bf16" not in text
