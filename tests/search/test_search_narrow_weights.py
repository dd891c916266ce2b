"""A scenario that keeps its GEMM weights narrow (fp8_params, which Megatron gathers only with a sharded optimizer) is
searched as it simulates: the search sets the scenario's sharding aside to choose its own, so validating the rest
without it refused the file for asking fp8_params without the distributed optimizer it sets, from the CLI (exit 2)
and in every worker of a pool."""

from __future__ import annotations

import json

import yaml

from helpers import gpt_scenario
from simulon.search.run import Search, load_search_scenario, part_search


def narrow_weights(tmp_path):
    data = gpt_scenario(gpus_per_node=8, layers=4, gbs=32).as_data()
    data["workload"]["training"].update(dtype="fp8", fp8_params=True)
    data["workload"]["parallelism"]["distributed_optimizer"] = True
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(json.loads(json.dumps(data, default=str))))
    return path


def test_a_scenario_keeping_fp8_weights_loads_for_a_search_and_in_each_worker(tmp_path):
    sc, asked = load_search_scenario(narrow_weights(tmp_path))
    assert sc.workload.training.fp8_params and asked is None
    search = Search(sc, 8, fp8=False)
    spec = json.dumps([search.sc.model_dump(mode="json", exclude_none=True), 8, None, False], sort_keys=True)
    assert part_search(spec).workload.training.fp8_params


def test_every_strategy_searched_with_fp8_weights_shards_its_optimizer(tmp_path):
    sc, _ = load_search_scenario(narrow_weights(tmp_path))
    strategies = list(Search(sc, 8, fp8=False).space.strategies())
    assert strategies and {s.sharding for s in strategies} <= {"distributed_optimizer", "zero2", "fsdp"}
