"""Where pipeline stages run on GPUs of different memory, each stage's memory is shown against its own GPU by name:
`simulate --json` gives each stage's GPU (the one whose memory its capacity is), the report's memory table and summary
name it as `simulon memory` and `simulate` print it, and the memory plot labels each stage's bar with it."""

from __future__ import annotations

import copy

from helpers import gpt_scenario
from simulon.config.units import GiB
from simulon.memory import estimate_memory
from simulon.plots import KINDS
from simulon.plots.figure import pyplot
from simulon.report.page import memory, summary


def on_b200_and_h100(result: dict) -> dict:
    """The result with its stages on B200s (180 GiB) and H100s (80 GiB) in turn, the H100 stage deciding."""
    data = copy.deepcopy(result)
    for i, stage in enumerate(data["memory"]["stages"]):
        stage["capacity_bytes"], stage["gpu"] = (180 * GiB, "B200") if i % 2 == 0 else (80 * GiB, "H100-SXM5-80GB")
    data["memory"]["capacity_bytes"] = 80 * GiB
    data["memory"]["gpu"] = "B200 + H100-SXM5-80GB"
    data["memory"]["peak_stage"] = data["memory"]["stages"][1]["stage"]
    return data


def test_each_stage_in_the_json_names_the_gpu_whose_memory_it_is_held_to():
    stage = estimate_memory(gpt_scenario(pp=2, layers=8, gbs=8)).to_json()["stages"][0]
    assert stage["gpu"] == estimate_memory(gpt_scenario(pp=2, layers=8, gbs=8)).stages[0].gpu != ""


def test_the_report_names_each_stages_gpu_where_the_stages_memory_differs(made):
    data = on_b200_and_h100(made.result)
    html = memory(data)
    assert "<th>GPU</th>" in html and html.count("<td>B200</td>") == 1 and "<td>H100-SXM5-80GB</td>" in html
    assert "<th>GPU</th>" not in memory(made.result)  # one GPU: its name is the section's, not a column
    assert "GiB (H100-SXM5-80GB)" in summary(data).replace("</span>", "")


def test_the_memory_plot_labels_each_stage_with_its_gpu_where_capacities_differ(made):
    fig = KINDS["memory"].draw(on_b200_and_h100(made.result), "result.json", None)
    try:
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0\nB200", "1\nH100-SXM5-80GB"]
        assert ax.get_xlabel() == "pipeline stage and its GPU"
    finally:
        pyplot().close(fig)
