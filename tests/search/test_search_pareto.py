"""The search's time-vs-memory Pareto front and its plot."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from helpers import SEED_SCENARIO, cli, gpt_scenario
from simulon.search.pareto import Point, front, plot, points
from simulon.search.run import Search
from simulon.search.space import Strategy

BASE = Strategy(1, 1, 1, 8, 1, 1, 1, 1, False, "none", "distributed_optimizer", "bf16", False)


def dominates(a: Point, b: Point) -> bool:
    return (a.iteration_ms <= b.iteration_ms and a.peak_memory_gib <= b.peak_memory_gib
            and (a.iteration_ms, a.peak_memory_gib) != (b.iteration_ms, b.peak_memory_gib))


@given(st.lists(st.tuples(st.integers(1, 50), st.integers(1, 50)), min_size=1, max_size=40))
def test_the_front_keeps_exactly_the_points_nothing_beats_on_both_time_and_memory(pairs):
    candidates = [Point(float(t), float(m), BASE, False) for t, m in pairs]
    kept = front(candidates)
    assert not any(dominates(other, p) for p in kept for other in candidates)
    assert all(any(dominates(k, p) or (k.iteration_ms, k.peak_memory_gib) == (p.iteration_ms, p.peak_memory_gib)
                   for k in kept) for p in candidates)
    assert [p.iteration_ms for p in kept] == sorted(p.iteration_ms for p in kept)


def test_the_plot_marks_the_winner_and_the_same_search_writes_the_same_bytes(tmp_path):
    searcher = Search(gpt_scenario(nodes=2, gpus_per_node=4, layers=8, gbs=16, seq=1024))
    result = searcher.run(top=3, replay=1, workers=1)
    found = points(searcher, result, pool=400)
    assert result.estimated > 400 and len(found) == 400 and sum(p.replayed for p in found) == 1
    winner = min(found)
    assert winner.strategy == result.ranked[0].strategy and winner in front(found)
    for suffix in ("png", "svg"):
        first, second = tmp_path / f"a.{suffix}", tmp_path / f"b.{suffix}"
        plot(found, winner.strategy, 80.0, first, "test")
        plot(found, winner.strategy, 80.0, second, "test")
        assert first.read_bytes() == second.read_bytes() and first.stat().st_size > 10_000
    assert (tmp_path / "a.png").read_bytes().startswith(b"\x89PNG")


def test_a_plot_name_that_is_not_png_or_svg_is_refused_before_the_search(tmp_path):
    run = cli("search", str(SEED_SCENARIO), "--plot", str(tmp_path / "front.jpg"), "--no-cache")
    assert run.returncode == 2 and "--plot" in run.stderr and ".png or .svg" in run.stderr
    assert not list(tmp_path.iterdir()) and "strategies enumerated" not in run.stdout
