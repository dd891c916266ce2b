"""The winner written as a scenario (search/export.py): the file simulates to exactly the step time the search
replayed, the scenario's own framework settings included."""

from __future__ import annotations

import yaml

from helpers import gpt_scenario
from simulon.config.loading import parse_scenario
from simulon.pipeline import simulate
from simulon.search.export import megatron_arguments, scenario_yaml
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



def loaded(tmp_path, data: dict):
    """A scenario file of `data`, loaded as `simulon search` loads it."""
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_search_scenario(path)[0]


def test_a_sharded_winner_is_written_without_the_bucket_size_its_sharding_does_not_read(tmp_path):
    """Under ZeRO-2 (fsdp shard_grad_op) gradients are reduced per unit and grad_bucket_size is refused as unread:
    the written winner drops it, as the search ran it (search.run.apply), and simulates to the replayed time."""
    data = gpt_scenario(nodes=2, gpus_per_node=4, layers=8, gbs=16, seq=1024).model_dump(mode="json",
                                                                                           exclude_none=True)
    data["workload"]["training"]["grad_bucket_size"] = 40_000_000
    sc = loaded(tmp_path, data)
    strategy = Strategy(1, 1, 1, 8, 1, 1, 1, 1, False, "none", "zero2", "bf16", False)
    written = yaml.safe_load(scenario_yaml(sc, strategy, 8, "best"))
    assert "grad_bucket_size" not in written["workload"]["training"]
    replayed = simulate(scenario_for(sc, strategy, 8)).result.iteration_time_ms
    assert simulate(parse_scenario(written)).result.iteration_time_ms == replayed


def test_deepep_is_searched_and_written_as_the_all_to_all_dispatcher_where_a_strategy_has_no_expert_group(tmp_path):
    """A scenario on DeepEP's dispatcher loads for a search (validated on one GPU, where ep 1 has nothing to
    dispatch); a strategy of ep 1 and etp 1 runs and is written on the all-to-all dispatcher (Megatron-Core asserts
    TPxEP > 1 for DeepEP's), one of ep 2 on DeepEP's, each written file simulating to the replayed time."""
    data = gpt_scenario(nodes=2, gpus_per_node=4, layers=4, gbs=16, seq=1024, ep=2,
                        moe={"num_experts": 8, "top_k": 2}).model_dump(mode="json", exclude_none=True)
    data["workload"]["training"]["moe_dispatcher"] = "deepep"
    sc = loaded(tmp_path, data)
    for ep, dispatcher, flag in ((1, "alltoall", "--moe-token-dispatcher-type alltoall"),
                                 (2, "deepep", "--moe-flex-dispatcher-backend deepep")):
        strategy = Strategy(1, 1, 1, 8, 1, ep, 1, 1, False, "none", "distributed_optimizer", "bf16", False)
        written = yaml.safe_load(scenario_yaml(sc, strategy, 8, "best"))
        assert written["workload"]["training"]["moe_dispatcher"] == dispatcher
        assert flag in megatron_arguments(strategy, sc)
        replayed = simulate(scenario_for(sc, strategy, 8)).result.iteration_time_ms
        assert simulate(parse_scenario(written)).result.iteration_time_ms == replayed
