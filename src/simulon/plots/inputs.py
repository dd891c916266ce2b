"""Reading what a plot draws from a result file, with one plain message (file, field, problem) when it is not there."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from ..config.errors import (
    LARGEST_NUMBER,
    MAX_RESULT_BYTES,
    ConfigError,
    EmptyJSON,
    JSONTooDeep,
    json_number,
    not_utf8,
    parse_json,
    quoted,
    read_input_text,
)


def read_text(path: Path) -> str:
    """A result file's text, or a ConfigError naming the file and why it cannot be read."""
    try:
        return read_input_text(path, MAX_RESULT_BYTES, "a result")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: {not_utf8(exc)}") from None
    except ValueError as exc:  # a device, a pipe, a file larger than any result
        raise ConfigError(f"{path}: cannot read: {exc}") from None


def read_json(path: Path, made_by: str) -> Any:
    """A JSON result file, or a ConfigError naming the file and what is wrong with it: a sweep's CSV, given where
    the output of `made_by` was meant, is named as one and sent to the kinds that draw it."""
    text = read_text(path)
    try:
        return parse_json(text)
    except EmptyJSON:
        raise ConfigError(f"{path}: empty: expected the JSON that `{made_by}` writes") from None
    except json.JSONDecodeError as exc:
        if not sweep_columns_missing(next(csv.reader(io.StringIO(text)), [])):
            raise ConfigError(f"{path}: a sweep's CSV, not JSON (this plot reads the output of `{made_by}`; a "
                              "sweep's CSV draws with --kind scaling or steps)") from None
        raise ConfigError(f"{path}: not JSON: {exc.msg}: line {exc.lineno}, column {exc.colno}") from None
    except JSONTooDeep as exc:
        raise ConfigError(f"{path}: not JSON simulon reads: {exc}") from None


def sweep_columns_missing(header: list[str]) -> list[str]:
    """The columns of a sweep's CSV (sweep/run.py: its key, the swept fields, then each of METRICS) that a CSV's
    `header` lacks, in that order: none where the file is a sweep's."""
    from ..sweep.run import METRICS

    return [c for c in ("key", *METRICS) if c not in header]


def need(data: Any, key: str, source: str, made_by: str, kind: type = list) -> Any:
    """`data[key]`, which must be a non-empty `kind`; else a ConfigError saying which command writes it."""
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, kind) or not value:
        what = "missing" if value is None else "empty or of the wrong type"
        raise ConfigError(f"{source}: {key}: {what} (this plot reads the output of `{made_by}`)")
    return value


def number(data: dict, key: str, source: str, default: float | None, where: str = "") -> float:
    """`data[key]` as a finite number (`default` where absent; required where that is None); else a ConfigError
    naming the file and the field (`where` + `key`, as `simulon diff` names it: analysis/diff.py)."""
    if default is None and key not in data:
        raise ConfigError(f"{source}: {where}{key}: missing")
    value = data.get(key, default)
    if not is_finite(value):
        raise ConfigError(f"{source}: {where}{key}: {expected(value)}")
    return float(value)


def replayed_of(data: dict, source: str) -> tuple[int, int] | None:
    """(micro-batches replayed, the step's) where a `simulate --json` result was extrapolated from replays of fewer
    micro-batches (`micro_batch_sampling`, sampling.py): its schedule, critical path and links are the larger
    replay's, its step time and breakdown the extrapolated step's. None where every micro-batch was replayed."""
    sampling = data.get("micro_batch_sampling") if isinstance(data, dict) else None
    if sampling is None:
        return None
    if not isinstance(sampling, dict):
        raise ConfigError(f"{source}: micro_batch_sampling: expected an object, got {sampling!r}")
    where = "micro_batch_sampling."
    return (int(number(sampling, "trace_and_analysis_of", source, None, where)),
            int(number(sampling, "micro_batches", source, None, where)))


def numbers(rows: list, keys: tuple[str, ...], source: str, where: str) -> list[tuple[float, ...]]:
    """Each row's values of `keys` as finite floats; a ConfigError names the first row and key that is not one
    (`where`[row].key)."""
    values = []
    for i, row in enumerate(rows):
        bad = next((k for k in keys if not isinstance(row, dict) or not is_finite(row.get(k))), None)
        if bad is not None:
            missing = not isinstance(row, dict) or bad not in row
            raise ConfigError(f"{source}: {where}[{i}].{bad}: {'expected a number' if missing else expected(row[bad])}")
        values.append(tuple(float(row[k]) for k in keys))
    return values


def is_finite(value: Any) -> bool:
    """Whether `value` is a number a plot can draw (config.errors.json_number)."""
    return json_number(value) is not None


def expected(value: Any) -> str:
    """What a message says of `value` where a drawable number was expected."""
    large = not isinstance(value, bool) and isinstance(value, int | float) and value == value  # not NaN
    size = f" of size at most {LARGEST_NUMBER:g}" if large else ""
    return f"expected a number{size}, got {quoted(value)}"
