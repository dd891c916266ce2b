"""Terminal tables, and the labels of a result extrapolated from sampled micro-batches; rich is imported only when
a table is printed, to keep start-up light."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..analysis.result import MicroBatchSampling, SimulationResult
    from ..dag.fold import Fold


def print_table(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    from rich.cells import cell_len
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for i, column in enumerate(columns):  # no narrower than its longest word: a narrow terminal wraps a header at
        words = [word for cell in (column, *(row[i] for row in rows)) for word in cell.split()]  # its spaces and
        table.add_column(column, justify="right", min_width=max(map(cell_len, words), default=1))  # cuts no cell
    for row in rows:
        table.add_row(*row)
    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:  # a file or a pipe has no width to fit: the table at its own, one line per row
        unbounded = console.options.update_width(10_000)  # wider than any table's natural width: none is cut
        console.width = max(console.width, console.measure(table, options=unbounded).maximum)
    console.print(table)


def sampling_line(sampling: MicroBatchSampling, traced: bool = False) -> str:
    """What `simulon simulate` says of a step extrapolated from two replayed micro-batch counts."""
    m1, m2 = sampling.simulated
    shown = "the trace and findings are" if traced else "the findings are"
    return (f"Micro-batches: {m1} and {m2} of {sampling.micro_batches} replayed, the step extrapolated linearly "
            f"(--micro-batches all replays every one); {shown} the {m2}-micro-batch replay's")


def fold_lines(fold: Fold) -> list[str]:
    """What `simulon simulate` says of a step too large to replay as it is: its collectives folded throughout, its
    long rings in steady state."""
    from ..dag.fold import STEADY_RING_MEMBERS

    lines = [] if fold.expand_spread else [
        "Collectives: folded throughout, none expanded over every GPU (their expansion would not fit; within 1% of it "
        "on most steps, up to 10% fast on ZeRO-3's: dag.fold.Fold.folded_throughout)"]
    if fold.steady_rings:
        lines.append(f"Rings: those of {STEADY_RING_MEMBERS} members or more in steady state, each sender's steps one "
                     "flow (the step would not fit otherwise: dag.fold.Fold.with_steady_rings)")
    return lines


def fold_flags(fold: Fold) -> dict[str, bool]:
    """The keys `simulate --json` and the trace's metadata carry for a step folded throughout or run with its rings
    in steady state (none for one replayed as it is)."""
    return {**({} if fold.expand_spread else {"collectives_folded_throughout": True}),
            **({"rings_in_steady_state": True} if fold.steady_rings else {})}


def trace_metadata(result: SimulationResult, fold: Fold) -> dict | None:
    """The trace's label (its `otherData`) where the trace is not the step as it would run: extrapolated from sampled
    micro-batches (the trace is the larger replayed count's), collectives folded throughout, rings in steady state;
    `note` says each in words, as the terminal does."""
    metadata: dict = fold_flags(fold)
    notes = []
    if result.sampling is not None:
        metadata["micro_batch_sampling"] = result.sampling.to_dict()
        notes.append(f"this trace replays {result.sampling.simulated[1]} of the step's "
                     f"{result.sampling.micro_batches} micro-batches; the summary is extrapolated")
    notes += fold_lines(fold)
    return {**metadata, "note": "; ".join(notes)} if notes else None
