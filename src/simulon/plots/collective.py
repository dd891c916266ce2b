"""Bus bandwidth against message size, from `simulon collective --json`, with measured points overlaid from a
validation table in the shipped format (validate/data/collectives.csv: nccl-tests-style busbw per message size),
filtered to the same collective and group size, and optionally to one subset or hardware."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config.errors import ConfigError, not_utf8
from .figure import pyplot
from .inputs import need, numbers
from .scaling import label_log_axis

COLLECTIVE = "simulon collective SCENARIO --json"


@dataclass(frozen=True)
class Measured:
    """Where measured points come from: a table, and which of its rows to draw."""

    table: Path
    subset: str | None = None
    hardware: str | None = None


def op_name(text: str) -> str:
    """A collective's name in simulon's spelling: all_reduce -> allreduce, collective_permute (...) -> sendrecv."""
    name = text.split(" ")[0].replace("_", "").replace("-", "").lower()
    return {"collectivepermute": "sendrecv", "permute": "sendrecv"}.get(name, name)


def measured_series(measured: Measured, op: str, group_size: int) -> dict[str, list[tuple[float, float]]]:
    """(size, busbw) points per subset and hardware of the table's rows for this collective and group size: each
    row's bus bandwidth as `validate collectives` reads it (validate.collectives.measured_busbw: from its time, else
    its busbw, else its algbw)."""
    from ..collective.metrics import bus_bandwidth_factor
    from ..collective.types import collective_named
    from ..validate.collectives import MEASURED, measured_busbw
    from ..validate.report import number, read_table

    try:
        rows = read_table(measured.table)
    except OSError as exc:
        raise ConfigError(f"--measured {measured.table}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--measured {measured.table}: {not_utf8(exc)}") from None
    if rows and not ({"collective", "msg_bytes"} <= rows[0].keys() and set(MEASURED) & rows[0].keys()):
        raise ConfigError(f"--measured {measured.table}: expected the columns collective, msg_bytes and one of "
                          f"{', '.join(MEASURED)} (a table in validate/data/collectives.csv's format)")
    ctype = collective_named(op_name(op))
    factor = bus_bandwidth_factor(ctype, group_size) if ctype is not None else 1.0
    series: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        size = number(row, "msg_bytes")
        if size is None or not chosen(measured, row, op, group_size):
            continue
        busbw = measured_busbw({column: row.get(column, "") for column in MEASURED}, factor, size)
        if not busbw:
            continue
        series.setdefault(f"{row.get('subset', '')}: {row.get('hardware', '')[:40]}", []).append((size, busbw))
    if not series:
        which = "".join(f", {k} {v!r}" for k, v in (("subset", measured.subset), ("hardware", measured.hardware)) if v)
        raise ConfigError(f"--measured {measured.table}: no row measures {op} over {group_size} GPUs{which}")
    return {name: sorted(points) for name, points in sorted(series.items())}


def chosen(measured: Measured, row: dict[str, str], op: str, group_size: int) -> bool:
    """Whether a table row measures this collective over this many GPUs, on the subset and hardware asked for."""
    from ..validate.report import number

    hardware = measured.hardware
    return (op_name(row["collective"]) == op_name(op) and number(row, "group_size") == group_size
            and (measured.subset is None or row.get("subset") == measured.subset)
            and (hardware is None or hardware.lower() in row.get("hardware", "").lower()))


def busbw(data: Any, source: str, options: Any = None) -> Any:
    """Simulated bus bandwidth per message size (log-log), one line per collective and group size (the runs of a
    file that joins several `collective --json` lists), and the measured points of a table if `options` is a
    Measured."""
    if not isinstance(data, list) or not data:
        raise ConfigError(f"{source}: expected a non-empty JSON list of sizes (this plot reads the output of "
                          f"`{COLLECTIVE}`)")
    series = runs(data, source)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    markers = "sdv^<>Px"
    measured_drawn = 0
    for n, ((op, group), (first, rows)) in enumerate(series.items()):
        colour = "#4c72b0" if len(series) == 1 else plt.get_cmap("tab10").colors[n % 10]
        name = "simulon" if len(series) == 1 else f"{op} over {group} GPUs"
        ax.plot([r[0] for r in rows], [r[1] for r in rows], "o-", color=colour, markersize=3, label=name)
        if isinstance(options, Measured):
            need(data[first], "group_size", f"{source}: [{first}]", COLLECTIVE, int)
            for name, points in measured_series(options, op, group).items():
                ax.plot([p[0] for p in points], [p[1] for p in points], markers[measured_drawn % len(markers)],
                        fillstyle="none", label=f"measured {name}" if len(series) == 1
                        else f"measured {op} over {group} GPUs, {name}")
                measured_drawn += 1
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    label_log_axis(ax.yaxis, *ax.get_ylim())  # matplotlib wrote a sweep within 1% as 5.188x10^1, 5.19x10^1, ...
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    if len(series) == 1:
        op, group = next(iter(series))
        ax.set_title(f"{op} over {group} GPUs: bus bandwidth against message size")
    else:
        ax.set_title("Bus bandwidth against message size, per collective and group size")
    ax.legend(fontsize=7)
    return fig


def runs(data: list, source: str) -> dict[tuple[str, int | str], tuple[int, list[tuple[float, float]]]]:
    """The rows of a `collective --json` list (or of several joined) by collective and group size, in name and size
    order: for each, the index of its first row and its (size, busbw) points by size. A size given twice in one
    run is refused naming both rows, as `collective --sizes` refuses a repeated size (runs of other algorithms or
    channels over the same collective and group belong in files of their own)."""
    values = numbers(data, ("size_bytes", "busbw_GBps"), source, "(list)")
    found: dict[tuple[str, int | str], tuple[int, dict[float, tuple[int, float]]]] = {}
    for i, (row, (size, bw)) in enumerate(zip(data, values, strict=True)):
        if "group_size" in row:  # a whole number: the line's name and key (an older list may leave it out)
            need(row, "group_size", f"{source}: [{i}]", COLLECTIVE, int)
        key = (str(row.get("op", "collective")), row.get("group_size", ""))
        points = found.setdefault(key, (i, {}))[1]
        if size in points:
            raise ConfigError(f"{source}: [{points[size][0]}] and [{i}]: both {key[0]} over {key[1]} GPUs at "
                              f"{size:,.0f} bytes; a busbw plot draws one line per collective and group size, each "
                              "size once (plot runs of other settings from files of their own)")
        points[size] = (i, bw)
    return {key: (first, sorted((size, bw) for size, (_, bw) in points.items()))
            for key, (first, points) in sorted(found.items(), key=lambda item: line_order(*item[0]))}


def line_order(op: str, group: int | str) -> tuple[str, bool, int]:
    """The lines in order of collective, then of group size (rows without a group size after those with one)."""
    return op, group == "", group if isinstance(group, int) else 0
