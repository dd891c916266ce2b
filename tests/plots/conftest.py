"""Real results of small scenarios, made once per session by the commands that write them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import cli, gpt_scenario

SMALL = gpt_scenario(nodes=1, gpus_per_node=8, tp=2, pp=2, gbs=16, seq=1024)
"""A 1-node, 8-GPU scenario (tp2 pp2 dp2) that simulates in well under a second."""


def run_json(*args: str) -> object:
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="session")
def results(tmp_path_factory) -> dict[str, Path]:
    """kind -> a result file it reads, each written by the real command."""
    folder = tmp_path_factory.mktemp("results")
    scenario = folder / "small.yaml"
    scenario.write_text(yaml.safe_dump(SMALL.model_dump(mode="json", exclude_none=True)))
    files = {"simulate": folder / "simulate.json", "collective": folder / "collective.json",
             "validate": folder / "validate.json", "sweep": folder / "sweep.csv"}
    files["simulate"].write_text(json.dumps(run_json("simulate", str(scenario), "--json")))
    files["collective"].write_text(json.dumps(run_json("collective", str(scenario), "--sizes", "1MiB,8MiB,64MiB",
                                                       "--json")))
    files["validate"].write_text(json.dumps(run_json("validate", "memory", "--json")))
    done = cli("sweep", str(scenario), "--set", "cluster.num_nodes=1,2", "-o", str(files["sweep"]), "--jobs", "1")
    assert done.returncode == 0, done.stderr
    return files
