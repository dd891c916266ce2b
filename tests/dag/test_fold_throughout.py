"""A step whose expanded collectives would not fit folds them too (dag.fold.Fold.folded_throughout)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulon.config.loading import parse_scenario
from simulon.pipeline import plan_dag, simulate


def _scenario():
    """tp4 cp2 on 8 DGX H100 nodes, two nodes a leaf: data parallelism's gradient reduction runs over the dp x cp
    group, two members a node across four leaves, which the fold expands over every GPU."""
    return parse_scenario({
        "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 8},
                       "network": {"scale_out": {"topology": {"from": "rail-optimized-fat-tree", "nics_per_leaf": 2}}}},
        "workload": {"framework": "megatron", "model": "gpt3-1.3b",
                     "parallelism": {"tp": 4, "cp": 2, "sequence_parallel": True, "distributed_optimizer": True},
                     "training": {"global_batch_size": 8, "micro_batch_size": 1, "sequence_length": 2048}}},
        "inline")


def test_folding_throughout_builds_a_smaller_dag_than_expanding_the_spread_collectives():
    planned = plan_dag(_scenario(), "symmetric")
    expanded = planned.size()
    throughout = replace(planned, fold=planned.fold.folded_throughout()).size()
    assert throughout.nodes < expanded.nodes / 2


def test_a_step_whose_expansion_would_not_fit_is_folded_throughout_within_a_percent_of_the_full_expansion():
    sc = _scenario()
    planned = plan_dag(sc, "symmetric")
    expanded = planned.size().memory_bytes()
    throughout = replace(planned, fold=planned.fold.folded_throughout()).size().memory_bytes()
    full = simulate(sc, "full")
    fitted = simulate(sc, "symmetric", memory_limit=(expanded + throughout) / 2)
    assert not fitted.fold.expand_spread
    assert fitted.result.iteration_time_ms == pytest.approx(full.result.iteration_time_ms, rel=0.01)


def test_a_step_that_fits_keeps_its_collectives_expanded():
    sim = simulate(_scenario(), "symmetric", memory_limit=1e12)
    assert sim.fold.expand_spread
