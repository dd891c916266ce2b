"""The breakdown plot labels its GPUs and stages without one label running into another, however many GPUs were
simulated (32 DGX-sized GPUs' two-digit numbers ran together, "1011121314", on a mixed H100/A100 cluster's report)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.plots import KINDS
from simulon.plots.figure import label_boxes, overlapping, pyplot


def result(gpus: int, stages: int) -> dict:
    """A simulate --json result's fields the breakdown plot reads: `gpus` GPUs over `stages` stages, a 10 ms step."""
    per_gpu = [{"gpu": g, "stage": g * stages // gpus, "stands_for": 1, "compute_ms": 6.0, "exposed_comm_ms": 3.0,
                "bubble_ms": 1.0} for g in range(gpus)]
    return {"iteration_time_ms": 10.0, "num_gpus": gpus, "per_gpu": per_gpu}


@settings(max_examples=6, deadline=None)
@given(gpus=st.sampled_from([8, 32, 63, 64, 200, 1024]), stages=st.sampled_from([1, 2, 8]))
def test_no_two_gpu_or_stage_labels_overlap(gpus, stages):
    fig = KINDS["breakdown"].draw(result(gpus, stages), "result.json", None)
    by_gpu, by_stage = fig.axes
    try:
        for ax in (by_gpu, by_stage):
            boxes = label_boxes(ax)
            assert boxes and not overlapping(boxes), ax.get_xlabel()
        assert by_gpu.get_xticklabels()[0].get_text() == "0"
    finally:
        pyplot().close(fig)
