"""The points of a sweep: the cartesian product of `--set PATH=V1,V2,...` axes over a scenario file.

PATH is a field's dotted path from the scenario's root (`datacenter.cluster.num_nodes`), or from inside one of its
blocks when only one block has a field of that name (`cluster.num_nodes`, `network.scale_out.nic.speed`,
`parallelism.tp`); a number is a position in a list (`node_groups.1.num_nodes`). Several fields that must move
together are one axis: `--set A+B=a1:b1,a2:b2` (a GPU count and the batch that keeps a weak-scaling study's
micro-batches per replica constant, say). Values are read as YAML scalars, as in the scenario file (`4` a number,
`400Gbps` text, `true` a flag); a value holding a comma is quoted, YAML's quotes inside the shell's
(`--set 'parallelism.pipeline_layout="Et*3|(tt|)*29,m|L"'`). Each point is the scenario file with its values set,
validated by the scenario's own models (config/), so a bad path or value is refused with the field's own message
before anything runs; so is a sweep of the datacenter's size on a scenario whose workload.training.num_gpus fixes
the GPUs trained on (every point would simulate the same run: check_gpus_follow).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..config.common import whole_number
from ..config.dc import DatacenterConfig
from ..config.errors import ConfigError, parse_yaml, yaml_problem
from ..config.loading import parse_scenario, read_scenario_data
from ..config.scenario import CollectiveConfig, ScenarioConfig
from ..config.workload import (
    CP_EXCHANGE_SETTINGS,
    FSDP_UNREAD,
    UNOVERLAPPED_UNREAD,
    MegatronWorkload,
    ParallelismSpec,
    without_other_recompute_settings,
)

MAX_POINTS = 10_000
"""The most points one sweep runs: each is validated before the first runs (a few ms each) and simulated in full
(a second or more), so a product of --set lists beyond this would sit for hours before its first row; split it."""

BLOCKS = {"datacenter": DatacenterConfig, "workload": MegatronWorkload, "collective": CollectiveConfig}
"""The scenario's blocks, and the model a path inside each starts from."""


@dataclass(frozen=True)
class Axis:
    """One `--set`: the fields it sets together, and the values of each of its steps."""

    paths: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]

    @property
    def name(self) -> str:
        """The axis's column in the sweep's CSV: its paths joined by '+'."""
        return "+".join(self.paths)


def step_text(values: tuple[Any, ...]) -> str:
    """One step of an axis as its CSV cell: the values joined by ':' (true/false for flags)."""
    return ":".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values)


def settings_label(settings: dict[str, Any]) -> str:
    """A point's values as its messages name them, each as its CSV cell writes it (step_text): `tp=2, sp=true`."""
    return ", ".join(f"{path}={step_text((value,))}" for path, value in settings.items())


@dataclass(frozen=True)
class Point:
    """One scenario of the sweep: the values it sets (path -> value) and its validated scenario."""

    settings: dict[str, Any]
    scenario: ScenarioConfig
    steps: dict[str, str]   # axis name -> the step's CSV cell
    expand: str = "auto"    # how its replay folds (pipeline.check_fold_mode): auto, full or symmetric
    source: Path | None = None  # the scenario file its values are set in (points_at reads it again)

    @property
    def label(self) -> str:
        return settings_label(self.settings)

    @property
    def key(self) -> str:
        """A hash of the resolved scenario (templates merged, defaults filled) and of the expansion where one is
        named (`auto`'s keys are the scenario's alone, as they were before it counted): two points that simulate
        the same thing the same way share it, whatever their file or options said."""
        run = self.scenario.model_dump_json() + ("" if self.expand == "auto" else f"\nexpand: {self.expand}")
        return hashlib.sha256(run.encode()).hexdigest()[:16]


def full_path(path: str) -> str:
    """A dotted path from the scenario's root: `cluster.num_nodes` -> `datacenter.cluster.num_nodes` when only one
    block has a `cluster` field (a path the blocks do not know is left for the validation to name)."""
    first = path.split(".", 1)[0]
    if first in BLOCKS:
        return path
    owners = [block for block, model in BLOCKS.items() if first in model.model_fields]
    return f"{owners[0]}.{path}" if len(owners) == 1 else path


def top_level_split(text: str, separator: str = ",") -> list[str]:
    """`text` split at the `separator`s outside quotes, brackets, braces and parentheses: "[15,17],[16,16]" is two
    steps, each then read and refused as the list it is, not cut inside one; a quoted value ('"Et*3|(tt|)*29,m|L"',
    a pipeline layout in Megatron's own form) is one step, its quotes then read off as YAML reads them (a \\" inside
    double quotes, or '' inside single ones, does not end them)."""
    steps, depth, start, opened, quote, escaped, closed = [], 0, 0, 0, "", False, -2
    for i, char in enumerate(text):
        if quote:  # inside quotes as YAML reads them: \" in double quotes and '' in single quotes quote nothing
            if escaped:
                escaped = False
            elif quote == '"' and char == "\\":
                escaped = True
            elif char == quote:
                quote, closed = "", i
        elif char in "\"'" and (not text[opened:i].strip()  # a quote opens a value, as in YAML (not "it's"),
                                  or (closed == i - 1 and char == "'" == text[closed])):  # or is the second ' of ''
            quote = char
        else:
            depth += (char in "[{(") - (char in "]})")
            if char == separator and depth <= 0:
                steps.append(text[start:i])
                start = i + 1
            opened = i + 1 if char in ",:" and depth <= 0 else opened  # where the next value, or a linked one, opens
    return [*steps, text[start:]]


def parse_axis(text: str) -> Axis:
    """`PATH=V1,V2` or `PATH1+PATH2=A1:B1,A2:B2` as an axis; a ConfigError names the --set and the problem."""
    left, sep, right = text.partition("=")
    paths = tuple(full_path(p.strip()) for p in left.split("+"))
    if not sep or not right.strip() or not all(p and all(paths) for p in paths):
        raise ConfigError(f"--set {text}: expected PATH=VALUE[,VALUE...] (or PATH+PATH=V:V[,V:V...])")
    if len(set(paths)) != len(paths):
        raise ConfigError(f"--set {text}: a field appears twice")
    values = []
    for step in top_level_split(right):
        parts = top_level_split(step, ":") if len(paths) > 1 else [step]
        if len(parts) != len(paths):
            raise ConfigError(f"--set {text}: {step.strip()!r} has {len(parts)} values for {len(paths)} fields "
                              "(separate them with ':')")
        try:
            values.append(tuple(parse_yaml(part.strip()) for part in parts))
        except yaml.YAMLError as exc:
            where, problem = yaml_problem(exc)
            raise ConfigError(f"--set {text}: cannot read {step.strip()!r}{where}: {problem}") from None
        for path, part, value in zip(paths, parts, values[-1], strict=True):
            if isinstance(value, list | dict):
                kind, inside = ("list", "entries by index") if isinstance(value, list) else ("mapping", "fields")
                raise ConfigError(f"--set {text}: {part.strip()!r} is a {kind}, and a sweep sets one value a step: "
                                  f"sweep its {inside} ({path}.{'0' if kind == 'list' else 'FIELD'}=...)")
            if value is None:
                raise ConfigError(f"--set {text}: {step.strip()!r}: expected a number, text or true/false")
    if len(set(values)) != len(values):
        raise ConfigError(f"--set {text}: a value appears twice")
    return Axis(paths, tuple(values))


def with_value(data: dict, path: str, value: Any) -> None:
    """Set `path` in the raw scenario `data` (in place), creating mappings on the way; a template named by a bare
    string (`model: gpt3-175b`) becomes `{from: gpt3-175b}` so that one of its fields can be set; a number steps
    into a list (`datacenter.node_groups.1.num_nodes`)."""
    node: dict | list = data
    keys = path.split(".")
    for depth, key in enumerate(keys[:-1]):
        if isinstance(node, list):
            at = list_index(node, key, path, keys[:depth])
            if isinstance(node[at], str):
                node[at] = {"from": node[at]}
            node = node[at]
            continue
        child = node.get(key)
        if isinstance(child, str):
            child = {"from": child}
        elif not isinstance(child, dict | list):
            child = {}
        node[key] = child
        node = child
    if isinstance(node, list):
        node[list_index(node, keys[-1], path, keys[:-1])] = value
    else:
        node[keys[-1]] = value


def list_index(items: list, key: str, path: str, prefix: list[str]) -> int:
    """The list position `key` names in a --set path, or a ConfigError saying which positions there are."""
    position = whole_number(key)
    if position is None or position >= len(items):
        raise ConfigError(f"--set {path}: {'.'.join(prefix)} is a list of {len(items)}: expected a position "
                          f"0 to {len(items) - 1}, got {key!r}")
    return position


def sweep_points(scenario: Path, axes: list[Axis]) -> list[Point]:
    """Every point of the cartesian product of `axes` over the scenario file, validated (the first bad one stops
    the sweep with a message naming its settings, the field and the problem)."""
    if not axes:
        raise ConfigError("--set: give at least one field to sweep, e.g. --set cluster.num_nodes=1,2,4")
    paths = [p for axis in axes for p in axis.paths]
    twice = next((p for p in paths if paths.count(p) > 1), None)
    if twice is not None:
        raise ConfigError(f"--set: {twice} is set by two --set options")
    count = math.prod(len(axis.values) for axis in axes)
    if count > MAX_POINTS:
        sizes = " x ".join(str(len(axis.values)) for axis in axes)
        raise ConfigError(f"--set: {count:,} points ({sizes} values), more than the {MAX_POINTS:,} one sweep runs; "
                          "split it into several sweeps (each resumes from its own CSV)")
    base = read_scenario_data(scenario)
    if not isinstance(base, dict):
        parse_scenario(base, str(scenario))  # raises the loader's own message
    points = []
    for steps in itertools.product(*(axis.values for axis in axes)):
        settings = {p: v for axis, step in zip(axes, steps, strict=True) for p, v in zip(axis.paths, step, strict=True)}
        points.append(point_of(scenario, base, settings, {axis.name: step_text(step) for axis, step in zip(axes, steps,
                                                                                                   strict=True)}))
    keys = [p.key for p in points]
    same = next((i for i, k in enumerate(keys) if keys.index(k) != i), None)
    if same is not None:
        first = points[keys.index(keys[same])]
        raise ConfigError(f"--set: {points[same].label} simulates the same scenario as {first.label}")
    check_gpus_follow(scenario, axes, points)
    return points


def point_of(scenario: Path, base: Any, settings: dict[str, Any], steps: dict[str, str]) -> Point:
    """The point of the scenario file `scenario` (its raw data `base`) with `settings` set, validated."""
    data = copy.deepcopy(base)
    for path, value in settings.items():
        with_value(data, path, value)
    without_unread_settings(data, settings)
    sc = parse_scenario(data, f"{scenario} with {settings_label(settings)}", scenario.parent)
    if sc.workload is None:
        raise ConfigError(f"{scenario}: workload: required to sweep training iterations")
    return Point(settings, sc, steps, source=scenario)


def cell_value(text: str) -> Any:
    """A swept value as its CSV cell (step_text) wrote it, read back as a --set reads it (a YAML scalar); text the
    --set could not have given as such (YAML's list, mapping or null, or no YAML at all: 'a: b', quoted on the
    command line) is the text itself."""
    try:
        value = parse_yaml(text.strip())
    except yaml.YAMLError:
        return text
    return text if value is None or isinstance(value, list | dict) else value


def points_at(like: Point, cells: list[dict[str, str]]) -> list[Point | None]:
    """The point of `like`'s scenario file and expansion at each of these CSV rows' swept cells (`like.steps`' axes,
    each cell read back as a --set reads its value: step_text's ':' between linked values), as sweep_points makes
    it; None where a row's cells cannot be read back to a point the scenario takes (then nothing says whether it is
    one of the scenario's points), or where `like` names no file."""
    if like.source is None:
        return [None] * len(cells)
    base = read_scenario_data(like.source)
    found: list[Point | None] = []
    for row in cells:
        try:
            settings = {}
            for name in like.steps:
                paths = name.split("+")
                parts = top_level_split(row[name], ":") if len(paths) > 1 else [row[name]]
                if len(parts) != len(paths):
                    raise ValueError(f"{row[name]!r} has {len(parts)} values for {len(paths)} fields")
                settings.update(zip(paths, map(cell_value, parts), strict=True))
            point = point_of(like.source, base, settings, {name: row[name] for name in like.steps})
        except (ConfigError, ValueError, TypeError):
            found.append(None)
            continue
        found.append(dataclasses.replace(point, expand=like.expand))
    return found


SCHEDULE_FIELDS = {("parallelism", "pipeline_schedule"), ("parallelism", "vpp"), ("parallelism", "pipeline_layout")}
"""The (block, key) settings that choose whether the pipeline runs interleaved 1F1B, which alone reads
microbatch_group_size."""


def without_unread_settings(data: dict, settings: dict[str, Any]) -> None:
    """Drop from a point's raw scenario `data` (in place) the base's settings that a mode the sweep sets does not read,
    unless the sweep sets them too: another recomputation mode's (config.workload.without_other_recompute_settings),
    the gradient bucket size under fsdp or with overlap_grad_reduce off (FSDP_UNREAD, UNOVERLAPPED_UNREAD),
    a2a+p2p's group sizes under another context-parallel exchange (CP_EXCHANGE_SETTINGS), and interleaved 1F1B's
    micro-batch group size under another schedule (SCHEDULE_FIELDS). The scenario refuses each beside that mode, so a
    sweep over the modes of a scenario that gave one was refused whole; the search and the memory remedies drop
    theirs alike."""
    swept = {tuple(p.split(".")[1:3]) for p in settings if p.startswith("workload.")}  # (block, key) set by the sweep
    workload = data.get("workload")
    if not isinstance(workload, dict):
        return
    parallelism = workload.get("parallelism")
    parallelism = parallelism if isinstance(parallelism, dict) else {}
    if "workload.parallelism.recompute" in settings:  # the base's settings of the mode the sweep replaced
        without_other_recompute_settings(parallelism, keep=[key for block, key in swept if block == "parallelism"])
    unread = [*(FSDP_UNREAD if settings.get("workload.parallelism.fsdp", "none") != "none" else ()),
              *(UNOVERLAPPED_UNREAD if settings.get("workload.parallelism.overlap_grad_reduce") is False else ())]
    for block, key in unread:
        if (block, key) not in swept and isinstance(workload.get(block), dict):
            workload[block].pop(key, None)
    grouped = ("parallelism", "microbatch_group_size") not in swept
    if swept & SCHEDULE_FIELDS and grouped and not interleaved(parallelism):
        parallelism.pop("microbatch_group_size", None)
    if "workload.parallelism.context_parallel_comm" in settings:
        for exchange, key in CP_EXCHANGE_SETTINGS.items():
            if settings["workload.parallelism.context_parallel_comm"] != exchange and ("parallelism", key) not in swept:
                parallelism.pop(key, None)


def interleaved(parallelism: dict) -> bool:
    """Whether a raw parallelism block runs Megatron's interleaved 1F1B (ParallelismSpec.interleaved); True where the
    block is refused alone (left for the scenario's own checks to name)."""
    try:
        return ParallelismSpec.model_validate({k: v for k, v in parallelism.items() if k != "microbatch_group_size"}
                                              ).interleaved
    except (ValueError, ConfigError):
        return True


def changes_gpus(axis: Axis, points: list[Point]) -> bool:
    """Whether two of `points` that differ in `axis` alone have datacenters of different GPU counts (in a cartesian
    product, some axis does wherever the counts differ at all)."""
    counts: dict[tuple, set[int]] = {}
    for p in points:
        others = tuple(step for name, step in p.steps.items() if name != axis.name)
        counts.setdefault(others, set()).add(p.scenario.datacenter.num_gpus)
    return any(len(gpus) > 1 for gpus in counts.values())


def check_gpus_follow(scenario: Path, axes: list[Axis], points: list[Point]) -> None:
    """A ConfigError where the sweep changes the datacenter's GPU count but the scenario's workload.training.num_gpus
    holds the GPUs trained on fixed: every point would simulate the same GPUs (the same row, again and again), so
    the sweep is refused before anything runs, with the combined axis that moves both."""
    trained = {p.scenario.workload.training.num_gpus for p in points}
    if len({p.scenario.datacenter.num_gpus for p in points}) < 2 or len(trained) != 1 or None in trained:
        return
    axis = next(a for a in axes if changes_gpus(a, points))
    gpus = {}
    for p in points:
        gpus.setdefault(p.steps[axis.name], p.scenario.datacenter.num_gpus)
    example = ",".join(f"{step}:{n}" for step, n in gpus.items())
    raise ConfigError(f"--set {axis.name}: changes the datacenter's GPUs ({', '.join(map(str, gpus.values()))}), but "
                      f"{scenario}: workload.training.num_gpus: {trained.pop()} fixes the GPUs every point trains "
                      f"on, so every point would simulate the same run; sweep the GPU count with it, e.g. "
                      f"--set {axis.name}+workload.training.num_gpus={example}")
