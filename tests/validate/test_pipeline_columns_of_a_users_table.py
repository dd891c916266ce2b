"""A user's training or memory table may state each row's pipeline schedule and context-parallel exchange in columns
named as the scenario's fields (report.PIPELINE_COLUMNS): they were ignored without a word, a DualPipe run's memory
predicted as 1F1B's (30.25 GiB against the 51.60 of `simulon memory` on the scenario naming dualpipe)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.validate import memory, training
from simulon.validate.report import PIPELINE_COLUMNS, pipeline_cells

TRAINING_ROW = {**dict.fromkeys((*training.COLUMNS, *training.INFORMATIONAL), ""), "subset": "mine", "source": "me",
                "hardware": "H100", "num_gpus": "16", "model": "Llama 3 8B", "seq_len": "8192",
                "framework": "Megatron-Core", "tp": "2", "pp": "4", "mbs": "1", "gbs": "32", "iter_time_s": "3"}
MEMORY_ROW = {**dict.fromkeys((*memory.COLUMNS, *memory.INFORMATIONAL), ""), "source": "my lab", "model": "Llama 3 8B",
              "hardware": "H100", "framework": "Megatron-Core", "num_gpus": "16", "tp": "2", "pp": "4", "mbs": "1",
              "gbs": "32", "seq_len": "8192", "dtype": "bf16", "mem_gib": "30", "mem_kind": "allocated"}


@pytest.mark.parametrize(("cell", "schedule", "vpp"), [("ZB-H1", "zb_h1", 1), ("DualPipe", "dualpipe", 1),
                                                       ("dualpipe v", "dualpipev", 2), ("zb_v", "zb_v", 2),
                                                       ("1F1B", "1f1b", 1)])
def test_a_stated_schedule_is_simulated_with_the_chunks_it_runs(cell, schedule, vpp):
    for module, row in ((training, TRAINING_ROW), (memory, MEMORY_ROW)):
        par = module.scenario_from_row({**row, "pipeline_schedule": cell}).workload.parallelism
        assert (par.pipeline_schedule, par.vpp) == (schedule, vpp)


@pytest.mark.parametrize(("cell", "exchange"), [("all-gather", "all_gather"), ("A2A", "a2a"), ("p2p", "p2p")])
def test_a_stated_context_parallel_exchange_is_simulated(cell, exchange):
    changes = {"pp": "1", "cp": "2", "seq_len": "16384", "context_parallel_comm": cell}
    for module, row in ((training, TRAINING_ROW), (memory, MEMORY_ROW)):
        assert module.scenario_from_row({**row, **changes}).workload.parallelism.context_parallel_comm == exchange


def test_a_dualpipe_rows_memory_holds_its_parameters_twice():
    report = memory.validate_memory([MEMORY_ROW, {**MEMORY_ROW, "pipeline_schedule": "dualpipe"}])
    plain, dualpipe = (r.predicted for r in report.rows)
    assert dualpipe > plain * 1.5


def test_a_schedule_simulon_does_not_build_skips_the_row_naming_the_field():
    with pytest.raises(training.Unsupported, match=r"pipeline_schedule: .*'gpipe'"):
        training.scenario_from_row({**TRAINING_ROW, "pipeline_schedule": "gpipe"})


@settings(max_examples=50, deadline=None)
@given(column=st.sampled_from(sorted(PIPELINE_COLUMNS)), data=st.data())
def test_every_value_reads_as_itself_in_any_case_and_separator(column, data):
    value = data.draw(st.sampled_from(PIPELINE_COLUMNS[column]))
    written = data.draw(st.sampled_from([value.upper(), value.replace("_", "-"), value.replace("_", " "), value]))
    assert pipeline_cells({column: f" {written} "}) == {column: value}
