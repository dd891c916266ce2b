"""A scaling study from a sweep's rows: throughput and scaling efficiency against GPUs, whether the study is weak
or strong scaling, and where the efficiency drops most and which step-time term causes it.

* Series: the points that differ only in the axes that change the GPU count; each other combination of swept
  values (two NIC speeds, say) is its own series.
* Strong scaling: the tokens of a step stay the same as the GPUs grow; weak: the tokens per GPU stay the same
  (the global batch grows with the GPUs); anything else is reported as mixed.
* Efficiency of a point: its tokens/s per GPU over the smallest point's (speed-up over ideal speed-up in strong
  scaling, the step time's growth in weak scaling: both are that ratio).
* Where scaling breaks: the step between consecutive GPU counts with the largest fall in efficiency; its cause:
  the step-time term (compute, bubble, exposed communication per kind) whose share of the step grows most over
  that step.
"""

from __future__ import annotations

from dataclasses import dataclass

from .run import EXPOSED

TERMS = ("compute_ms", "bubble_ms", *EXPOSED)
"""The terms whose shares of the step explain a fall in efficiency."""

TOLERANCE = 1e-6
"""Relative spread within which tokens per step (strong scaling) or per GPU (weak scaling) count as constant:
well above the CSV's rounding (9 significant digits, sweep/run.py's DIGITS), far below any real change of
batch or GPU count."""


@dataclass(frozen=True)
class Break:
    """The step where efficiency falls most, and the term whose share of the step grows most there."""

    from_gpus: int
    to_gpus: int
    efficiency_before: float
    efficiency_after: float
    term: str
    share_before: float
    share_after: float

    def describe(self) -> str:
        name = self.term.removesuffix("_ms").replace("_", " ")
        before, after = apart(100 * self.efficiency_before, 100 * self.efficiency_after)
        return (f"efficiency falls most from {self.from_gpus:,} to {self.to_gpus:,} GPUs "
                f"({before}% -> {after}%): {name} grows from "
                f"{100 * self.share_before:.1f}% to {100 * self.share_after:.1f}% of the step")


def apart(a: float, b: float, most: int = 3) -> tuple[str, str]:
    """Two numbers with the fewest decimals (up to `most`) that keep them apart: 100.4 and 99.9, not 100 and 100."""
    for digits in range(most + 1):
        shown = f"{a:.{digits}f}", f"{b:.{digits}f}"
        if shown[0] != shown[1]:
            return shown
    return shown


@dataclass(frozen=True)
class Series:
    """The points of one combination of the other swept values, by GPU count."""

    name: str
    rows: list[dict[str, str]]
    kind: str            # strong, weak or mixed
    efficiency: list[float]
    worst: Break | None

    @property
    def gpus(self) -> list[int]:
        return [int(r["num_gpus"]) for r in self.rows]

    @property
    def tokens_per_s(self) -> list[float]:
        return [float(r["tokens_per_s"]) for r in self.rows]


def short_name(axis: str) -> str:
    """An axis's column without the blocks its paths go through: `datacenter.cluster.num_nodes` -> `num_nodes`."""
    return "+".join(path.rsplit(".", 1)[-1] for path in axis.split("+"))


def gpu_axes(rows: list[dict[str, str]], axes: list[str]) -> list[str]:
    """The swept columns that change the GPU count: two rows differing in that column alone differ in GPUs."""
    changing = []
    for axis in axes:
        others = [a for a in axes if a != axis]
        seen: dict[tuple, set[str]] = {}
        for row in rows:
            seen.setdefault(tuple(row[a] for a in others), set()).add(row["num_gpus"])
        if any(len(gpus) > 1 for gpus in seen.values()):
            changing.append(axis)
    return changing


def scaling_kind(rows: list[dict[str, str]]) -> str:
    tokens = [float(r["tokens_per_step"]) for r in rows]
    per_gpu = [t / int(r["num_gpus"]) for t, r in zip(tokens, rows, strict=True)]
    if max(tokens) - min(tokens) <= TOLERANCE * max(tokens):
        return "strong"
    if max(per_gpu) - min(per_gpu) <= TOLERANCE * max(per_gpu):
        return "weak"
    return "mixed"


def share(row: dict[str, str], term: str) -> float:
    return float(row[term]) / float(row["step_ms"])


def worst_step(rows: list[dict[str, str]], efficiency: list[float]) -> Break | None:
    """The consecutive pair with the largest fall in efficiency (None if it never falls)."""
    falls = [(efficiency[i] - efficiency[i + 1], i) for i in range(len(rows) - 1)]
    drop, i = max(falls, default=(0.0, -1))
    if drop <= 0:
        return None
    before, after = rows[i], rows[i + 1]
    term = max(TERMS, key=lambda t: (share(after, t) - share(before, t), t))
    return Break(int(before["num_gpus"]), int(after["num_gpus"]), efficiency[i], efficiency[i + 1], term,
                 share(before, term), share(after, term))


def scaling_study(rows: list[dict[str, str]], axes: list[str]) -> list[Series]:
    """The sweep's series by GPU count (see the module docstring); none if no swept field changes the GPUs."""
    changing = gpu_axes(rows, axes)
    if not changing:
        return []
    others = [a for a in axes if a not in changing]
    groups: dict[tuple, list[dict[str, str]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[a] for a in others), []).append(row)
    series = []
    for values, members in groups.items():
        members = sorted(members, key=lambda r: int(r["num_gpus"]))
        base = float(members[0]["tokens_per_s"]) / int(members[0]["num_gpus"])
        efficiency = [float(r["tokens_per_s"]) / int(r["num_gpus"]) / base if base > 0 else 0.0 for r in members]
        name = ", ".join(f"{short_name(a)}={v}" for a, v in zip(others, values, strict=True)) or "all points"
        series.append(Series(name, members, scaling_kind(members), efficiency, worst_step(members, efficiency)))
    return series
