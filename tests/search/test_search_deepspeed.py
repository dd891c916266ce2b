"""A search of a scenario on DeepSpeed's pipeline engine tries only what DeepSpeed runs: its PipelineEngine's plain
1F1B, one model chunk per rank and no zero-bubble split (config.workload refuses the rest)."""

from __future__ import annotations

import re

import pytest
import yaml

from helpers import gpt_scenario
from simulon.config.loading import parse_scenario
from simulon.config.scenario import ScenarioConfig
from simulon.pipeline import simulate
from simulon.search.export import deepspeed_arguments, launch_lines, scenario_yaml
from simulon.search.run import Search
from simulon.search.space import Limits, Space, Strategy


def deepspeed_scenario() -> ScenarioConfig:
    data = gpt_scenario(nodes=1, gpus_per_node=8, pp=2, layers=8, gbs=32, seq=1024).model_dump(mode="json",
                                                                                              exclude_none=True)
    data["workload"]["framework"] = "deepspeed"
    return ScenarioConfig.model_validate(data)


def test_deepspeeds_space_holds_one_model_chunk_per_rank_and_no_zero_bubble_split_even_when_asked():
    workload = deepspeed_scenario().workload
    space = Space(workload, 8, 8, False, Limits({"zero_bubble": (False, True)}))
    strategies = list(space.strategies())
    assert strategies and {(s.vpp, s.zero_bubble) for s in strategies} == {(1, False)}
    assert space.tried()["vpp"] == (1,)


def test_a_deepspeed_search_ranks_and_writes_only_strategies_deepspeed_runs():
    """Before, tp1 pp2 vpp8 strategies were estimated, refused at their replay ('deepspeed's PipelineEngine runs
    plain 1F1B') and ranked first on their estimates, and --write-best wrote a file simulate refused."""
    sc = deepspeed_scenario()
    result = Search(sc, 8, Limits({"pp": (2,)}), fp8=False).run(top=3, replay=2, workers=1)
    assert result.ranked and all(r.strategy.vpp == 1 for r in result.ranked)
    written = yaml.safe_load(scenario_yaml(sc, result.ranked[0].strategy, 8, "best"))
    assert simulate(parse_scenario(written)).result.iteration_time_ms > 0


def test_a_strategy_whose_scenario_is_refused_at_its_replay_is_listed_as_refused_and_not_ranked(monkeypatch):
    """A rule the space does not know (as DeepSpeed's was) refuses a strategy only when its scenario is built for the
    replay: it is listed with why, and no longer ranked on its estimate, where it could come first and be written as
    the winner."""
    from simulon.config.errors import ConfigError
    from simulon.search import run

    sc = deepspeed_scenario()
    search = Search(sc, 8, Limits({"pp": (2,)}), fp8=False)
    first = search.estimated().candidates[0][1]
    built = run.scenario_for

    def refusing(base, strategy, num_gpus):
        if strategy == first:
            raise ConfigError("a rule the space does not know")
        return built(base, strategy, num_gpus)

    monkeypatch.setattr(run, "scenario_for", refusing)
    result = Search(sc, 8, Limits({"pp": (2,)}), fp8=False).run(top=3, replay=2, workers=1)
    assert [why for strategy, why in result.refused if strategy == first] == [
        f"{run.INVALID}: a rule the space does not know"]
    assert first not in [r.strategy for r in result.ranked] and result.ranked


def test_deepspeeds_pipelines_are_searched_with_zero1_at_most_and_no_tensor_parallel_overlap():
    """DeepSpeed's PipelineEngine asserts a ZeRO stage below 2 and Megatron-DeepSpeed has no --tp-comm-overlap:
    before, a pp 2 search tried ZeRO-2, FSDP and the overlap, which config.workload now refuses."""
    space = Space(deepspeed_scenario().workload, 8, 8, False, Limits({"pp": (2,)}))
    strategies = list(space.strategies())
    assert strategies and {s.sharding for s in strategies} == {"distributed_optimizer"}  # DDP: a dominance rule
    assert not any(s.tp_comm_overlap for s in strategies)
    one_stage = {s.sharding for s in Space(deepspeed_scenario().workload, 8, 8, False, Limits({"pp": (1,)}))
                 .strategies()}
    assert one_stage == {"distributed_optimizer", "zero2", "fsdp"}


def test_a_deepspeed_winner_is_given_as_megatron_deepspeed_flags_and_its_deepspeed_config():
    """Before, the winner of a DeepSpeed search was printed as Megatron-LM's flags (--use-distributed-optimizer,
    Megatron-Core's dispatcher), which a DeepSpeed run does not read."""
    sc = deepspeed_scenario()
    result = Search(sc, 8, Limits({"pp": (2,)}), fp8=False).run(top=1, replay=1, workers=1)
    best = result.ranked[0].strategy
    flags, config = launch_lines(best, sc)
    assert flags.startswith("Megatron-DeepSpeed: ") and "--use-distributed-optimizer" not in flags
    stage = {"distributed_optimizer": 1}[best.sharding]
    assert "--pipeline-model-parallel-size 2" in flags and f"--zero-stage {stage}" in flags
    assert yaml.safe_load(config.split(": ", 1)[1]) == {
        "train_batch_size": 32, "train_micro_batch_size_per_gpu": best.micro_batch_size,
        "zero_optimization": {"stage": stage}, "bf16": {"enabled": True}}
    assert launch_lines(best, gpt_scenario(nodes=1, gpus_per_node=8, pp=2, layers=8, gbs=32, seq=1024))[0] \
        .startswith("Megatron-LM: ")


FLAG = re.compile(r"--[a-z][a-z0-9_-]*( [^\s()]+)*")
"""A command-line flag and its values, as a shell takes them: no parenthesised note."""


@pytest.mark.parametrize(("comm", "dtype", "notes"), [
    ("p2p", "bf16", ["Not in these flags: context parallelism by p2p: Megatron-DeepSpeed has "
                     "--ds-sequence-parallel-size, DeepSpeed-Ulysses' all-to-all, alone"]),
    ("a2a", "mxfp8", ["Not in these flags: no flag for mxfp8: Megatron-DeepSpeed trains in fp8 at the narrowest"]),
    ("a2a", "bf16", [])])
def test_deepspeeds_flags_are_flags_and_what_they_cannot_say_is_a_line_of_its_own(comm, dtype, notes):
    data = deepspeed_scenario().model_dump(mode="json", exclude_none=True)
    data["workload"]["parallelism"].update(cp=2, context_parallel_comm=comm)
    data["workload"]["training"]["dtype"] = dtype
    data["datacenter"]["node"]["gpu"] = "B200"  # which trains in mxfp8
    sc = ScenarioConfig.model_validate(data)
    args = deepspeed_arguments(Strategy.of(sc), sc)
    assert all(FLAG.fullmatch(arg) for arg in args), args
    assert ("--ds-sequence-parallel-size 2" in args) == (comm == "a2a")
    lines = launch_lines(Strategy.of(sc), sc)
    assert lines[0] == "Megatron-DeepSpeed: " + " ".join(args) and lines[2:] == notes
