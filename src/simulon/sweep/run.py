"""Run a sweep's points on local processes or Ray and keep their results in a CSV that doubles as the sweep's
journal.

Each point is one full simulation (pipeline.simulate) in a worker: a local process pool, or Ray tasks
(executors.py, the executors the search replays its best strategies on). A finished point's row is
appended to the CSV and flushed to disk at once, keyed by the hash of the point's resolved scenario
(sweep/points.py), so a sweep that is killed loses only the points it was running: started again, it keeps the
rows whose key is one of its points and runs the rest. When every point is done the CSV is rewritten in the
points' order, so the same sweep gives the same file however it was interrupted or parallelised.

The file accumulates points: a sweep onto the CSV of another sweep over the same fields keeps that sweep's rows
(after its own, in their order), so that `--set tp=1,2` then `--set tp=4` leaves all three. Rows it cannot keep
honestly are refused, not dropped: rows swept over other fields (this sweep's columns cannot hold them), a row
with one of this sweep's steps but another key (simulated from a scenario that has changed since), and a row whose
swept values, set in this sweep's scenario, give another key (simulated from another scenario: the CSV has no
column saying which, so it mixed two runs, and the plots drew them as one series).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import os
from collections.abc import Iterator
from pathlib import Path

from ..analysis.kinds import COMM_KINDS
from ..config.common import MAX_GPUS
from ..config.errors import ConfigError, not_utf8
from ..config.units import GiB
from ..executors import Executor, Needs, Refused, check_processes, in_shares, task_limit
from ..export.files import write_atomic
from ..progress import SILENT, Progress
from .points import Point, points_at

EXPOSED = tuple(f"exposed_{kind.lower()}_comm_ms" for kind in COMM_KINDS)
"""Exposed communication per kind, averaged over the GPUs as exposed_comm_ms is, an instant in which several kinds
run shared among them, so that they add up to it (analysis/exposure.py: mean_exposed_ms)."""

METRICS = ("num_gpus", "tokens_per_step", "step_ms", "tokens_per_s", "tflops_per_gpu", "mfu", "compute_ms",
           "exposed_comm_ms", "overlapped_comm_ms", "bubble_ms", *EXPOSED, "peak_memory_gib", "memory_capacity_gib",
           "fits")
"""What each point's row reports after its key and swept values (ms per step: averages over the GPUs)."""

DIGITS = 9
"""Significant digits of a number in the CSV."""


UNRUNNABLE, TOO_LARGE = "unrunnable", "too large"
"""The keys of a point's outcome that say why it cannot run, or why it is too large to (point_outcome)."""


def point_metrics(args: tuple[dict, str, float | None, float | None]) -> dict[str, str] | Needs:
    """Simulate one point as `simulate` does within `memory_limit` (micro-batches sampled where the step is too large
    to replay whole, refused where even that would take more than the limit, TooLarge) and return its row's metrics
    as CSV text; runs in a worker process (module level, to be picklable). `share`: the bytes it may take beside the
    points running with it (None: the whole limit): one planned within the limit to need more is not run, and
    comes back as Needs (executors.in_shares: it runs later, admitted by its need), so that a point's row never
    depends on how many ran beside it."""
    from ..analysis.analyze import per_gpu_values
    from ..analysis.exposure import exposure, mean_exposed_ms
    from ..config.loading import parse_scenario
    from ..pipeline import over_share, plan_step, simulate_step

    data, fold_mode, memory_limit, share = args
    sc = parse_scenario(data, "sweep point")
    step = plan_step(sc, fold_mode, memory_limit, micro_batches="auto")  # type: ignore[arg-type]
    need = over_share(sc, step, fold_mode, memory_limit, share)  # type: ignore[arg-type]
    if need is not None:
        return need
    train, gib = sc.workload.training, GiB
    placement = sc.placement()  # the ridge point only splits compute, not the exposed communication read here
    ridge = (per_gpu_values(placement, lambda g: g.gpu.peak_flops(train.dtype))
             / per_gpu_values(placement, lambda g: g.gpu.memory_bandwidth))

    def exposed_by_kind(replay) -> dict[str, float]:  # of each sampled replay, extrapolated as the step's figures
        return mean_exposed_ms(exposure(replay.dag, replay.timeline, ridge))

    sim = simulate_step(sc, step, fold_mode, memory_limit=memory_limit, micro_batches="auto",  # type: ignore[arg-type]
                        figures=exposed_by_kind)
    r, exposed = sim.result, sim.summary
    values = {"num_gpus": r.num_gpus, "tokens_per_step": train.global_batch_size * train.sequence_length,
              "step_ms": r.iteration_time_ms, "tokens_per_s": r.tokens_per_s, "tflops_per_gpu": r.tflops_per_gpu,
              "mfu": r.mfu, **r.breakdown, **dict(zip(EXPOSED, exposed.values(), strict=True)),
              "peak_memory_gib": sim.memory.peak.device / gib, "memory_capacity_gib": sim.memory.capacity / gib,
              "fits": sim.memory.fits}
    return {name: text(values[name]) for name in METRICS}


def text(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.{DIGITS}g}"
    return str(value)


def columns(points: list[Point]) -> list[str]:
    return ["key", *points[0].steps, *METRICS]


def read_done(path: Path) -> dict[str, dict[str, str]]:
    """The rows of an earlier run of a sweep in `path` (none if it does not exist): key -> metrics (read_rows)."""
    return {key: {m: row[m] for m in METRICS} for key, row in read_rows(path)[1].items()}


def read_rows(path: Path) -> tuple[list[str], dict[str, dict[str, str]]]:
    """The columns and the finished rows (key -> the whole row, in the file's order) of the sweep CSV at `path`
    (none if it does not exist). A row cut short by a kill (no newline at its end, or fields missing) is ignored;
    a file that is not a sweep's CSV, or a complete row whose metrics are not numbers (check_metrics), is refused
    rather than overwritten."""
    if not path.exists():
        return [], {}
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark, as a spreadsheet saves one, dropped
    except OSError as exc:
        raise ConfigError(f"-o {path}: cannot read the earlier sweep's rows: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"-o {path}: exists and is not a sweep's CSV ({not_utf8(exc)}); name another file") from None
    text = text[:text.rfind("\n") + 1]  # a last line without its newline was cut short by a kill
    if not text.strip():
        return [], {}
    reader = csv.DictReader(io.StringIO(text))
    if "key" not in (reader.fieldnames or []):
        raise ConfigError(f"-o {path}: exists and is not a sweep's CSV (no key column); name another file")
    done = {}
    for row in reader:
        if all(row.get(m) not in (None, "") for m in METRICS) and None not in row:
            check_metrics(row, path, reader.line_num)
            done[row["key"]] = row
    return list(reader.fieldnames or []), done


def check_metrics(row: dict[str, str], path: Path, line: int) -> None:
    """A ConfigError naming the file, the line and the column of a kept row's metric that is not what the sweep
    writes (metric_problem): a row edited or damaged is refused, not taken as done."""
    for name in METRICS:
        problem = metric_problem(name, row[name])
        if problem is not None:
            raise ConfigError(f"-o {path}: line {line}, column {name}: {problem}, got {row[name]!r} (the earlier "
                              "sweep's row is damaged: correct or delete it, or name another file)")


def metric_problem(name: str, value: str) -> str | None:
    """What is wrong with a sweep CSV's cell of the metric `name` (None where it is what the sweep writes): `fits` is
    true or false; `num_gpus` a whole number from 1 to MAX_GPUS (the scaling study divides by it: 0, 1.5 or a
    400-digit count ended `plot` in an internal error); `step_ms` a time above 0; every other one a finite number."""
    if name == "fits":
        return None if value in ("true", "false") else "expected true or false"
    try:
        number = float(value)
    except ValueError:
        return "expected a number"
    if not math.isfinite(number):
        return "expected a number"
    if name == "num_gpus" and not (value.strip().isdecimal() and 1 <= number <= MAX_GPUS):
        return f"expected a whole number of GPUs from 1 to {MAX_GPUS:,}"
    if name == "step_ms" and number <= 0:
        return "expected a step time above 0"
    return None


def row_text(header: list[str], rows: list[dict[str, str]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, lineterminator="\n")
    for row in rows:
        writer.writerow(row)
    return out.getvalue()


def header_text(header: list[str]) -> str:
    return ",".join(header) + "\n"


def point_row(point: Point, metrics: dict[str, str]) -> dict[str, str]:
    return {"key": point.key, **point.steps, **metrics}


def run_sweep(points: list[Point], path: Path, jobs: int = 1, fold_mode: str = "auto",
              progress: Progress = SILENT, runner: Executor | None = None,
              memory_limit: float | None = None) -> tuple[list[dict[str, str]], int]:
    """Run every point not already in the CSV at `path`, `jobs` at a time, writing each row as it finishes; the
    rows in the points' order, and how many were already there. `memory_limit`: bytes the points running at once
    may take together (None: no limit; on Ray, each task's), as `simulated` shares it out. Nothing is read or
    written before the arguments are checked (check_arguments: ValueError or TypeError naming the parameter), and
    nothing written before every point to run is known to be runnable (check_runnable) and `runner` has reached
    its workers (a Ray address that cannot be joined left a CSV holding only its header)."""
    path = check_arguments(points, path, jobs, fold_mode, memory_limit)
    points = [dataclasses.replace(p, expand=fold_mode) for p in points]
    header = columns(points)
    fields, done = read_rows(path)
    kept = {p.key: {m: done[p.key][m] for m in METRICS} for p in points if p.key in done}
    others = earlier_points(points, path, fields, done)
    check_runnable([p for p in points if p.key not in kept])
    if runner is not None:  # a Ray cluster that cannot be reached is refused before the CSV is touched
        runner.connect()
    new_file = not path.exists()
    try:
        write_atomic(path, header_text(header) + row_text(header, [point_row(p, kept[p.key]) for p in points
                                                                    if p.key in kept] + others))
    except OSError as exc:
        raise ConfigError(f"-o {path}: cannot write: {exc.strerror or exc}") from None
    pending = [p for p in points if p.key not in kept]
    progress.stage(f"simulating {len(pending)} of {len(points)} points", total=len(pending), unit="points")
    results = dict(kept)
    written = 0
    try:
        with open(path, "ab") as journal:  # bytes, as write_atomic writes the file: UTF-8 and '\n' line ends whatever
            # the locale's encoding or the platform's line end (text mode wrote '\r\n' rows on Windows)
            for point, metrics in simulated(pending, jobs, fold_mode, runner, memory_limit):
                journal.write(row_text(header, [point_row(point, metrics)]).encode("utf-8"))
                journal.flush()
                os.fsync(journal.fileno())
                results[point.key] = metrics
                written += 1
                progress.advance(written)
    except BaseException:  # a point that cannot run, Ctrl-C or SIGTERM, a worker lost: a file this sweep made and
        # wrote no row to is not left behind (an interrupted sweep left a CSV holding only its header)
        if new_file and not written and not kept and not others:
            path.unlink(missing_ok=True)
        raise
    rows = [point_row(p, results[p.key]) for p in points]
    write_atomic(path, header_text(header) + row_text(header, rows + others))
    return rows, len(kept)


def check_arguments(points: object, path: object, jobs: object, fold_mode: object, memory_limit: object) -> Path:
    """run_sweep's CSV path as a Path (a str or path-like given), once its arguments are what it takes: points of
    sweep.points (sweep_points makes them), at least one; `jobs` a number of local processes as --jobs is checked
    (executors.check_processes); a fold mode and a memory limit as simulate takes them (pipeline.check_fold_mode,
    check_memory_limit). Else TypeError or ValueError naming the parameter, before the CSV is touched: an invalid
    fold_mode left a CSV holding only its header, and jobs=0 or -1 ran where --jobs 0 is refused."""
    from ..pipeline import check_fold_mode, check_memory_limit

    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path: expected the sweep CSV's path (a str or pathlib.Path), got {type(path).__name__}")
    if not isinstance(points, list) or not all(isinstance(p, Point) for p in points):
        raise TypeError("points: expected a list of sweep points (simulon.sweep.points.sweep_points makes them)")
    if not points:
        raise ValueError("points: expected at least one point to sweep")
    check_processes(jobs, "jobs")
    check_fold_mode(fold_mode)
    check_memory_limit(memory_limit)
    return Path(path)


def check_runnable(points: list[Point]) -> None:
    """A ConfigError naming the first of `points` whose collective algorithm cannot run one of its step's
    collectives (pipeline.check_collectives: PAT's all-reduce, a tree's all-gather, NVLS across NVLink domains),
    as the point's run would end (named), but before any point runs: a sweep of collective.algorithm=ring,tree,pat
    ran ring and tree first and then stopped, keeping the ring row on a local pool and none on Ray."""
    from ..collective.algorithms import Unrunnable
    from ..pipeline import check_collectives

    for point in points:
        try:
            check_collectives(point.scenario)
        except Unrunnable as exc:
            named(point, {UNRUNNABLE: str(exc)})


def earlier_points(points: list[Point], path: Path, fields: list[str], done: dict[str, dict[str, str]]
                   ) -> list[dict[str, str]]:
    """The rows of `path` whose points this sweep does not run, kept after its own (a sweep's CSV accumulates
    points, each keyed by its resolved scenario). Refused with a ConfigError rather than dropped: rows swept over
    other fields (this sweep's columns cannot hold them), a row with one of this sweep's steps but another key
    (its point simulated from a scenario that has changed since), and a row whose swept values, set in this sweep's
    scenario (points.points_at), give another key than its own (simulated from another scenario)."""
    ours = {p.key for p in points}
    others = [row for key, row in done.items() if key not in ours]
    if not others:
        return []
    header = columns(points)
    if set(fields) != set(header):
        swept = ", ".join(f for f in fields if f != "key" and f not in METRICS) or "nothing"
        raise ConfigError(f"-o {path}: holds {len(others)} rows of other points, swept over {swept}; this sweep "
                          f"sets {', '.join(points[0].steps)}, so its columns cannot hold them: sweep the same "
                          "fields (the file then keeps every point), or name another file")
    steps = {tuple(p.steps.values()): p for p in points}
    for row in others:
        same = steps.get(tuple(row[axis] for axis in points[0].steps))
        if same is not None:
            raise ConfigError(f"-o {path}: the row keyed {row['key']} is the point {same.label} of this sweep "
                              "simulated from another scenario or with another --expand (the scenario or a template "
                              "it names has changed since); name another file, or delete that one to simulate every "
                              "point again")
    for row, point in zip(others, points_at(points[0], others), strict=True):
        if point is not None and point.key != row["key"]:
            raise ConfigError(f"-o {path}: the row keyed {row['key']} ({point.label}) was simulated from another "
                              "scenario or with another --expand than this sweep's (or from this scenario before it "
                              "or a template it names changed): the file would hold the rows of two runs with "
                              "nothing to tell them apart; name another file")
    return [{name: row[name] for name in header} for row in others]


def simulated(points: list[Point], jobs: int, fold_mode: str, runner: Executor | None = None,
              memory_limit: float | None = None) -> Iterator[tuple[Point, dict[str, str]]]:
    """(point, metrics) as each point finishes: on `runner` (executors.py: a process pool or Ray; there
    `memory_limit` is each task's, at most what the runner lets one take, executors.task_limit, and each point is
    sized first and asks for its need) if given, else in this process with one job, else on a local pool of `jobs`
    sharing `memory_limit` (executors.in_shares: each point is planned within the whole limit, so its row is the
    same however many run beside it)."""
    if runner is not None:
        memory_limit = task_limit(runner, memory_limit)
    work = [(p.scenario.as_data(), fold_mode, memory_limit) for p in points]
    for index, outcome in in_shares(point_outcome, work, jobs, memory_limit, runner):
        yield points[index], named(points[index], outcome)


def point_outcome(args: tuple[dict, str, float | None, float | None]) -> dict[str, str] | Needs:
    """point_metrics, or {"unrunnable": why} for a scenario that validates but cannot run (a collective algorithm
    the fabric lacks) or {"too large": why} for one too large for its memory: a value, not an exception, so that it
    comes back alike from any executor."""
    from ..collective.algorithms import Unrunnable
    from ..dag.size import TooLarge

    try:
        return point_metrics(args)
    except Unrunnable as exc:
        return {UNRUNNABLE: str(exc)}
    except TooLarge as exc:
        return {TOO_LARGE: str(exc)}


def named(point: Point, outcome: dict[str, str] | Refused) -> dict[str, str]:
    """A point's metrics; one that cannot run, or is too large to within the memory limit (or to be admitted by
    its executor: Refused), stops the sweep with a message naming the point (the rows done so far stay in the
    CSV)."""
    if isinstance(outcome, Refused):
        raise ConfigError(f"sweep point {point.label}: {outcome.reason}")
    if UNRUNNABLE in outcome:
        raise ConfigError(f"sweep point {point.label}: collective.algorithm: {outcome[UNRUNNABLE]}")
    if TOO_LARGE in outcome:
        raise ConfigError(f"sweep point {point.label}: {outcome[TOO_LARGE]}")
    return outcome
