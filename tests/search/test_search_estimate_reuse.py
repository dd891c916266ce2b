"""The estimator works out what strategies share once and gives every strategy the figures a fresh estimator gives
it: each stage's parameters once per kernel table and layer split (Estimator.parameters), for a MoE model with leading
dense layers and a multi-token-prediction layer, over pipelines, shardings and splits drawn by hypothesis; ZeRO-2's
and FSDP's per-unit collectives once per layout (Estimator._sharded_syncs); every rank's chunk times once per shape,
placement and split (Estimator.chunk_times); ZeRO-2's and FSDP's collectives played once for a pipeline's alike
stages (estimate.ShardedPlay)."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.search import estimate
from simulon.search.run import Search, apply
from simulon.search.space import Limits, Strategy
from simulon.workload import parameters


def scenario():
    """8 layers, the first dense, 8 experts, one multi-token-prediction layer, on 4 nodes of 4 H100s."""
    return gpt_scenario(nodes=4, gpus_per_node=4, layers=8, hidden=512, heads=8, gbs=64, seq=512,
                        moe={"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 256, "first_dense_layers": 1},
                        extra_model={"mtp_layers": 1})


SC = scenario()
LIMITS = Limits({"tp": (1, 2), "pp": (2, 4), "dtype": ("bf16",)})
SHARED = Search(SC, limits=LIMITS)
ESTIMATED = {strategy: estimate for estimate, strategy in SHARED.estimated(workers=1).candidates}
STRATEGIES = sorted(ESTIMATED)


def test_the_drawn_space_spans_pipelines_shardings_splits_and_expert_layouts():
    assert {s.pp for s in STRATEGIES} == {2, 4}
    assert {"fsdp", "zero2", "distributed_optimizer"} <= {s.sharding for s in STRATEGIES}
    assert len({(s.first_layers, s.last_layers) for s in STRATEGIES}) > 2
    assert len({s.ep for s in STRATEGIES}) > 1 and any(s.vpp > 1 for s in STRATEGIES)


@given(picks=st.lists(st.integers(0, len(STRATEGIES) - 1), min_size=1, max_size=4))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_an_estimator_shared_by_the_search_estimates_every_strategy_to_the_bit_as_a_fresh_one(picks):
    fresh = Search(SC, limits=LIMITS).estimator  # knows only the drawn strategies
    for strategy in (STRATEGIES[i] for i in picks):
        workload = apply(SC.workload, strategy)
        alone = Search(SC, limits=LIMITS).estimator.estimate(strategy, workload)
        assert ESTIMATED[strategy] == alone
        assert fresh.estimate(strategy, workload) == alone


def test_a_stages_parameters_are_worked_out_once_per_kernel_table_and_layer_split(monkeypatch):
    built: list[tuple[int, ...]] = []
    real = parameters.StageParameters

    def counted(units, *args, **kwargs):
        built.append(units)
        return real(units, *args, **kwargs)

    monkeypatch.setattr(parameters, "StageParameters", counted)
    search = Search(SC, limits=LIMITS)
    picked = [s for s in STRATEGIES if s.pp == 4 and s.tp == 1 and s.sharding == "zero2"]
    tables = set()
    for strategy in picked:
        workload = apply(SC.workload, strategy)
        search.estimator.estimate(strategy, workload)
        tables.add((strategy.ep, strategy.etp, strategy.vpp, strategy.first_layers, strategy.last_layers))
    assert len(picked) > 2 * len(tables)
    assert 0 < len(built) <= 4 * len(tables)  # at most each of the 4 stages once per table and split


@pytest.mark.parametrize("stage", range(4))
def test_a_stages_parameters_asked_again_are_the_same_object(stage):
    strategy = next(s for s in STRATEGIES if s.pp == 4)
    workload = apply(SC.workload, strategy)
    estimator = Search(SC, limits=LIMITS).estimator
    kernels, layers = parameters.LayerKernels.weights_of(workload), parameters.PipelineLayers.of(workload)
    held = estimator.parameters(kernels, workload, layers).stage(stage)
    assert estimator.parameters(kernels, workload, parameters.PipelineLayers.of(workload)).stage(stage) is held
    assert held == parameters.ModelParameters(kernels, workload.model, layers).stage(stage)


def test_zero_2_and_fsdp_time_a_layouts_gathers_and_reduce_scatters_once_whatever_the_micro_batch_and_recompute():
    """A stage's per-unit all-gathers and reduce-scatters depend on the layout, the number format and the layer split
    alone: strategies differing only in micro-batch size and recomputation ask for none again."""
    families: dict[tuple, list[Strategy]] = defaultdict(list)
    for strategy in STRATEGIES:
        if strategy.sharding in ("zero2", "fsdp") and strategy.pp == 4:
            families[(strategy.tp, strategy.dp, strategy.cp, strategy.ep, strategy.etp, strategy.vpp,
                      strategy.first_layers, strategy.last_layers, strategy.sharding)].append(strategy)
    family = max(families.values(), key=lambda members: len({(s.micro_batch_size, s.recompute) for s in members}))
    assert len({(s.micro_batch_size, s.recompute) for s in family}) > 1
    estimator = Search(SC, limits=LIMITS).estimator
    first, *rest = family
    estimator.estimate(first, apply(SC.workload, first))
    asked = []
    real = estimator.slowest

    def counted(ctype, groups, size, algorithm=""):
        asked.append(ctype)
        return real(ctype, groups, size, algorithm)

    estimator.slowest = counted
    for strategy in rest:
        fresh = Search(SC, limits=LIMITS).estimator.estimate(strategy, apply(SC.workload, strategy))
        assert estimator.estimate(strategy, apply(SC.workload, strategy)) == fresh
    assert [c for c in asked if c.name in ("AllGather", "ReduceScatter")] == []


def test_the_played_chunk_times_are_worked_out_once_for_strategies_differing_in_sharding_alone():
    """Every rank's chunk times (what the schedule player plays) depend on the shape, the ranks' placement and the
    layer split, not on the sharding or the micro-batch count: asked again, the same times, equal to a fresh
    estimator's."""
    families: dict[tuple, list[Strategy]] = defaultdict(list)
    for strategy in STRATEGIES:
        families[(*(getattr(strategy, f) for f in Strategy.__dataclass_fields__ if f != "sharding"),)].append(strategy)
    family = max(families.values(), key=len)
    assert len({s.sharding for s in family}) > 1
    estimator = Search(SC, limits=LIMITS).estimator

    def times(strategy: Strategy, on=estimator):
        workload = apply(SC.workload, strategy)
        return on.chunk_times(strategy, workload, parameters.LayerKernels.weights_of(workload),
                              parameters.PipelineLayers.of(workload))

    first = times(family[0])
    for strategy in family[1:]:
        assert times(strategy) is first
        assert times(strategy, Search(SC, limits=LIMITS).estimator) == first


@pytest.mark.parametrize("fsdp", ["shard_grad_op", "full_shard"])
def test_zero_2_and_fsdp_play_the_collectives_of_a_pipelines_alike_middle_stages_once(monkeypatch, fsdp):
    """16 layers at pp 8 dp 2 on 2 nodes of 8 H100s: stages 1 to 6 hold two alike layers on alike ranks, so their
    gathers and reduce-scatters are played once (estimate.ShardedPlay), stage 0's (the embedding) and stage 7's (the
    head) apart: a reduce tail played three times, not once a stage; the estimate is a fresh estimator's."""
    sc = gpt_scenario(nodes=2, gpus_per_node=8, pp=8, layers=16, hidden=1024, heads=16, seq=1024, gbs=32,
                      nvlink="450GBps", nic="400Gbps", extra_parallelism={"fsdp": fsdp, "distributed_optimizer": False})
    strategy = Strategy.of(sc)
    assert strategy.dp == 2 and strategy.sharding in ("zero2", "fsdp")
    fresh = Search(sc).estimator.estimate(strategy, sc.workload)
    played = []
    real = estimate.reduce_tail

    def counted(computes, reduces):
        played.append(1)
        return real(computes, reduces)

    monkeypatch.setattr(estimate, "reduce_tail", counted)
    assert Search(sc).estimator.estimate(strategy, sc.workload) == fresh
    assert len(played) == 3


def test_where_a_stages_ranks_lie_is_worked_out_once_per_stage_size_and_stage():
    """Estimator.stage_key, which most of the estimate's caches key on: asked again, the same object, equal to what
    the placement gives and to a fresh estimator's."""
    strategy = next(s for s in STRATEGIES if s.pp == 4 and s.tp * s.cp * s.dp > 1)
    estimator = Search(SC, limits=LIMITS).estimator
    size = strategy.tp * strategy.cp * strategy.dp
    for stage in range(strategy.pp):
        key = estimator.stage_key(strategy, stage)
        assert estimator.stage_key(strategy, stage) is key
        assert key == estimator.placement.group[stage * size:(stage + 1) * size].tobytes()
        assert key == Search(SC, limits=LIMITS).estimator.stage_key(strategy, stage)


def test_a_pipelines_alike_middle_stages_have_the_same_unit_kinds_number_and_the_ends_their_own():
    """Estimator.chunk_kinds, on which a stage's unit costs are cached: 16 layers at pp 8, stages 1 to 6 hold two alike
    layers each and share a number; stage 0 (with the embedding) and stage 7 (with the head) have numbers of their
    own; the kinds are unit_kind's of each chunk's units in order."""
    sc = gpt_scenario(nodes=2, gpus_per_node=8, pp=8, layers=16, hidden=1024, heads=16, seq=1024, gbs=32)
    estimator = Search(sc).estimator
    kernels, layers = parameters.LayerKernels.weights_of(sc.workload), parameters.PipelineLayers.of(sc.workload)
    numbers = []
    for stage in range(8):
        kinds, number = estimator.chunk_kinds(kernels, layers, stage)
        assert kinds == tuple(tuple(estimate.unit_kind(kernels, unit) for unit in layers.units_of(stage, chunk))
                              for chunk in range(layers.chunks))
        numbers.append(number)
    assert numbers[1:7] == [numbers[1]] * 6
    assert len({numbers[0], numbers[1], numbers[7]}) == 3


def test_a_pipelines_alike_middle_stages_share_their_played_chunk_times():
    """16 layers at pp 8: stages 1 to 6 hold two alike layers on alike ranks, so the chunk times the schedule player
    plays are worked out once for them (the same object), equal to a fresh estimator's."""
    sc = gpt_scenario(nodes=2, gpus_per_node=8, pp=8, layers=16, hidden=1024, heads=16, seq=1024, gbs=32)
    strategy = Strategy.of(sc)
    kernels, layers = parameters.LayerKernels.weights_of(sc.workload), parameters.PipelineLayers.of(sc.workload)
    times = Search(sc).estimator.chunk_times(strategy, sc.workload, kernels, layers)
    assert all(times[stage] is times[1] for stage in range(2, 7))
    assert times[0] != times[1] != times[7]
    assert Search(sc).estimator.chunk_times(strategy, sc.workload, kernels, layers) == times
