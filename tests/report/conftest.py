"""A small scenario's report and its `simulate --json`, each made once per session by the real commands."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from helpers import cli, gpt_scenario

SMALL = gpt_scenario(nodes=2, gpus_per_node=4, tp=2, pp=2, gbs=16, seq=1024)
"""Two 4-GPU nodes (tp2 pp2 dp2: the data-parallel reduction crosses the NICs), simulated in well under a second."""


@dataclass(frozen=True)
class Made:
    scenario: Path
    report: Path
    result: dict   # what `simulon simulate SCENARIO --json` printed


@pytest.fixture(scope="session")
def made(tmp_path_factory) -> Made:
    folder = tmp_path_factory.mktemp("report")
    scenario = folder / "small.yaml"
    scenario.write_text(yaml.safe_dump(SMALL.model_dump(mode="json", exclude_none=True)))
    done = cli("simulate", str(scenario), "--json")
    assert done.returncode == 0, done.stderr
    report = folder / "report.html"
    written = cli("report", str(scenario), "-o", str(report))
    assert written.returncode == 0, written.stderr
    assert written.stdout == f"Report written to {report}\n"
    return Made(scenario, report, json.loads(done.stdout))
