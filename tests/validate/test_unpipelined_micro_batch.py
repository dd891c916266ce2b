"""Megatron-Core's scaling runs state no micro-batch: unpipelined, a replica takes its share of the global batch in one
micro-batch as far as memory allows (config.frameworks.MEGATRON_CORE_RUNS, validate.training.whole_batch_micro_batch);
one sequence a micro-batch contradicts the GPT-32B row's own throughput."""

from __future__ import annotations

import pytest

from simulon.memory import estimate_memory
from simulon.validate.report import read_table, shipped_table
from simulon.validate.training import scenario_from_row

SUBSET = "mcore_r0.8_h100_weak_scaling"


@pytest.fixture(scope="module")
def scaling_rows() -> dict[str, dict[str, str]]:
    return {row["model"]: row for row in read_table(shipped_table("training")) if row["subset"] == SUBSET}


def _micro_batch(row: dict[str, str]) -> int:
    return scenario_from_row(row).workload.training.micro_batch_size


def test_megatron_core_scaling_runs_without_a_pipeline_take_a_replicas_batch_in_one_micro_batch(scaling_rows):
    # 192 sequences over 48 replicas: 4 each, one micro-batch of 4 (it was 4 micro-batches of 1, which left the 32B's
    # 15.7 GB fp32 gradient reduction over 48 nodes to hide behind one micro-batch's backward: +32% on its 0.892 s)
    unpipelined = {model: _micro_batch(row) for model, row in scaling_rows.items() if row["pp"] == "1"}
    assert unpipelined == {"GPT-1.7B": 4, "GPT-7.1B": 4, "GPT-16B": 4, "GPT-32B": 4}
    pipelined = {model: _micro_batch(row) for model, row in scaling_rows.items() if row["pp"] != "1"}
    assert len(pipelined) == 5 and set(pipelined.values()) == {1}


def test_a_replicas_batch_too_large_for_memory_takes_the_largest_micro_batch_that_fits(scaling_rows):
    row = {**scaling_rows["GPT-1.7B"], "gbs": str(48 * 64)}  # 64 sequences a replica
    sc = scenario_from_row(row)
    mbs = sc.workload.training.micro_batch_size
    assert 1 < mbs < 64 and 64 % mbs == 0 and estimate_memory(sc).fits
    larger = min(d for d in range(mbs + 1, 65) if 64 % d == 0)
    assert not estimate_memory(scenario_from_row({**row, "mbs": str(larger)})).fits


@pytest.mark.parametrize("cells", [{"mbs": "1"}, {"mbs": "2"}, {"grad_accum": "4"},
                                   {"framework": "Megatron-LM @23e00ed0 + TE 2.11"}])
def test_a_stated_micro_batch_accumulation_or_other_framework_keeps_its_own(scaling_rows, cells):
    expected = int(cells.get("mbs", "1"))
    assert _micro_batch({**scaling_rows["GPT-32B"], **cells}) == expected
