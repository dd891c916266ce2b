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
    """(size, busbw) points per subset and hardware of the table's rows for this collective and group size."""
    from ..validate.report import number, read_table

    try:
        rows = read_table(measured.table)
    except OSError as exc:
        raise ConfigError(f"--measured {measured.table}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--measured {measured.table}: {not_utf8(exc)}") from None
    if rows and not {"collective", "msg_bytes", "busbw_GBps"} <= rows[0].keys():
        raise ConfigError(f"--measured {measured.table}: expected the columns collective, msg_bytes and busbw_GBps "
                          "(a table in validate/data/collectives.csv's format)")
    series: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        size, busbw = number(row, "msg_bytes"), number(row, "busbw_GBps")
        if size is None or busbw is None or not chosen(measured, row, op, group_size):
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
    """Simulated bus bandwidth per message size (log-log), and the measured points of a table if `options` is a
    Measured."""
    if not isinstance(data, list) or not data:
        raise ConfigError(f"{source}: expected a non-empty JSON list of sizes (this plot reads the output of "
                          f"`{COLLECTIVE}`)")
    rows = sorted(numbers(data, ("size_bytes", "busbw_GBps"), source, "(list)"))
    op = str(data[0].get("op", "collective")) if isinstance(data[0], dict) else "collective"
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot([r[0] for r in rows], [r[1] for r in rows], "o-", color="#4c72b0", markersize=3, label="simulon")
    if isinstance(options, Measured):
        group = need(data[0], "group_size", f"{source}: [0]", COLLECTIVE, int)
        markers = "sdv^<>Px"
        for n, (name, points) in enumerate(measured_series(options, op, group).items()):
            ax.plot([p[0] for p in points], [p[1] for p in points], markers[n % len(markers)], fillstyle="none",
                    label=f"measured {name}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    group = data[0].get("group_size", "") if isinstance(data[0], dict) else ""
    ax.set_title(f"{op} over {group} GPUs: bus bandwidth against message size")
    ax.legend(fontsize=7)
    return fig
