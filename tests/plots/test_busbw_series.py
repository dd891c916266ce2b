"""The busbw plot of a file joining several `collective --json` lists draws one labelled line per collective and
group size, in a fixed order, under a title naming none of them; one collective keeps its single line and its
title; a size given twice for one collective and group is refused naming both rows; its bandwidth axis reads in plain
figures to both ends."""

from __future__ import annotations

import copy
import json
import math
import re

from helpers import cli
from simulon.plots import KINDS
from simulon.plots.figure import pyplot


def lines(data: list) -> tuple[str, list[tuple[str, list[float]]], list[str]]:
    """The busbw plot's title, its lines (label, message sizes) and its legend's entries."""
    fig = KINDS["busbw"].draw(data, "mixed.json", None)
    ax = fig.axes[0]
    drawn = (ax.get_title(), [(line.get_label(), list(line.get_xdata())) for line in ax.lines],
             [text.get_text() for text in ax.get_legend().get_texts()])
    pyplot().close(fig)
    return drawn


def rerun(rows: list, **change) -> list:
    return [{**copy.deepcopy(row), **change} for row in rows]


def test_a_file_of_several_collectives_and_group_sizes_draws_one_labelled_line_each_in_name_and_size_order(results):
    """It drew one zig-zag line through every row, titled after the first row's collective."""
    ar8 = json.loads(results["collective"].read_text())
    sizes = sorted(r["size_bytes"] for r in ar8)
    mixed = rerun(ar8[:2], op="allgather") + ar8 + rerun(ar8, group_size=4)
    title, drawn, legend = lines(mixed)
    assert drawn == [("allgather over 8 GPUs", sizes[:2]), ("allreduce over 4 GPUs", sizes),
                     ("allreduce over 8 GPUs", sizes)]
    assert legend == [label for label, _ in drawn]
    assert title == "Bus bandwidth against message size, per collective and group size"
    assert lines(list(reversed(mixed))) == (title, drawn, legend)  # the file's order does not matter


def test_one_collective_keeps_its_single_line_and_its_title(results):
    ar8 = json.loads(results["collective"].read_text())
    title, drawn, _ = lines(list(reversed(ar8)))
    assert drawn == [("simulon", sorted(r["size_bytes"] for r in ar8))]
    assert title == "allreduce over 8 GPUs: bus bandwidth against message size"


def test_a_size_given_twice_for_one_collective_and_group_is_refused_naming_both_rows(results, tmp_path):
    ar8 = json.loads(results["collective"].read_text())
    path, out = tmp_path / "twice.json", tmp_path / "p.png"
    path.write_text(json.dumps(ar8 + rerun(ar8[1:2], algorithm="tree")))
    done = cli("plot", str(path), "--kind", "busbw", "-o", str(out))
    assert done.returncode == 2 and done.stderr.startswith(
        f"error: {path}: [1] and [{len(ar8)}]: both allreduce over 8 GPUs at {ar8[1]['size_bytes']:,.0f} bytes; "), \
        done.stderr
    assert not out.exists()


def test_the_bandwidth_axis_is_labelled_in_plain_figures_near_both_ends():
    """`collective --sizes 256MiB,512MiB,1GiB` on the quick start's 4 GPUs gives 51.88-52.02 GB/s: matplotlib
    labelled that log axis 5.188x10^1, 5.19x10^1, ..., 5.202x10^1."""
    rows = [{"op": "allreduce", "group_size": 4, "size_bytes": 2.0**p, "busbw_GBps": bw}
            for p, bw in ((28, 51.8768), (29, 51.9704), (30, 52.0175))]
    fig = KINDS["busbw"].draw(rows, "narrow.json", None)
    ax = fig.axes[0]
    fig.canvas.draw()
    low, high = ax.get_ylim()
    shown = sorted((t.get_position()[1], t.get_text()) for t in ax.yaxis.get_majorticklabels()
                   + ax.yaxis.get_minorticklabels() if t.get_text() and low <= t.get_position()[1] <= high)
    pyplot().close(fig)
    assert len(shown) >= 2 and all(re.fullmatch(r"[\d,]+(\.\d+)?", text) for _, text in shown)
    length = math.log10(high / low)
    assert math.log10(shown[0][0] / low) <= length / 4 and math.log10(high / shown[-1][0]) <= length / 4
