"""A user's memory row naming a framework (and no sharding) is predicted as the scenario naming that framework is
(config.frameworks.workload_defaults): torchtitan's and llm-foundry's rows ran without their FSDP (78.3 GiB against
the scenario's 28.6 for Llama 3 8B at tp 2 on 8 H100), HuggingFace's with fused elementwise kernels, Megatron's
without its vocabulary padding."""

from __future__ import annotations

import pytest

from simulon.config.loading import parse_scenario
from simulon.config.units import GiB
from simulon.memory import estimate_memory
from simulon.validate.memory import validate_memory

ROW = {"source": "our cluster", "locator": "", "model": "Llama3-8B", "hardware": "8x H100 SXM", "framework": "",
       "num_gpus": "8", "tp": "", "pp": "", "dp": "", "cp": "", "ep": "", "vpp": "", "sp": "", "recompute": "",
       "zero_or_fsdp": "", "mbs": "1", "gbs": "16", "seq_len": "4096", "dtype": "bf16", "mem_gib": "40",
       "mem_kind": "allocated", "notes": ""}


@pytest.mark.parametrize("framework", ["Megatron-LM", "Megatron-Core 0.9", "NeMo 24.07", "Megatron-Bridge",
                                       "torchtitan", "llm-foundry", "MaxText", "DeepSpeed", "HuggingFace"])
@pytest.mark.parametrize(("tp", "pp"), [(2, 2), (8, 1)])
def test_a_row_naming_a_framework_predicts_the_peak_of_the_scenario_naming_it(framework, tp, pp):
    report = validate_memory([{**ROW, "framework": framework, "tp": str(tp), "pp": str(pp)}])
    scenario = parse_scenario({
        "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}},
        "workload": {"framework": framework, "model": "llama-3-8b", "parallelism": {"tp": tp, "pp": pp},
                     "training": {"num_gpus": 8, "global_batch_size": 16, "micro_batch_size": 1,
                                  "sequence_length": 4096, "dtype": "bf16"}}}, "scenario")
    assert not report.skipped
    assert report.rows[0].predicted == estimate_memory(scenario).stages[0].allocated / GiB
