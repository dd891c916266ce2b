"""How a long run tells what it is doing: the stages of a simulation and how far the replay has got.

The pipeline reports to a `Progress`; the CLI's shows a bar on a terminal (cli/progress.py), and `SILENT`, the
default, says nothing. Reporting is cheap: the replay calls `advance` once every REPORT_EVERY finished nodes.
"""

from __future__ import annotations

from typing import Protocol

REPORT_EVERY = 1 << 14
"""Finished nodes between two reports of the replay's advance (a bar refreshes a few times a second)."""


class Progress(Protocol):
    def stage(self, description: str, total: int | None = None, unit: str = "") -> None:
        """A new stage begins; `total`: the units (`unit`: what they are) `advance` counts to, if it reports
        any."""

    def advance(self, done: int) -> None:
        """`done` of the current stage's total units are finished."""


class Silent:
    """Progress that is not shown."""

    def stage(self, description: str, total: int | None = None, unit: str = "") -> None:
        pass

    def advance(self, done: int) -> None:
        pass


SILENT = Silent()
