"""The heterogeneous planner (search/hetero.py, `simulon plan-hetero`) refuses what it does not model, with one
line naming the file and the setting: schedules running two stages on a rank (dualpipe, dualpipev, zb_v), clusters
whose stages' GPUs cannot lie in one node group (after simulating the scenario as written), and --dp-shares with
expert parallelism or FSDP. And a scenario error's field path names no union branch (config.errors.field_loc)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from helpers import cli
from simulon.config import ScenarioConfig
from simulon.config.errors import field_loc
from simulon.pipeline import simulate as simulate_scenario
from simulon.search.hetero import Planner, unit_costs

FABRIC = {"scale_out": {"nic": {"speed": "200Gbps", "latency": "2us"},
                        "topology": {"tiers": 2, "rail_optimized": True, "nics_per_leaf": 8, "spines": 4}},
          "scale_up": {"switch": {"port_speed": "300GBps", "latency": "0.5us"}}}
NODE = {"gpus_per_node": 4, "gpus_per_nic": 1}


def scenario(nodes: tuple[int, int] = (2, 2), pp: int = 4, dp: int = 1, gbs: int = 16, layers: int = 8,
             model: dict | None = None, **parallelism) -> dict:
    """tp 4 (one node) x pp x dp of a small GPT on `nodes` H100 nodes then `nodes` A100 nodes."""
    return {"datacenter": {"node_groups": [{"num_nodes": n, "node": {**NODE, "gpu": gpu}}
                                           for n, gpu in zip(nodes, ("H100", "A100"), strict=True)],
                           "network": FABRIC},
            "workload": {"model": {"name": "test-gpt", "num_layers": layers, "hidden_size": 1024, "num_heads": 16,
                                   "ffn_hidden_size": 4096, "vocab_size": 32768, **(model or {})},
                         "parallelism": {"tp": 4, "pp": pp, "dp": dp, **parallelism},
                         "training": {"global_batch_size": gbs, "micro_batch_size": 1, "sequence_length": 1024}}}


def refused_by_cli(tmp_path: Path, data: dict, *options: str) -> str:
    """plan-hetero's one-line refusal (exit 2, nothing printed, no traceback) of a scenario file."""
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    run = cli("plan-hetero", str(path), *options)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stdout == "" and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert run.stderr.startswith(f"error: {path}: ")
    return run.stderr


def no_simulation(_sc):
    raise AssertionError("refused before simulating anything")


# --- schedules placing two stages on a rank -------------------------------------------------------------------------

@pytest.mark.parametrize(("parallelism", "runs"), [
    ({"pipeline_schedule": "dualpipe"}, "stage i and its mirror, stage pp-1-i"),
    ({"pipeline_schedule": "dualpipev", "vpp": 2}, "stages i and 2pp-1-i, as a V"),
    ({"pipeline_schedule": "zb_v", "vpp": 2}, "stages i and 2pp-1-i, as a V"),
])
def test_a_schedule_running_two_stages_on_a_rank_is_refused_naming_pipeline_schedule(parallelism, runs):
    """dualpipe was planned as 1F1B: its estimate was 40% under its simulation, and a trivial placement beat the
    plan."""
    sc = ScenarioConfig.model_validate(scenario(**parallelism))
    with pytest.raises(ValueError) as refused:
        Planner(sc)
    name = parallelism["pipeline_schedule"]
    assert str(refused.value) == (
        f"workload.parallelism.pipeline_schedule: {name} runs two model stages on each rank ({runs}), which the "
        "heterogeneous planner does not model: it places and splits one stage per rank, so it plans 1f1b and zb_h1 "
        "pipelines only")


@pytest.mark.parametrize("name", ["1f1b", "zb_h1"])
def test_one_stage_per_rank_schedules_are_planned(name):
    planner = Planner(ScenarioConfig.model_validate(scenario(pipeline_schedule=name)))
    plan = planner.plan_of((0, 0, 1, 1))
    assert sum(plan.layers_per_stage) == 8 and plan.layers_per_stage[0] > plan.layers_per_stage[-1]


def test_plan_hetero_refuses_dualpipe_in_one_line_naming_the_file_and_the_field(tmp_path):
    line = refused_by_cli(tmp_path, scenario(pipeline_schedule="dualpipe"))
    assert "workload.parallelism.pipeline_schedule: dualpipe runs two model stages on each rank" in line


# --- stages whose GPUs span node groups -----------------------------------------------------------------------------

STRADDLE = scenario(nodes=(3, 1), pp=2, dp=2, gbs=8, layers=4)
"""16 GPUs, tp 4 x pp 2 x dp 2: a stage is 8 GPUs (two nodes); three H100 nodes hold one stage, one A100 node none,
so the second stage's replicas run one on H100, one on A100 (the simulator runs it)."""


def test_stages_spanning_node_groups_are_refused_as_the_planners_limit_after_simulating_the_scenario():
    """It said "a stage's GPUs must lie in one group", as if the scenario were wrong, though simulate runs it."""
    sc = ScenarioConfig.model_validate(STRADDLE)
    simulated = []
    with pytest.raises(ValueError) as refused:
        Planner(sc).run(simulate=lambda s: simulated.append(s) or simulate_scenario(s))
    assert simulated == [sc]
    step = simulate_scenario(sc).result.iteration_time_ms
    message = str(refused.value)
    assert message.startswith("workload.parallelism.pp: the heterogeneous planner places each pipeline stage's 8 "
                              "GPUs (tp 4 x dp 2) within one node group, and these groups hold 1 of the 2 stages "
                              "whole (")
    assert f"so it cannot plan this cluster, where a stage's GPUs span groups; the simulator runs it as written " \
           f"({step:,.1f} ms per step simulated;" in message
    assert message.endswith("To plan, give each node group a multiple of 2 nodes or use fewer GPUs per stage "
                            "(a smaller tp or dp)")


@pytest.mark.parametrize("options", [(), ("--dp-shares",)])
def test_plan_hetero_refuses_stages_spanning_groups_in_one_line_with_or_without_dp_shares(tmp_path, options):
    line = refused_by_cli(tmp_path, STRADDLE, *options)
    assert "the heterogeneous planner places each pipeline stage's 8 GPUs" in line and "ms per step simulated" in line


def test_plan_hetero_refuses_stages_of_part_of_a_node_naming_the_setting(tmp_path):
    """It said "a stage holds 2 GPUs, not whole nodes of 4: ..." naming no setting, nor what makes the 2."""
    line = refused_by_cli(tmp_path, scenario(nodes=(1, 1), pp=4, tp=2))
    assert line.endswith(": workload.parallelism: a pipeline stage holds 2 GPUs (tp 2), not whole nodes of 4: the "
                         "heterogeneous planner places stages on node groups only when each fills whole nodes (a "
                         "smaller pp gives each stage more GPUs)\n")


# --- --dp-shares where the sharding cannot take shares -------------------------------------------------------------

@pytest.mark.parametrize(("parallelism", "model", "setting", "what"), [
    ({"ep": 2}, {"moe": {"num_experts": 4, "top_k": 2}}, "ep: 2", "expert parallelism"),
    ({"fsdp": "full_shard"}, {}, "fsdp: full_shard", "FSDP"),
])
def test_dp_shares_with_expert_parallelism_or_fsdp_is_refused_naming_the_setting(parallelism, model, setting, what):
    """--dp-shares with ep 4 was silently ignored: the output was the same as without it."""
    sc = ScenarioConfig.model_validate(scenario(pp=2, dp=2, gbs=8, model=model, **parallelism))
    planner = Planner(sc)
    with pytest.raises(ValueError) as refused:
        planner.run(simulate=no_simulation, shares=True)
    assert str(refused.value) == (
        f"workload.parallelism.{setting}: --dp-shares gives the data-parallel replicas uneven micro-batch counts "
        f"(training.dp_shares), which {what} does not allow (its collectives join the replicas every micro-batch); "
        "leave out --dp-shares")


def test_plan_hetero_refuses_dp_shares_with_expert_parallelism_in_one_line(tmp_path):
    data = scenario(pp=2, dp=2, gbs=8, model={"moe": {"num_experts": 4, "top_k": 2}}, ep=2)
    assert "workload.parallelism.ep: 2: --dp-shares" in refused_by_cli(tmp_path, data, "--dp-shares")


# --- union branches in a field's path -------------------------------------------------------------------------------

def test_a_union_fields_error_locations_lose_the_branch_type_names_and_keep_the_index():
    """stage_groups: [a, 0] said `workload.training.stage_groups[0].int: expected a whole number`."""
    data = scenario(pp=2)
    data["workload"]["training"]["stage_groups"] = ["a", 0]
    with pytest.raises(ValidationError) as bad:
        ScenarioConfig.model_validate(data)
    locs = {field_loc(tuple(error["loc"])) for error in bad.value.errors()}
    assert locs == {("workload", "training", "stage_groups", 0)}


class _Gpu(BaseModel):
    memory_gb: int


class _Nic(BaseModel):
    speed_gbps: int


class _Holder(BaseModel):
    part: _Gpu | _Nic | dict[str, int] | list[int]


def test_a_model_branchs_class_name_and_a_mapping_branchs_type_are_dropped_but_fields_and_keys_stay():
    with pytest.raises(ValidationError) as bad:
        _Holder.model_validate({"part": {"gpu0": "x"}})
    assert {tuple(error["loc"])[1] for error in bad.value.errors()} == {"_Gpu", "_Nic", "dict[str,int]", "list[int]"}
    locs = {field_loc(tuple(error["loc"])) for error in bad.value.errors()}
    assert locs == {("part", "memory_gb"), ("part", "speed_gbps"), ("part", "gpu0"), ("part",)}


@pytest.mark.parametrize("loc", [
    ("workload", "parallelism", "tp"), ("datacenter", "node_groups", 1, "num_nodes"),
    ("workload", "model", "moe", "layer_freq", 3),
])
def test_locations_without_union_branches_are_unchanged(loc):
    assert field_loc(loc) == loc


@pytest.mark.parametrize("tag", ["int", "str", "float", "bool", "list[int]", "dict[str,int]", "literal['a','b']",
                                 "function-after[check(), int]", "constrained-int", "enum[DType]",
                                 "tuple[literal[0,1], ...]", "ScenarioConfig"])
def test_each_kind_of_branch_tag_pydantic_writes_is_dropped(tag):
    assert field_loc(("workload", "model", "moe", "layer_freq", tag, 0)) == ("workload", "model", "moe",
                                                                             "layer_freq", 0)


# --- the last stage's time holds its multi-token-prediction layers ---------------------------------------------------

def test_the_last_stages_estimated_time_holds_its_multi_token_prediction_layers():
    """The split counted the MTP layer on the last stage, the reported stage time did not (GLM-4.5-Air's slowest
    stage 250 ms for about 272)."""
    sc = ScenarioConfig.model_validate(scenario(model={"mtp_layers": 1}))
    planner = Planner(sc)
    plan = planner.plan_of((0, 0, 1, 1))
    last = unit_costs(sc)[1]
    n = plan.layers_per_stage[-1]
    decoder = sum(last.layers[kind] for kind in planner.kinds[-n:])
    mtp = sum(last.layers[kind] for kind in planner.mtp_kinds)
    assert len(planner.mtp_kinds) == 1 and mtp > 0
    assert plan.stage_ms[-1] == pytest.approx(1e3 * (decoder + last.head + mtp), rel=1e-12)


# --- a split the scenario names -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("split", "as_written"), [
    ({"pipeline_layout": "Et*3|t*3|t|tL"}, (3, 3, 1, 1)),
    ({"first_stage_layers": 2}, (2, 2, 2, 2)),
    ({"last_stage_layers": 5}, (1, 1, 1, 5)),
    ({"first_stage_layers": 4, "last_stage_layers": 2}, (4, 1, 1, 2)),
])
def test_a_plan_replaces_the_split_the_scenario_names_with_its_own(split, as_written):
    """A scenario splitting its layers with pipeline_layout or first/last_stage_layers simulates, but each plan was
    refused when written back ("layers_per_stage splits the layers ..., and pipeline_layout does too: give one"):
    the planner added its split over the scenario's. The scenario as written keeps its own split."""
    sc = ScenarioConfig.model_validate(scenario(**split))
    planner = Planner(sc)
    assert planner.baseline().layers_per_stage == as_written
    plan = planner.plan_of((0, 0, 1, 1))
    planned = planner.scenario(plan).workload.parallelism
    assert planned.layers_per_stage == list(plan.layers_per_stage)
    assert (planned.pipeline_layout, planned.first_stage_layers, planned.last_stage_layers) == (None, None, None)
    assert simulate_scenario(planner.scenario(plan)).result.iteration_time_ms > 0


def test_plan_hetero_plans_a_scenario_split_by_its_pipeline_layout(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(scenario(pipeline_layout="Et*3|t*3|t|tL")))
    run = cli("plan-hetero", str(path), "--simulate", "1")
    assert run.returncode == 0, run.stderr
    assert "best: stage_groups" in run.stdout
