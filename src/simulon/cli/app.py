"""The `simulon` command: thin wrappers over the library.

Exit status: 0 success, 2 bad input (one plain message naming file, field and problem), 1 internal error.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

from .. import __version__
from ..collective.algorithms import CATALOG, Unrunnable, algorithm_for, asked_algorithm
from ..collective.types import COLLECTIVE_NAMES, coll_type
from ..config.errors import ConfigError
from ..config.loading import files_read, load_scenario
from ..config.scenario import CollectiveConfig, check_channels
from ..config.units import check_size, format_size, parse_size
from .diff import diff_command
from .errors import run_reporting_errors
from .limits import MaxMemoryOption, memory_limit
from .memory import advice, print_report, remedy_line, summary_line, warnings
from .memory import memory as memory_command
from .output import fold_lines, print_table, sampling_line, trace_metadata
from .paths import path_option
from .plan import plan_hetero
from .plot import plot as plot_command
from .profile import app as profile_app
from .report import report as report_command
from .report import result_json, run_scenario
from .search import search as search_command
from .sweep import sweep as sweep_command
from .templates import app as templates_app
from .topology import topology as topology_command
from .validate import app as validate_app

DEFAULT_COLLECTIVE = CollectiveConfig()
"""How collectives run where a scenario has no `collective` block (`simulon collective`'s defaults)."""

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Simulate LLM training iterations and collectives on AI clusters.")
app.add_typer(validate_app, name="validate")
app.command(name="topology")(topology_command)
app.command(name="memory")(memory_command)
app.command(name="search")(search_command)
app.command(name="diff")(diff_command)
app.command(name="plan-hetero")(plan_hetero)
app.command(name="sweep")(sweep_command)
app.command(name="plot")(plot_command)
app.command(name="report")(report_command)
app.add_typer(profile_app, name="profile")
app.add_typer(templates_app, name="templates")


def joined_help(typer_app: typer.Typer) -> None:
    """Give every command of `typer_app` and its groups its docstring with each paragraph's line breaks joined, as
    its help, and the first paragraph as the summary a group's --help lists it by: in rich markup mode Typer keeps a
    docstring's line breaks (typer/rich_utils.py _make_command_help, _get_help_text), so the help broke each
    paragraph where the source wraps it."""
    for info in typer_app.registered_commands:
        if info.help is None and info.callback is not None:
            paragraphs = [" ".join(part.split()) for part in (inspect.getdoc(info.callback) or "").split("\n\n")]
            info.help, info.short_help = "\n\n".join(paragraphs), paragraphs[0]
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            joined_help(group.typer_instance)


def plain_metavar(param, ctx: typer.Context) -> None:
    """Give an option of `param`'s kind the metavar its --help should show: none for a flag, which takes no value
    (Typer 0.29 showed `--json <bool>`, as if it took one), and its element's for a list option, each use of which
    takes one value (`--tp <str>`, not `<list[str]>`)."""
    if not isinstance(param, TyperOption) or param.metavar is not None:
        return
    if param.is_flag:
        param.metavar = ""
    elif param.multiple:
        shown = param.display_type_rich(ctx) or ""
        if shown.startswith("<list[") and shown.endswith("]>"):
            param.metavar = f"<{shown[6:-2]}>"


class PlainMetavars:
    """Mixed into a Typer command or group: its --help shows plain metavars (plain_metavar)."""

    def get_params(self, ctx: typer.Context) -> list:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            plain_metavar(param, ctx)
        return params


class PlainCommand(PlainMetavars, TyperCommand):
    """A command whose --help shows plain metavars."""


class PlainGroup(PlainMetavars, TyperGroup):
    """A group whose --help shows plain metavars."""


def plain_metavars(typer_app: typer.Typer) -> None:
    """Make every command and group of `typer_app` show plain metavars in its --help (plain_metavar)."""
    typer_app.info.cls = PlainGroup
    for info in typer_app.registered_commands:
        info.cls = PlainCommand
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            plain_metavars(group.typer_instance)


def _print_version(requested: bool) -> None:
    if requested:
        print(f"simulon {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="print simulon's version and exit")] = False,
) -> None:
    """Simulate LLM training iterations and collectives on AI clusters."""




@app.command()
def simulate(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML (datacenter + workload + collective)")],
    output: Annotated[Path | None, path_option(
        "-o", "--output", help="write a Chrome/Perfetto trace (gzip-compressed where the name ends in .gz)")] = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help="print the per-GPU breakdown")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as one JSON object")] = False,
    expand: Annotated[str, typer.Option(help="auto | full | symmetric: simulate every GPU, or one per "
                                        "class of identical data/tensor-parallel peers")] = "auto",
    trace_detail: Annotated[str | None, typer.Option(help="what the trace (-o) draws: kernels, collectives (and "
                                                     "pipeline sends) or flows (those and every network flow); default "
                                                     "collectives")] = None,
    max_memory: MaxMemoryOption = None,
    micro_batches: Annotated[str, typer.Option(
        "--micro-batches", help="all: replay every micro-batch; sample: replay two small counts the pipeline "
        "schedule accepts in its steady state and extrapolate the step linearly to its real count; M1,M2: those "
        "two counts; auto: all, unless the full step would not fit the memory limit or is very large "
        "(simulon.sampling.SAMPLE_ABOVE_NODES DAG nodes)")] = "auto",
) -> None:
    """Simulate one training iteration and report its time."""
    from ..analysis.shown import shown_ms
    from ..export.chrome_trace import DETAILS, chrome_trace_json
    from ..export.files import check_writable, compressed_as_named, write_atomic
    from ..pipeline import check_fold_mode
    from ..sampling import parse_mode

    try:
        check_fold_mode(expand, "--expand")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if verbose and as_json:
        raise ConfigError("-v: adds the per-GPU breakdown and the memory table to the printed summary, and --json "
                          "prints none: its per_gpu and memory hold both; give one of the two")
    if trace_detail is not None and output is None:
        raise ConfigError("--trace-detail: says what the trace draws, and no trace is written: add -o trace.json")
    trace_detail = trace_detail or "collectives"
    if trace_detail not in DETAILS:
        raise ConfigError(f"--trace-detail: expected one of {', '.join(DETAILS)}, got {trace_detail!r}")
    try:
        mode = parse_mode(micro_batches)
    except ValueError as exc:
        raise ConfigError(f"--micro-batches: {exc}") from None
    limit = memory_limit(max_memory)
    if output is not None:
        check_writable(output, "-o", "trace file", inputs=files_read(scenario))
    sim, analysis = run_scenario(scenario, quiet=as_json, expand=expand, memory_limit=limit,
                                 trace=trace_detail if output is not None else False, micro_batches=mode)
    result = sim.result
    if output is not None:
        try:
            write_atomic(output, compressed_as_named(output, chrome_trace_json(
                sim.dag, sim.timeline, trace_detail, sim.memory, sim.fold.rep, analysis.busiest,
                trace_metadata(result, sim.fold), {b.gpu: b.device for b in result.per_gpu})))
        except OSError as exc:
            raise ConfigError(f"-o {output}: cannot write: {exc.strerror or exc}") from None
    if as_json:
        print(json.dumps(result_json(sim, analysis, scenario)))
        return
    if output is not None:
        print(f"Trace written to {output}")
    print(f"GPUs: {result.num_gpus} | Total: {shown_ms(result.iteration_time_ms)} ms")
    if result.sampling is not None:
        print(sampling_line(result.sampling, output is not None))
    for line in fold_lines(sim.fold):
        print(line)
    print(f"Throughput: {result.tokens_per_s:,.0f} tokens/s | {result.tflops_per_gpu:.1f} TFLOP/s per GPU "
          f"| MFU {100 * result.mfu:.1f}%")
    print(summary_line(sim.memory))
    for line in warnings(sim.memory):
        print(line)
    if not sim.memory.fits:
        sc = load_scenario(scenario)
        print(remedy_line(advice(sc, sim.memory)))
    for gpu, use in sim.profiled.items():
        print(use.line(gpu))
    for rank, finding in enumerate(analysis.findings[:3], start=1):
        print(f"Finding {rank}: {finding.line()}")
    if output is not None:
        print("Load in https://ui.perfetto.dev or chrome://tracing")
    if verbose:
        _print_breakdown(result)
        print_report(sim.memory)


def _print_breakdown(result) -> None:
    mixed = len({b.device for b in result.per_gpu}) > 1  # a cluster of several GPU types: say which each is
    print_table("Per-GPU breakdown (ms)",
           ("GPU", *(("type",) if mixed else ()), "stage", "stands for", "compute", "exposed comm",
            "overlapped comm", "bubble/idle"),
           [(str(b.gpu), *((b.device,) if mixed else ()), str(b.stage), str(b.stands_for), f"{b.compute_ms:.2f}",
             f"{b.exposed_comm_ms:.2f}", f"{b.overlapped_comm_ms:.2f}", f"{b.bubble_ms:.2f}")
            for b in result.per_gpu])
    if result.simulated_gpus < result.num_gpus:
        print(f"{result.simulated_gpus} of {result.num_gpus} GPUs simulated; each stands for its identical "
              "data/tensor-parallel peers (use --expand full to simulate all).")


def parse_ranks(text: str, num_gpus: int) -> tuple[int, ...]:
    """'0-7' or '0,8,16,24' (or a mix) -> ranks, checked against the cluster size (pipeline.check_group)."""
    from ..pipeline import check_group, check_rank

    ranks: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise ConfigError(f"--group: empty entry in {text!r} (use ranges like 0-7 or lists like 0,8,16)")
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError
            else:
                lo = hi = int(part)
        except ValueError:
            raise ConfigError(f"--group: cannot read {part!r} (use ranges like 0-7 or lists like 0,8,16)") from None
        try:
            for rank in (lo, hi):  # before the range is spelled out: 0-100000000000 is refused at once
                check_rank(rank, num_gpus)
        except ValueError as exc:
            raise ConfigError(f"--group: {exc}") from None
        ranks.extend(range(lo, hi + 1))
    try:
        return check_group(ranks, num_gpus, written=text)
    except ValueError as exc:
        raise ConfigError(f"--group: {exc}") from None


def parse_sizes(text: str | None) -> list[float]:
    if text is None:  # nccl-tests-style doubling sweep, 1 KiB to 1 GiB
        return [float(2**p) for p in range(10, 31)]
    given: dict[float, str] = {}
    for part in (p.strip() for p in text.split(",")):
        try:
            size = check_size(parse_size(part))
            if not size.is_integer():
                raise ValueError(f"{size:g} B is not a whole number of bytes")
        except ValueError as exc:
            raise ConfigError(f"--sizes: {part!r}: {exc}") from None
        if size in given:  # as a sweep refuses a repeated value: the row would print twice
            raise ConfigError(f"--sizes: {part!r} is {size:,.0f} B again (as {given[size]!r}); give each size once")
        given[size] = part
    return list(given)


def what_ran(name: str, chosen: list[str]) -> str:
    """A table title's words for the algorithm or protocol each size ran (what the tuner chose where the scenario says
    auto, not "auto"): the one, or each in the order of the sizes that ran it ("protocols ll and simple by size")."""
    ran = list(dict.fromkeys(chosen))
    if len(ran) == 1:
        return f"{name} {ran[0]}"
    return f"{name}s {', '.join(ran[:-1])} and {ran[-1]} by size"


@app.command()
def collective(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML with at least a datacenter block")],
    op: Annotated[str, typer.Option(help=f"{' | '.join(COLLECTIVE_NAMES)}, in any case, with or without '_' or "
                                    "'-' (sendrecv and permute: a ring shift, each GPU to the next)")] = "allreduce",
    group: Annotated[str | None, typer.Option(help="GPUs like 0-7 or 0,8,16,24, numbered in the datacenter's node "
                                                    "groups' order, not a workload's stage_groups placement "
                                                    "(default: every GPU)")] = None,
    sizes: Annotated[str | None, typer.Option(help="sizes like 1KiB,64MiB,1GiB (default: 1KiB..1GiB doubling)")] = None,
    algorithm: Annotated[str | None, typer.Option(help=f"{', '.join(CATALOG)} or auto (NCCL's choice per size) "
                                                  "(default: the scenario's collective.algorithm, "
                                                  f"{DEFAULT_COLLECTIVE.algorithm} where it names none, as in "
                                                  "simulate)")] = None,
    protocol: Annotated[str | None, typer.Option(help="simple, ll, ll128 or auto (default: the scenario's "
                                                 f"collective.protocol, {DEFAULT_COLLECTIVE.protocol} where it names "
                                                 "none)")] = None,
    channels: Annotated[int | None, typer.Option(help="channels (default: the scenario's num_channels, else "
                                                 "NCCL's count for the message)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print a JSON list instead of a table")] = False,
    max_memory: MaxMemoryOption = None,
) -> None:
    """Simulate one collective over a message-size sweep, like nccl-tests without GPUs."""
    from ..dag.size import TooLarge
    from ..pipeline import collective_sweep
    from .progress import terminal_progress

    try:
        ctype = coll_type(op)
    except ValueError as exc:
        raise ConfigError(f"--op: {exc}") from None
    sc = load_scenario(scenario)
    dc = sc.datacenter
    if group is not None:
        ranks = parse_ranks(group, dc.num_gpus)
    elif dc.num_gpus < 2:
        raise ConfigError(f"{scenario}: datacenter: a collective needs at least two GPUs, and the datacenter has "
                          f"{dc.num_gpus}")
    else:
        ranks = tuple(range(dc.num_gpus))
    try:  # the scenario's for every collective, or the one asked for this one, in any case as the scenario's
        algo = algorithm_for(ctype, sc.collective.algorithm) if algorithm is None \
            else asked_algorithm(ctype, algorithm.lower(), "--algorithm")
    except Unrunnable as exc:
        raise ConfigError(str(exc)) from None
    proto = sc.collective.protocol if protocol is None else protocol.lower()
    chans = channels if channels is not None else sc.collective.num_channels
    limit = memory_limit(max_memory)
    if channels is not None:
        try:
            check_channels(channels)
        except ValueError as exc:
            raise ConfigError(f"--channels: {exc}") from None
    try:
        with terminal_progress(quiet=as_json) as progress:
            rows = collective_sweep(dc, ctype, ranks, parse_sizes(sizes), algo, chans, proto, progress=progress,
                                    memory_limit=limit)
    except TooLarge as exc:
        raise ConfigError(f"{scenario}: {exc}") from None
    except ValueError as exc:
        option = "--protocol" if "protocol" in str(exc) else "--algorithm"
        raise ConfigError(f"{option}: {exc}") from None
    ruled = bool(dc.network.nccl.tuner_config)  # which tuner rule chose each size, where the platform has rules
    unruled = "none (NCCL's model)" if algo == "auto" else "none (algorithm fixed)"
    if as_json:
        print(json.dumps([{"op": ctype.name.lower(), "group_size": len(ranks),
                           "size_bytes": r.size_bytes, "time_us": r.time_us, "algbw_GBps": r.algbw_GBps,
                           "busbw_GBps": r.busbw_GBps, "algorithm": r.algorithm, "protocol": r.protocol,
                           "channels": r.channels, "model": r.model,
                           **({"tuner_rule": r.tuner_rule} if ruled else {})} for r in rows]))
        return
    print_table(f"{op} over {len(ranks)} GPUs, {what_ran('algorithm', [r.algorithm for r in rows])}, "
                f"{what_ran('protocol', [r.protocol for r in rows])}",
                ("size", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "algorithm", "protocol", "channels",
                 *(("tuner rule",) if ruled else ())),
                [(format_size(r.size_bytes), f"{r.time_us:.2f}", f"{r.algbw_GBps:.2f}", f"{r.busbw_GBps:.2f}",
                  r.algorithm, r.protocol, str(r.channels),
                  *((str(r.tuner_rule) if r.tuner_rule else unruled,) if ruled else ()))
                 for r in rows])
    if ruled and algo == "auto" and not any(r.tuner_rule for r in rows):
        print(f"No rule of network.nccl.tuner_config applied to these sizes over {len(ranks)} ranks: check each "
              "rule's collective, size range, nNodes (NVLink domains, as NCCL counts nodes) and nRanks, and that "
              "the platform's NCCL enables its algorithm and protocol.")


joined_help(app)
plain_metavars(app)


def main() -> None:
    run_reporting_errors(lambda: app(prog_name="simulon", standalone_mode=False))
