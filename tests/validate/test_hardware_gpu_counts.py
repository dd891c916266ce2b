"""A training row whose hardware counts fewer GPUs than the row runs on, in a number its system's nodes cannot hold
("4x H100 SXM per node" beside 8 GPUs), is skipped saying so: it ran on one DGX H100 of 8 GPUs, as if the
description had said nothing (a scenario's description is refused there, config.dc)."""

from __future__ import annotations

import pytest

from simulon.validate import training

ROW = {**dict.fromkeys((*training.COLUMNS, *training.INFORMATIONAL), ""), "subset": "mine", "source": "me",
       "model": "Llama 3 8B", "seq_len": "4096", "framework": "Megatron-Core", "tp": "2", "mbs": "1", "gbs": "64",
       "iter_time_s": "3"}


@pytest.mark.parametrize(("hardware", "gpus"), [("4x H100 SXM per node, 200Gb/s IB", "8"), ("4xA100", "16")])
def test_a_gpu_count_no_node_holds_below_the_rows_is_skipped_naming_the_hardware(hardware, gpus):
    with pytest.raises(training.Unsupported, match=r"hardware .* counts 4 .* GPUs, fewer than the row's"):
        training.scenario_from_row({**ROW, "hardware": hardware, "num_gpus": gpus})


@pytest.mark.parametrize(("hardware", "gpus"), [("4x H100 SXM", "4"), ("4x H100", "2"), ("16x H100", "16"),
                                                ("8x H100", "64"), ("H100", "8")])
def test_a_count_of_the_runs_gpus_or_of_a_nodes_is_read(hardware, gpus):
    assert training.scenario_from_row({**ROW, "hardware": hardware, "num_gpus": gpus}).workload.training.num_gpus \
        == int(gpus)
