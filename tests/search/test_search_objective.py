"""The cost objective: GPU-hours per million tokens over one or several GPU counts."""

from __future__ import annotations

import json

import pytest

from helpers import SEED_SCENARIO, cli, gpt_scenario
from simulon.search.run import Search, combine

SC = gpt_scenario(nodes=2, gpus_per_node=4, layers=8, gbs=64, seq=1024, nic="400Gbps")
TOKENS = 64 * 1024


@pytest.fixture(scope="module")
def by_count():
    return [Search(SC, n).run(top=6, replay=2, workers=1) for n in (4, 8)]


def test_on_one_gpu_count_time_and_cost_rank_alike(by_count):
    for result in by_count:
        timed, costed = combine([result], "time"), combine([result], "cost")
        assert [r.strategy for r in timed.ranked] == [r.strategy for r in costed.ranked]


def test_over_two_counts_cost_ranks_by_gpus_times_step_time_and_can_pick_fewer_gpus_than_time(by_count):
    timed, costed = combine(by_count, "time", top=12), combine(by_count, "cost", top=12, gpu_hour_price=2.0)
    steps = [r.iteration_ms for r in timed.ranked]
    gpu_seconds = [r.strategy.num_gpus * r.iteration_ms for r in costed.ranked]
    assert steps == sorted(steps) and gpu_seconds == sorted(gpu_seconds)
    best = costed.ranked[0]
    hours = best.strategy.num_gpus * best.iteration_ms / 3.6e6 / (TOKENS / 1e6)  # the closed form
    row = costed.to_json()["top"][0]
    assert row["gpu_hours_per_million_tokens"] == pytest.approx(hours)
    assert row["cost_per_million_tokens"] == pytest.approx(2.0 * hours)
    fastest = timed.ranked[0]
    # the closed form's trade: the 8-GPU winner is faster, but not twice as fast as the best on 4 GPUs
    assert fastest.strategy.num_gpus == 8 and best.strategy.num_gpus == 4
    assert fastest.iteration_ms < best.iteration_ms < 2 * fastest.iteration_ms
    assert sorted(timed.gpu_counts) == [4, 8] and timed.estimated == sum(r.estimated for r in by_count)


def test_the_command_takes_several_gpu_counts_and_refuses_bad_ones(tmp_path):
    run = cli("search", str(SEED_SCENARIO), "--gpus", "2,4", "--objective", "cost", "--replay", "1", "--top", "4",
              "--json", "--cache", str(tmp_path))
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["gpu_counts"] == [2, 4] and data["objective"] == "cost"
    costs = [row["gpu_hours_per_million_tokens"] for row in data["top"]]
    assert costs == sorted(costs)
    for bad, message in ((("--gpus", "4,x"), "--gpus: expected positive whole numbers"),
                         (("--objective", "speed"), "--objective: expected one of time, cost"),
                         (("--gpu-hour-price", "-1"), "--gpu-hour-price: expected a positive price")):
        run = cli("search", str(SEED_SCENARIO), *bad, "--no-cache")
        assert run.returncode == 2 and message in run.stderr and "Traceback" not in run.stderr


def test_a_large_cost_is_written_in_figures_not_in_exponent_form():
    """The cost and GPU-hour columns were written '{:,.3g}': the seed at a price of 100,000 a GPU-hour cost
    '2.28e+03' a million tokens."""
    run = cli("search", str(SEED_SCENARIO), "--no-cache", "--replay", "0", "--top", "1", "--gpu-hour-price", "100000")
    row = next(line for line in run.stdout.splitlines() if line.startswith("│"))
    hours, cost = (cell.strip() for cell in row.split("│")[7:9])
    assert "e" not in hours + cost and float(hours) > 0
    assert float(cost.replace(",", "")) == pytest.approx(1e5 * float(hours), rel=5e-3)
