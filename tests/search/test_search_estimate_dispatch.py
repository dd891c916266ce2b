"""The search's estimate times the MoE token dispatch by the scenario's dispatcher (search/estimate.py,
workload.megatron.dispatch_algorithm), as the replay sends it: DeepEP's sends a token once to each node holding
any of its experts, Megatron's all-to-all once per chosen expert."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.config.scenario import ScenarioConfig
from simulon.pipeline import simulate
from simulon.search.estimate import Estimator
from simulon.search.space import Strategy


def estimated_and_replayed_ms(dispatcher: str) -> tuple[float, float]:
    """64 experts, top-8, over ep 16 on two nodes of 8 H100 (200 Gb/s NICs): most of a token's copies cross the
    network under the all-to-all dispatcher, one per node under DeepEP's."""
    data = gpt_scenario(nodes=2, gpus_per_node=8, ep=16, layers=2, hidden=1024, seq=2048, gbs=16, nic="200Gbps",
                        moe={"num_experts": 64, "top_k": 8}).model_dump(mode="json", exclude_none=True)
    data["workload"]["training"]["moe_dispatcher"] = dispatcher
    sc = ScenarioConfig.model_validate(data)
    estimate = Estimator.on(sc.workload, sc.datacenter, sc.collective, 16).estimate(Strategy.of(sc), sc.workload)
    return 1e3 * estimate.iteration_s, simulate(sc).result.iteration_time_ms


def test_the_estimate_saves_what_the_replay_saves_by_dispatching_through_deepep():
    """Before, the estimate timed DeepEP's dispatch as the all-to-all's (16.32 ms both, replayed 18.02 and 14.12):
    a search on a deepep scenario priced every expert-parallel strategy as if it sent each copy."""
    (est_a2a, replay_a2a), (est_deepep, replay_deepep) = map(estimated_and_replayed_ms, ("alltoall", "deepep"))
    assert replay_deepep < replay_a2a
    assert est_a2a - est_deepep == pytest.approx(replay_a2a - replay_deepep, rel=0.05)
