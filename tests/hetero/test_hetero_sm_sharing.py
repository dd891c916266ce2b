"""SM sharing on GPUs of several SM counts: each rank's kernels lose the share of its own SMs that the
collectives beside them hold."""

from __future__ import annotations

import numpy as np
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import ROOT
from simulon.compute.calibration import Calibrations
from simulon.compute.populate import populate
from simulon.config import ScenarioConfig
from simulon.engine.flows import flow_properties
from simulon.engine.replay import per_rank_sms, replay
from simulon.engine.replay_input import MAX_HELD_SHARE, node_arrays
from simulon.pipeline import build_dag, sm_counts

EXAMPLE = ROOT / "examples" / "hetero_h100_a100.yaml"


def example_dag():
    sc = ScenarioConfig.model_validate(yaml.safe_load(EXAMPLE.read_text()))
    dag, topology, fold = build_dag(sc)
    placement = sc.placement()
    populate(dag, [g.gpu for g in placement.groups], sc.workload.training.dtype, placement.group)
    return sc, dag, topology, fold


def test_each_rank_gets_its_own_gpus_sm_count():
    sc, *_ = example_dag()
    sms = sm_counts(sc.placement())
    calibrations = Calibrations.shipped()
    h100, a100 = (calibrations.sm_count(g.gpu) for g in sc.datacenter.groups)
    assert h100 != a100
    assert sms.tolist() == [h100] * 16 + [a100] * 16


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 200), min_size=2, max_size=4, unique=True), st.integers(0, 400))
def test_a_common_sm_count_gives_every_rank_its_own_slowdown(counts, held):
    """S / (S - min(held * S / s, share * S)) is s / (s - min(held, share * s)) for the common multiple S."""
    common = int(np.lcm.reduce(counts))
    for s in counts:
        scaled = held * (common // s)
        own = s / (s - min(held, MAX_HELD_SHARE * s))
        shared = common / (common - min(scaled, MAX_HELD_SHARE * common))
        assert shared == np.float64(own) or abs(shared - own) <= 1e-12 * own


def test_spans_are_scaled_by_the_common_count_over_the_ranks_own():
    sc, dag, topology, fold = example_dag()
    sms = sm_counts(sc.placement())
    nodes = node_arrays(dag, flow_properties(dag, topology, fold).nodes, int(sms.max()))
    scaled, common = per_rank_sms(dag, nodes, sms)
    assert common == np.lcm.reduce(np.unique(sms))
    assert np.array_equal(scaled.span, nodes.span * (common // sms[dag.gpu]))
    same, count = per_rank_sms(dag, nodes, np.full(dag.num_gpus, 132))
    assert same is nodes and count == 132


def test_replay_with_one_count_per_rank_equals_the_scalar_where_they_are_equal():
    _, dag, topology, fold = example_dag()
    scalar = replay(dag, topology, fold, 132)
    per_rank = replay(dag, topology, fold, np.full(dag.num_gpus, 132))
    assert np.array_equal(scalar.finish, per_rank.finish)
