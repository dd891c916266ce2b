"""A training row naming DeepSpeed (or Megatron-DeepSpeed) runs on DeepSpeed's pipeline engine, as the scenario
naming that framework does (config.frameworks.pipeline_engine): the validator ran every row on Megatron-Core's
schedule (85.56 ms against the scenario's 85.72 for Llama 3.2 1B, tp 2 x pp 2 on 8 H100)."""

from __future__ import annotations

import pytest

from simulon.config.loading import parse_scenario
from simulon.pipeline import simulate
from simulon.validate import training

ROW = {**dict.fromkeys((*training.COLUMNS, *training.INFORMATIONAL), ""), "subset": "mine", "source": "me",
       "hardware": "8x H100 SXM", "num_gpus": "8", "model": "llama-3.2-1b", "seq_len": "2048", "tp": "2", "pp": "2",
       "mbs": "1", "gbs": "8", "iter_time_s": "1"}


@pytest.mark.parametrize(("framework", "engine"), [("DeepSpeed 0.14", "deepspeed"), ("Megatron-DeepSpeed", "deepspeed"),
                                                   ("torchtitan", "megatron"), ("Megatron-Core 0.9", "megatron"),
                                                   ("", "megatron")])
def test_a_row_runs_on_the_pipeline_engine_of_the_framework_it_names(framework, engine):
    assert training.scenario_from_row({**ROW, "framework": framework}).workload.framework == engine


def test_a_deepspeed_row_is_predicted_as_the_scenario_naming_deepspeed():
    sc = training.scenario_from_row({**ROW, "framework": "DeepSpeed"})
    written = parse_scenario({
        "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}},
        "workload": {"framework": "DeepSpeed", "model": "llama-3.2-1b", "parallelism": {"tp": 2, "pp": 2},
                     "training": {"num_gpus": 8, "global_batch_size": 8, "micro_batch_size": 1,
                                  "sequence_length": 2048}}}, "scenario")
    assert training.simulate_row(sc).result.iteration_time_ms == simulate(written).result.iteration_time_ms
