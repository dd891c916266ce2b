"""The sweep's steps plot labels every bar with its point's swept values, and no label runs into another, however
many fields are swept (one combined) and however long their values."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.plots import KINDS
from simulon.plots.figure import label_boxes, overlapping, pyplot

COMBINED = "datacenter.cluster.num_nodes+workload.training.global_batch_size"
AXES = [COMBINED, "workload.training.micro_batch_size", "datacenter.network.scale_out.nic.speed"]


def point(values: tuple[str, ...], axes: list[str]) -> dict[str, str]:
    """A sweep CSV row: its swept values and a step of 10 ms."""
    return {**dict(zip(axes, values, strict=True)), "compute_ms": "6", "exposed_comm_ms": "3", "bubble_ms": "1"}


def drawn_labels(rows: list[dict[str, str]], axes: list[str]) -> tuple[list[str], list]:
    """The texts of the steps plot's visible x tick labels and their drawn boxes."""
    fig = KINDS["steps"].draw((rows, axes), "sweep.csv", None)
    ax = fig.axes[0]
    shown = [label.get_text() for label in ax.get_xticklabels() if label.get_visible() and label.get_text()]
    boxes = label_boxes(ax)
    pyplot().close(fig)
    return shown, boxes


def test_a_sweep_over_a_combined_field_and_two_more_labels_every_bar_without_overlap():
    values = itertools.product(["1:16", "2:32", "4:64"], ["1", "2"], ["200Gbps", "400Gbps"])
    rows = [point(v, AXES) for v in values]
    shown, boxes = drawn_labels(rows, AXES)
    assert len(shown) == len(rows) == 12  # all bars labelled: upright, they fit
    assert shown[0] == "num_nodes+global_batch_size=1:16\nmicro_batch_size=1\nspeed=200Gbps"
    assert not overlapping(boxes)


def test_a_short_sweep_keeps_its_labels_level():
    axes = ["datacenter.cluster.num_nodes", "workload.training.micro_batch_size"]
    rows = [point(v, axes) for v in itertools.product(["1", "2"], ["1", "2"])]
    fig = KINDS["steps"].draw((rows, axes), "sweep.csv", None)
    assert {label.get_rotation() for label in fig.axes[0].get_xticklabels()} == {0.0}
    assert not overlapping(label_boxes(fig.axes[0]))
    pyplot().close(fig)


@settings(max_examples=12, deadline=None)
@given(points=st.integers(1, 40), length=st.integers(1, 60), fields=st.integers(1, 3))
def test_no_two_labels_overlap_whatever_the_count_and_length_of_the_values(points, length, fields):
    axes = AXES[:fields]
    rows = [point(tuple(f"{i}".rjust(length, "x") for _ in axes), axes) for i in range(points)]
    shown, boxes = drawn_labels(rows, axes)
    assert shown and not overlapping(boxes)
    assert shown[0].startswith(f"num_nodes+global_batch_size={'0'.rjust(length, 'x')}")
