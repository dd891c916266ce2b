"""The winner written as a scenario (search/export.py): the file simulates to exactly the step time the search
replayed, the scenario's own framework settings included."""

from __future__ import annotations

import yaml

from helpers import gpt_scenario
from simulon.config.loading import parse_scenario
from simulon.pipeline import simulate
from simulon.search.export import scenario_yaml
from simulon.search.run import load_search_scenario, scenario_for
from simulon.search.space import Strategy

FRAMEWORK = {"overlap_grad_reduce": False, "average_in_collective": True,
             "account_for_embedding_in_pipeline_split": True, "account_for_loss_in_pipeline_split": True}
"""How the framework runs, set away from each default."""


def searched(tmp_path):
    """A scenario file with framework settings, loaded as `simulon search` loads it."""
    data = gpt_scenario(nodes=2, gpus_per_node=4, layers=8, gbs=16, seq=1024,
                        extra_parallelism=FRAMEWORK).model_dump(mode="json", exclude_none=True)
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_search_scenario(path)[0]


def test_the_written_winner_keeps_the_scenarios_framework_settings_and_simulates_to_the_replayed_time(tmp_path):
    sc = searched(tmp_path)
    strategy = Strategy(1, 2, 1, 4, 1, 1, 1, 1, False, "none", "distributed_optimizer", "bf16", False)
    written = yaml.safe_load(scenario_yaml(sc, strategy, 8, "best"))
    assert FRAMEWORK.items() <= written["workload"]["parallelism"].items()
    replayed = simulate(scenario_for(sc, strategy, 8)).result.iteration_time_ms
    assert simulate(parse_scenario(written)).result.iteration_time_ms == replayed

