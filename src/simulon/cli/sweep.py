"""`simulon sweep SCENARIO --set PATH=V1,V2 ... -o sweep.csv [--plots DIR] [--jobs N]`: the cartesian product of
the swept fields, simulated on local processes or Ray, written as a resumable CSV, with scaling plots (sweep/)."""

from __future__ import annotations

import json
import math
import os
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated

import typer

from ..config.errors import ConfigError
from .limits import MaxMemoryOption, check_processes, memory_limit
from .paths import path_option, typed_text

PLOTS = {"scaling": "scaling.png", "steps": "steps.png"}
"""The plots --plots writes (plots/scaling.py), by kind."""


def sweep(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML to start every point from")],
    set_: Annotated[list[str], typer.Option("--set", help="PATH=V1,V2,... : a field by its dotted path (from the "
                                            "scenario's root, or inside datacenter/workload/collective) and its "
                                            "values; PATH+PATH=A:B,C:D moves fields together (repeatable; the "
                                            "sweep runs every combination); quote a value holding a comma, YAML's "
                                            "quotes inside the shell's: 'PATH=\"Et*8,t|t*8L\"'")],
    output: Annotated[Path, path_option("-o", "--output", help="the sweep's CSV; rows already there for the same "
                                        "points are kept, not re-run")],
    plots: Annotated[Path | None, path_option(folder=True, help="folder to write scaling.png and steps.png into "
                                                   "(created if missing, in a folder that exists)")] = None,
    jobs: Annotated[int | None, typer.Option(help="points simulated at once (default: the CPU count)")] = None,
    expand: Annotated[str, typer.Option(help="auto | full | symmetric, as in simulate")] = "auto",
    executor: Annotated[str, typer.Option(help="where points run: process (a local pool) or ray")] = "process",
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster to join (default: start a local one)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the rows and the scaling study as JSON")] = False,
    max_memory: MaxMemoryOption = None,
) -> None:
    """Simulate every combination of the swept values; write one CSV row per point and the scaling plots."""
    from ..config.errors import recording_reads
    from ..executors import executor as make_executor
    from ..export.files import check_folder_writable, check_not_input, check_regular_output, check_writable
    from ..pipeline import check_fold_mode
    from ..sweep.points import parse_axis, sweep_points
    from ..sweep.run import run_sweep
    from ..sweep.scaling import scaling_study
    from .progress import terminal_progress

    try:
        check_fold_mode(expand, "--expand")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    check_processes(jobs, "--jobs")
    # on Ray each point's limit is its task's, at most the largest node's memory (sweep.run.simulated), not what
    # this machine has available
    limit = None if executor == "ray" and max_memory is None else memory_limit(max_memory)
    check_writable(output, "-o", "CSV", inputs=(scenario,))
    check_regular_output(output, "-o", "sweep's CSV")
    if plots is not None:
        if plots.resolve() == output.resolve():  # the CSV, once written, is a file where the folder was to be made
            raise ConfigError(f"--plots {plots}: is the sweep's CSV (-o {output}); name a folder of its own")
        check_folder_writable(plots, "--plots")
        check_plot_files(plots, inputs=(scenario, output))
    with recording_reads() as read:  # the points' templates and configs: the CSV may overwrite none of them
        points = sweep_points(scenario, [parse_axis(typed_text(text, "--set")) for text in set_])
    check_not_input(output, "-o", tuple(read))
    runner = make_executor(executor, jobs, ray_address, workers_option="--jobs")
    if executor == "process":  # the sweep runs its own local pool (sweep.run), sized by --jobs
        runner = None
    with runner or nullcontext(), terminal_progress(quiet=as_json) as progress:  # Ray started once, stopped after
        rows, kept = run_sweep(points, output, jobs or os.cpu_count() or 1, expand, progress, runner, limit)
    axes = list(points[0].steps)
    series = scaling_study(rows, axes)
    written = write_plots(plots, output, rows, axes) if plots is not None else []
    if as_json:
        print(json.dumps({"rows": [json_row(row) for row in rows], "kept": kept, "scaling": [
            {"series": s.name, "kind": s.kind, "gpus": s.gpus, "efficiency": s.efficiency,
             "worst": s.worst.describe() if s.worst else None} for s in series]}))
        return
    print(f"{len(points)} point{'s' if len(points) != 1 else ''} ({kept} already in {output}, {len(points) - kept} "
          f"simulated); written to {output}")
    for s in series:
        print(f"{s.name}: {s.kind} scaling over {s.gpus[0]:,}-{s.gpus[-1]:,} GPUs, efficiency "
              f"{100 * s.efficiency[-1]:.0f}% at {s.gpus[-1]:,}" + (f"; {s.worst.describe()}" if s.worst else ""))
    if written:
        print(f"Plots written to {plots}: {', '.join(written)}")


def check_plot_files(folder: Path, inputs: tuple[Path, ...]) -> None:
    """A ConfigError, before the sweep runs, where a plot --plots writes into an existing `folder` could not be
    written there (a folder of its name, the sweep's own scenario or CSV): it was refused after every point had run,
    naming `-o pl/steps.png`, an option the user never gave."""
    from ..export.files import check_writable

    if folder.is_dir():
        for name in PLOTS.values():
            check_writable(folder / name, "--plots", "plot", inputs=inputs)


def json_row(row: dict[str, str]) -> dict[str, object]:
    """A CSV row as --json prints it: its key (a hash) as text, every other cell typed."""
    return {name: cell if name == "key" else typed(cell) for name, cell in row.items()}


def typed(cell: str) -> object:
    """A CSV cell as --json gives it: a whole number or a finite number as a number, true/false as a boolean, a
    blank as null, anything else (a speed like 400Gbps, a combined axis's 2:16) as the text."""
    if cell == "":
        return None
    if cell in ("true", "false"):
        return cell == "true"
    for kind in (int, float):
        try:
            value = kind(cell)
        except ValueError:
            continue
        if math.isfinite(value):
            return value
    return cell


def write_plots(folder: Path, csv_path: Path, rows: list[dict[str, str]], axes: list[str]) -> list[str]:
    """The sweep's plots of its own `rows` (a scaling plot only where a swept field changes the GPU count), as the
    printed study reads them: the CSV may also hold the rows of earlier sweeps, of other scenarios among them, which
    were drawn into this sweep's plots; the names of the files written."""
    from ..plots import render_data
    from ..sweep.scaling import scaling_study

    try:
        folder.mkdir(exist_ok=True)  # its parent was checked up front: a typo there is refused, not created
    except OSError as exc:
        raise ConfigError(f"--plots {folder}: cannot create: {exc.strerror or exc}") from None
    written = []
    for kind, name in PLOTS.items():
        if kind != "scaling" or scaling_study(rows, axes):
            render_data(kind, (rows, axes), str(csv_path), folder / name)
            written.append(name)
    return written
