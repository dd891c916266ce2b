"""`simulon profile gpu` times every kernel a training step of the profiled shape runs, in every number format: the
plan took the layer's table alone, which leaves out each GEMM's weight quantization (once a step) and the bf16 GEMMs
of the layers NVFP4 keeps in bf16, so a profile of the shape timed 47 of an fp8 step's 51 kernels and 47 of an nvfp4
step's 63, the rest falling back to the calibrated model."""

from __future__ import annotations

import pytest

from simulon.config.common import DType
from simulon.config.scenario import ScenarioConfig
from simulon.pipeline import build_dag
from simulon.profiling.plan import SweepPoint, plan
from simulon.profiling.store import run_key
from simulon.workload.kernels import Phase

MODEL = {"name": "tiny", "hidden_size": 256, "num_heads": 4, "ffn_hidden_size": 512, "vocab_size": 1024}


def scenario(gpu: str, dtype: str) -> ScenarioConfig:
    return ScenarioConfig.model_validate({
        "datacenter": {"cluster": {"num_nodes": 1}, "node": {"gpus_per_node": 4, "gpu": gpu},
                       "network": {"scale_up": {"switch": {"from": "nvswitch-gen4"}},
                                   "scale_out": {"nic": {"from": "connectx-7-400g"}}}},
        "workload": {"framework": "megatron", "model": {**MODEL, "num_layers": 8},
                     "parallelism": {"tp": 2, "pp": 2, "num_microbatches": 2},
                     "training": {"global_batch_size": 2, "micro_batch_size": 1, "sequence_length": 128,
                                  "dtype": dtype}}})


@pytest.mark.parametrize(("gpu", "dtype"), [("H100", "bf16"), ("H100", "fp8"), ("B200", "mxfp8"), ("B200", "nvfp4")])
def test_the_plan_times_every_kernel_of_a_step_of_its_shape_in_every_number_format(gpu, dtype):
    dag, _, _ = build_dag(scenario(gpu, dtype))
    _, planned = plan(SweepPoint({**MODEL, "num_layers": 1}, 128, 1, DType(dtype), 2))
    recorded = {run_key(p.spec.name, p.params) for p in planned}
    assert len(recorded) == len(planned)  # each distinct run once
    untimed = [(s.name, s.phase.name) for s in dag.kernel_specs
               if s.phase != Phase.step  # the gradient buffers' and optimizer's bytes are the stage's: interpolated
               and run_key(s.name, {**dict(s.shape), "phase": "fwd" if s.phase == Phase.recompute else s.phase.name,
                                    "dtype": dtype}) not in recorded]
    assert untimed == []
