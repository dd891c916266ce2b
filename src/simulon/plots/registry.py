"""The plot kinds by name, what each reads, and rendering one to a file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ..config.errors import ConfigError
from .collective import COLLECTIVE, busbw
from .figure import check_output, save
from .inputs import read_json
from .links import links
from .result import SIMULATE, breakdown, gantt, memory
from .scaling import read_sweep, scaling, steps
from .validation import VALIDATE, validation


@dataclass(frozen=True)
class PlotKind:
    draw: Callable[[Any, str, Any], Any]   # (data, source name, options) -> figure
    read: Callable[[Path], Any]            # the result file -> data


read_simulated = partial(read_json, made_by=SIMULATE)
"""A `simulate --json` result (a sweep's CSV named as one: inputs.read_json)."""

KINDS = {
    "breakdown": PlotKind(breakdown, read_simulated),
    "gantt": PlotKind(gantt, read_simulated),
    "memory": PlotKind(memory, read_simulated),
    "links": PlotKind(links, read_simulated),
    "busbw": PlotKind(busbw, partial(read_json, made_by=COLLECTIVE)),
    "validation": PlotKind(validation, partial(read_json, made_by=VALIDATE)),
    "scaling": PlotKind(scaling, read_sweep),
    "steps": PlotKind(steps, read_sweep),
}


def render(kind: str, result: Path, output: Path, options: Any = None) -> None:
    """Draw `kind` from the result file into `output` (PNG or SVG by its suffix)."""
    if kind not in KINDS:
        raise ConfigError(f"--kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    check_output(output)
    plot = KINDS[kind]
    render_data(kind, plot.read(result), str(result), output, options)


def render_data(kind: str, data: Any, source: str, output: Path, options: Any = None) -> None:
    """Draw `kind` from `data` as its kind reads it from a result file (a sweep's rows and swept columns, say)
    into `output`; `source` names where the data came from in messages."""
    save(KINDS[kind].draw(data, source, options), output)
