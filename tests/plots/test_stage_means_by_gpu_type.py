"""A pipeline stage whose data-parallel replicas run on GPUs of several types (training.stage_groups, with
dp_shares) is broken down per type in the breakdown plot and the report's per-stage table, not averaged over fast and
slow GPUs as if they were one."""

from __future__ import annotations

import re

import pytest

from simulon.plots import KINDS
from simulon.plots.figure import pyplot
from simulon.plots.result import TERMS, devices, stage_means
from simulon.report.page import breakdown

H100, A100 = "H100-SXM5-80GB", "A100-SXM4-80GB"


def result(types: tuple[str, ...]) -> dict:
    """Llama 3 8B tp8 pp2 dp2, replica 0 on H100s and replica 1 on A100s of each stage (dp_shares [22, 10]): per stage
    one GPU of each replica, as simulate --json's per_gpu gives them (ms)."""
    rows = [(0, 0, 638.8, 350.1, 142.5), (8, 0, 642.9, 300.7, 187.9), (16, 1, 718.7, 347.3, 65.5),
            (24, 1, 733.2, 315.9, 82.4)]
    per_gpu = [{"gpu": g, "stage": s, "stands_for": 8, "compute_ms": c, "exposed_comm_ms": e, "overlapped_comm_ms": 0.0,
                "bubble_ms": b, "device": types[i % len(types)]} for i, (g, s, c, e, b) in enumerate(rows)]
    analysis = [{"gpu": g["gpu"], "stage": g["stage"], "compute_bound_ms": g["compute_ms"], "memory_bound_ms": 0.0,
                 "exposed_ms": {"TP": g["exposed_comm_ms"]}, "bubble_ms": g["bubble_ms"]} for g in per_gpu]
    return {"iteration_time_ms": 1131.4, "num_gpus": 32, "per_gpu": per_gpu, "analysis": {"per_gpu": analysis},
            "breakdown": {"compute_ms": 683.4}}


def rows_of(data: dict) -> list[tuple[float, ...]]:
    return [(g["gpu"], g["stage"], g["stands_for"], *(g[t[0]] for t in TERMS)) for g in data["per_gpu"]]


def test_a_stage_on_two_gpu_types_has_one_mean_per_type():
    data = result((H100, A100))
    means = stage_means(rows_of(data), devices(data["per_gpu"]))
    assert list(means) == [(0, A100), (0, H100), (1, A100), (1, H100)]
    assert means[0, A100][2] == pytest.approx(187.9) and means[0, H100][2] == pytest.approx(142.5)
    one = result((H100,))  # one type: a mean per stage, as before
    assert list(stage_means(rows_of(one), devices(one["per_gpu"]))) == [(0, ""), (1, "")]


def test_the_breakdown_plot_labels_each_stage_bar_with_its_gpu_type():
    fig = KINDS["breakdown"].draw(result((H100, A100)), "result.json", None)
    try:
        by_stage = fig.axes[1]
        assert [t.get_text() for t in by_stage.get_xticklabels()] == [f"0\n{A100}", f"0\n{H100}", f"1\n{A100}",
                                                                     f"1\n{H100}"]
        assert by_stage.get_xlabel() == "pipeline stage and GPU type"
    finally:
        pyplot().close(fig)


def test_the_reports_per_stage_table_gives_each_gpu_type_its_row():
    html = breakdown(result((H100, A100)))
    table = html.split("Per stage and GPU type (ms, mean over its GPUs)")[1].split("</table>")[0]
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>.*?</td>", table)]
    assert cells[:5] == ["0", A100, "642.90", "300.70", "187.90"]
    assert cells[5:10] == ["0", H100, "638.80", "350.10", "142.50"]


def schedule(data: dict) -> dict:
    """The timeline simulate --json gives for `data`: each stage drawn from its lowest simulated GPU."""
    return {**data, "schedule": {"iteration_time_ms": 1131.4, "stages": [
        {"stage": s, "gpu": g, "spans": [[0.0, 500.0, "forward", 0]]} for s, g in ((0, 0), (1, 16))]}}


def test_the_timeline_names_the_gpu_each_stage_row_draws_and_its_type_on_mixed_gpus():
    """Each row draws one GPU of its stage; with replicas on H100s and A100s the rows said only "stage 0"."""
    for types, labels in (((H100, A100), [f"stage 1\nGPU 16, {H100}", f"stage 0\nGPU 0, {H100}"]),
                          ((H100,), ["stage 1", "stage 0"])):
        fig = KINDS["gantt"].draw(schedule(result(types)), "result.json", None)
        try:
            assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == labels
        finally:
            pyplot().close(fig)


def test_the_reports_per_gpu_by_kind_table_names_each_gpus_type_on_mixed_gpus():
    html = breakdown(result((H100, A100)))
    table = html.split("Per GPU by kind")[1].split("</table>")[0]
    assert "<th>type</th>" in table.replace(" ", "")
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>.*?</td>", table)]
    assert cells[:3] == ["0", H100, "0"] and cells[7:10] == ["8", A100, "0"]
