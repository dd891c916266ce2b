"""`simulon memory`, the memory lines of `simulate`, its JSON and trace counter, and `validate memory`."""

from __future__ import annotations

import json

import yaml

from helpers import SEED_SCENARIO, cli, seed_dict


def too_big(tmp_path) -> str:
    """The seed scenario with a model that cannot fit an 80 GB GPU."""
    data = seed_dict()
    data["workload"]["model"].update({"num_layers": 96, "hidden_size": 12288, "num_heads": 96,
                                      "ffn_hidden_size": 49152})
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_memory_prints_a_row_per_stage_and_the_verdict():
    run = cli("memory", str(SEED_SCENARIO))
    assert run.returncode == 0, run.stderr
    assert "Peak memory per GPU by pipeline stage" in run.stdout
    assert "Memory: peak 34.21 GiB on stage 0 of 80.00 GiB (H100): fits" in run.stdout


def test_a_table_written_to_a_pipe_keeps_each_row_on_one_line_whatever_its_width():
    run = cli("memory", str(SEED_SCENARIO))  # stdout a pipe: no terminal width to wrap to
    lines = run.stdout.splitlines()
    header = next(line for line in lines if line.startswith("┃"))
    assert all(word in header.split() for word in ("params", "weights", "optimizer", "activations", "reserved"))
    assert [line.split()[1] for line in lines if line.startswith("│")] == ["0", "1"]  # a line per stage
    assert len(header) > 80


def test_memory_json_gives_each_stage_its_terms_capacity_and_verdict():
    data = json.loads(cli("memory", str(SEED_SCENARIO), "--json").stdout)
    assert [s["stage"] for s in data["stages"]] == [0, 1]
    for stage in data["stages"]:
        assert stage["allocated_bytes"] == sum(stage["terms_bytes"].values())
        assert stage["allocated_bytes"] <= stage["reserved_bytes"] <= stage["device_bytes"] <= stage["capacity_bytes"]
        assert stage["fits"] is True
        assert {"weights", "gradients", "optimizer states", "activations"} <= set(stage["terms_bytes"])


def test_a_scenario_that_does_not_fit_is_simulated_with_a_warning_naming_the_stage_and_largest_terms(tmp_path):
    run = cli("simulate", too_big(tmp_path))
    assert run.returncode == 0, run.stderr
    assert "DOES NOT FIT" in run.stdout
    warning = next(line for line in run.stdout.splitlines() if line.startswith("warning: stage 0"))
    assert "optimizer states" in warning and "would run out of memory" in warning
    data = json.loads(cli("simulate", too_big(tmp_path), "--json").stdout)
    assert data["memory"]["fits"] is False and data["memory"]["stages"][0]["fits"] is False


def test_the_trace_counts_each_gpus_memory_from_its_states_up_through_warm_up_and_back(tmp_path):
    trace = tmp_path / "t.json"
    assert cli("simulate", str(SEED_SCENARIO), "-o", str(trace)).returncode == 0
    memory = json.loads(cli("memory", str(SEED_SCENARIO), "--json").stdout)["stages"]
    counters = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "C"]
    for gpu, stage in ((0, 0), (2, 1)):
        values = [e["args"]["GiB"] for e in counters if e["pid"] == gpu]
        states = sum(v for k, v in memory[stage]["terms_bytes"].items() if k in
                     ("weights", "gradients", "optimizer states")) / 2**30
        assert values[0] == round(states, 4) and abs(values[-1] - states) < 1e-3
        assert abs(max(values) - states - memory[stage]["kept_activations_bytes"] / 2**30) < 1e-3


def test_validate_memory_reports_every_row_compared_or_skipped_with_a_reason():
    data = json.loads(cli("validate", "memory", "--json").stdout)
    assert data["rows"] and all(r["metric"].endswith("_gib") for r in data["rows"])
    assert all(s["reason"] for s in data["skipped"])
    assert data["mape_pct_by_subset"]["Megatron"] <= 5.0
