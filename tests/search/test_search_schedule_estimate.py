"""The search's estimate follows the replay across pipeline schedules: the drain runs through every stage's last
backward, each slowed by its own overlapped gradient reduction, and ZB-H1's split backward leaves the wgrads no longer
beside the dgrads' tensor-parallel reduction."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.pipeline import simulate
from simulon.search.estimate import Estimator
from simulon.search.space import Strategy


def step_ms(tp: int, pp: int, gbs: int, **parallelism) -> tuple[float, float]:
    """(estimated, replayed) step of a 16-layer GPT (hidden 2048, sequence 2048) on one node of 8 H100s, in ms."""
    sc = gpt_scenario(nodes=1, gpus_per_node=8, tp=tp, pp=pp, layers=16, hidden=2048, heads=16, seq=2048, gbs=gbs,
                      nvlink="450GBps", nic="400Gbps", extra_parallelism={"sequence_parallel": tp > 1, **parallelism})
    estimator = Estimator.on(sc.workload, sc.datacenter, sc.collective, sc.workload.training.num_gpus)
    estimate = estimator.estimate(Strategy.of(sc), sc.workload).iteration_s * 1e3
    return estimate, simulate(sc).result.iteration_time_ms


DRAIN_WITHIN = 0.03
"""How far the estimated step may lie from the replayed one in the overlapped-reduction pipelines below (they agree
within 1%); with the slowest stage's reduction alone counted they were 8 to 10% short."""


@pytest.mark.parametrize(("pp", "vpp", "gbs", "setting"), [
    (4, 1, 8, {}),
    (4, 2, 64, {}),
    (4, 1, 8, {"distributed_optimizer": True}),
])
def test_the_estimate_drains_through_every_stages_last_backward_slowed_by_its_overlapped_gradient_reduction(
        pp, vpp, gbs, setting):
    estimated, replayed = step_ms(1, pp, gbs, vpp=vpp, **setting)
    assert estimated == pytest.approx(replayed, rel=DRAIN_WITHIN), (estimated, replayed)


def test_the_estimate_orders_the_overlapped_gradient_reduction_against_none_as_the_replay_does_under_a_pipeline():
    overlapped, replayed_overlapped = step_ms(1, 4, 8)
    plain, replayed_plain = step_ms(1, 4, 8, overlap_grad_reduce=False)
    assert (overlapped > plain) == (replayed_overlapped > replayed_plain), (overlapped, plain, replayed_overlapped,
                                                                            replayed_plain)


SPLIT_WITHIN = 0.03
"""How far the estimated ZB-H1 step may lie from the replayed one at tp 2 (they agree within 1%); with the dgrads'
reduction hidden behind the wgrads that ZB-H1 runs in a step of their own, they were 4 to 6% short."""


@pytest.mark.parametrize(("pp", "setting"), [(2, {}), (4, {}), (1, {"recompute": "selective"})])
def test_the_estimate_waits_for_the_tensor_parallel_reduction_of_zb_h1s_split_backward(pp, setting):
    estimated, replayed = step_ms(2, pp, 16, pipeline_schedule="zb_h1", **setting)
    assert estimated == pytest.approx(replayed, rel=SPLIT_WITHIN), (estimated, replayed)


SHARDED_WITHIN = 0.04
"""How far the estimated step may lie from the replayed one under ZeRO-2 and FSDP with a pipeline (they agree within
4%: FSDP at pp 4 3.6% long, its kernels slowed beside its backward's gathers and reduce-scatters at once as the SMs
both hold slow them, for as long as the pair runs, where the replay slows a kernel by what runs when it starts, and
missed the largest by a microsecond); with the other stages' fill and drain at their micro-batch time without its
sync, they were 4.7 to 6.1% short."""


@pytest.mark.parametrize(("pp", "fsdp"), [(2, "shard_grad_op"), (4, "shard_grad_op"), (2, "full_shard"),
                                          (4, "full_shard")])
def test_the_estimate_fills_and_drains_a_pipeline_at_each_stages_micro_batch_time_with_its_zero_2_or_fsdp_sync(
        pp, fsdp):
    estimated, replayed = step_ms(1, pp, 16, fsdp=fsdp)
    assert estimated == pytest.approx(replayed, rel=SHARDED_WITHIN), (estimated, replayed)
