"""Plots of a sweep (`simulon sweep ... -o sweep.csv`): throughput and scaling efficiency against GPUs with where
the efficiency falls most and the term that causes it (sweep/scaling.py), and the step-time breakdown of every
point."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from ..config.errors import ConfigError
from .figure import fit_tick_labels, pyplot
from .inputs import read_text, sweep_columns_missing
from .result import TERMS, stack

SWEEP = "simulon sweep SCENARIO --set ... -o sweep.csv"
JSON_KINDS = ("`simulate --json` draws with --kind breakdown, gantt, memory or links, `collective --json` with busbw, "
              "`validate --json` with validation")
"""The kinds that draw a JSON result, by the command that writes it: a collective's result given to --kind scaling
was told it was a simulation's."""


def read_sweep(path: Path) -> tuple[list[dict[str, str]], list[str]]:
    """A sweep's CSV: its rows and its swept columns (those between `key` and `num_gpus`)."""
    from ..sweep.run import METRICS, metric_problem

    text = read_text(path)
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    missing = sweep_columns_missing(header)
    if missing and not header:
        raise ConfigError(f"{path}: empty: no sweep's CSV (this plot reads the CSV of `{SWEEP}`)")
    if missing and text.lstrip().startswith(("{", "[")):
        raise ConfigError(f"{path}: a JSON file, not a sweep's CSV (this plot reads the CSV of `{SWEEP}`; "
                          f"{JSON_KINDS})")
    if missing:
        raise ConfigError(f"{path}: {missing[0]}: column missing (this plot reads the CSV of `{SWEEP}`)")
    rows = list(reader)
    if not rows:
        raise ConfigError(f"{path}: no rows (this plot reads the CSV of `{SWEEP}`)")
    for i, row in enumerate(rows):
        for column in METRICS[:-1]:  # a row by its line, the header being line 1, as `sweep` names them
            problem = metric_problem(column, row[column]) if isinstance(row[column], str) else "expected a number"
            if problem is not None:
                raise ConfigError(f"{path}: line {i + 2}: {column}: {problem}, got {row[column]!r}")
    return rows, header[1:header.index("num_gpus")]


LADDERS = ((1.0,), (1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0),
           (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0))
"""The labelled ticks of a log axis, as the multiples of each power of ten (matplotlib's LogLocator `subs`), coarsest
first: label_log_axis takes the first that reaches both ends of the axis."""

END_GAP = 0.25
"""The most of a log axis's length (in decades) that may go unlabelled at either end. Chosen, not fitted: a
validation panel over 36-180 s labelled up to 100 left its top 36% (and its point at 120 s) without a label."""


def label_log_axis(axis: Any, lo: float, hi: float) -> None:
    """Label a log axis spanning `lo` to `hi` (above 0) in plain numbers, at the coarsest of LADDERS whose ticks reach
    within END_GAP of the axis's length of both its ends (powers of ten over many decades; 1, 2 and 5 times them over
    two or three; every digit, then 1.2, 1.5 and 2.5 too, within a decade), so that the whole axis reads. A span
    that no ladder reaches across (within about 1.5x) takes evenly spaced ticks, with the decimals their spacing
    needs."""
    plt = pyplot()
    from matplotlib.ticker import LogLocator, MaxNLocator

    axis.set_minor_formatter(plt.NullFormatter())
    subs = next((s for s in LADDERS if reaches_ends(log_ticks_within(lo, hi, s), lo, hi)), None) if lo > 0 else None
    if subs is None:
        axis.set_major_locator(MaxNLocator(nbins=8))  # a step at most twice 1/8 of the span: a label per quarter
        step = (hi - lo) / 8
        places = max(0, 1 - math.floor(math.log10(step))) if step > 0 else 0
        axis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:,.{places}f}"))
        return
    axis.set_major_locator(LogLocator(subs=subs))
    axis.set_major_formatter(plt.FuncFormatter(lambda v, _: plain(v)))


def reaches_ends(ticks: list[float], lo: float, hi: float) -> bool:
    """Whether a log axis from `lo` to `hi` with these ticks (ascending) has two or more, and one within END_GAP of
    its length of each end."""
    limit = END_GAP * math.log10(hi / lo)
    return len(ticks) >= 2 and math.log10(ticks[0] / lo) <= limit and math.log10(hi / ticks[-1]) <= limit


def plain(value: float) -> str:
    """A log axis's tick in plain figures, to its second significant digit at most and without trailing zeros:
    2,000, 1,500,000, 1.5, 0.2, 0.05 (written whole, a tenth of a second read "0")."""
    if value <= 0:
        return f"{value:,.0f}"
    text = f"{value:,.{max(0, 1 - math.floor(math.log10(value)))}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def log_ticks_within(lo: float, hi: float, subs: tuple[float, ...] = LADDERS[2]) -> list[float]:
    """The values of `subs` times a power of ten from `lo` to `hi` (both positive), ascending: a log axis's ticks."""
    first, last = math.floor(math.log10(lo)), math.floor(math.log10(hi))
    return [d * 10.0**p for p in range(first, last + 1) for d in subs if lo <= d * 10.0**p <= hi]


def scaling(data: Any, source: str, options: Any = None) -> Any:
    """Tokens/s against GPUs (log-log, with the ideal line from the smallest point) and scaling efficiency, one
    line per series, the largest fall in efficiency marked and explained."""
    from ..sweep.scaling import scaling_study

    rows, axes = data
    series = scaling_study(rows, axes)
    if not series:
        raise ConfigError(f"{source}: no swept field changes the GPU count; a scaling plot needs one "
                          "(e.g. --set cluster.num_nodes+training.num_gpus=1:8,2:16,4:32 where the scenario sets "
                          "training.num_gpus, else --set cluster.num_nodes=1,2,4)")
    plt = pyplot()
    fig, (speed, eff) = plt.subplots(1, 2, figsize=(12, 4.8))
    notes = []
    for n, s in enumerate(series):
        colour = plt.get_cmap("tab10").colors[n % 10]
        label = f"{s.name} ({s.kind} scaling)"
        speed.plot(s.gpus, s.tokens_per_s, "o-", color=colour, label=label)
        ideal = [s.tokens_per_s[0] * g / s.gpus[0] for g in s.gpus]
        if s.kind != "mixed":
            speed.plot(s.gpus, ideal, ":", color=colour, linewidth=0.8)
        eff.plot(s.gpus, [100 * e for e in s.efficiency], "o-", color=colour, label=label)
        if s.worst is not None:
            eff.annotate(s.worst.term.removesuffix("_ms").replace("_", " "), (s.worst.to_gpus,
                         100 * s.worst.efficiency_after), textcoords="offset points", xytext=(0, -14), ha="center",
                         fontsize=7, color=colour)
            notes.append(f"{s.name}: {s.worst.describe()}")
    gpus = sorted({g for s in series for g in s.gpus})
    for ax in (speed, eff):
        ax.set_xscale("log", base=2)
        ax.set_xticks(gpus, [f"{g:,}" for g in gpus])
        ax.minorticks_off()
        ax.set_xlabel("GPUs")
        ax.legend(fontsize=7)
    speed.set_yscale("log")
    label_log_axis(speed.yaxis, *speed.get_ylim())
    speed.set_ylabel("tokens/s (dotted: ideal)")
    eff.set_ylabel("scaling efficiency (%)")
    eff.set_ylim(0, max(105, max(100 * max(s.efficiency) for s in series) + 5))
    fig.suptitle("Throughput and scaling efficiency")
    if notes:
        fig.text(0.5, -0.02, "\n".join(notes), ha="center", va="top", fontsize=8)
    return fig


def steps(data: Any, source: str, options: Any = None) -> Any:
    """Every point's step split into compute, exposed communication and bubble (ms, averages over the GPUs)."""
    from ..sweep.scaling import short_name

    rows, axes = data
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(rows) + 2), 5))
    labels = ["\n".join(f"{short_name(a)}={r[a]}" for a in axes) for r in rows]
    stack(ax, labels, [[float(r[t[0]]) for r in rows] for t in TERMS])
    fit_tick_labels(ax)
    ax.set_ylabel("ms per step")
    ax.legend(fontsize=8)
    ax.set_title("Step-time breakdown per point")
    return fig
