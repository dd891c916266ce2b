"""`simulon simulate` says how much of a step a GPU's measured profile timed: a profile none of whose runs is of a
kernel the step runs (another kernel name, phase or dtype) was left unused without a word."""

from __future__ import annotations

import copy

import yaml

from helpers import SEED_SCENARIO, cli
from simulon.config.loading import load_scenario
from simulon.pipeline import simulate


def with_runs(tmp_path, runs: list[dict]):
    doc = yaml.safe_load(SEED_SCENARIO.read_text())
    doc = copy.deepcopy(doc)
    doc["datacenter"]["node"]["gpu"] = {"from": "h100-sxm", "name": "my-h100", "kernel_runs": runs}
    path = tmp_path / "profiled.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_profile_timing_no_kernel_of_the_step_is_named_and_one_timing_some_counts_them(tmp_path):
    dag = simulate(load_scenario(SEED_SCENARIO)).dag
    gemm = next(spec for spec in dag.kernel_specs if dict(spec.shape).get("m"))
    matching = {"kernel": gemm.name, "params": {**dict(gemm.shape), "phase": gemm.phase.name, "dtype": "bf16"},
                "times_ms": [1.0]}
    elsewhere = {**matching, "kernel": "not_a_kernel_of_this_step"}
    other_dtype = {**matching, "params": {**matching["params"], "dtype": "fp8"}}
    unused = cli("simulate", str(with_runs(tmp_path, [elsewhere, other_dtype])))
    assert unused.returncode == 0, unused.stderr
    assert ("Profile: none of my-h100's 2 profiled runs is of a kernel this step runs in bf16 (same kernel name, "
            "phase, dtype and shape parameters): every kernel is timed by the calibrated model") in unused.stdout
    used = cli("simulate", str(with_runs(tmp_path, [matching, elsewhere])))
    assert used.returncode == 0, used.stderr
    assert (f"Profile: 1 of the step's {len(dag.kernel_specs):,} distinct kernels timed from my-h100's profile, the "
            "rest by the calibrated model") in used.stdout
    plain = cli("simulate", str(SEED_SCENARIO))
    assert "Profile:" not in plain.stdout
