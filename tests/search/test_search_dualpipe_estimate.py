"""The search's estimate times a DualPipe step as DeepSeek-V3's schedule runs it (technical report, table 2): each rank
runs half the micro-batches through each of its two mirrored stages, with a bubble of (p/2 - 1)(F&B + B - 3W), not
1F1B over both stages for every micro-batch; and with the all-reduce that sums each stage's gradients across the mirror
pair of ranks holding it (workload.data_parallel MIRROR_SYNC), which the optimizer step waits for. The bubble is the
schedule's own, played out over every rank's chunk times (search.estimate schedule_idle): DeepSeek's formula holds for
equal ranks only."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.pipeline import simulate
from simulon.search.estimate import Estimator, schedule_idle, step_seconds
from simulon.search.space import Strategy


def step_ms(pp: int, gbs: int) -> tuple[float, float]:
    """(estimated, replayed) DualPipe step of a 16-layer GPT (hidden 2048, sequence 2048) on one node of 8 H100s."""
    sc = gpt_scenario(nodes=1, gpus_per_node=8, pp=pp, layers=16, hidden=2048, heads=16, seq=2048, gbs=gbs,
                      nvlink="450GBps", nic="400Gbps", extra_parallelism={"pipeline_schedule": "dualpipe"})
    estimator = Estimator.on(sc.workload, sc.datacenter, sc.collective, sc.workload.training.num_gpus)
    return estimator.estimate(Strategy.of(sc), sc.workload).iteration_s * 1e3, simulate(sc).result.iteration_time_ms


@pytest.mark.parametrize(("pp", "gbs", "within"), [
    (4, 16, 0.03),  # 2.0% short (4.9% long by DeepSeek's bubble formula; 2.26 times long as 1F1B over both stages)
    (4, 32, 0.03),  # 0.6% short (3.4% long; 2.16 times)
    (8, 32, 0.05),  # 3.3% long (9.6% long: the formula idles the heaviest rank, holding both ends, 13.1 ms, the
                    # replay 1.7; 2.22 times)
    (2, 16, 0.06),  # 4.7% short (1.85 times long; 13.8% short without the mirrored ranks' gradient all-reduce)
    (2, 32, 0.05),  # 2.8% short (8.4% short without it)
])
def test_the_estimate_runs_half_the_micro_batches_through_each_of_dualpipes_mirrored_stages(pp, gbs, within):
    estimated, replayed = step_ms(pp, gbs)
    assert estimated == pytest.approx(replayed, rel=within), (estimated, replayed)


def test_step_timer_takes_dualpipe_now_that_the_estimate_sums_the_mirrored_gradients():
    """step_timer refused DualPipe while the estimate left out the mirror all-reduce (14% short at pp 2)."""
    sc = gpt_scenario(nodes=1, gpus_per_node=8, pp=2, layers=16, hidden=2048, heads=16, seq=2048, gbs=16,
                      nvlink="450GBps", nic="400Gbps", extra_parallelism={"pipeline_schedule": "dualpipe"})
    estimated, replayed = step_ms(2, 16)
    assert step_seconds(sc) == pytest.approx(estimated / 1e3, rel=1e-12)
    assert step_seconds(sc) * 1e3 == pytest.approx(replayed, rel=0.06)


def test_the_played_schedule_idles_equal_ranks_no_longer_than_deepseeks_dualpipe_bubble():
    """With every rank's chunks alike, the schedule played out idles no rank longer than (p/2 - 1)(F&B + B - 3W), the
    bubble of the DeepSeek-V3 technical report's table 2 (F&B a forward and a backward one after the other): none at
    pp 2, more as the pipeline deepens."""
    forward, backward, weight = 1.0, 2.0, 0.75
    idle = {pp: schedule_idle("dualpipe", 1, 4 * pp, tuple(((forward, backward, weight),) * 2 for _ in range(pp)))
            for pp in (2, 4, 8)}
    assert idle[2] == 0.0 < idle[4] < idle[8]
    for pp, seconds in idle.items():
        assert seconds <= (pp / 2 - 1) * (forward + 2 * backward - 3 * weight) + 1e-12
