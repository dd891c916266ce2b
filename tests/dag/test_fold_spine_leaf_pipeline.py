"""Folding a pipelined step on a two-tier fabric that is not rail-optimized: where the fabric hashes (ECMP) or pins
(static) the flows, a folded pipeline send moved at its slowest data-parallel counterpart's pace, send after send,
where each replica waits only for its own (a sum of maxima against the maximum of sums): tp 8, pp 4 on 16 DGX H100
nodes under the generic spine-leaf ran 5.1% slow folded under ECMP, 12.2% oversubscribed 2:1 and static. Only
tensor parallelism folds there (Topology.fold_axes); adaptive routing spreads every flow evenly and folds data
parallelism too, exactly."""

from __future__ import annotations

import pytest

from simulon.config.scenario import ScenarioConfig
from simulon.pipeline import plan_dag, simulate


def scenario(topology: dict) -> ScenarioConfig:
    return ScenarioConfig.model_validate({
        "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 16},
                       "network": {"scale_out": {"topology": {"from": "spine-leaf", **topology}}}},
        "workload": {"framework": "megatron",
                     "model": {"name": "tiny", "hidden_size": 2048, "num_layers": 4, "num_heads": 16,
                               "ffn_hidden_size": 5632, "vocab_size": 32000, "activation": "swiglu",
                               "normalization": "rmsnorm"},
                     "parallelism": {"tp": 8, "pp": 4},
                     "training": {"num_gpus": 128, "global_batch_size": 8, "sequence_length": 2048}}})


@pytest.mark.parametrize(("topology", "bound"), [({}, 0.005), ({"oversubscription": 2.0, "routing": "static"}, 0.01),
                                                 ({"routing": "adaptive"}, 2e-4)])
def test_a_folded_pipelined_step_on_a_spine_leaf_takes_the_full_expansions_time(topology, bound):
    sc = scenario(topology)
    full = simulate(sc, fold_mode="full").result.iteration_time_ms
    folded = simulate(sc, fold_mode="symmetric").result.iteration_time_ms
    assert folded == pytest.approx(full, rel=bound)


def test_only_adaptive_routing_folds_the_data_parallel_replicas_of_a_pipelined_step():
    def replicas(topology: dict) -> int:
        fold = plan_dag(scenario(topology), "symmetric").fold
        return len(set(fold.rep.tolist()))
    assert replicas({"routing": "adaptive"}) == 4       # one GPU a stage: 8 tensor and 4 data-parallel peers folded
    assert replicas({}) == replicas({"routing": "static"}) == 16  # the 4 replicas of each stage apart
