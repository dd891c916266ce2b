"""A malformed run in a GPU profile file (`kernel_runs`, written by `simulon profile gpu` or by hand) is refused where
the scenario is read, naming the profile file, the run and its field, as `validate profile` names them: a simulation
refused a run missing a shape parameter, or of an unknown phase, naming only the GPU ("GPU my-h100: ...")."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from helpers import one_gpu_scenario
from simulon.config.common import KERNEL_PHASES
from simulon.config.errors import ConfigError
from simulon.config.loading import load_scenario
from simulon.workload.kernels import Phase

GEMM = {"m": 2048, "n": 5504, "k": 4096, "groups": 1, "dtype_bytes": 2.0, "phase": "fwd", "dtype": "bf16"}
ATTENTION = {"batch": 1, "heads": 16, "kv_heads": 16, "seq_q": 2048, "seq_k": 2048, "qk_dim": 128, "v_dim": 128,
             "causal": True, "dtype_bytes": 2.0, "phase": "fwd", "dtype": "bf16"}


def scenario_on(tmp_path: Path, run: dict) -> tuple[Path, Path]:
    """(a one-GPU scenario whose GPU is read from a profile file holding `run`, that file)."""
    gpu = tmp_path / "my-h100.yaml"
    gpu.write_text(yaml.safe_dump({"from": "h100-sxm", "name": "my-h100", "kernel_runs": [run]}, sort_keys=False))
    path = one_gpu_scenario(tmp_path / "s.yaml", gpu)
    return path, gpu


def refusal(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_scenario(path)
    return str(info.value)


@pytest.mark.parametrize(("params", "field"), [
    ({k: v for k, v in GEMM.items() if k != "dtype_bytes"}, "dtype_bytes"),
    ({k: v for k, v in ATTENTION.items() if k != "causal"}, "causal"),
    ({"phase": "fwd", "dtype": "bf16"}, "bytes"),
])
def test_a_profiled_run_missing_a_shape_parameter_is_refused_naming_the_profile_file(tmp_path, params, field):
    path, gpu = scenario_on(tmp_path, {"kernel": "mlp_linear1", "params": params, "times_ms": [1.0]})
    assert refusal(path).startswith(f"{gpu} (included by {path} at datacenter.node.gpu): "
                                    f"kernel_runs[0].params.{field}: missing: ")


def test_a_profiled_run_without_times_is_refused_naming_the_profile_file(tmp_path):
    path, gpu = scenario_on(tmp_path, {"kernel": "mlp_linear1", "params": GEMM})
    assert refusal(path).startswith(f"{gpu} (included by {path} at datacenter.node.gpu): kernel_runs[0].times_ms: "
                                    "empty")


def test_a_profiled_run_of_an_unknown_phase_is_refused_naming_the_profile_file(tmp_path):
    path, gpu = scenario_on(tmp_path, {"kernel": "mlp_linear1", "params": {**GEMM, "phase": "bwd"}, "times_ms": [1.0]})
    assert refusal(path) == (f"{gpu} (included by {path} at datacenter.node.gpu): kernel_runs[0].params.phase: 'bwd' "
                             "is no kernel phase (one of fwd, bwd_ig, bwd_wg, step, recompute)")


def test_the_phases_a_profile_file_may_name_are_the_phases_kernels_run_in():
    assert tuple(Phase.__members__) == KERNEL_PHASES
