"""The search's estimate on a datacenter whose node groups share a GPU but not their links: each collective is timed
on the links of the groups its ranks lie in, the slowest of a stage's groups, as the replay runs it."""

from __future__ import annotations

import pytest

from simulon.config.loading import parse_scenario
from simulon.search.estimate import Estimate, Estimator
from simulon.search.space import Strategy

SLOW_NVLINK = {"scale_up": {"switch": {"port_speed": "900Gbps"}}}


def two_dgx_groups(pp: int, slow: tuple[bool, bool]):
    """Two one-node DGX H100 groups, those flagged in `slow` on 900 Gbps NVSwitch ports; llama-3-8b at tp 8."""
    groups = [{"from": "dgx-h100", "num_nodes": 1, **({"network": SLOW_NVLINK} if flag else {})} for flag in slow]
    return parse_scenario({
        "datacenter": {"datacenter": {"name": "two-dgx"}, "node_groups": groups},
        "workload": {"framework": "megatron", "model": "llama-3-8b",
                     "parallelism": {"tp": 8, "pp": pp, "dp": 2 // pp, "sequence_parallel": True,
                                     "distributed_optimizer": True},
                     "training": {"global_batch_size": 8, "micro_batch_size": 1, "sequence_length": 4096,
                                  "dtype": "bf16"}}}, "test")


def estimate(pp: int, slow: tuple[bool, bool]) -> Estimate:
    sc = two_dgx_groups(pp, slow)
    return Estimator.on(sc.workload, sc.datacenter, sc.collective).estimate(Strategy.of(sc), sc.workload)


def test_a_replica_on_the_slower_nvlink_group_sets_the_tensor_parallel_time():
    """Before, the tensor-parallel groups were timed on group 0's NVLink alone: 111.9 ms of tp on the mixed cluster
    as on two fast groups, where both groups slow give 416.1 ms. (Pinned with the embedding's and the LM head's
    tensor-parallel communication counted: 118.1 and 419.3 ms without.)"""
    fast, mixed, slow = (estimate(1, flags) for flags in ((False, False), (False, True), (True, True)))
    assert fast.tp_s == pytest.approx(0.120194, rel=1e-4)
    assert mixed.tp_s == pytest.approx(slow.tp_s, rel=1e-9)
    assert mixed.tp_s == pytest.approx(0.425032, rel=1e-4)


def test_a_stage_on_the_faster_group_keeps_its_own_links_in_the_fill_and_drain():
    """pp 2, stage 1 on the slower group: the slowest stage is timed on the slower NVLink, the other stage's fill
    and drain on the faster one (41.5 ms, as on two fast groups; two slow groups: 79.5 ms)."""
    fast, mixed, slow = (estimate(2, flags) for flags in ((False, False), (False, True), (True, True)))
    assert mixed.tp_s == pytest.approx(slow.tp_s, rel=1e-9)
    assert mixed.bubble_s == pytest.approx(fast.bubble_s, rel=1e-9)
    assert mixed.bubble_s < slow.bubble_s
