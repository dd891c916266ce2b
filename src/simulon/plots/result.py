"""Plots of one simulated iteration, from `simulon simulate --json`: where each GPU's and stage's step time goes
(analysis/result.py's per-GPU breakdown), the pipeline timeline per stage (analysis/schedule.py) and memory per
stage against the GPU's capacity (memory/)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..analysis.shown import shown_ms
from ..config.errors import ConfigError
from ..config.units import GiB
from .figure import fit_tick_labels, pyplot
from .inputs import is_finite, need, number, numbers, replayed_of

SIMULATE = "simulon simulate SCENARIO --json"

TERMS = (("compute_ms", "compute", "#4c72b0"), ("exposed_comm_ms", "exposed communication", "#dd8452"),
         ("bubble_ms", "bubble / idle", "#bbbbbb"))
"""The parts a GPU's iteration splits into (compute + exposed communication + bubble = step time)."""

SPAN_COLOURS = {"forward": "#4c72b0", "backward": "#55a868", "weight-gradient": "#8172b3", "recompute": "#64b5cd",
                "optimizer": "#937860", "gradient-buffer": "#b8a07a"}
COMM_COLOUR = {"tp-comm": "#dd8452", "cp-comm": "#da8bc3", "ep-comm": "#ccb974", "dp-comm": "#c44e52",
               "pp-comm": "#8c8c8c", "param-comm": "#e377c2", "communication": "#dd8452"}


def breakdown(data: Any, source: str, options: Any = None) -> Any:
    """Stacked bars: each simulated GPU's step split into compute, exposed communication and bubble, and the same
    per pipeline stage (averaged over the GPUs of the stage, each weighted by the GPUs it stands for)."""
    per_gpu = need(data, "per_gpu", source, SIMULATE)
    keys = ("gpu", "stage", "stands_for", *(t[0] for t in TERMS))
    rows = numbers(per_gpu, keys, source, "per_gpu")
    light = next((i for i, r in enumerate(rows) if r[2] < 1), None)
    if light is not None:  # a stage's mean divides by the GPUs its rows stand for
        raise ConfigError(f"{source}: per_gpu[{light}].stands_for: expected at least 1, got {rows[light][2]:g}")
    total_ms, gpus = number(data, "iteration_time_ms", source, 0), number(data, "num_gpus", source, len(rows))
    plt = pyplot()
    fig, (by_gpu, by_stage) = plt.subplots(1, 2, figsize=(11, 4.5), gridspec_kw={"width_ratios": (3, 2)})
    labels = [f"{int(r[0])}" for r in rows]
    stack(by_gpu, labels, [[r[3 + i] for r in rows] for i in range(len(TERMS))])
    by_gpu.set_xlabel("simulated GPU")
    stages = stage_means(rows, devices(per_gpu))
    stack(by_stage, [f"{s}\n{d}" if d else str(s) for s, d in stages],
          [[m[i] for m in stages.values()] for i in range(len(TERMS))])
    by_stage.set_xlabel("pipeline stage" + (" and GPU type" if any(d for _, d in stages) else ""))
    for ax in (by_gpu, by_stage):
        ax.set_ylabel("ms per iteration")
    by_stage.legend(loc="lower right", fontsize=8)
    fig.suptitle(f"Step-time breakdown: {shown_ms(total_ms)} ms, {int(gpus):,} GPUs")
    for ax in (by_gpu, by_stage):  # 32 GPUs' numbers, level, ran together ("1011121314")
        fit_tick_labels(ax)
    return fig


def devices(per_gpu: list) -> list[str]:
    """Each row's GPU type (`device`) where the rows name more than one, else "" for each (one type, or a result
    written before per_gpu named it)."""
    names = [str(g.get("device", "")) if isinstance(g, dict) else "" for g in per_gpu]
    return names if len(set(names)) > 1 else [""] * len(names)


def stage_means(rows: list[tuple[float, ...]], types: list[str] | None = None) -> dict[tuple[int, str], list[float]]:
    """Per pipeline stage and GPU type, the mean of each of the TERMS over its GPUs, each weighted by the GPUs it
    stands for, from rows of (gpu, stage, stands_for, *terms) and each row's type (`types`: devices; "" for all
    where None): a stage whose data-parallel replicas run on GPUs of several types (training.stage_groups) is one
    mean per type, not an average of fast and slow GPUs (on a stage of H100 and A100 replicas under dp_shares, idle
    142.5 and 187.9 ms, one 165.2 ms bar)."""
    stages: dict[tuple[int, str], list[tuple[float, ...]]] = defaultdict(list)
    for r, device in zip(rows, types or [""] * len(rows), strict=True):
        stages[int(r[1]), device].append(r)
    return {key: [sum(r[2] * r[3 + i] for r in group) / sum(r[2] for r in group) for i in range(len(TERMS))]
            for key, group in sorted(stages.items())}


def stack(ax: Any, labels: list[str], series: list[list[float]]) -> None:
    """Bars of the TERMS stacked at each label."""
    bottom = [0.0] * len(labels)
    for (_, name, colour), values in zip(TERMS, series, strict=True):
        ax.bar(range(len(labels)), values, bottom=bottom, label=name, color=colour, width=0.8)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    step = max(1, len(labels) // 32)
    ax.set_xticks(range(0, len(labels), step), labels[::step], fontsize=7)


def gantt(data: Any, source: str, options: Any = None) -> Any:
    """The pipeline timeline: per stage a row of compute spans coloured by kind (forward, backward,
    weight-gradient, recompute, optimizer, gradient-buffer) and under it a thinner row of communication by stream."""
    sched = need(data, "schedule", source, SIMULATE, dict)
    stages = need(sched, "stages", f"{source}: schedule", SIMULATE)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(12, 1.0 + 0.6 * len(stages)))
    seen: set[str] = set()
    for row, stage in enumerate(stages):
        spans = need(stage, "spans", f"{source}: schedule.stages[{row}]", SIMULATE)
        by_kind: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for i, s in enumerate(spans):
            if not (isinstance(s, list) and len(s) == 4 and isinstance(s[2], str) and is_finite(s[0])
                    and is_finite(s[1])):
                raise ConfigError(f"{source}: schedule.stages[{row}].spans[{i}]: expected [start_ms, end_ms, kind, "
                                  "microbatch]")
            if not 0 <= s[0] <= s[1]:  # a span drawn backwards, or before the step began
                raise ConfigError(f"{source}: schedule.stages[{row}].spans[{i}]: expected 0 <= start_ms <= end_ms, "
                                  f"got {s[0]!r} to {s[1]!r}")
            by_kind[s[2]].append((float(s[0]), float(s[1]) - float(s[0])))
        y = len(stages) - 1 - row
        for kind in sorted(by_kind, key=lambda k: (-sum(d for _, d in by_kind[k]), k)):  # the rarer drawn on top
            comm = kind not in SPAN_COLOURS
            colour = COMM_COLOUR.get(kind, "#8c8c8c") if comm else SPAN_COLOURS[kind]
            band = (y - 0.42, 0.22) if comm else (y - 0.17, 0.55)
            ax.broken_barh(by_kind[kind], band, facecolors=colour, label=None if kind in seen else kind,
                           linewidth=0)
            seen.add(kind)
    named = gpu_types(data.get("per_gpu"))
    ax.set_yticks(range(len(stages)), [stage_label(s, i, named) for i, s in enumerate(stages)][::-1])
    ax.set_xlabel("time (ms)")
    ax.set_xlim(0, number(sched, "iteration_time_ms", f"{source}: schedule", 0) or ax.get_xlim()[1])
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.3 / len(stages)), ncol=6, fontsize=8)
    ax.set_title("Pipeline timeline per stage (compute above, communication below; one GPU per stage)"
                 + replay_note(data, source))
    return fig


def gpu_types(per_gpu: Any) -> dict[Any, str]:
    """Each GPU's type by its number, from a result's per_gpu where it names several types (devices), else {}."""
    if not isinstance(per_gpu, list):
        return {}
    return {g["gpu"]: t for g, t in zip(per_gpu, devices(per_gpu), strict=True)
            if t and isinstance(g, dict) and isinstance(g.get("gpu"), int)}


def stage_label(stage: Any, index: int, types: dict[Any, str]) -> str:
    """A timeline row's label: "stage 0"; on GPUs of several types (gpu_types) with the GPU the row draws and its type
    ("stage 0\nGPU 8, A100-SXM4-80GB"), since a stage's replicas may run on GPUs of different speeds
    (training.stage_groups) and the row shows one of them."""
    label = f"stage {stage.get('stage', index)}"
    gpu = stage.get("gpu")
    return f"{label}\nGPU {gpu}, {types[gpu]}" if isinstance(gpu, int) and gpu in types else label


def replay_note(data: Any, source: str) -> str:
    """A title's second line where the drawing is a sampled step's larger replay (replayed_of), else nothing."""
    replayed = replayed_of(data, source)
    if replayed is None:
        return ""
    return (f"\nthe {replayed[0]}-micro-batch replay of a step of {replayed[1]} (the step's time is extrapolated "
            "from two replays)")


def memory(data: Any, source: str, options: Any = None) -> Any:
    """Each stage's peak memory per GPU, split into its terms, against its GPU's capacity: one line across where
    every stage has the same, else a mark over each stage's bar (GPUs of several types)."""
    mem = need(data, "memory", source, SIMULATE, dict)
    stages = need(mem, "stages", f"{source}: memory", SIMULATE)
    capacity = number(mem, "capacity_bytes", source, None, "memory.")
    gib = GiB
    terms: dict[str, list[float]] = {}
    for i, stage in enumerate(stages):
        parts = {**need(stage, "terms_bytes", f"{source}: memory.stages[{i}]", SIMULATE, dict),
                 **(stage.get("runtime_bytes") if isinstance(stage.get("runtime_bytes"), dict) else {})}
        for name in parts:
            terms.setdefault(name, [0.0] * len(stages))
        for name in parts:
            terms[name][i] = number(parts, name, source, None, f"memory.stages[{i}] term ") / gib
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    bottom = [0.0] * len(stages)
    colours = plt.get_cmap("tab20").colors
    for n, (name, values) in enumerate(terms.items()):
        ax.bar(range(len(stages)), values, bottom=bottom, label=name, color=colours[n % len(colours)])
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    devices = numbers(stages, ("device_bytes",), source, "memory.stages")
    rest = [max(d[0] / gib - b, 0.0) for d, b in zip(devices, bottom, strict=True)]
    if any(r > 0 for r in rest):  # the caching allocator's excess: device peak over the terms
        ax.bar(range(len(stages)), rest, bottom=bottom, label="allocator excess", color="#eeeeee", hatch="//")
    own = stage_capacities(stages, capacity, source)
    capacity_marks(ax, capacity, own)
    named = len(set(own)) > 1 and all(isinstance(s.get("gpu"), str) for s in stages)  # whose memory each mark is
    ax.set_xticks(range(len(stages)), [f"{s.get('stage', i)}\n{s['gpu']}" if named else str(s.get("stage", i))
                                       for i, s in enumerate(stages)])
    ax.set_xlabel("pipeline stage and its GPU" if named else "pipeline stage")
    ax.set_ylabel("GiB per GPU")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7)
    ax.set_title(f"Memory per stage on {mem.get('gpu', 'the GPU')}: {'fits' if mem.get('fits') else 'does not fit'}")
    return fig


def stage_capacities(stages: list, capacity: float, source: str) -> list[float]:
    """Each stage's own capacity (bytes), `capacity` where a stage does not give one."""
    rows = [s if isinstance(s, dict) and "capacity_bytes" in s else {"capacity_bytes": capacity} for s in stages]
    return [c for (c,) in numbers(rows, ("capacity_bytes",), source, "memory.stages")]


def capacity_marks(ax: Any, capacity: float, per_stage: list[float]) -> None:
    """The capacity in GiB: a dashed line across the stages where they all have `capacity`, else a dashed mark
    over each stage's bar at its own."""
    colour, gib = "#c44e52", GiB
    if all(c == capacity for c in per_stage):
        ax.axhline(capacity / gib, color=colour, linestyle="--", label=f"capacity {capacity / gib:.0f} GiB")
        return
    sizes = ", ".join(f"{c / gib:.0f}" for c in dict.fromkeys(per_stage))
    ax.hlines([c / gib for c in per_stage], [x - 0.45 for x in range(len(per_stage))],
              [x + 0.45 for x in range(len(per_stage))], colors=colour, linestyles="--", linewidth=2,
              label=f"capacity per stage ({sizes} GiB)")
