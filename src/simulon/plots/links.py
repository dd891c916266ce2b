"""The link-utilisation heat map, from `simulon simulate --json`: the busiest links (rows) against time in the step
(columns), each cell the link's mean load over that bin as a share of its capacity (analysis/links.py's
`load_over_time`: each flow counted at the rates the replay gave it)."""

from __future__ import annotations

from typing import Any

from ..config.errors import ConfigError
from .figure import pyplot
from .inputs import expected, is_finite, need, number
from .result import SIMULATE, replay_note


def links(data: Any, source: str, options: Any = None) -> Any:
    """A heat map of the busiest links' load over the step, with each link's utilisation over the whole step."""
    analysis = need(data, "analysis", source, SIMULATE, dict)
    over_time = need(need(analysis, "links", f"{source}: analysis", SIMULATE, dict), "over_time",
                     f"{source}: analysis.links", SIMULATE, dict)
    if over_time.get("links") == []:
        raise ConfigError(f"{source}: analysis.links.over_time.links: empty: no link carried traffic in this step, "
                          "so there is no load to draw")
    rows = need(over_time, "links", f"{source}: analysis.links.over_time", SIMULATE)
    grid = [load_row(row, source, i) for i, row in enumerate(rows)]
    if len({len(r) for r in grid}) != 1:
        raise ConfigError(f"{source}: analysis.links.over_time.links: every link needs the same number of bins")
    bin_ms = number(over_time, "bin_ms", source, None, "analysis.links.over_time.")
    if bin_ms <= 0:
        raise ConfigError(f"{source}: analysis.links.over_time.bin_ms: expected a bin width above 0, got {bin_ms:g}")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.45 * len(grid)))
    image = ax.imshow(grid, aspect="auto", cmap="viridis", vmin=0.0, vmax=max(1.0, max(map(max, grid))),
                      extent=(0.0, bin_ms * len(grid[0]), len(grid) - 0.5, -0.5), interpolation="nearest")
    means = [sum(r) / len(r) for r in grid]
    ax.set_yticks(range(len(grid)), [f"{row['link']} ({100 * m:.1f}%)" for row, m in zip(rows, means, strict=True)],
                  fontsize=8)
    ax.grid(False)
    ax.set_xlabel("time in the step (ms)")
    fig.colorbar(image, ax=ax, label="load (share of capacity)", pad=0.01)
    ax.set_title("Busiest links' load over the step (mean over the step in brackets)" + replay_note(data, source))
    return fig


def load_row(row: Any, source: str, index: int) -> list[float]:
    """One link's loads per bin, or a ConfigError naming the link's entry."""
    where = f"{source}: analysis.links.over_time.links[{index}]"
    load = row.get("load") if isinstance(row, dict) else None
    if not isinstance(load, list) or not load or not isinstance(row.get("link"), str):
        raise ConfigError(f"{where}: expected {{\"link\": name, \"load\": [share per bin, ...]}}")
    bad = next((i for i, x in enumerate(load) if not is_finite(x)), None)
    if bad is not None:
        raise ConfigError(f"{where}.load[{bad}]: {expected(load[bad])}")
    return [float(x) for x in load]
