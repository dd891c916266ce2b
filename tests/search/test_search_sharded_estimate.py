"""The search's estimate times ZeRO-2 and FSDP as the tracer runs them (workload.data_parallel): every micro-batch
gathers each unit's parameters before its forward (and, FSDP, again before its backward), each gather prefetched once
the unit before it starts, so each model chunk's first unit waits for its own in full; the reduce-scatters of the
step's last backward (stage 0's first chunk) go on after it, and the optimizer waits for them. Left out, with ZeRO-2's
gather counted once a step, ZeRO-2 and FSDP at vpp 2 were estimated 0.926 to 0.941 of their replay. A forward after a
backward gathers on links that backward's reduce-scatters still load, and the kernels beside the communication slow
as the replay slows them: with each second of communication slowing a second of kernels, ZeRO-2 without a pipeline
was estimated 1.036 of its replay."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.pipeline import simulate
from simulon.search.estimate import (
    Estimator,
    ShardedWaits,
    forwards_after_backward,
    gather_waits,
    held_twice,
    played_gathers,
    reduce_tail,
    spread_slowing,
    stretched,
)
from simulon.search.space import Strategy
from simulon.workload.layer_kernels import LayerKernels
from simulon.workload.parameters import PipelineLayers

seconds = st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8)


def estimate_over_replay(pp: int, vpp: int, fsdp: str) -> float:
    """A 16-layer GPT (hidden 2048, sequence 2048, 16 sequences) at tp 1 on one node of 8 H100s."""
    sc = gpt_scenario(nodes=1, gpus_per_node=8, pp=pp, layers=16, hidden=2048, heads=16, seq=2048, gbs=16,
                      nvlink="450GBps", nic="400Gbps",
                      extra_parallelism={"vpp": vpp, "fsdp": fsdp, "distributed_optimizer": False})
    estimator = Estimator.on(sc.workload, sc.datacenter, sc.collective, sc.workload.training.num_gpus)
    estimated = estimator.estimate(Strategy.of(sc), sc.workload).iteration_s * 1e3
    return estimated / simulate(sc).result.iteration_time_ms


@pytest.mark.parametrize(("pp", "vpp", "fsdp"), [
    (2, 2, "shard_grad_op"),  # 0.987 (0.941 before the first gathers, 1.004 before the shared links)
    (4, 2, "shard_grad_op"),  # 0.985 (0.926, 0.988)
    (2, 2, "full_shard"),     # 0.985 (0.935, 0.983; 1.007 with every backward gather beside a reduce-scatter)
    (4, 2, "full_shard"),     # 0.988 (0.931, 0.987; 1.022)
    (1, 1, "shard_grad_op"),  # 1.004 (1.036 with a second of communication slowing a second of kernels)
    (2, 1, "shard_grad_op"),  # 0.992 (1.023)
    (1, 1, "full_shard"),     # 1.001 (1.002; 1.003)
    (2, 1, "full_shard"),     # 1.000 (1.000; 1.010)
])
def test_the_estimate_waits_for_each_chunks_first_gather_and_the_last_reduce_scatters_under_zero_2_and_fsdp(
        pp, vpp, fsdp):
    assert 0.97 < estimate_over_replay(pp, vpp, fsdp) < 1.03


def test_the_forwards_after_a_backward_are_every_micro_batchs_but_the_first_without_pipelining():
    assert forwards_after_backward("1f1b", 1, 0, 1, 4) == (((-1, 0.25), (0, 0.75)),)


@given(st.sampled_from(["1f1b", "interleaved_1f1b"]), st.integers(1, 4), st.integers(1, 4), st.data())
def test_each_chunks_forwards_follow_a_backward_or_none_in_shares_that_sum_to_one(schedule, pp, vpp, data):
    vpp, pp = (1, pp) if schedule == "1f1b" else (max(vpp, 2), max(pp, 2))
    microbatches = pp * data.draw(st.integers(1, 3))
    follows = forwards_after_backward(schedule, vpp, data.draw(st.integers(0, pp - 1)), pp, microbatches)
    assert len(follows) == vpp
    for after in follows:
        assert sum(share for _, share in after) == pytest.approx(1.0)
        assert all(-1 <= chunk < vpp for chunk, _ in after)


@given(seconds, st.data(), st.floats(0.0, 2.0))
def test_gathers_on_links_a_reduce_scatter_still_loads_wait_no_less_and_no_more_than_its_seconds_longer(
        gathers, data, busy):
    computes = data.draw(st.lists(st.floats(0.0, 1.0), min_size=len(gathers), max_size=len(gathers)))
    alone = gather_waits(gathers, computes)
    shared = gather_waits(gathers, computes, busy)
    assert alone - 1e-12 <= shared <= alone + busy + 1e-12
    assert shared >= gathers[0] + min(gathers[0], busy) - 1e-12  # the first, waited for, shares the links


def test_a_gather_beside_a_longer_reduce_scatter_takes_twice_its_time():
    assert gather_waits([0.3], [1.0], busy=1.0) == pytest.approx(0.6)
    assert played_gathers([0.3, 0.2], [1.0, 1.0], busy=1.0) == pytest.approx((0.6, 0.4))


@given(st.floats(0.0, 1.0), st.floats(0.01, 2.0), st.lists(st.tuples(st.floats(0.0, 2.0), st.floats(0.0, 1.0)),
                                                           max_size=3))
def test_kernels_spread_over_a_span_slow_by_no_more_than_beside_communication_throughout(kernels, span, beside):
    kernels = min(kernels, span)
    slowed = spread_slowing(kernels, span, beside)
    assert 0.0 <= slowed <= kernels * max((slower for _, slower in beside), default=0.0) + 1e-12


def test_kernels_alone_in_their_span_slow_as_stretched_gives():
    assert spread_slowing(1.0, 1.0, [(0.66, 0.32)]) == pytest.approx(stretched(1.0, 0.66, 0.32) - 1.0)


def test_kernels_beside_two_collectives_lose_the_sms_both_hold():
    """One collective holding a quarter of the SMs slows kernels by a third; two hold half, and slow them twofold."""
    assert held_twice(1 / 3) == pytest.approx(1.0)


@given(seconds, st.data())
def test_a_chunk_waits_for_its_first_gather_in_full_and_for_no_more_than_every_gather(gathers, data):
    computes = data.draw(st.lists(st.floats(0.0, 1.0), min_size=len(gathers), max_size=len(gathers)))
    waits = gather_waits(gathers, computes)
    assert gathers[0] - 1e-12 <= waits <= sum(gathers) + 1e-12


def test_a_gather_no_longer_than_the_unit_before_it_is_hidden():
    assert gather_waits([0.3, 0.5, 0.5], [1.0, 0.5, 2.0]) == pytest.approx(0.3)


@given(seconds, st.data())
def test_the_last_reduce_scatter_outlasts_the_backward_and_no_more_than_all_of_them(reduces, data):
    computes = data.draw(st.lists(st.floats(0.0, 1.0), min_size=len(reduces), max_size=len(reduces)))
    tail = reduce_tail(computes, reduces)
    assert reduces[-1] - 1e-12 <= tail <= sum(reduces) + 1e-12


def estimate_over_replay_on_four_nodes(tp: int, moe: bool) -> float:
    """An 8-layer GPT (hidden 2048, sequence 2048, 8 sequences a data-parallel rank) under ZeRO-2 on 4 nodes of 8
    H100s (400 Gbps NICs), its data-parallel group across the nodes; `moe`: 8 experts, top 2, at ep 2."""
    dp = 32 // tp
    sc = gpt_scenario(nodes=4, gpus_per_node=8, tp=tp, ep=2 if moe else 1, layers=8, hidden=2048, heads=16, seq=2048,
                      gbs=8 * dp, nvlink="450GBps", nic="400Gbps", moe={"num_experts": 8, "top_k": 2} if moe else None,
                      extra_parallelism={"sequence_parallel": True, "fsdp": "shard_grad_op",
                                         "distributed_optimizer": False})
    estimator = Estimator.on(sc.workload, sc.datacenter, sc.collective, sc.workload.training.num_gpus)
    estimated = estimator.estimate(Strategy.of(sc), sc.workload).iteration_s * 1e3
    return estimated / simulate(sc).result.iteration_time_ms


def test_a_micro_batchs_sync_hides_behind_its_whole_span_not_its_kernels_alone():
    """tp 8 across 4 nodes: each micro-batch's gradient reduce-scatter (4.4 ms) outlasts its backward kernels (2.7 ms)
    but not the micro-batch, whose exposed tensor-parallel communication it runs beside too: counted as exposed by
    the kernels, the step was estimated 1.182 of its replay (1.003)."""
    assert 0.97 < estimate_over_replay_on_four_nodes(8, moe=False) < 1.03


def test_zero_2_syncs_a_units_expert_parameters_with_its_dense_ones_over_the_data_parallel_group():
    """The tracer reduce-scatters and gathers each unit's dense and expert parameters in one collective over the FSDP
    group (dp x cp): timed apart over the expert-data-parallel group, tp 2 ep 2 was estimated 1.51 of its replay."""
    assert 0.95 < estimate_over_replay_on_four_nodes(2, moe=True) < 1.05


def fsdp_over_replay(tp: int, sequence_parallel: bool) -> float:
    """4 layers (hidden 4096, sequence 2048, 8 sequences) under FSDP full sharding, bf16, on one node of 4 H100s."""
    sc = gpt_scenario(nodes=1, gpus_per_node=4, tp=tp, layers=4, hidden=4096, heads=32, gbs=8, seq=2048,
                      extra_parallelism={"fsdp": "full_shard", "distributed_optimizer": False,
                                         "sequence_parallel": sequence_parallel})
    estimator = Estimator.on(sc.workload, sc.datacenter, sc.collective, sc.workload.training.num_gpus)
    estimated = estimator.estimate(Strategy.of(sc), sc.workload).iteration_s * 1e3
    return estimated / simulate(sc).result.iteration_time_ms


@pytest.mark.parametrize(("tp", "sequence_parallel"), [
    (1, False),  # 1.022 (1.044 with every backward gather beside a reduce-scatter)
    (2, False),  # 1.025 (1.039)
    (2, True),   # 1.010 (1.024)
])
def test_fsdp_runs_a_backward_gather_beside_the_reduce_scatter_of_the_unit_two_before_it(tp, sequence_parallel):
    """A unit's backward runs beside the reduce-scatter of the unit before it and the gather of the unit after it,
    prefetched as it starts: the first two units' backward gathers run beside no reduce-scatter, each later one beside
    the reduce-scatter of the unit two before it (tp 1: 7.8 ms of a micro-batch in the replay, 8.2 estimated, where
    counting every backward gather beside one, 11.7, slowed the kernels beside both as long)."""
    assert 0.97 < fsdp_over_replay(tp, sequence_parallel) < 1.03


@pytest.mark.parametrize("fsdp", ["shard_grad_op", "full_shard"])
def test_a_stages_sharded_waits_are_named_and_only_fsdp_gathers_beside_its_backwards_reduce_scatters(fsdp):
    sc = gpt_scenario(nodes=1, gpus_per_node=8, pp=2, layers=16, hidden=2048, heads=16, seq=2048, gbs=16,
                      nvlink="450GBps", nic="400Gbps",
                      extra_parallelism={"vpp": 2, "fsdp": fsdp, "distributed_optimizer": False})
    estimator = Estimator.on(sc.workload, sc.datacenter, sc.collective, sc.workload.training.num_gpus)
    kernels, layers = LayerKernels.weights_of(sc.workload), PipelineLayers.of(sc.workload)
    waits = estimator.sharded_waits(Strategy.of(sc), sc.workload, kernels, layers, 0)
    assert isinstance(waits, ShardedWaits)
    assert waits.waited > 0 and waits.reduce_tail > 0 and waits.paired >= 0
    assert (waits.shared > 0) == (fsdp == "full_shard")  # ZeRO-2 gathers before the forward alone
