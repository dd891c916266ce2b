"""`simulon memory SCENARIO`: the per-stage memory breakdown alone (no DAG, no replay); the lines `simulate`
prints about memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ..config.errors import ConfigError
from ..config.loading import load_scenario
from ..config.scenario import ScenarioConfig
from ..config.units import GiB
from ..memory import MemoryReport, StageMemory, estimate_memory
from ..memory.remedies import LADDER_ORDER, TIMED_ORDER, Advice, advise
from .output import print_table

TERM_COLUMNS = {"weights": "weights", "gradients": "grads", "optimizer states": "optimizer",
                "quantized weight copies": "narrow wts", "activations": "activations", "layer transient": "transient",
                "optimizer step transient": "step"}
"""Memory terms as table columns: the term, its column header."""


def _gib(value: float) -> str:
    return f"{value / GiB:.2f}"


def warnings(report: MemoryReport) -> list[str]:
    """One line per stage that does not fit its own GPU's memory, naming that GPU and the stage's largest terms."""
    lines = []
    for stage in report.stages:
        if stage.fits:
            continue
        largest = ", ".join(f"{name} {_gib(value)}" for name, value in stage.largest_terms())
        lines.append(f"warning: stage {stage.stage} needs {_gib(stage.device)} GiB of the {stage.gpu}'s "
                     f"{_gib(stage.capacity)} GiB (largest: {largest} GiB); it would run out of memory")
    return lines


def advice(sc: ScenarioConfig, report: MemoryReport) -> Advice | None:
    """For a run that does not fit, what would make it fit (memory.remedies), fastest first by the strategy search's
    estimate of a step (search.estimate.step_timer, imported here: only a run that does not fit needs it, and every
    command loads this module); None for a run that fits."""
    if report.fits:
        return None
    from ..search.estimate import step_timer

    return advise(sc, step_time=step_timer(sc))


def remedy_line(found: Advice | None) -> str | None:
    """The changes that would make a run fit, or that none of one or two of the settings tried (those whose memory
    was estimated) does and the closest, if any comes nearer fitting than the run as written; None for a run that
    fits."""
    if found is None:
        return None
    if found.remedies:
        first = found.remedies[0]
        order = LADDER_ORDER
        if found.timed:
            order = TIMED_ORDER + (
                f", the run as written {first.as_written_s:.2f} s" if first.as_written_s else "")
        return f"To fit, one of ({order}, memory.remedies): " + "; or ".join(r.text() for r in found.remedies)
    advice = "more GPUs, or `simulon search` for the strategies that do"
    if not found.tried:
        return f"No change of the settings tuning guides try first applies to this run: {advice}"
    miss = (f"; the closest, {found.closest.text()}" if found.closest is not None
            else "; none of them takes less memory than the run as written")
    return f"No change of one or two of {', '.join(found.tried)} fits{miss}: {advice}"


def memory_json(report: MemoryReport, found: Advice | None) -> dict:
    """The memory object of `simulon memory --json` and of `simulate --json`'s `memory` (and so of `report`): the
    report, with the changes that would make a run that does not fit fit (`found`, from advice), `to_fit`, and where
    none fits, the closest change, `closest_to_fit`; both present for every run, empty (`[]`, null) for one that
    fits."""
    closest = found.closest.to_json() if found is not None and found.closest is not None else None
    return {**report.to_json(), "to_fit": [r.to_json() for r in found.remedies] if found is not None else [],
            "closest_to_fit": closest}


def summary_line(report: MemoryReport) -> str:
    """The deciding stage (MemoryReport.peak: the least headroom) against its own GPU's memory, in one line (naming
    that GPU where the stages' GPUs differ in memory, else every type the run uses)."""
    peak = report.peak
    verdict = "fits" if report.fits else "DOES NOT FIT"
    gpu = report.gpu if report.uniform else peak.gpu
    return f"Memory: peak {_gib(peak.device)} GiB on stage {peak.stage} of {_gib(peak.capacity)} GiB ({gpu}): {verdict}"


def print_report(report: MemoryReport) -> None:
    """The breakdown table: a row per pipeline stage, a column per term, GiB; where the stages' GPUs differ in
    memory, each stage's GPU and capacity in columns of their own (else the one capacity in the title)."""
    used = [name for name in TERM_COLUMNS if any(name in s.terms for s in report.stages)]
    mixed = not report.uniform

    def row(stage: StageMemory) -> tuple[str, ...]:
        own = (stage.gpu, _gib(stage.capacity)) if mixed else ()
        return (str(stage.stage), f"{stage.params / 1e9:.2f}", f"{stage.microbatches_in_flight:.1f}",
                *(_gib(stage.terms.get(name, 0.0)) for name in used), _gib(stage.allocated), _gib(stage.reserved),
                _gib(stage.device), *own, "yes" if stage.fits else "NO")

    held = report.gpu if mixed else f"{report.gpu}: {_gib(report.capacity)} GiB"
    print_table(f"Peak memory per GPU by pipeline stage, GiB ({held})",
                ("stage", "params B", "in flight", *(TERM_COLUMNS[name] for name in used), "alloc", "reserved",
                 "device", *(("GPU", "capacity") if mixed else ()), "fits"),
                [row(stage) for stage in report.stages])


def memory(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML (datacenter + workload)")],
    as_json: Annotated[bool, typer.Option("--json", help="print the report as one JSON object")] = False,
) -> None:
    """Print each pipeline stage's peak memory per GPU, term by term, against the GPU's capacity (allocated as
    torch counts it, reserved by its caching allocator, device as nvidia-smi shows it)."""
    sc = load_scenario(scenario)
    if sc.workload is None:
        raise ConfigError(f"{scenario}: workload: required to estimate memory")
    report = estimate_memory(sc)
    found = advice(sc, report)
    if as_json:
        print(json.dumps(memory_json(report, found)))
        return
    print_report(report)
    print(summary_line(report))
    for line in warnings(report):
        print(line)
    if (line := remedy_line(found)) is not None:
        print(line)
