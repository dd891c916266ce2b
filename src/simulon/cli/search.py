"""`simulon search SCENARIO`: the fastest strategy that fits, its runners-up, and how the search got there; where
none is left, why (an option that alone leaves none, the rules every strategy breaks or those that pruned the
most)."""

from __future__ import annotations

import csv
import io
import json
import math
import operator
import sys
from collections import Counter
from functools import reduce
from pathlib import Path
from typing import Annotated

import typer

from ..config.common import FieldError, dtype_named, whole_number
from ..config.errors import ConfigError
from ..config.frameworks import SHARDING_KEYS, sharding_synonym
from ..config.loading import files_read, key_synonym
from .limits import MaxMemoryOption, check_processes, memory_limit
from .output import print_table
from .paths import path_option

HEADROOM_GIB = 3.0
"""A winner with less memory headroom than this gets its roomiest close alternative shown beside it (the caching
allocator's fragmentation alone moves a peak by a few GiB: memory.csv's reserved-over-allocated excess runs to
13 GiB on its largest runs)."""

DIMENSIONS = {"tp": int, "pp": int, "vpp": int, "cp": int, "ep": int, "etp": int, "micro_batch_size": int,
              "recompute": str, "sharding": str, "dtype": str, "sequence_parallel": bool, "tp_comm_overlap": bool,
              "zero_bubble": bool}
"""Dimensions a user may restrict (`--tp 1,2,4`, `--fix pp=8`), with the type of their values."""


MAX_GPU_HOUR_PRICE = 1e9
"""The largest --gpu-hour-price: far above any price in any currency, and small enough that a run's cost per
million tokens stays a finite number (an infinite price printed Infinity, which is not JSON)."""

CHOICE_NAMES = {"recompute": "recomputation", "sharding": "sharding", "dtype": "number format"}
"""What a message calls the values of each named dimension."""


def _where(name: str, part: str, option: str) -> str:
    """How a message names one value given on the command line: `--tp 0` or `--fix dtype=banana`."""
    return f"--fix {name}={part}" if option == "--fix" else f"{option} {part}"


def _value(name: str, part: str, option: str) -> int | str | bool:
    """One value of a dimension as the command line gives it, checked whatever the scenario."""
    from ..search.space import CHOICES

    kind, where = DIMENSIONS[name], _where(name, part, option)
    if kind is bool:
        if part.lower() not in ("true", "false"):
            raise ConfigError(f"{where}: expected true or false")
        return part.lower() == "true"
    if kind is int:
        number = whole_number(part.removeprefix("+"))
        if number is None or number < 1:
            raise ConfigError(f"{where}: expected a positive whole number")
        return number
    if name == "dtype":  # as a scenario reads it: BF16, bfloat16, fp8-e4m3
        part = str(dtype_named(part))
    if part not in CHOICES[name]:
        known = _sharding_named(part) if name == "sharding" else ""
        raise ConfigError(f"{where}: unknown {CHOICE_NAMES[name]} {part!r} ({known + '; ' if known else ''}"
                          f"valid: {', '.join(CHOICES[name])})")
    return part


SEARCH_NAMES = {"expert_tensor_parallel": "etp"}
"""The scenario's workload.parallelism keys the search calls otherwise (the others it calls as the scenario does)."""


def _shardings(settings: dict) -> list[str]:
    """The search's shardings with these workload.parallelism settings (search.space.SHARDING_SETTINGS)."""
    from ..search.space import SHARDING_SETTINGS

    return [name for name, full in SHARDING_SETTINGS.items() if settings.items() <= full.items()]


def _sharding_named(text: str) -> str:
    """'ZeRO-3 is sharding=fsdp' for a well-known name of a sharding (config.loading.WELL_KNOWN_SHARDINGS), else
    ''."""
    known = sharding_synonym(text)
    names = _shardings(known[1]) if known else []
    return f"{known[0]} is sharding={' or '.join(names)}" if names else ""


def _name_hint(name: str, text: str) -> str:
    """' (did you mean etp?)' for an unknown --fix NAME that is a dimension under the scenario's or Megatron-LM's
    name; for a sharding setting (fsdp=full_shard, zero_stage=3), the search's sharding it is."""
    keys = key_synonym(name) or (name,)
    if keys == SHARDING_KEYS or name in SHARDING_KEYS:
        return f" ({_setting_named(name, text) or 'sharding is --fix sharding=' + ', '.join(_shardings({}))})"
    dimension = SEARCH_NAMES.get(keys[0], keys[0])
    return f" (did you mean {dimension}?)" if dimension in DIMENSIONS and dimension != name else ""


def _setting_named(name: str, text: str) -> str:
    """'ZeRO-3 is sharding=fsdp' for a sharding's well-known name given as a value (zero_stage=3), or
    'fsdp=full_shard is sharding=fsdp' for a scenario's sharding setting; else ''."""
    value = {"true": True, "false": False}.get(text.strip().lower(), text.strip())
    names = _shardings({name: value}) if name in SHARDING_KEYS else []
    return _sharding_named(text) or (f"{name}={text} is sharding={' or '.join(names)}" if names else "")


def _values(name: str, text: str, option: str, where: str) -> tuple:
    """The values of a comma list given to a dimension (`where`: the option as given, for the message); a value
    given twice (`--fix pp=4,4`, `--tp 2,+2`) is refused, as sweep's --set refuses one."""
    values = tuple(_value(name, part.strip(), option) for part in text.split(","))
    if len(set(values)) != len(values):
        raise ConfigError(f"{where}: a value appears twice")
    return values


def _fixed_name(fix: str) -> str:
    name = fix.partition("=")[0].strip().replace("-", "_")
    return "micro_batch_size" if name == "mbs" else name


def restrictions(options: dict[str, list[str] | None], fixes: list[str]) -> dict[str, tuple[tuple, str]]:
    """The dimensions the command's options restrict (`options`: each dimension option's values as often as it was
    given): each one's allowed values, and the option that says so as the command line gave it (`--pp 2,4`,
    `--fix pp=3`). A dimension restricted twice (`--tp 4 --tp 1`, `--tp 1 --fix tp=2`, `--fix tp=4 --fix tp=1`) is
    refused naming both, rather than the last kept."""
    given = [(name, text, f"--{name.replace('_', '-')}", f"--{name.replace('_', '-')} {text}")
             for name, texts in options.items() for text in texts or ()]
    for fix in fixes:
        name, text = _fixed_name(fix), fix.partition("=")[2]
        if name not in DIMENSIONS or not text:
            raise ConfigError(f"--fix: expected NAME=VALUE with NAME one of {', '.join(DIMENSIONS)}, got {fix!r}"
                              f"{_name_hint(name, text) if text else ''}")
        given.append((name, text, "--fix", f"--fix {fix}"))
    restricted: dict[str, tuple[tuple, str]] = {}
    for name, text, option, where in given:
        if name in restricted:
            raise ConfigError(f"{where}: {name} is already restricted by {restricted[name][1]}; give its values "
                              f"once (a comma list: {_where(name, 'A,B', option)})")
        restricted[name] = _values(name, text, option, where), where
    return restricted


def limits_from(options: dict[str, list[str] | None], fixes: list[str]):
    """The dimensions the command's options restrict, as the search's Limits."""
    return _limits(restrictions(options, fixes))


def _limits(restricted: dict[str, tuple[tuple, str]]):
    from ..search.space import Limits

    return Limits({name: values for name, (values, _) in restricted.items()} or None)


NAMED_RULES = 3
"""Rules a search where every strategy was pruned names, those that pruned the most first."""


def _most_pruned(pruned) -> str:
    """'rule (count); rule (count)' for the rules that pruned the most, largest first."""
    from ..search.run import by_count

    return "; ".join(f"{rule} ({count:,})" for rule, count in by_count(pruned)[:NAMED_RULES])


def _screened(searchers: list, limits):
    """The searchers' spaces screened by the rules under `limits` (None: each space's own), as one Screen."""
    return reduce(operator.add, (s.space.screened() if limits is None else s.space.restricted(limits).screened()
                                 for s in searchers))


def _screen_text(screen, allowed: str) -> str:
    """Why the rules leave none of the strategies that `allowed` says some options allow ('' for all of them): a
    rule every one breaks, else the rules that pruned the most."""
    strategies = " ".join(filter(None, ("strategy", allowed)))
    if not screen.allowed:
        return f"the search tries no {strategies}"
    if screen.broken_by_all:
        return f"every {strategies} breaks {screen.broken_by_all[0]}"
    return f"the rules pruned every {strategies}, most by {_most_pruned(screen.pruned)}"


def why_all_pruned(searchers: list, result, restricted: dict[str, tuple[tuple, str]]) -> str:
    """Why a search where every strategy was pruned found none: an option that alone leaves none the rules allow
    (`--fix pp=3` on 8 GPUs), else the options together, else the rules that pruned the most."""
    from ..search.space import EXCLUDED, Limits

    for name, (values, where) in restricted.items():
        screen = _screened(searchers, Limits({name: values}))
        if not screen.passing:
            return f"{where} alone leaves none: {_screen_text(screen, 'with it')}"
    screen = _screened(searchers, None)
    if not screen.passing:
        lead = "the options together leave none: " if restricted else ""
        return lead + _screen_text(screen, "they allow" if restricted else "")
    rules = Counter({rule: count for rule, count in result.pruned.items() if rule != EXCLUDED})
    return f"the rules pruned most by {_most_pruned(rules)}"


def check_tried(searcher, fixes: list[str]) -> None:
    """A ConfigError naming the option of a restriction to a value the search never tries on this scenario (an
    fp4 format on a GPU without it, a micro-batch size past the list), which would leave nothing to search."""
    fixed = {_fixed_name(fix) for fix in fixes}
    for name, tried in searcher.space.tried().items():
        for value in (searcher.space.limits.values or {}).get(name, ()):
            if value not in tried:
                where = _where(name, str(value), "--fix" if name in fixed else f"--{name}")
                if not tried:
                    raise ConfigError(f"{where}: never tried on this scenario: {name} splits the experts, and the "
                                      "model has none")
                why = (f": the scenario's training.dtype, and fp8 where the {searcher.gpu.name} runs it"
                       if name == "dtype" else "")
                raise ConfigError(f"{where}: never tried on this scenario (the search tries {name} "
                                  f"{', '.join(map(str, tried))}{why})")


def _row(rank: int, r, result) -> tuple[str, ...]:
    from ..analysis.shown import shown_ms

    time = shown_ms(r.iteration_ms) + ("" if r.replay_ms is not None else " *")
    hours = result.gpu_hours_per_million_tokens(r)  # GPU-hours and cost written as a time is: never in exponent form
    price = () if result.gpu_hour_price is None else (shown_ms(hours * result.gpu_hour_price),)
    return (str(rank), f"{r.strategy.num_gpus:,}", _describe(r.strategy, short=True), time,
            f"{result.tokens_per_s(r):,.0f}", f"{100 * result.mfu(r):.1f}", shown_ms(hours), *price,
            f"{r.peak_memory_gib:.1f} / {r.headroom_gib:.1f}")


def print_result(result) -> None:
    from ..search.run import by_count

    pruned = ", ".join(f"{count:,} {rule}" for rule, count in by_count(result.pruned))
    infeasible = ", ".join(f"{count:,} by {term}" for term, count in by_count(result.infeasible)) or "none"
    print(f"{result.enumerated:,} strategies enumerated: "
          f"{sum(result.pruned.values()):,} pruned, {sum(result.infeasible.values()):,} do not fit, "
          f"{result.estimated:,} estimated, {result.replayed} replayed")
    print(f"  pruned: {pruned}")
    print(f"  do not fit (largest term on the fullest stage): {infeasible}")
    scales = ", ".join(f"{part.estimate_scale:.2f}" for part in (result.parts or {0: result}).values())
    price = () if result.gpu_hour_price is None else ("cost / Mtok",)
    for strategy, why in result.refused:
        print(f"  {_describe(strategy, short=True)}: {why}")
    times = (f"step ms replayed; * estimated, scaled by {scales} as the replayed ones ran against their estimates"
             if result.replayed else "* step ms estimated: none replayed")
    print_table(f"Best strategies on {_counts(result)} GPUs by {result.objective} ({times})",
                ("#", "GPUs", "strategy", "step ms", "tokens/s", "MFU %", "GPU-h / Mtok", *price, "peak / free GiB"),
                [_row(i + 1, r, result) for i, r in enumerate(result.ranked)])


def search(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML: datacenter, model, global batch and sequence")],
    gpus: Annotated[str | None, typer.Option(help="GPUs to train on, or several counts to compare (512,1024); "
                                                  "default: the scenario's, else every GPU")] = None,
    objective: Annotated[str, typer.Option(help="time (the fastest step) or cost (the fewest GPU-hours per "
                                                "million tokens)")] = "time",
    gpu_hour_price: Annotated[float | None, typer.Option(help="price of one GPU-hour, for a cost column")] = None,
    top: Annotated[int, typer.Option(help="strategies to list (1 to 1000)")] = 10,
    replay: Annotated[int, typer.Option(help="best estimates to replay with the full simulation (0 to 1000)")] = 10,
    tp: Annotated[list[str] | None, typer.Option(help="allowed values, e.g. 1,2,4,8 (once)")] = None,
    pp: Annotated[list[str] | None, typer.Option(help="allowed values (once)")] = None,
    cp: Annotated[list[str] | None, typer.Option(help="allowed values (once)")] = None,
    ep: Annotated[list[str] | None, typer.Option(help="allowed values (once)")] = None,
    fix: Annotated[list[str] | None, typer.Option(help="NAME=VALUE[,VALUE] for any dimension, e.g. pp=8 or "
                                                       "recompute=none,selective (repeatable)")] = None,
    fp8: Annotated[bool, typer.Option(help="also try fp8 where the GPU has it")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as one JSON object")] = False,
    output: Annotated[Path | None, path_option("-o", "--output", help="write the ranking as CSV")] = None,
    write_best: Annotated[Path | None, path_option(help="write the winner as a scenario YAML")] = None,
    plot: Annotated[Path | None, path_option(help="draw the time-vs-memory Pareto front (.png or .svg)")] = None,
    cache: Annotated[Path | None, path_option(folder=True, help="folder keeping estimates and replays by "
                                            "configuration hash: a search run again (or killed and restarted) reads "
                                            "what it finished (created if missing, in a folder that exists; default "
                                            ".simulon-cache)")]
    = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="neither read nor write the cache")] = False,
    executor: Annotated[str, typer.Option(help="where replays run: process (a local pool) or ray")] = "process",
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster to join (default: start a local one)")] = None,
    workers: Annotated[int | None, typer.Option(help="processes of the local pool (default: every core)")] = None,
    max_memory: MaxMemoryOption = None,
) -> None:
    """Find the fastest parallel strategy that fits: enumerate, prune by exact rules, drop what does not fit,
    estimate every survivor, replay the best with the full contention-aware simulation."""
    from ..analysis.shown import shown_ms
    from ..executors import executor as make_executor
    from ..search.cache import DEFAULT_FOLDER, Cache
    from ..search.export import launch_lines, scenario_yaml
    from ..search.run import OBJECTIVES, Search, combine, load_search_scenario
    from .progress import terminal_progress

    _check_counts(top, replay, workers)
    if no_cache and cache is not None:
        raise ConfigError("--cache: names the cache folder, and --no-cache uses none: give one of the two")
    cache = None if no_cache else cache or DEFAULT_FOLDER
    # the replays running side by side share this budget (default: what is available when they start)
    budget = None if max_memory is None else (memory_limit(max_memory) or math.inf)
    runner = make_executor(executor, workers, ray_address, budget)
    _check_outputs(scenario, output, write_best, plot, cache)
    counts = _gpu_counts(gpus)
    if objective not in OBJECTIVES:
        raise ConfigError(f"--objective: expected one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if gpu_hour_price is not None and not 0 < gpu_hour_price <= MAX_GPU_HOUR_PRICE:
        raise ConfigError(f"--gpu-hour-price: expected a positive price up to {MAX_GPU_HOUR_PRICE:g}, "
                          f"got {gpu_hour_price}")
    restricted = restrictions({"tp": tp, "pp": pp, "cp": cp, "ep": ep}, fix or [])
    limits = _limits(restricted)
    sc, asked = load_search_scenario(scenario)
    with runner, terminal_progress(quiet=as_json) as progress:  # a local Ray instance: one for the whole search
        searchers = [Search(sc, n, limits, fp8) for n in counts or [asked]]
        for searcher in searchers:
            check_tried(searcher, fix or [])
        store = None if cache is None else Cache(cache)
        try:
            result = combine([s.run(top, replay, progress, executor=runner, cache=store) for s in searchers],
                             objective, top, gpu_hour_price)
        except FieldError as exc:  # a strategy's workload refused, here or in a worker (bad input, not a crash)
            raise ConfigError(f"{scenario}: {exc} (in a strategy the search tried)") from None
    if not result.ranked:
        raise ConfigError(_none_fits(scenario, searchers, result, restricted))
    best = result.ranked[0]
    files = {output: ("-o", _csv_text(result)) if output is not None else None,
             plot: ("--plot", _plot(plot, searchers, result)) if plot is not None else None,
             write_best: ("--write-best", scenario_yaml(sc, best.strategy, result.num_gpus, _best_note(result)))
             if write_best is not None else None}
    _write_all({path: entry for path, entry in files.items() if entry is not None})
    if as_json:
        print(json.dumps(result.to_json()))
        return
    print(f"Search took {result.seconds:.1f} s", file=sys.stderr)  # wall-clock time: kept off stdout
    print_result(result)
    shown = min(0.5, 1e-3 * best.iteration_ms)  # a term of half a millisecond, or of a short step's thousandth
    print("Where the winner's step goes (estimate, ms): " + ", ".join(
        f"{k} {shown_ms(v)}" for k, v in best.estimate.breakdown_ms().items() if v >= shown))
    for line in launch_lines(best.strategy, sc):
        print(line)
    if best.headroom_gib < HEADROOM_GIB:
        roomier = next((r for r in result.ranked[1:] if r.headroom_gib >= HEADROOM_GIB), None)
        if roomier is not None:
            print(f"The winner leaves {best.headroom_gib:.1f} GiB free; with more room: {_describe(roomier.strategy)} "
                  f"({shown_ms(roomier.iteration_ms)} ms, {roomier.headroom_gib:.1f} GiB free)")
    if write_best is not None:
        print(f"Winner written to {write_best}")


def _none_fits(scenario: Path, searchers: list, result, restricted: dict[str, tuple[tuple, str]]) -> str:
    """What to say when no strategy is left: the counts; then the closest miss where some did not fit in memory,
    else why the rules and options pruned them all (why_all_pruned)."""
    from ..search.space import EXCLUDED

    excluded = result.pruned[EXCLUDED]
    left_out = f", {excluded:,} left out by the options" if excluded else ""
    counts = (f"{result.enumerated:,} enumerated, {sum(result.pruned.values()) - excluded:,} pruned by the rules"
              f"{left_out}, {sum(result.infeasible.values()):,} out of memory")
    miss = result.closest_miss
    if miss:
        why = f"; closest: {_describe(miss[0])}, which {miss[1]}"
    else:
        why = f": {why_all_pruned(searchers, result, restricted)}" if not result.infeasible else ""
    return f"{scenario}: no strategy fits on {_counts(result)} GPUs ({counts}){why}"


def _check_counts(top: int, replay: int, workers: int | None) -> None:
    """The counts the options give: strategies listed (one at least, or there is no winner), replayed, workers."""
    if not 1 <= top <= 1000:
        raise ConfigError(f"--top: expected 1 to 1000 strategies to list, got {top}")
    if not 0 <= replay <= 1000:
        raise ConfigError(f"--replay: expected 0 to 1000, got {replay}")
    check_processes(workers, "--workers")


def _check_outputs(scenario: Path, output: Path | None, write_best: Path | None, plot: Path | None,
                   cache: Path | None) -> None:
    """Every file the search will write, checked before it starts (a search can take minutes): the ranking, the
    plot, the winner's scenario, and the cache folder (created if missing, in a folder that exists)."""
    from ..export.files import check_folder_writable, check_writable
    from ..plots.figure import check_output
    from ..search.run import load_search_scenario

    read = files_read(scenario, load_search_scenario) if output or plot or write_best else ()
    if output is not None:
        check_writable(output, "-o", "CSV", inputs=read)
    if plot is not None:
        check_output(plot, "--plot", read)
    if write_best is not None:
        check_writable(write_best, "--write-best", "scenario YAML", inputs=read)
    if cache is not None:
        check_folder_writable(cache, "--cache")
    paths = [p.resolve() for p in (output, plot, write_best) if p is not None]
    if len(set(paths)) < len(paths):
        raise ConfigError("-o/--plot/--write-best: two of them name the same file; name a file for each")
    if cache is not None and cache.resolve() in paths:  # the cache, made first, would be a folder in the file's place
        raise ConfigError(f"--cache {cache}: is also a file the search writes (-o, --plot or --write-best); name a "
                          "folder of its own")


def _write_all(files: dict[Path, tuple[str, str | bytes]]) -> None:
    """Write each output (its option and content), every content made before the first is written."""
    from ..export.files import write_atomic

    for path, (option, content) in files.items():
        try:
            write_atomic(path, content)
        except OSError as exc:
            raise ConfigError(f"{option} {path}: cannot write: {exc.strerror or exc}") from None


def _best_note(result) -> str:
    from ..analysis.shown import shown_ms

    best = result.ranked[0]
    return (f"simulon search: best of {result.estimated:,} feasible strategies, "
            f"{shown_ms(best.iteration_ms)} ms per step ({'replayed' if best.replay_ms else 'estimated'})")


def _plot(path: Path, searchers: list, result) -> bytes:
    """The Pareto front of the winning GPU count's search, as the bytes of the file `path` names."""
    from ..config.units import GiB
    from ..search import pareto

    winner = result.ranked[0].strategy.num_gpus
    searcher, part = next(s for s in searchers if s.num_gpus == winner), result.parts[winner]
    title = (f"{searcher.workload.model.name} on {part.num_gpus:,} {searcher.gpu.name}: step time against "
             f"peak memory")
    return pareto.drawing(pareto.points(searcher, part), result.ranked[0].strategy, searcher.capacity / GiB,
                          pareto.plot_kind(path), title)


def _gpu_counts(text: str | None) -> list[int]:
    """`--gpus 512` or `--gpus 512,1024`: the counts, in the order given, each once."""
    if text is None:
        return []
    counts = []
    for part in text.split(","):
        try:
            count = int(part.strip())
        except ValueError:
            count = 0
        if count < 1:
            raise ConfigError(f"--gpus: expected positive whole numbers like 512 or 512,1024, got {part.strip()!r}")
        if count not in counts:
            counts.append(count)
    return counts


def _counts(result) -> str:
    return " or ".join(f"{n:,}" for n in result.gpu_counts or (result.num_gpus,))


def _describe(s, short: bool = False) -> str:
    """A strategy in a line: every degree, an uneven split's first and last stage layers, the micro-batch,
    recomputation, sharding, format and TP overlap."""
    sharding = {"distributed_optimizer": "dist-opt", "zero2": "ZeRO-2", "fsdp": "FSDP"}[s.sharding]
    experts = f" ep{s.ep}" + (f" etp{s.etp}" if s.etp != s.tp else "") if s.ep > 1 else ""
    uneven = f" first/last {s.first_layers}/{s.last_layers} layers" if s.first_layers else ""
    text = (f"tp{s.tp} pp{s.pp}" + (f" vpp{s.vpp}" if s.vpp > 1 else "") + uneven + f" dp{s.dp}"
            + (f" cp{s.cp}" if s.cp > 1 else "") + experts + f" mbs{s.micro_batch_size}"
            + ("" if s.recompute == "none" else f" {s.recompute}-recompute") + f" {sharding} {s.dtype}"
            + (" tp-overlap" if s.tp_comm_overlap else "") + (" zb-h1" if s.zero_bubble else ""))
    return text if short else text.replace("mbs", "micro-batch ")


def _csv_text(result) -> str:
    """The ranking as CSV (the JSON's `top` rows without their breakdowns; flags true or false, as the JSON and a
    sweep's CSV write them)."""
    rows = result.to_json()["top"]
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=[k for k in rows[0] if k != "breakdown_ms"], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: str(v).lower() if isinstance(v, bool) else v
                         for k, v in row.items() if k != "breakdown_ms"})
    return text.getvalue()
