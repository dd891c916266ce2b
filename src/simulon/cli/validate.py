"""`simulon validate {kernels,collectives,training,memory,hetero} [--csv FILE] [--json] [--plot FILE]`: the
shipped table unless --csv names one; --plot draws predicted against measured (plots/validation.py).
`simulon validate profile GPU.yaml`: a GPU's own profiled kernels against the compute model."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from ..config.errors import ConfigError, not_utf8
from ..config.loading import describe_validation_error
from .limits import MaxMemoryOption, check_processes, memory_limit
from .output import print_table
from .paths import path_option

app = typer.Typer(no_args_is_help=True, help="Compare predictions with published measurement tables.")

CsvOption = Annotated[Path | None, path_option("--csv", help="a measurement table in the shipped tables' format "
                                                "(default: the shipped table of published measurements)")]
JsonOption = Annotated[bool, typer.Option("--json", help="print the report as one JSON object")]
PlotOption = Annotated[Path | None, path_option("--plot", help="also draw predicted against measured by subset "
                                                 "(.png or .svg)")]
JobsOption = Annotated[int | None, typer.Option("--jobs", help="simulations run at once, sharing --max-memory "
                                                "(default: the CPU count)")]


def table(csv_path: Path | None, name: str) -> Path:
    """The table to compare with: the one given, else the shipped one."""
    from ..validate.report import shipped_table

    return csv_path if csv_path is not None else shipped_table(name)


def report(csv_path: Path, as_json: bool, validator: Callable, group_title: str, plot: Path | None = None) -> None:
    """Run a validator over a table and print its report (a table, or JSON); with `plot`, draw it there."""
    from ..plots.figure import check_output
    from ..validate.report import REASONS_WHEN_NONE, read_table

    if plot is not None:  # never over the table it draws (by a link, or a table saved under a .png name)
        check_output(plot, "--plot", (csv_path,))

    try:
        rows = read_table(csv_path)
    except OSError as exc:
        raise ConfigError(f"{csv_path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{csv_path}: {not_utf8(exc)}") from None
    except ValueError as exc:  # cells the csv module cannot split
        raise ConfigError(f"{csv_path}: {exc}") from None
    if not rows:  # read as "no row could be compared (0 skipped)", asking whether it was a table of another format
        raise ConfigError(f"{csv_path}: no rows: the table is empty or holds only its header")
    result = validator(rows).usable()
    numbers = spreadsheet_rows(rows)
    if not result.rows:
        lines = skipped_lines(result.skipped, numbers=numbers)
        why = ": " + "; ".join(lines[:REASONS_WHEN_NONE]) if lines else ""
        if len(lines) > REASONS_WHEN_NONE:
            why += f"; and {len(lines) - REASONS_WHEN_NONE} other reasons"
        # rows skipped for one reason have that reason; rows skipped for many may be a table of another format
        ask = "; is this a table in the shipped tables' format for this validator?" if len(lines) != 1 else ""
        raise ConfigError(f"{csv_path}: no row could be compared ({len(result.skipped)} skipped{why}){ask}")
    report_on(result, str(csv_path), as_json, group_title, plot, numbers=numbers)


def spreadsheet_rows(rows: list) -> list[int]:
    """Each data row's number as a spreadsheet shows the table (report.TableRow.number: blank lines are rows there),
    FIRST_ROW on for rows that do not know theirs."""
    return [getattr(row, "number", None) or index + FIRST_ROW for index, row in enumerate(rows)]


def report_on(result, source: str, as_json: bool, group_title: str, plot: Path | None = None,
              items: str | None = None, numbers: list[int] | None = None) -> None:
    """Print a validation report (a table, or JSON) and, with `plot`, draw it there. `result` holds finite errors
    only (ValidationReport.usable: a comparison whose error is no finite number is among the skipped). `items`: the
    YAML list the indices count (`kernel_runs`), where they are no table's rows; `numbers`: the rows' numbers as a
    spreadsheet shows them, by index (spreadsheet_rows; default the index + FIRST_ROW)."""
    if plot is not None:
        from ..plots.figure import save
        from ..plots.validation import validation

        save(validation(result.to_dict(groups=True), source), plot, "--plot")
    if as_json:
        print(json.dumps(result.to_dict()))
        return
    rows = len({r.index for r in result.rows})
    several = len(result.rows) > rows  # some row measured more than one quantity (memory: allocated and reserved)
    compared = f"{rows} row{'s' * (rows != 1)} compared" + (f" ({len(result.rows)} measurements)" if several else "")
    print_table(f"{compared}, {len(result.skipped)} skipped: MAPE "
                f"{result.mape_pct:.1f}%", ("subset", "MAPE %", *counts_header(several)),
                [(name, f"{value:.1f}", *counts(result.rows, "subset", name, several))
                 for name, value in result.mape_by("subset").items()])
    floors = result.floor_by("group")
    shown = any(value > 0 for value in floors.values())  # only where the table holds rows it does not tell apart
    print_table(f"MAPE by {group_title}", (group_title, "MAPE %", *(("floor %",) if shown else ()),
                                           *counts_header(several)),
                [(name, f"{value:.1f}", *((f"{floors[name]:.1f}",) if shown else ()),
                  *counts(result.rows, "group", name, several))
                 for name, value in result.mape_by("group").items()])
    if shown:
        print("floor %: the least MAPE any model reading the table can reach: rows alike in every cell but the "
              "measured ones, measured apart, get one prediction")
    for line in skipped_lines(result.skipped, items, numbers):
        print(f"skipped {line}")
    if result.skipped and items is None:
        blanks = numbers is not None and any(n != i + FIRST_ROW for i, n in enumerate(numbers))
        print(f"(rows numbered as a spreadsheet shows the table: its header is row {FIRST_ROW - 1}; --json gives "
              f"each row's index from 0{', not counting blank lines' if blanks else ''})")


def counts_header(several: bool) -> tuple[str, ...]:
    """The count columns of a report's table: the table rows compared, and where a row may give several measurements
    the measurements too (which the MAPE averages over)."""
    return ("rows", "measurements") if several else ("rows",)


def counts(comparisons: list, key: str, name: str, several: bool) -> tuple[str, ...]:
    """For the comparisons whose `key` (subset or group) is `name`: the table rows they come from (a row counted once
    however many quantities it measured: the memory table's allocated and reserved figures of one run were two
    "rows"), and with `several` the measurements."""
    mine = [c for c in comparisons if getattr(c, key) == name]
    rows = str(len({c.index for c in mine}))
    return (rows, str(len(mine))) if several else (rows,)


NUMBER = re.compile(r"(?<![\w'.-])\d+(?:\.\d+)?(?![\w'])")
"""A number standing as a word of its own (a measured value), not part of a name ('Intel Gaudi 2', 'fp8', 'H100')."""


FIRST_ROW = 2
"""The number a table's first data row has where a user looks at it: a spreadsheet's, the header being row 1."""
ROWS_LISTED = 12
"""Row numbers a skipped reason lists before it says how many more."""


def skip_reasons(reasons: list[str], indices: list[int] | None = None) -> list[tuple[str, list[int]]]:
    """The skipped rows' reasons, most frequent first, each with the indices of its rows (`indices`, else the reasons'
    positions); reasons that differ only in their numbers are one line, each number that varies shown as its range
    ("2012.64 to 2592.8 TFLOP/s is above ...")."""
    alike: dict[tuple[str, ...], list[tuple[int, list[str]]]] = {}
    for index, reason in zip(range(len(reasons)) if indices is None else indices, reasons, strict=True):
        alike.setdefault(tuple(NUMBER.split(reason)), []).append((index, NUMBER.findall(reason)))
    lines = []
    for texts, found in alike.items():
        numbers = [values for _, values in found]
        shown = [values[0] if len(set(values)) == 1 else f"{min(values, key=float)} to {max(values, key=float)}"
                 for values in zip(*numbers, strict=True)]
        lines.append(("".join(text + number for text, number in zip(texts, [*shown, ""], strict=True)),
                      [index for index, _ in found]))
    return sorted(lines, key=lambda line: -len(line[1]))


def row_numbers(indices: list[int], numbers: list[int] | None = None) -> str:
    """Rows by the numbers a user sees them under (`numbers` by index, else FIRST_ROW on), runs of three or more as
    ranges, the first ROWS_LISTED parts and a count of the rows left: "rows 2-4, 9 and 3 more"."""
    runs: list[list[int]] = []
    for number in sorted(index + FIRST_ROW if numbers is None else numbers[index] for index in indices):
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    parts = [(f"{run[0]}-{run[-1]}", len(run)) if len(run) > 2 else (str(n), 1)
             for run in runs for n in (run if len(run) <= 2 else run[:1])]
    shown = parts[:ROWS_LISTED]
    rest = len(indices) - sum(count for _, count in shown)
    text = ", ".join(part for part, _ in shown) + (f" and {rest} more" if rest else "")
    return f"row {text}" if len(indices) == 1 else f"rows {text}"


def skipped_lines(skipped: list, items: str | None = None, numbers: list[int] | None = None) -> list[str]:
    """One line a reason: how many rows it skipped, which (by `numbers`, as row_numbers), and why ("2 (rows 3, 7): no
    sequence length"); the entries of the YAML list `items` where the indices count one ("1 (kernel_runs[0]):
    unknown phase '3'")."""
    return [f"{len(indices)} ({row_numbers(indices, numbers) if items is None else item_numbers(indices, items)}): "
            f"{reason}"
            for reason, indices in skip_reasons([s.reason for s in skipped], [s.index for s in skipped])]


def item_numbers(indices: list[int], items: str) -> str:
    """Entries of a YAML list by their indices from 0, the first ROWS_LISTED and a count of the rest:
    "kernel_runs[0], kernel_runs[4] and 3 more"."""
    shown = sorted(indices)[:ROWS_LISTED]
    rest = len(indices) - len(shown)
    return ", ".join(f"{items}[{i}]" for i in shown) + (f" and {rest} more" if rest else "")


@app.command()
def training(csv: CsvOption = None, as_json: JsonOption = False, max_memory: MaxMemoryOption = None,
             plot: PlotOption = None, jobs: JobsOption = None) -> None:
    """Predict each published training run's iteration time and compare (a row too large for the memory
    available is skipped, with its reason)."""
    from ..validate.training import validate_training
    from .progress import terminal_progress

    check_processes(jobs, "--jobs")
    limit = memory_limit(max_memory)
    with terminal_progress(quiet=as_json) as progress:
        path = table(csv, "training")
        report(path, as_json, lambda rows: validate_training(rows, limit, progress=progress, source=str(path),
                                                             jobs=jobs), "system", plot)


@app.command()
def kernels(csv: CsvOption = None, as_json: JsonOption = False, plot: PlotOption = None) -> None:
    """Kernel throughput (GEMM, grouped GEMM, attention) against the calibrated compute model."""
    from ..validate.kernels import validate_kernels

    path = table(csv, "kernels")
    report(path, as_json, lambda rows: validate_kernels(rows, source=str(path)), "GPU / family", plot)


@app.command()
def collectives(csv: CsvOption = None, as_json: JsonOption = False, max_memory: MaxMemoryOption = None,
                plot: PlotOption = None, jobs: JobsOption = None) -> None:
    """Simulate each published collective measurement (nccl-tests style) and compare bus bandwidth (a row too
    large for the memory available is skipped, with its reason)."""
    from ..validate.collectives import validate_collectives
    from .progress import terminal_progress

    check_processes(jobs, "--jobs")
    limit = memory_limit(max_memory)
    with terminal_progress(quiet=as_json) as progress:
        path = table(csv, "collectives")
        report(path, as_json, lambda rows: validate_collectives(rows, progress=progress, source=str(path),
                                                                memory_limit=limit, jobs=jobs),
               "hardware family and size", plot)


@app.command()
def memory(csv: CsvOption = None, as_json: JsonOption = False, plot: PlotOption = None) -> None:
    """Per-GPU peak memory of published runs against the memory model, each compared with what its source
    measured (allocated, reserved, or nvidia-smi's used memory)."""
    from ..validate.memory import validate_memory

    path = table(csv, "memory")
    report(path, as_json, lambda rows: validate_memory(rows, source=str(path)), "source", plot)


@app.command()
def hetero(csv: CsvOption = None, as_json: JsonOption = False, plot: PlotOption = None) -> None:
    """Heterogeneous training runs (Sailor's mixed RTX 3090 / TITAN RTX / RTX 2080 Ti runs in the memory table)
    simulated on their node groups: iteration time against measured."""
    from ..validate.hetero import validate_hetero
    from .progress import terminal_progress

    with terminal_progress(quiet=as_json) as progress:
        path = table(csv, "memory")
        report(path, as_json, lambda rows: validate_hetero(rows, progress=progress, source=str(path)),
               "node groups and strategy", plot)


@app.command()
def profile(gpu_file: Annotated[Path, typer.Argument(help="a GPU YAML with kernel_runs (simulon profile gpu)")],
            as_json: JsonOption = False, plot: PlotOption = None) -> None:
    """A GPU's own measured kernels (`simulon profile gpu`) against the calibrated compute model, kernel by
    kernel and by family."""
    from ..config.dc import GPUSpec
    from ..plots.figure import check_output
    from ..validate.profile import validate_profile

    if plot is not None:
        check_output(plot, "--plot", (gpu_file,))
    try:
        is_file = gpu_file.is_file()
    except OSError as exc:  # a name no file can have (ENAMETOOLONG): pathlib raises rather than answer
        raise ConfigError(f"{gpu_file}: cannot read: {exc.strerror or exc}") from None
    if not is_file:
        why = "Is a directory" if gpu_file.is_dir() else "No such file or directory" if not gpu_file.exists() \
            else "not a regular file"
        raise ConfigError(f"{gpu_file}: cannot read: {why}")
    path = str(gpu_file)
    try:  # with a slash `from` reads it as the file it is whatever its name, never as a template's (my-h100)
        gpu = GPUSpec.model_validate({"from": path if "/" in path else f"./{path}"})
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, str(gpu_file))) from None
    report_on(validate_profile(gpu, source=str(gpu_file)).usable(), str(gpu_file), as_json, "family", plot,
              items="kernel_runs")
