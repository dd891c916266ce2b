"""A trace whose step was not replayed as it would run says so in its metadata (`otherData`, Perfetto's trace info),
as the terminal does: collectives folded throughout (dag.fold.Fold.folded_throughout), rings in steady state
(dag.fold.Fold.with_steady_rings), micro-batches sampled (cli.output.trace_metadata)."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import yaml

from helpers import cli
from simulon.cli.output import fold_lines, trace_metadata
from simulon.config.loading import parse_scenario
from simulon.pipeline import plan_dag

SPREAD = {
    "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 8},
                   "network": {"scale_out": {"topology": {"from": "rail-optimized-fat-tree", "nics_per_leaf": 2}}}},
    "workload": {"framework": "megatron", "model": "gpt3-1.3b",
                 "parallelism": {"tp": 4, "cp": 2, "sequence_parallel": True, "distributed_optimizer": True},
                 "training": {"global_batch_size": 8, "micro_batch_size": 1, "sequence_length": 2048}}}
"""dp x cp's gradient reduction spread over four leaves, which the fold expands over every GPU where it fits
(tests/dag/test_fold_throughout.py)."""


def test_a_trace_folded_throughout_says_so_in_its_metadata_as_the_terminal_does(tmp_path):
    planned = plan_dag(parse_scenario(SPREAD, "inline"), "symmetric")
    expanded = planned.size().memory_bytes(trace="collectives")
    throughout = replace(planned, fold=planned.fold.folded_throughout()).size().memory_bytes(trace="collectives")
    scenario, trace = tmp_path / "spread.yaml", tmp_path / "trace.json"
    scenario.write_text(yaml.safe_dump(SPREAD))
    done = cli("simulate", str(scenario), "--expand", "symmetric", "--max-memory",
               f"{(expanded + throughout) / 2e6:.0f}MB", "-o", str(trace))
    assert done.returncode == 0, done.stderr
    assert "Collectives: folded throughout" in done.stdout
    other = json.loads(trace.read_text())["otherData"]
    assert other["collectives_folded_throughout"] is True
    assert other["note"] in done.stdout  # the terminal's own words


def test_a_trace_with_rings_in_steady_state_says_so_beside_its_sampling():
    fold = plan_dag(parse_scenario(SPREAD, "inline"), "symmetric").fold.with_steady_rings()
    assert trace_metadata(SimpleNamespace(sampling=None), fold) == {
        "rings_in_steady_state": True, "note": fold_lines(fold)[0]}
    sampling = SimpleNamespace(simulated=(2, 4), micro_batches=16, to_dict=lambda: {"simulated": [2, 4]})
    both = trace_metadata(SimpleNamespace(sampling=sampling), fold.folded_throughout())
    assert both["micro_batch_sampling"] == {"simulated": [2, 4]} and both["rings_in_steady_state"]
    assert both["collectives_folded_throughout"] and both["note"].startswith("this trace replays 4 of the step's 16")
    assert all(line in both["note"] for line in fold_lines(fold.folded_throughout()))


def test_a_trace_replayed_as_it_runs_carries_no_metadata():
    fold = plan_dag(parse_scenario(SPREAD, "inline"), "symmetric").fold
    assert fold_lines(fold) == [] and trace_metadata(SimpleNamespace(sampling=None), fold) is None
