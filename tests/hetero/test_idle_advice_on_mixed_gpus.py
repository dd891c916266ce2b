"""On GPUs of several models the idle-time finding offers a way to size each GPU's work to its speed that the
scenario can take: simulon plan-hetero only where the planner plans its pipeline (pp > 1, one stage per rank), as
it refuses vpp > 1 and the schedules running two stages a rank (zb_v, dualpipe, dualpipev) and pp 1, which the
advice offered it for; layers_per_stage and stage_groups by hand for those pipelines, and dp_shares without one."""

from __future__ import annotations

import pytest

from simulon.analysis.findings import Settings, advice
from simulon.config.loading import parse_scenario
from simulon.search.hetero import Planner

PLAN_HETERO = "(simulon plan-hetero)"


def _scenario(model: str = "llama-3-8b", **parallelism):
    groups = [{"from": "dgx-h100", "num_nodes": 2}, {"from": "dgx-a100", "num_nodes": 2}]
    data = {"datacenter": {"datacenter": {"name": "mixed"}, "node_groups": groups},
            "workload": {"framework": "megatron", "model": model,
                         "parallelism": {"tp": 8, "sequence_parallel": True, **parallelism},
                         "training": {"global_batch_size": 16, "micro_batch_size": 1, "sequence_length": 4096}}}
    return parse_scenario(data, "mixed.yaml")


@pytest.mark.parametrize("parallelism", [{"pp": 2, "vpp": 2}, {"pp": 2, "vpp": 2, "pipeline_schedule": "zb_v"},
                                         {"pp": 2, "vpp": 2, "pipeline_schedule": "dualpipev"},
                                         {"pp": 2, "pipeline_schedule": "dualpipe"}],
                         ids=["interleaved", "zb_v", "dualpipev", "dualpipe"])
def test_pipelines_plan_hetero_refuses_are_told_to_size_their_layers_by_hand(parallelism):
    sc = _scenario(**parallelism)
    with pytest.raises(ValueError):
        Planner(sc)
    told = advice("bubble", Settings.of(sc))
    assert PLAN_HETERO not in told
    assert "layers sized to each GPU's speed (layers_per_stage and stage_groups; simulon plan-hetero plans the " \
           "pipeline at vpp 1 on 1f1b or zb_h1)" in told


@pytest.mark.parametrize("parallelism", [{"pp": 4}, {"pp": 4, "pipeline_schedule": "zb_h1"}], ids=["1f1b", "zb_h1"])
def test_pipelines_plan_hetero_plans_are_pointed_to_it(parallelism):
    sc = _scenario(**parallelism)
    Planner(sc)
    assert f"layers and batch sized to each GPU's speed {PLAN_HETERO}" in advice("bubble", Settings.of(sc))


def test_replicas_without_a_pipeline_are_pointed_to_dp_shares_not_plan_hetero():
    sc = _scenario(pp=1)
    with pytest.raises(ValueError):
        Planner(sc)
    told = advice("bubble", Settings.of(sc))
    assert PLAN_HETERO not in told and "(training.dp_shares)" in told


def test_replicas_joined_by_expert_all_to_alls_are_offered_no_shares():
    sc = _scenario("mixtral-8x7b", pp=1, ep=4)
    told = advice("bubble", Settings.of(sc))
    assert PLAN_HETERO not in told and "dp_shares" not in told


def test_replicas_that_already_run_their_own_shares_are_told_to_try_other_shares_not_to_set_them():
    """tp 8 x dp 4 on two DGX H100 and two DGX A100 nodes with dp_shares [6, 6, 2, 2] was told to try 'micro-batches
    sized to each replica's GPU speed (training.dp_shares)', what it already does."""
    data = _scenario(pp=1).as_data()
    data["workload"]["training"]["dp_shares"] = [6, 6, 2, 2]
    told = advice("bubble", Settings.of(parse_scenario(data, "mixed.yaml")))
    assert "sized to each replica's GPU speed" not in told
    assert "other micro-batch shares for the replicas (training.dp_shares, now [6, 6, 2, 2])" in told
