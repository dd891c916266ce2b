"""Plots refuse non-finite numbers naming the field, mark each stage's own capacity on GPUs of several types, and
label a log axis whatever its span."""

from __future__ import annotations

import json
import math
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from matplotlib.collections import LineCollection

from helpers import cli
from simulon.config.units import GiB
from simulon.plots import KINDS
from simulon.plots.figure import pyplot
from simulon.plots.scaling import label_log_axis


def damaged(results, tmp_path, change) -> str:
    data = json.loads(results["simulate"].read_text())
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))  # writes Infinity and NaN as Python's json does
    return str(path)


@pytest.mark.parametrize("kind, change, field", [
    ("breakdown", lambda d: d["per_gpu"][0].update(compute_ms=float("inf")), "per_gpu[0].compute_ms"),
    ("breakdown", lambda d: d["per_gpu"][0].update(compute_ms=float("nan")), "per_gpu[0].compute_ms"),
    ("memory", lambda d: d["memory"]["stages"][0].update(device_bytes=float("inf")), "memory.stages[0].device_bytes"),
    ("memory", lambda d: d["memory"].update(capacity_bytes="big"), "memory.capacity_bytes"),
    ("memory", lambda d: d["memory"].update(capacity_bytes=float("inf")), "memory.capacity_bytes"),
])
def test_a_non_finite_or_non_numeric_field_exits_2_naming_it(kind, change, field, results, tmp_path):
    done = cli("plot", damaged(results, tmp_path, change), "--kind", kind, "-o", str(tmp_path / "p.png"))
    assert done.returncode == 2 and f": {field}: expected a number" in done.stderr
    assert "Warning" not in done.stderr and not (tmp_path / "p.png").exists()


def test_a_truncated_result_is_named_not_json_without_a_doubled_word(results, tmp_path):
    path = tmp_path / "trunc.json"
    path.write_text(results["simulate"].read_text()[:1000])
    done = cli("plot", str(path), "--kind", "breakdown", "-o", str(tmp_path / "p.png"))
    assert done.returncode == 2 and "not JSON" in done.stderr and " at at " not in done.stderr


def capacity_marks(data: dict) -> list[float]:
    """The capacities (GiB) the memory plot marks: one line across, or a mark over each stage."""
    fig = KINDS["memory"].draw(data, "result.json", None)
    ax = fig.axes[0]
    marks = [seg[0][1] for c in ax.collections if isinstance(c, LineCollection) for seg in c.get_segments()]
    across = [line.get_ydata()[0] for line in ax.lines if line.get_label().startswith("capacity")]
    pyplot().close(fig)
    return marks or across


def test_the_memory_plot_marks_each_stages_own_capacity_where_they_differ(results):
    data = json.loads(results["simulate"].read_text())
    stages = data["memory"]["stages"]
    assert capacity_marks(data) == [data["memory"]["capacity_bytes"] / GiB]  # one GPU type: one line across
    for i, stage in enumerate(stages):
        stage["capacity_bytes"] = (80 if i % 2 == 0 else 40) * GiB
    assert capacity_marks(data) == [80 if i % 2 == 0 else 40 for i in range(len(stages))]


@settings(max_examples=30, deadline=None)
@given(st.floats(0.01, 1e6), st.floats(1.05, 1e4))
@example(150.0, 1.9).via("a span of 150-285 held one tick of 1-9 x 10^k (200); 110-190 none")
@example(110.0, 1.7)
def test_a_log_axis_is_labelled_at_two_ticks_or_more_whatever_its_span(low, ratio):
    plt = pyplot()
    fig, ax = plt.subplots()
    ax.set_yscale("log")
    ax.set_ylim(low, low * ratio)
    label_log_axis(ax.yaxis, low, low * ratio)
    fig.canvas.draw()
    shown = [t for t in ax.yaxis.get_majorticklabels() + ax.yaxis.get_minorticklabels()
             if t.get_text() and low <= t.get_position()[1] <= low * ratio]
    plt.close(fig)
    assert len(shown) >= 2
    assert len({t.get_text() for t in shown}) == len(shown)  # no two labels alike (10.5 and 11 both "11")


def drawn_labels(ax, low, high) -> list[float]:
    """The y values of the labelled ticks of `ax` drawn between `low` and `high`."""
    ax.figure.canvas.draw()
    return sorted(t.get_position()[1] for t in ax.yaxis.get_majorticklabels() + ax.yaxis.get_minorticklabels()
                  if t.get_text() and low <= t.get_position()[1] <= high)


@settings(max_examples=40, deadline=None)
@given(st.floats(0.01, 1e6), st.floats(1.05, 1e8))
@example(53.78 / 1.5, 119.84 * 1.5 / (53.78 / 1.5)).via("validate hetero's panel: 36-180 s labelled up to 100")
@example(6.5e4, 30.0).via("a scaling plot's tokens/s over 65,000-1,950,000 labelled up to 1,000,000")
def test_a_log_axis_has_a_label_within_a_quarter_of_its_length_of_each_end(low, ratio):
    """A log axis within a decade or two was labelled at 1-9 x 10^k or at powers of ten only: validate hetero's
    panel over 36-180 s had no label above 100 (its point at 120 s none near it)."""
    plt = pyplot()
    fig, ax = plt.subplots()
    ax.set_yscale("log")
    ax.set_ylim(low, low * ratio)
    label_log_axis(ax.yaxis, low, low * ratio)
    shown = drawn_labels(ax, low, low * ratio)
    plt.close(fig)
    length = math.log10(ratio)
    assert math.log10(shown[0] / low) <= length / 4 + 1e-9
    assert math.log10(low * ratio / shown[-1]) <= length / 4 + 1e-9


def test_a_sweep_row_that_is_not_a_number_is_named_by_its_line_as_sweep_and_validate_count_them(tmp_path):
    """`plot` counted data rows from 1 where `sweep` and `validate` count the header as line (row) 1."""
    from simulon.sweep.run import METRICS

    header = ["key", "tp", *METRICS]
    good = ["k1", "1", *["1"] * (len(METRICS) - 1), "true"]
    bad = ["k2", "2", "fast", *["1"] * (len(METRICS) - 2), "true"]
    path = tmp_path / "s.csv"
    path.write_text("\n".join(",".join(r) for r in (header, good, bad)) + "\n")
    done = cli("plot", str(path), "--kind", "steps", "-o", str(tmp_path / "p.png"))
    assert done.returncode == 2 and f"{path}: line 3: num_gpus: expected a number, got 'fast'" in done.stderr


def test_a_collective_result_given_as_a_sweep_is_sent_to_busbw_not_told_it_is_a_simulation(tmp_path):
    """A `collective --json` list drawn with --kind scaling was told 'a result of `simulate --json` draws with --kind
    breakdown, gantt, memory or links'."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps([{"op": "allreduce", "group_size": 8, "size_bytes": 1024, "busbw_GBps": 1.0}]))
    done = cli("plot", str(path), "--kind", "scaling", "-o", str(tmp_path / "p.png"))
    assert done.returncode == 2 and "`collective --json` with busbw" in done.stderr, done.stderr
    assert "`validate --json` with validation" in done.stderr


@pytest.mark.parametrize("kind", ["steps", "scaling"])
def test_a_json_result_given_as_a_sweep_is_named_as_json_not_as_a_missing_column(tmp_path, kind):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"iteration_time_ms": 5.0, "num_gpus": 8}))
    done = cli("plot", str(path), "--kind", kind, "-o", str(tmp_path / "p.png"))
    assert done.returncode == 2 and f"{path}: a JSON file, not a sweep's CSV" in done.stderr, done.stderr
    assert "column missing" not in done.stderr
    (tmp_path / "e.csv").write_text("")
    done = cli("plot", str(tmp_path / "e.csv"), "--kind", kind, "-o", str(tmp_path / "p.png"))
    assert done.returncode == 2 and "e.csv: empty: no sweep's CSV" in done.stderr, done.stderr


@pytest.mark.parametrize("kind, made_by", [("breakdown", "simulate"), ("gantt", "simulate"), ("memory", "simulate"),
                                           ("links", "simulate"), ("busbw", "collective"),
                                           ("validation", "validate")])
def test_a_sweeps_csv_given_as_a_json_result_is_named_as_a_sweep_and_sent_to_the_kinds_that_draw_it(
        results, tmp_path, kind, made_by):
    """The mirror of the JSON result given to a sweep's plot: it read 'not JSON: Expecting value: line 1, column 1'."""
    out = tmp_path / "p.png"
    done = cli("plot", str(results["sweep"]), "--kind", kind, "-o", str(out))
    assert done.returncode == 2 and done.stderr == (
        f"error: {results['sweep']}: a sweep's CSV, not JSON (this plot reads the output of `simulon {made_by} "
        f"{'TABLE' if made_by == 'validate' else 'SCENARIO'} --json`; a sweep's CSV draws with --kind scaling or "
        "steps)\n"), done.stderr
    assert not out.exists()


@pytest.mark.parametrize("span", [[5.0, 1.0], [-1.0, 2.0]])
def test_a_gantt_span_that_ends_before_it_starts_or_starts_before_the_step_is_refused(results, tmp_path, span):
    def change(data):
        data["schedule"]["stages"][0]["spans"][0][:2] = span

    done = cli("plot", damaged(results, tmp_path, change), "--kind", "gantt", "-o", str(tmp_path / "p.png"))
    assert done.returncode == 2 and "schedule.stages[0].spans[0]: expected 0 <= start_ms <= end_ms, got " \
        f"{span[0]!r} to {span[1]!r}" in done.stderr, done.stderr
    assert not (tmp_path / "p.png").exists()
    assert cli("plot", str(results["simulate"]), "--kind", "gantt", "-o", str(tmp_path / "p.png")).returncode == 0


@pytest.mark.parametrize("scale", [0.01, 1.0, 30.0])
def test_a_validation_panel_within_a_decade_or_two_reads_its_ticks_in_plain_figures(scale):
    """validate memory's panels of 20 to 200 GiB were labelled 2x10^1, 3x10^1, ...; a tenth of a second would read 0."""
    from simulon.plots.validation import validation

    rows = [{"metric": "iter_s", "subset": "s", "measured": scale * m, "predicted": scale * m * 1.1}
            for m in (2.0, 3.0, 5.0, 7.0)]
    fig = validation({"rows": rows, "mape_pct": 10.0}, "v.json")
    fig.canvas.draw()
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    for axis in (ax.xaxis, ax.yaxis):
        shown = [t.get_text() for t in axis.get_majorticklabels() + axis.get_minorticklabels()
                 if t.get_text() and lo <= max(t.get_position()) <= hi]
        assert len(shown) >= 2 and all(re.fullmatch(r"[\d,.]+", t) and float(t.replace(",", "")) > 0 for t in shown), \
            shown
    pyplot().close(fig)
