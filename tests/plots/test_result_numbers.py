"""A number in a result that no result holds (a whole number of 400 digits, too large for a float; text where a
number belongs; NaN; a size no plot can draw) is bad input for `simulon diff` and `simulon plot` alike: one line
naming the file and the field, exit status 2, never an internal error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import cli
from simulon.config.errors import ConfigError
from simulon.plots import KINDS
from simulon.plots.figure import pyplot

HUGE = "1" + "0" * 400
"""A whole number JSON allows and Python parses, but no float holds."""


def written(tmp_path, data: object, replace: tuple[str, str] | None = None) -> str:
    """`data` as a JSON file, with a placeholder's text replaced by raw JSON (a number json.dumps cannot write)."""
    text = json.dumps(data)
    if replace is not None:
        text = text.replace(json.dumps(replace[0]), replace[1], 1)
    path = tmp_path / "bad.json"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(("raw", "shown"), [(HUGE, "1000000000"), ('"4"', "'4'"), ("NaN", "nan")])
@pytest.mark.parametrize("command", ["diff", "plot"])
def test_a_headline_number_no_result_holds_is_refused_naming_the_file_and_field(results, tmp_path, raw, shown,
                                                                                  command):
    data = json.loads(results["simulate"].read_text())
    data["num_gpus"] = "PLACEHOLDER"
    bad = written(tmp_path, data, ("PLACEHOLDER", raw))
    args = ("diff", str(results["simulate"]), bad) if command == "diff" else \
        ("plot", bad, "--kind", "breakdown", "-o", str(tmp_path / "p.png"))
    done = cli(*args)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: {bad}: num_gpus: expected a number") and shown in done.stderr
    assert done.stderr.count("\n") == 1 and len(done.stderr) < 200  # the 400 digits are not printed
    assert not (tmp_path / "p.png").exists()


def numeric_fields(node: object, path: tuple = ()) -> list[tuple]:
    """The paths of a JSON document's numbers (the first three items of each list)."""
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in numeric_fields(v, (*path, k))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node[:3]) for p in numeric_fields(v, (*path, i))]
    return [path] if isinstance(node, int | float) and not isinstance(node, bool) else []


READS = {"breakdown": "simulate", "gantt": "simulate", "memory": "simulate", "links": "simulate",
         "busbw": "collective", "validation": "validate"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_plot_draws_or_refuses_a_result_with_a_number_no_result_holds(results, tmp_path, data):
    kind = data.draw(st.sampled_from(sorted(READS)))
    document = json.loads(results[READS[kind]].read_text())
    field = data.draw(st.sampled_from(numeric_fields(document)))
    node = document
    for key in field[:-1]:
        node = node[key]
    node[field[-1]] = "PLACEHOLDER"
    raw = data.draw(st.sampled_from([HUGE, "-" + HUGE, "1e308", "-1e308", "NaN", "Infinity", '"7"', "null", "0",
                                     "-1"]))
    path = written(tmp_path, document, ("PLACEHOLDER", raw))
    try:
        fig = KINDS[kind].draw(KINDS[kind].read(Path(path)), path, None)
    except ConfigError as exc:
        assert str(exc).startswith(path) and "\n" not in str(exc)
    else:
        fig.canvas.draw()
        pyplot().close(fig)


@pytest.mark.parametrize(("column", "value", "problem"), [
    ("num_gpus", "0", "expected a whole number of GPUs from 1 to 1,000,000"),
    ("num_gpus", "1.5", "expected a whole number of GPUs from 1 to 1,000,000"),
    ("num_gpus", HUGE, "expected a number"),
    ("num_gpus", "nan", "expected a number"),
    ("tokens_per_s", "inf", "expected a number"),
    ("step_ms", "0", "expected a step time above 0"),
])
@pytest.mark.parametrize("kind", ["scaling", "steps"])
def test_a_sweep_cell_no_sweep_writes_is_refused_naming_its_line_and_column(results, tmp_path, kind, column, value,
                                                                              problem):
    """A GPU count of 0, 1.5 or 400 digits, or an infinite throughput, ended the scaling plot in an internal error."""
    import csv

    rows = list(csv.DictReader(results["sweep"].open()))
    rows[0][column] = value
    path = tmp_path / "sweep.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(ConfigError, match=f"^{path}: line 2: {column}: {problem}, got "):
        KINDS[kind].draw(KINDS[kind].read(path), str(path), None)
