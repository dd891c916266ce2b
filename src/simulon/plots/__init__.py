"""Plots of simulon's results with matplotlib, as PNG or SVG: one registry of plot kinds, each a function from a
result (what a command printed or wrote) to a figure, rendered deterministically by plots/figure.py.

| kind | reads | draws |
|---|---|---|
| breakdown | `simulon simulate --json` | step-time breakdown per GPU and per stage |
| gantt | `simulon simulate --json` | the pipeline timeline per stage |
| memory | `simulon simulate --json` | memory per stage against capacity |
| links | `simulon simulate --json` | the busiest links' load over the step, as a heat map |
| busbw | `simulon collective --json` | bus bandwidth against message size (measured points with --measured) |
| validation | `simulon validate ... --json` | predicted against measured, by subset |
| scaling | `simulon sweep -o sweep.csv` | throughput and scaling efficiency against GPUs, where scaling breaks |
| steps | `simulon sweep -o sweep.csv` | step-time breakdown per point |
"""

from .registry import KINDS, PlotKind, render, render_data

__all__ = ["KINDS", "PlotKind", "render", "render_data"]
