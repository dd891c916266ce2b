"""Figures rendered the same way every time: matplotlib's Agg backend (no display), imported only when a plot is
made, and files whose bytes depend only on what is drawn.

PNG: matplotlib writes no time stamp, and its "Software" text is dropped (it names the matplotlib version). SVG: the
ids matplotlib derives from a random salt use a fixed `svg.hashsalt`, and the "Date" metadata is left out
(matplotlib's documented recipe for reproducible SVG, `rcParams["svg.hashsalt"]`)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ..config.errors import ConfigError

FORMATS = (".png", ".svg")
"""The file types a plot is written as, by the output's suffix."""

DPI = 120
"""PNG resolution: a 10 x 6 inch figure is 1,200 x 720 pixels, readable on a laptop screen."""

STYLE = {"svg.hashsalt": "simulon", "svg.fonttype": "path", "font.size": 9, "axes.grid": True,
         "grid.alpha": 0.3, "figure.dpi": DPI}


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, with simulon's style (imported on first use: `simulon simulate` and
    the other commands do not pay for matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(STYLE)
    return plt


def check_output(path: Path, option: str = "-o", inputs: tuple[Path, ...] = ()) -> str:
    """The format to write `path` (given by `option`) in, or a ConfigError naming the option and the problem."""
    from ..export.files import check_writable

    check_writable(path, option, "plot", FORMATS, inputs)
    return path.suffix.lower()[1:]


def figure_bytes(fig: Any, fmt: str) -> bytes:
    """The figure as PNG or SVG bytes, without time stamps or version strings; the figure is closed."""
    plt = pyplot()
    metadata = {"Software": None} if fmt == "png" else {"Date": None, "Creator": None}
    buffer = io.BytesIO()
    with plt.rc_context(STYLE):
        fig.savefig(buffer, format=fmt, dpi=DPI, metadata=metadata, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def save(fig: Any, path: Path, option: str = "-o") -> None:
    """Write the figure to `path` (PNG or SVG by its suffix, given by `option`), atomically."""
    from ..export.files import write_atomic

    data = figure_bytes(fig, check_output(path, option))
    try:
        write_atomic(path, data)
    except OSError as exc:
        raise ConfigError(f"{option} {path}: cannot write: {exc.strerror or exc}") from None


def overlapping(boxes: list[Any]) -> bool:
    """Whether any two of these boxes (matplotlib Bboxes of tick labels, left to right) overlap."""
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def label_boxes(ax: Any) -> list[Any]:
    """The drawn extents of the x tick labels of `ax` that show text (the figure laid out first: a label's place is
    set when its axis is drawn)."""
    ax.figure.draw_without_rendering()
    renderer = ax.figure.canvas.get_renderer()
    return [label.get_window_extent(renderer) for label in ax.get_xticklabels() if label.get_visible()
            and label.get_text()]


def fit_tick_labels(ax: Any) -> None:
    """Lay out the x tick labels of `ax` so that none overlaps another, the way a reader needs them: level where
    they fit, else turned upright (each then as wide as its lines are tall), else upright and thinned to every
    n-th label, the fewest dropped (labels of several lines per bar, over a dozen bars, ran into each other)."""
    labels = [label for label in ax.get_xticklabels() if label.get_text()]
    for rotation in (0, 90):
        for label in labels:  # upright, the lines of a label end together, at the axis
            label.set(rotation=rotation, multialignment="right" if rotation else "center")
        if not overlapping(label_boxes(ax)):
            return
    for every in range(2, len(labels) + 1):
        for i, label in enumerate(labels):
            label.set_visible(i % every == 0)
        if not overlapping(label_boxes(ax)):
            return
