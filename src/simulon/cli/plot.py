"""`simulon plot RESULT --kind K -o out.png|svg`: draw one of simulon's results (plots/)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..config.errors import ConfigError
from .paths import path_option


def plot(
    result: Annotated[Path, typer.Argument(help="a result: simulate/collective/validate --json output saved to a "
                                           "file, or a sweep's CSV")],
    kind: Annotated[str, typer.Option(help="breakdown, gantt, memory, links (simulate --json); busbw (collective "
                                      "--json); validation (validate --json); scaling, steps (sweep CSV)")],
    output: Annotated[Path, path_option("-o", "--output", help="the plot to write: .png or .svg")],
    measured: Annotated[Path | None, path_option(help="busbw: a measurement table in validate's collectives.csv "
                                                 "format, its rows for the same collective and group size overlaid")]
    = None,
    subset: Annotated[str | None, typer.Option(help="busbw: only the measured rows of this subset")] = None,
    hardware: Annotated[str | None, typer.Option(help="busbw: only measured rows whose hardware contains this "
                                                 "text")] = None,
) -> None:
    """Draw a result as a PNG or SVG plot."""
    from ..plots import render
    from ..plots.collective import Measured
    from ..plots.figure import check_output

    if measured is None and (subset is not None or hardware is not None):
        raise ConfigError("--subset/--hardware: choose measured rows, so they need --measured")
    if measured is not None and kind != "busbw":
        raise ConfigError(f"--measured: only the busbw plot overlays measurements, not {kind!r}")
    check_output(output, "-o", (result,) if measured is None else (result, measured))
    render(kind, result, output, Measured(measured, subset, hardware) if measured is not None else None)
    print(f"Plot written to {output}")
