"""A user's memory row that gives no global batch runs enough micro-batches to fill its pipeline, and at least the
fewest its stated schedule runs: a DualPipe or DualPipeV row (which need 2 pp, config.workload.microbatch_steps) was
skipped with 'num_microbatches: 4 micro-batches: pipeline_schedule dualpipe needs at least 2 * pp = 8', a count it
never gave."""

from __future__ import annotations

import pytest

from simulon.validate.memory import scenario_from_row, validate_memory

ROW = {"source": "our cluster", "locator": "", "model": "llama-2-7b", "hardware": "H100", "framework": "Megatron-LM",
       "num_gpus": "8", "tp": "1", "pp": "4", "dp": "2", "cp": "1", "ep": "1", "vpp": "", "sp": "true",
       "recompute": "none", "zero_or_fsdp": "distopt", "mbs": "1", "gbs": "", "seq_len": "4096", "dtype": "bf16",
       "mem_gib": "40", "mem_kind": "allocated", "notes": "", "pipeline_schedule": ""}


@pytest.mark.parametrize(("schedule", "microbatches"), [("DualPipe", 8), ("dualpipev", 8), ("ZB-V", 4), ("zb_h1", 4),
                                                        ("1F1B", 4), ("", 4)])
def test_a_row_without_a_global_batch_runs_the_fewest_micro_batches_its_schedule_takes(schedule, microbatches):
    report = validate_memory([{**ROW, "pipeline_schedule": schedule}])
    assert not report.skipped
    training = scenario_from_row({**ROW, "pipeline_schedule": schedule}).workload.training
    assert training.global_batch_size == microbatches * 2  # dp 2, micro-batch 1


def test_a_schedule_the_scenario_refuses_is_skipped_naming_it_not_the_batch():
    reason = validate_memory([{**ROW, "pipeline_schedule": "bogus"}]).skipped[0].reason
    assert reason.startswith("workload.parallelism.pipeline_schedule")
