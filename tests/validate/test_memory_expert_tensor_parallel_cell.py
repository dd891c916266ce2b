"""A user's memory row stating its expert tensor parallelism (the `etp` column the shared schema and `validate
training` read) is predicted with it: `validate memory` left the column out, so a Mixtral 8x7B row at tp 4, ep 8
and etp 1 on 32 H100s was predicted 27.50 GiB, as at etp 4, where the scenario with etp 1 holds 51.19."""

from __future__ import annotations

import pytest

from simulon.config.loading import parse_scenario
from simulon.config.units import GiB
from simulon.memory import estimate_memory
from simulon.validate.memory import validate_memory

ROW = {"source": "our cluster", "locator": "", "model": "Mixtral-8x7B", "hardware": "H100", "framework": "Megatron-LM",
       "num_gpus": "32", "tp": "4", "pp": "1", "dp": "8", "cp": "1", "ep": "8", "etp": "", "vpp": "", "sp": "true",
       "recompute": "full", "zero_or_fsdp": "distopt", "mbs": "1", "gbs": "64", "seq_len": "4096", "dtype": "bf16",
       "mem_gib": "40", "mem_kind": "allocated", "notes": ""}


def scenario_peak(etp: int | None) -> float:
    parallelism = {"tp": 4, "ep": 8, "sequence_parallel": True, "recompute": "full", "distributed_optimizer": True,
                   **({"expert_tensor_parallel": etp} if etp else {})}
    scenario = parse_scenario({
        "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 4}},
        "workload": {"framework": "Megatron-LM", "model": "mixtral-8x7b", "parallelism": parallelism,
                     "training": {"num_gpus": 32, "global_batch_size": 64, "micro_batch_size": 1,
                                  "sequence_length": 4096, "dtype": "bf16"}}}, "scenario")
    return estimate_memory(scenario).stages[0].allocated / GiB


@pytest.mark.parametrize("etp", [1, 2, 4, None])
def test_a_rows_etp_cell_is_the_scenarios_expert_tensor_parallelism(etp):
    report = validate_memory([{**ROW, "etp": str(etp or "")}])
    assert not report.skipped
    assert report.rows[0].predicted == pytest.approx(scenario_peak(etp))


def test_expert_tensor_parallelism_below_tp_is_not_predicted_as_tp():
    one, four = (validate_memory([{**ROW, "etp": etp}]).rows[0].predicted for etp in ("1", "4"))
    assert one > four


def test_an_etp_splitting_a_dense_models_experts_is_skipped_naming_the_column():
    report = validate_memory([{**ROW, "model": "Llama3-8B", "ep": "1", "etp": "2"}])
    assert "etp: 2 splits the experts of a model without them" in report.skipped[0].reason
