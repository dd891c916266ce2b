"""The report holds each stage to its own GPU's memory where the stages' GPUs differ (GPUs of several types), and
keeps the one capacity where they do not."""

from __future__ import annotations

import copy

from simulon.config.units import GiB
from simulon.report.page import memory, summary


def mixed(result: dict) -> dict:
    """The result with its stages on 80 and 40 GiB GPUs in turn, the first stage deciding."""
    data = copy.deepcopy(result)
    for i, stage in enumerate(data["memory"]["stages"]):
        stage["capacity_bytes"] = (80 if i % 2 == 0 else 40) * GiB
    data["memory"]["capacity_bytes"] = 40 * GiB  # the smallest, as results before per-stage capacities wrote it
    data["memory"]["peak_stage"] = data["memory"]["stages"][0]["stage"]
    return data


def test_the_summary_compares_the_peak_stage_with_its_own_gpus_memory(made):
    html = summary(mixed(made.result))
    assert 'data-key="memory.stages.0.capacity_bytes"' in html and 'data-key="memory.capacity_bytes"' not in html
    assert 'data-key="memory.capacity_bytes"' in summary(made.result)


def test_the_memory_table_has_a_capacity_column_only_where_capacities_differ(made):
    data = mixed(made.result)
    html = memory(data)
    assert "<th>capacity</th>" in html
    for i in range(len(data["memory"]["stages"])):
        assert f'data-key="memory.stages.{i}.capacity_bytes"' in html
    assert "<th>capacity</th>" not in memory(made.result)
