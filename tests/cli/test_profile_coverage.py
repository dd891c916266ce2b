"""`simulon simulate` says how much of a step a GPU's measured profile timed: a profile none of whose runs is of a
kernel the step runs (another kernel name, phase or dtype) was left unused without a word."""

from __future__ import annotations

import copy
import json

import yaml

from helpers import SEED_SCENARIO, cli
from simulon.config import ScenarioConfig
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
    assert (f"Profile: 1 of the {len(dag.kernel_specs):,} distinct kernels my-h100 runs timed from its profile, the "
            "rest by the calibrated model") in used.stdout
    plain = cli("simulate", str(SEED_SCENARIO))
    assert "Profile:" not in plain.stdout


def test_on_a_mixed_cluster_each_gpu_counts_the_kernels_its_own_ranks_ran_as_the_replay_timed_them():
    """Each GPU type's count is populate's own, over the kernels its ranks run: the first stage (H100s) runs no
    loss kernel, the last (A100s) runs no embedding; a profiled run of the H100's first GEMM is counted once for it
    and never for the A100, whose profile of the same kernel in fp8 times nothing."""
    wl = {"framework": "megatron",
          "model": {"name": "test-gpt", "num_layers": 4, "hidden_size": 1024, "num_heads": 16,
                    "ffn_hidden_size": 4096, "vocab_size": 32768},
          "parallelism": {"tp": 4, "pp": 2},
          "training": {"global_batch_size": 8, "micro_batch_size": 1, "sequence_length": 1024}}
    node = {"gpus_per_node": 4, "gpus_per_nic": 1}
    doc = {"datacenter": {"node_groups": [{"num_nodes": 1, "node": {**node, "gpu": "H100"}},
                                          {"num_nodes": 1, "node": {**node, "gpu": "A100"}}],
                          "network": {"scale_out": {"nic": {"speed": "200Gbps", "latency": "2us"},
                                                    "topology": {"tiers": 2, "rail_optimized": True,
                                                                 "nics_per_leaf": 8, "spines": 4}},
                                      "scale_up": {"switch": {"port_speed": "300GBps", "latency": "0.5us"}}}},
           "workload": wl}
    plain = simulate(ScenarioConfig.model_validate(doc))
    placement = ScenarioConfig.model_validate(doc).placement()
    ran = {name: set(plain.dag.kernel[(plain.dag.kernel >= 0) & (placement.group[plain.dag.gpu] == g)].tolist())
           for g, name in enumerate(gr.gpu.name for gr in placement.groups)}
    assert ran["H100-SXM5-80GB"] != ran["A100-SXM4-80GB"]
    specs = plain.dag.kernel_specs
    gemm = next(specs[k] for k in sorted(ran["H100-SXM5-80GB"]) if dict(specs[k].shape).get("m"))
    run = {"kernel": gemm.name, "params": {**dict(gemm.shape), "phase": gemm.phase.name, "dtype": "bf16"},
           "times_ms": [1.0]}
    groups = doc["datacenter"]["node_groups"]
    groups[0]["node"]["gpu"] = {"from": "h100-sxm", "kernel_runs": [run]}
    groups[1]["node"]["gpu"] = {"from": "a100-sxm-80gb",
                                "kernel_runs": [{**run, "params": {**run["params"], "dtype": "fp8"}}]}
    sim = simulate(ScenarioConfig.model_validate(doc))
    h100, a100 = "H100-SXM5-80GB", "A100-SXM4-80GB"
    assert sim.profiled == {h100: (1, len(ran[h100]), 1, "bf16"), a100: (0, len(ran[a100]), 1, "bf16")}
    assert len(ran["H100-SXM5-80GB"]) < len(plain.dag.kernel_specs)


def test_the_json_and_the_report_carry_what_the_profile_timed_and_a_run_without_one_carries_nothing(tmp_path):
    dag = simulate(load_scenario(SEED_SCENARIO)).dag
    gemm = next(spec for spec in dag.kernel_specs if dict(spec.shape).get("m"))
    run = {"kernel": gemm.name, "params": {**dict(gemm.shape), "phase": gemm.phase.name, "dtype": "bf16"},
           "times_ms": [1.0]}
    scenario = with_runs(tmp_path, [run, {**run, "kernel": "not_a_kernel_of_this_step"}])
    printed = cli("simulate", str(scenario), "--json")
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout)["profile"] == {
        "my-h100": {"timed": 1, "kernels": len(dag.kernel_specs), "runs": 2, "dtype": "bf16"}}
    report = tmp_path / "report.html"
    written = cli("report", str(scenario), "-o", str(report))
    assert written.returncode == 0, written.stderr
    assert (f"Profile: 1 of the {len(dag.kernel_specs):,} distinct kernels my-h100 runs timed from its profile, the "
            "rest by the calibrated model.") in report.read_text()
    plain = cli("simulate", str(SEED_SCENARIO), "--json")
    assert "profile" not in json.loads(plain.stdout)
