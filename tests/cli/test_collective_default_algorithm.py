"""`simulon collective` runs a scenario's collectives as `simulon simulate` does: without --algorithm, with the
scenario's collective.algorithm, and where the scenario names none with CollectiveConfig's default (ring, as seed
000's example pins it), not NCCL's choice; its --help says so and its table's title names what ran."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from simulon.cli.app import app
from simulon.config.scenario import CollectiveConfig


def run(*args: str, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", "400")
    result = CliRunner().invoke(app, list(args), prog_name="simulon")
    assert result.exit_code == 0, result.output
    return result.output


def test_collective_help_names_the_algorithm_and_protocol_run_where_the_scenario_names_none(monkeypatch):
    text = " ".join(run("collective", "--help", monkeypatch=monkeypatch).split())
    default = CollectiveConfig()
    assert f"collective.algorithm, {default.algorithm} where it names none" in text
    assert f"collective.protocol, {default.protocol} where it names none" in text


def test_collective_without_algorithm_runs_the_scenarios_default_and_says_so(tmp_path, monkeypatch):
    path = tmp_path / "dc.yaml"
    path.write_text("datacenter: {from: dgx-h100, cluster: {num_nodes: 2}}\n")
    rows = json.loads(run("collective", str(path), "--sizes", "1MiB", "--json", monkeypatch=monkeypatch))
    assert [r["algorithm"] for r in rows] == [CollectiveConfig().algorithm]
    assert f"algorithm {CollectiveConfig().algorithm}" in run("collective", str(path), "--sizes", "1MiB",
                                                               monkeypatch=monkeypatch)
