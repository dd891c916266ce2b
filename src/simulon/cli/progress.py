"""A progress display on stderr for long commands: the stage, and a bar with the units done (the replay's
nodes, a table's rows), the elapsed time and an estimate of the time left. Shown only where stderr is a
terminal, and not with --json (`quiet`), so that output piped to a file or read by another program stays as it
is; it disappears when the command ends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


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
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True, disable=quiet or not console.is_terminal) as bar:
        yield TerminalProgress(bar)
