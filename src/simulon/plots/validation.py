"""Predicted against measured, one marker per compared measurement coloured by subset, from a validation report
(validate/report.py, what `simulon validate ... --json` prints): points on the diagonal are exact, the band is
+-20%. One panel per compared metric (iteration time, bus bandwidth, kernel TFLOP/s, memory)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .figure import pyplot
from .inputs import need, numbers

VALIDATE = "simulon validate TABLE --json"
BAND = 0.2
"""The shaded band around the diagonal: +-20% error."""


def validation(data: Any, source: str, options: Any = None) -> Any:
    rows = need(data, "rows", source, VALIDATE)
    values = numbers(rows, ("measured", "predicted"), source, "rows")
    panels: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for row, (measured, predicted) in zip(rows, values, strict=True):
        panels[str(row.get("metric", ""))][str(row.get("subset", ""))].append((measured, predicted))
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 5.5), squeeze=False)
    colours = plt.get_cmap("tab20").colors
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
        ax.set_xlabel(f"measured {metric}")
        ax.set_ylabel(f"predicted {metric}")
        ax.legend(fontsize=6, loc="upper left")
    mape = data.get("mape_pct")
    fig.suptitle(f"Predicted against measured: {len(rows)} comparisons"
                 + (f", MAPE {float(mape):.1f}%" if isinstance(mape, int | float) else ""))
    return fig
