"""Replays side by side are admitted against the memory as a whole: the needs of those running never add up to
more than the budget, a job too large even alone is refused with its reason, and every other job runs once."""

from __future__ import annotations

import math
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import RecordingPool, gpt_scenario
from simulon.executors import Admission, ProcessExecutor, Refused
from simulon.pipeline import build_dag, simulate, step_size
from simulon.search import run
from simulon.search.run import Search, scenario_for, worker_baseline

FOOTPRINT = 3e9
"""A stand-in for the search's own resident memory (what a forked worker starts from)."""


def small():
    return gpt_scenario(nodes=2, gpus_per_node=4, layers=8, gbs=16, seq=1024)


def drain(admission: Admission, finish_order: list[int]) -> tuple[list[int], float, int]:
    """Run an admission to the end, finishing the running job `finish_order` picks each time: (the jobs in the
    order they started, the most bytes running at once, the most jobs running at once)."""
    started, peak_bytes, peak_jobs, turn = [], 0.0, 0, 0
    while not admission.done:
        started += admission.start()
        peak_bytes, peak_jobs = max(peak_bytes, admission.in_use), max(peak_jobs, len(admission.running))
        running = sorted(admission.running)
        assert running, "waiting jobs with nothing running: the admission is stuck"
        admission.finish(running[finish_order[turn % len(finish_order)] % len(running)])
        turn += 1
    return started, peak_bytes, peak_jobs


@given(needs=st.lists(st.floats(0, 10), max_size=12), budget=st.floats(0.5, 12), slots=st.integers(1, 4),
       finish_order=st.lists(st.integers(0, 3), min_size=1, max_size=5))
@settings(max_examples=300, deadline=None)
def test_running_jobs_never_need_more_than_the_budget_and_every_job_that_fits_alone_runs_once(
        needs, budget, slots, finish_order):
    admission = Admission(needs, budget, slots)
    started, peak_bytes, peak_jobs = drain(admission, finish_order)
    assert set(admission.refused) == {i for i, need in enumerate(needs) if need > budget}
    assert sorted(started) == [i for i in range(len(needs)) if i not in admission.refused]
    assert peak_bytes <= budget and peak_jobs <= slots


def test_jobs_that_fit_together_start_together_a_smaller_one_passes_a_larger_and_the_larger_follows():
    admission = Admission([6.0, 6.0, 6.0, 3.0], budget=15.0, slots=4)
    assert admission.start() == [0, 1, 3]  # the third 6 would make 18; the 3 makes 15
    assert admission.start() == []
    admission.finish(0)
    assert admission.start() == [2]


def interval(seconds: float) -> tuple[float, float]:
    start = time.monotonic()  # system-wide on Linux: comparable across the pool's processes
    time.sleep(seconds)
    return start, time.monotonic()


def test_the_process_pool_runs_at_once_only_jobs_whose_needs_fit_and_refuses_one_too_large_alone():
    needs = [6.0, 6.0, 6.0, 20.0]
    done = dict(ProcessExecutor(3, memory=13.0).map_unordered(interval, [0.3] * 4, needs))
    assert isinstance(done[3], Refused) and "20.0" not in done[3].reason  # bytes shown in GB
    spans = [done[i] for i in range(3)]
    for moment in (start for start, _ in spans):  # at most two of the 6-byte jobs at any moment
        assert sum(start <= moment < end for start, end in spans) <= 2
    assert max(start for start, _ in spans) >= min(end for _, end in spans)  # the third waited for one to end


def test_without_needs_the_pool_admits_everything_as_before():
    assert dict(ProcessExecutor(2, memory=0.0).map_unordered(abs, [-1, -2])) == {0: 1, 1: 2}


def test_a_search_whose_replays_cannot_fit_ranks_by_estimate_and_says_why_each_was_not_replayed():
    sc = small()
    result = Search(sc).run(top=5, replay=3, executor=ProcessExecutor(2, memory=1e6))
    assert result.replayed == 0 and len(result.refused) == 3 and len(result.ranked) == 5
    need = step_size(scenario_for(sc, result.refused[0][0], 8)).memory_bytes()
    assert need > 1e6
    for _, why in result.refused:
        assert why.startswith("not replayed: ") and "DAG nodes" in why and "1.0 MB the replays may use" in why
    assert [r["reason"] for r in result.to_json()["refused"]] == [why for _, why in result.refused]


def test_a_search_with_room_for_one_replay_at_a_time_gives_the_unlimited_answer(monkeypatch):
    monkeypatch.setattr(run, "resident_memory", lambda: FOOTPRINT)
    limited = Search(small()).run(top=5, replay=3, executor=ProcessExecutor(2, memory=None))
    sizes = [step_size(scenario_for(small(), r.strategy, 8)).memory_bytes() for r in limited.ranked[:3]]
    one_at_a_time = Search(small()).run(top=5, replay=3,
                                        executor=ProcessExecutor(2, memory=(max(sizes) + FOOTPRINT) * 1.01))
    unlimited = Search(small()).run(top=5, replay=3, executor=ProcessExecutor(2, memory=math.inf))
    assert one_at_a_time.replayed == 3 and not one_at_a_time.refused
    assert one_at_a_time.to_json()["top"] == unlimited.to_json()["top"] == limited.to_json()["top"]


def test_a_replay_is_sized_as_the_dag_it_builds():
    sc = scenario_for(small(), Search(small()).run(top=1, replay=0).ranked[0].strategy, 8)
    dag, _, _ = build_dag(sc)
    size = step_size(sc)
    assert (size.nodes, size.flows, size.simulated_gpus) == (dag.num_nodes, int((dag.kind == 1).sum()),
                                                              int((dag.multiplicity > 0).sum()))


def test_the_space_shared_out_over_workers_gives_exactly_the_one_process_answer():
    from simulon.search.space import Limits

    sc = gpt_scenario(nodes=2, gpus_per_node=4, layers=6, gbs=16, seq=1024)  # 6 layers: uneven splits and misses
    alone = Search(sc, limits=Limits({"zero_bubble": (False, True)})).estimated(workers=1)
    shared = Search(sc, limits=Limits({"zero_bubble": (False, True)})).estimated(executor=ProcessExecutor(2))
    assert shared.to_json() == alone.to_json() and shared.enumerated > 10_000


def test_a_forked_worker_s_replay_needs_its_dag_plus_the_search_s_own_footprint(monkeypatch):
    monkeypatch.setattr(run, "resident_memory", lambda: FOOTPRINT)
    pool = RecordingPool(2, memory=math.inf)
    result = Search(small()).run(top=3, replay=3, executor=pool)
    estimated, sized, replayed = pool.needs  # the estimates and the sizing jobs (no admission), then the replays
    dags = [step_size(scenario_for(small(), r.strategy, 8)).memory_bytes() for r in result.ranked[:3]]
    assert estimated is None and sized is None and result.replayed == 3
    assert sorted(replayed) == sorted(dag + FOOTPRINT for dag in dags)


def test_a_replay_whose_dag_fits_but_not_beside_the_inherited_footprint_is_refused_and_says_so(monkeypatch):
    monkeypatch.setattr(run, "resident_memory", lambda: FOOTPRINT)
    ranked = Search(small()).run(top=3, replay=0).ranked
    dags = [step_size(scenario_for(small(), r.strategy, 8)).memory_bytes() for r in ranked]
    result = Search(small()).run(top=3, replay=3, executor=ProcessExecutor(2, memory=max(dags) + FOOTPRINT / 2))
    assert result.replayed == 0 and len(result.refused) == 3
    assert all("3.0 GB is the search's own memory" in why for _, why in result.refused)


def test_only_a_forked_pool_worker_starts_from_the_search_s_footprint(monkeypatch):
    monkeypatch.setattr(run, "resident_memory", lambda: FOOTPRINT)
    monkeypatch.setattr(run.multiprocessing, "get_start_method", lambda: "fork")
    assert worker_baseline(ProcessExecutor(2)) == FOOTPRINT
    assert worker_baseline(RecordingPool(2)) == FOOTPRINT
    assert worker_baseline(object()) == 0.0  # Ray's (or any other executor's) workers start fresh
    monkeypatch.setattr(run.multiprocessing, "get_start_method", lambda: "spawn")
    assert worker_baseline(ProcessExecutor(2)) == 0.0


def test_the_search_s_resident_memory_is_read_and_is_more_than_an_empty_interpreter():
    assert run.resident_memory() > 50e6  # simulon, numpy and pydantic imported


def test_a_replay_too_large_whole_is_replayed_as_simulate_would_run_it_within_the_budget(monkeypatch):
    monkeypatch.setattr(run, "resident_memory", lambda: 0.0)
    sc = gpt_scenario(nodes=2, gpus_per_node=4, layers=8, gbs=512, seq=1024)  # 8 micro-batches of 8 on pp 1
    variant = scenario_for(sc, Search(sc).run(top=1, replay=0).ranked[0].strategy, 8)
    whole = step_size(variant, micro_batches="auto", samples_first_above=run.SAMPLES_FIRST_ABOVE).memory_bytes()
    budget = whole * 0.9
    shrunk = step_size(variant, micro_batches="auto", samples_first_above=run.SAMPLES_FIRST_ABOVE,
                       memory_limit=budget).memory_bytes()
    assert shrunk <= budget < whole  # sampled (or folded) it fits where the whole step would not
    result = Search(sc).run(top=1, replay=1, executor=ProcessExecutor(1, memory=budget))
    assert result.replayed == 1 and not result.refused
    alone = simulate(variant, micro_batches="auto", samples_first_above=run.SAMPLES_FIRST_ABOVE, memory_limit=budget)
    assert result.ranked[0].replay_ms == alone.result.iteration_time_ms
