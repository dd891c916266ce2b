"""DualPipe's mirrored stages under a fold: the mirror group's flows find their folded counterparts."""

from __future__ import annotations

import pytest

from simulon.config.loading import parse_scenario
from simulon.pipeline import simulate


def _dualpipe_with_experts_across_nodes():
    """DeepSeek-V3's shape cut down: tp1 pp4 ep32 on 16 HGX H800 nodes, DualPipe (rank i also holds stage
    pp - 1 - i, its gradients summed over the `mirror` group)."""
    return parse_scenario({
        "datacenter": {"from": "hgx-h800", "cluster": {"num_nodes": 16}},
        "workload": {"framework": "megatron",
                     "model": {"from": "deepseek-v3", "num_layers": 8,
                               "moe": {"num_experts": 32, "top_k": 2, "num_groups": 1, "group_topk": 1}},
                     "parallelism": {"tp": 1, "pp": 4, "ep": 32, "pipeline_schedule": "dualpipe"},
                     "training": {"global_batch_size": 256, "micro_batch_size": 1, "sequence_length": 1024}}},
        "inline")


def test_a_folded_dualpipe_step_takes_the_full_expansions_time_within_a_percent():
    sc = _dualpipe_with_experts_across_nodes()
    folded = simulate(sc, "symmetric")
    assert folded.fold.axes
    assert folded.result.iteration_time_ms == pytest.approx(simulate(sc, "full").result.iteration_time_ms, rel=0.01)
