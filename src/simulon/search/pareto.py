"""The time-versus-memory Pareto front of a search, and its plot.

A strategy is on the front when no other one is both faster and needs less memory: the front is the menu a
person picks from when memory headroom matters (a longer sequence later, a fragmenting allocator). Its points are
the `POOL` fastest feasible strategies by estimate (the estimate scaled as the search scales it, the replayed
ones at their replayed step time), each with the peak memory of its fullest stage from the memory model
(memory/): working out the memory of every feasible strategy would cost as much as the search itself.

The plot (matplotlib's Agg backend, imported only when a plot is asked for) shows every point, the front as a
step line and the winner as a star; the same search writes the same bytes (no dates or software versions in the
file's metadata, a fixed SVG id salt).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from ..config.errors import ConfigError
from ..config.units import GiB
from ..export.files import write_atomic
from .run import Search, SearchResult, anchored_ms
from .space import Strategy

POOL = 2000
"""Feasible strategies, fastest estimates first, whose memory the front is drawn from (0.5 ms each)."""


@dataclass(frozen=True, order=True)
class Point:
    iteration_ms: float
    peak_memory_gib: float
    strategy: Strategy
    replayed: bool


def points(search: Search, result: SearchResult, pool: int = POOL) -> list[Point]:
    """The pool's strategies at the step time the search gives them and their peak memory."""
    replayed = {r.strategy: r.replay_ms for r in result.ranked if r.replay_ms is not None}
    found = []
    for estimate, strategy in result.candidates[:pool]:
        ms = replayed.get(strategy)
        time_ms = ms if ms is not None else anchored_ms(estimate, result.anchor)
        found.append(Point(time_ms, search.memory(strategy).device / GiB, strategy, ms is not None))
    return sorted(found)


def front(candidates: list[Point]) -> list[Point]:
    """The points no other point beats on both step time and memory, fastest first."""
    kept: list[Point] = []
    for point in sorted(candidates):
        if not kept or point.peak_memory_gib < kept[-1].peak_memory_gib:
            kept.append(point)
    return kept


def plot_kind(path: Path) -> str:
    """`png` or `svg`, from the file name; anything else is refused before the search starts."""
    kind = path.suffix.lower().lstrip(".")
    if kind not in ("png", "svg"):
        raise ConfigError(f"--plot {path}: expected a .png or .svg file name")
    return kind


def plot(candidates: list[Point], winner: Strategy, capacity_gib: float, path: Path, title: str) -> None:
    """The points, the front and the winner, as PNG or SVG by the file's suffix."""
    data = drawing(candidates, winner, capacity_gib, plot_kind(path), title)
    try:
        write_atomic(path, data)
    except OSError as exc:
        raise ConfigError(f"--plot {path}: cannot write: {exc.strerror or exc}") from None


def drawing(candidates: list[Point], winner: Strategy, capacity_gib: float, kind: str, title: str) -> bytes:
    """The points, the front and the winner drawn as `kind` (png or svg): the file's bytes."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    best = front(candidates)
    with matplotlib.rc_context({"svg.hashsalt": "simulon", "svg.fonttype": "path"}):
        figure, axes = pyplot.subplots(figsize=(8, 5), dpi=100)
        axes.scatter([p.iteration_ms for p in candidates], [p.peak_memory_gib for p in candidates], s=8,
                     color="0.75", label=f"feasible strategies ({len(candidates):,} fastest)")
        axes.step([p.iteration_ms for p in best], [p.peak_memory_gib for p in best], where="post",
                  color="tab:blue", marker="o", markersize=4, label=f"Pareto front ({len(best)})")
        top = next(p for p in candidates if p.strategy == winner)
        axes.scatter([top.iteration_ms], [top.peak_memory_gib], marker="*", s=220, color="tab:red", zorder=3,
                     label="winner")
        axes.axhline(capacity_gib, color="0.4", linestyle="--", linewidth=1, label="GPU memory")
        axes.set(xlabel="step time (ms; replayed where replayed, else the scaled estimate)",
                 ylabel="peak memory, fullest stage (GiB)", title=title)
        axes.legend(loc="upper right", fontsize=8)
        figure.tight_layout()
        buffer = io.BytesIO()
        metadata = {"Software": None} if kind == "png" else {"Date": None, "Creator": None}
        figure.savefig(buffer, format=kind, metadata=metadata)
        pyplot.close(figure)
    return buffer.getvalue()
