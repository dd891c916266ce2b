"""`simulon report SCENARIO -o report.html`: simulate the scenario once and write one self-contained HTML report of
the iteration (report/); and the simulation `simulon simulate` and the report share: the scenario loaded and
replayed, then analysed (analysis/), with bad input as one plain message."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..config.errors import ConfigError
from ..config.loading import files_read, load_scenario
from .limits import MaxMemoryOption, memory_limit
from .output import fold_flags
from .paths import path_option, shown_name

if TYPE_CHECKING:
    from ..analysis.analyze import Analysis
    from ..dag.size import Trace
    from ..pipeline import Simulation
    from ..sampling import MicroBatches

REPORT_SUFFIXES = (".html", ".htm")


def run_scenario(scenario: Path, quiet: bool, expand: str = "auto", memory_limit: float | None = None,
                 trace: Trace = False, micro_batches: MicroBatches = "auto") -> tuple[Simulation, Analysis]:
    """Load and simulate a scenario (a progress bar on a terminal unless `quiet`) and analyse its iteration, the
    findings' advice steered by what the scenario already does (findings.Settings); a scenario without a workload,
    an algorithm that cannot run or a run too large end as a ConfigError."""
    from ..analysis.analyze import analyze, per_gpu_values
    from ..analysis.findings import Settings
    from ..collective.algorithms import Unrunnable
    from ..config.number_formats import number_format
    from ..dag.size import TooLarge
    from ..pipeline import simulate
    from ..sampling import chosen_counts
    from ..search.estimate import step_timer
    from .progress import terminal_progress

    sc = load_scenario(scenario)
    if sc.workload is None:
        raise ConfigError(f"{scenario}: workload: required to simulate a training iteration "
                          "(use `simulon collective` for a datacenter-only scenario)")
    try:
        chosen_counts(sc, micro_batches)
    except ValueError as exc:  # micro-batch counts the step or its schedule refuses
        raise ConfigError(f"{scenario}: --micro-batches: {exc}") from None
    try:
        with terminal_progress(quiet=quiet) as progress:
            sim = simulate(sc, fold_mode=expand, progress=progress, memory_limit=memory_limit,  # type: ignore[arg-type]
                           trace=trace, micro_batches=micro_batches)
    except Unrunnable as exc:
        raise ConfigError(f"{scenario}: collective.algorithm: {exc}") from None
    except TooLarge as exc:
        raise ConfigError(f"{scenario}: {exc}") from None
    placement = sc.placement()  # GPUs of several types: each one's peak and HBM bandwidth
    sampled = sim.result.sampling
    settings = Settings.of(sc, step_timer(sc))
    if sampled is not None:
        settings = dataclasses.replace(settings, replayed=f"the {sampled.simulated[1]}-micro-batch replay")
    dtype = number_format(sc.workload.training.dtype)  # a narrow format's 16-bit kernels run at the 16-bit peak
    return sim, analyze(sim.dag, sim.timeline, sim.topology,
                        per_gpu_values(placement, lambda g: g.gpu.peak_flops(dtype.dtype)),
                        per_gpu_values(placement, lambda g: g.gpu.memory_bandwidth), settings,
                        per_gpu_values(placement, lambda g: g.gpu.peak_flops(dtype.attention_dtype))
                        if dtype.quantized else None)


def result_json(sim: Simulation, analysis: Analysis, scenario: Path) -> dict:
    """The iteration as `simulon simulate --json` prints it: the summary, `memory` (as `simulon memory --json` prints
    it, memory.memory_json: with `to_fit`, the changes that would make a run that does not fit fit, and
    `closest_to_fit`, memory.remedies; `[]` and null for a run that fits), `analysis` and
    `schedule`, and where a GPU has a measured profile, `profile`: how it served the step, by GPU
    (compute.populate.ProfileUse)."""
    from ..analysis.schedule import schedule
    from .memory import advice, memory_json

    folded = fold_flags(sim.fold)
    profiled = {"profile": {gpu: use._asdict() for gpu, use in sim.profiled.items()}} if sim.profiled else {}
    memory = memory_json(sim.memory, None if sim.memory.fits else advice(load_scenario(scenario), sim.memory))
    return {**sim.result.to_dict(), **folded, **profiled, "memory": memory,
            "analysis": analysis.to_dict(), "schedule": schedule(sim.dag, sim.timeline)}


def check_report_output(path: Path, scenario: Path) -> None:
    """A ConfigError unless `path` names an .html file in a folder that exists, other than the scenario."""
    from ..export.files import check_writable

    check_writable(path, "-o", "report file", REPORT_SUFFIXES, files_read(scenario))


def report(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML (datacenter + workload)")],
    output: Annotated[Path, path_option("-o", "--output", help="the report to write: one self-contained .html "
                                        "file")],
    max_memory: MaxMemoryOption = None,
) -> None:
    """Simulate one iteration and write an HTML report: summary, breakdown, critical path, findings, plots, memory."""
    from ..export.files import write_atomic
    from ..report import report_html

    limit = memory_limit(max_memory)
    check_report_output(output, scenario)
    sim, analysis = run_scenario(scenario, quiet=False, memory_limit=limit)
    html = report_html(result_json(sim, analysis, scenario), f"simulon report: {shown_name(Path(scenario.name))}")
    try:
        write_atomic(output, html)
    except OSError as exc:
        raise ConfigError(f"-o {output}: cannot write: {exc.strerror or exc}") from None
    print(f"Report written to {output}")
