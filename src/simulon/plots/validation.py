"""Predicted against measured, one marker per compared measurement coloured by subset, from a validation report
(validate/report.py, what `simulon validate ... --json` prints): points on the diagonal are exact, the band is
+-20%. One panel per compared metric (iteration time, bus bandwidth, kernel TFLOP/s, memory). A panel with more
subsets than the palette has colours (a GPU profile's kernels by phase and dtype: 170 of them) is coloured by the
rows' coarser group instead (kernel family, GPU, hardware family: `validate --plot` passes them; a saved `--json`
report has none and keeps its subsets), so that its legend stays readable."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .figure import pyplot
from .inputs import is_finite, need, numbers
from .scaling import label_log_axis

VALIDATE = "simulon validate TABLE --json"
BAND = 0.2
"""The shaded band around the diagonal: +-20% error."""


def validation(data: Any, source: str, options: Any = None) -> Any:
    rows = need(data, "rows", source, VALIDATE)
    values = numbers(rows, ("measured", "predicted"), source, "rows")
    panels: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    plt = pyplot()
    colours = plt.get_cmap("tab20").colors
    by_group = grouped_metrics(rows, len(colours))
    for row, (measured, predicted) in zip(rows, values, strict=True):
        metric = str(row.get("metric", ""))
        panels[metric][str(row["group"] if metric in by_group else row.get("subset", ""))].append((measured, predicted))
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 5.5), squeeze=False)
    for ax, (metric, subsets) in zip(axes[0], sorted(panels.items()), strict=True):
        points = [p for pts in subsets.values() for p in pts if p[0] > 0 and p[1] > 0]
        lo = min(min(p) for p in points) / 1.5 if points else 0.1
        hi = max(max(p) for p in points) * 1.5 if points else 10.0
        ax.fill_between([lo, hi], [lo * (1 - BAND), hi * (1 - BAND)], [lo * (1 + BAND), hi * (1 + BAND)],
                        color="#dddddd", label=f"+-{100 * BAND:.0f}%")
        ax.plot([lo, hi], [lo, hi], "k-", linewidth=0.8)
        for n, (subset, pts) in enumerate(sorted(subsets.items())):
            error = sum(abs(p - m) / m for m, p in pts if m) / len(pts) * 100
            ax.scatter([m for m, _ in pts], [p for _, p in pts], s=12, color=colours[n % len(colours)],
                       label=f"{subset} ({len(pts)}, MAPE {error:.1f}%)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        for axis in (ax.xaxis, ax.yaxis):  # matplotlib labels a span within a decade 2x10^1, 3x10^1, ...
            label_log_axis(axis, lo, hi)
        ax.set_xlabel(f"measured {metric}")
        ax.set_ylabel(f"predicted {metric}")
        ax.legend(fontsize=6, loc="upper left")
    mape = data.get("mape_pct")
    fig.suptitle(f"Predicted against measured: {len(rows)} comparisons"
                 + (f", MAPE {float(mape):.1f}%" if is_finite(mape) else ""))
    return fig


def grouped_metrics(rows: list[dict], colours: int) -> set[str]:
    """The metrics whose panels are coloured by group: more subsets than colours, and a group on every row."""
    subsets: dict[str, set[str]] = defaultdict(set)
    ungrouped: set[str] = set()
    for row in rows:
        metric = str(row.get("metric", ""))
        subsets[metric].add(str(row.get("subset", "")))
        if not row.get("group"):
            ungrouped.add(metric)
    return {metric for metric, names in subsets.items() if len(names) > colours and metric not in ungrouped}
