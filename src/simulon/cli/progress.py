"""A progress display on stderr for long commands: the stage, and a bar with the units done (the replay's
nodes, a table's rows), the elapsed time and an estimate of the time left. Shown only where stderr is a
terminal, and not with --json (`quiet`), so that output piped to a file or read by another program stays as it
is; it disappears when the command ends."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text


class TimeLeft(ProgressColumn):
    """The time a stage has left at its mean pace so far: the time since it began over the units done, times the
    units left (unknown, -:--:--, until one is done). Rich's own estimate (TimeRemainingColumn) divides the units
    reported after the first report by the time between the first and the last, leaving out the wait for the
    first: a sweep's points on two processes finish in pairs a moment apart, so after the first pair of 60 s points
    it showed 0:00:01 left for the next pair (speed: one point in a millisecond)."""

    def render(self, task: Task) -> Text:
        if task.finished:
            return Text("0:00:00", style="progress.remaining")
        if not task.completed or task.total is None or task.elapsed is None:
            return Text("-:--:--", style="progress.remaining")
        left = task.elapsed * max(task.total - task.completed, 0) / task.completed
        return Text(str(timedelta(seconds=math.ceil(left))), style="progress.remaining")


class TerminalProgress:
    """simulon.progress.Progress as a rich progress bar."""

    def __init__(self, bar: Progress):
        self.bar = bar
        self.task: TaskID | None = None
        self.unit = ""
        self.total: int | None = None

    def stage(self, description: str, total: int | None = None, unit: str = "") -> None:
        if self.task is not None:
            self.bar.remove_task(self.task)
        self.unit = f" {unit}" if unit else ""
        self.total = total
        self.task = self.bar.add_task(description, total=total, counts="")

    def advance(self, done: int) -> None:
        if self.task is not None:
            self.bar.update(self.task, completed=done,
                            counts=f"{done:,}/{self.total:,}{self.unit}" if self.total else "")


@contextmanager
def terminal_progress(console: Console | None = None, quiet: bool = False) -> Iterator[TerminalProgress]:
    """A progress display on `console` (default: stderr), disabled where that is not a terminal or `quiet`."""
    console = console or Console(stderr=True)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[counts]}"),
               TimeElapsedColumn(), TimeLeft())
    with Progress(*columns, console=console, transient=True, disable=quiet or not console.is_terminal) as bar:
        yield TerminalProgress(bar)
