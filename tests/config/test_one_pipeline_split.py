"""A parallelism block names one way of splitting the layers over the pipeline (a layout, per-stage counts, first
and last stage counts, or the embedding/loss accounting), and a setting that needs another one names it: two
splits were taken in order of precedence and the other silently dropped, and overlap_param_gather without a
distributed optimizer changed nothing."""

from __future__ import annotations

import itertools
import json

import pytest
import yaml

from helpers import cli, gpt_scenario
from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario

SPLITS = {"pipeline_layout": "Et*2|tt|tt|ttL", "layers_per_stage": [2, 2, 2, 2], "first_stage_layers": 1,
          "last_stage_layers": 1, "account_for_embedding_in_pipeline_split": True,
          "account_for_loss_in_pipeline_split": True}
"""Each split alone is one this 8-layer model on pp 4 runs (the accounting flags each leave 9 units: apart,
neither divides over 4 stages, so each is paired below only with another way)."""
WAY = {"pipeline_layout": 0, "layers_per_stage": 1, "first_stage_layers": 2, "last_stage_layers": 2,
       "account_for_embedding_in_pipeline_split": 3, "account_for_loss_in_pipeline_split": 3}


def scenario(**parallelism):
    data = gpt_scenario(gpus_per_node=4, pp=4, layers=8).as_data()
    data["workload"]["parallelism"].update(parallelism)
    return parse_scenario(data, "s.yaml")


@pytest.mark.parametrize("first,second", [pair for pair in itertools.combinations(SPLITS, 2)
                                          if WAY[pair[0]] != WAY[pair[1]]])
def test_two_ways_of_splitting_the_layers_are_refused_naming_both(first, second):
    with pytest.raises(ConfigError) as exc:
        scenario(**{first: SPLITS[first], second: SPLITS[second]})
    message = str(exc.value)
    assert f"workload.parallelism.{second}" in message and f"parallelism.{first}" in message


def test_first_and_last_stage_counts_together_are_one_split():
    assert scenario(first_stage_layers=1, last_stage_layers=1).workload.parallelism.first_stage_layers == 1


def test_both_accounting_flags_together_are_one_split():
    data = gpt_scenario(gpus_per_node=4, pp=4, layers=10).as_data()
    data["workload"]["parallelism"].update(account_for_embedding_in_pipeline_split=True,
                                           account_for_loss_in_pipeline_split=True)
    assert parse_scenario(data, "s.yaml").workload.parallelism.account_for_loss_in_pipeline_split


def test_overlap_param_gather_without_a_distributed_optimizer_is_refused():
    with pytest.raises(ConfigError, match=r"overlap_param_gather.*distributed_optimizer"):
        scenario(overlap_param_gather=True, distributed_optimizer=False)
    assert scenario(overlap_param_gather=True, distributed_optimizer=True).workload.parallelism.overlap_param_gather


def test_the_cli_refuses_two_splits_with_one_line_and_exit_status_2(tmp_path):
    data = gpt_scenario(gpus_per_node=4, pp=4, layers=8).as_data()
    data["workload"]["parallelism"].update(layers_per_stage=[2, 2, 2, 2], first_stage_layers=1)
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(json.loads(json.dumps(data, default=str))))
    run = cli("simulate", str(path))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().count("\n") == 0 and "two.yaml: workload.parallelism.first_stage_layers" in run.stderr
