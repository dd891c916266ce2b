"""`--max-memory`: how much memory a simulation may take before it is refused up front (dag/size.py); and how many
local processes a command may start (`--jobs`, `--workers`)."""

from __future__ import annotations

from typing import Annotated

import typer

from ..config.errors import ConfigError
from ..config.units import check_size, parse_size

MaxMemoryOption = Annotated[str | None, typer.Option(
    "--max-memory", help="memory a simulation may take, like 8GB, or 'none' for no limit (default: what the "
                         "machine has available); a run estimated to need more is refused before it starts")]


def memory_limit(text: str | None) -> float | None:
    """Bytes a simulation may take: the option's value, or what this machine has available; None: no limit."""
    from ..dag.size import available_memory

    if text is None:
        return available_memory()
    if text.strip().lower() == "none":
        return None
    try:
        return check_size(parse_size(text))
    except ValueError as exc:
        raise ConfigError(f"--max-memory: {exc}") from None


def check_processes(count: int | None, option: str) -> None:
    """A ConfigError unless `count` (given by `option`; None: the default) is a sensible number of local
    processes (executors.check_processes, the rule's one home, which the Python API's entry points share)."""
    from ..executors import check_processes as checked_processes

    try:
        checked_processes(count, option)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
