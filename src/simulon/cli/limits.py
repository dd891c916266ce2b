"""`--max-memory`: how much memory a simulation may take before it is refused up front (dag/size.py); and how many
local processes a command may start (`--jobs`, `--workers`)."""

from __future__ import annotations

import os
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


PROCESSES_PER_CPU = 4
"""Local worker processes allowed per CPU: a simulation keeps its CPU busy, so more run no faster, and each
process holds its own copy of the work (thousands of them would exhaust the machine's memory and processes)."""


def check_processes(count: int | None, option: str) -> None:
    """A ConfigError unless `count` (given by `option`; None: the default) is a sensible number of local
    processes: at least one, and at most PROCESSES_PER_CPU for each CPU of this machine."""
    if count is None:
        return
    if count < 1:
        raise ConfigError(f"{option}: expected a positive number of processes, got {count}")
    cpus = os.cpu_count() or 1
    if count > PROCESSES_PER_CPU * cpus:
        raise ConfigError(f"{option}: expected at most {PROCESSES_PER_CPU * cpus} processes ({PROCESSES_PER_CPU} for "
                          f"each of this machine's {cpus} CPUs; more run no faster), got {count}")
