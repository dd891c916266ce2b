"""What changed between two simulation results (`simulate --json` objects) and why: the headline numbers, and the
terms that moved, largest move first.

Why a step got longer or shorter is read off terms that add up to the step, so that their changes add up to the
step's change: the critical path's time per kind (compute, TP, CP, EP, DP, PP) and per term (kernels, their SM
slowdown, transfer, link contention, launch, delivery), both summing to the step (critical_path.py); and the
per-GPU mean (over the GPUs each simulated GPU stands for) of compute-bound and memory-bound kernels, exposed
communication by kind and bubble, which sum to the step on every GPU (exposure.py). Results without an
`analysis` (written before it existed) are compared on their breakdown alone.

A result that replayed only some of its micro-batches (`micro_batch_sampling`, sampling.py) extrapolates its step,
breakdown and per-GPU figures along the line through two replays, but its analysis is that of the larger replay
alone: it sums to that replay's step, not to the step reported. The line through the replays is not known term by
term (only the larger replay's terms are stored), and the terms do not grow alike (the data-parallel reduction and
the optimizer run once per step, in the intercept), so the analysis cannot be made whole honestly: where either
result is sampled, its groups are left out of the comparison and `Diff.left_out` says why; the breakdown, which is
extrapolated, still adds up to the step's change.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

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

HEADLINE = {"iteration_time_ms": "step time (ms)", "tokens_per_s": "tokens/s", "tflops_per_gpu": "TFLOP/s per GPU",
            "mfu": "MFU", "num_gpus": "GPUs"}
"""The numbers compared first, and their names."""
BREAKDOWN = ("compute_ms", "exposed_comm_ms", "overlapped_comm_ms", "bubble_ms")


@dataclass(frozen=True)
class Change:
    """One number in both results."""

    name: str
    a: float
    b: float

    @property
    def delta(self) -> float:
        return self.b - self.a

    @property
    def percent(self) -> float | None:
        """The change relative to A (None where A is 0 to ROUNDING_MS: a baseline of rounding noise, such as a
        critical path's 8.9e-12 ms of compute slowdown, made changes of 3.4e13 %)."""
        return 100 * self.delta / self.a if abs(self.a) > ROUNDING_MS else None

    @property
    def residue(self) -> bool:
        """Whether the move is within the rounding of the sums that gave the two numbers (RELATIVE_ROUNDING of the
        larger), no change: a step extrapolated from two replays read +1.26e-09 ms (+0.0000000000207%) against the
        same step replayed whole."""
        return abs(self.delta) <= RELATIVE_ROUNDING * max(abs(self.a), abs(self.b))

    def to_dict(self) -> dict:
        return {"name": self.name, "a": self.a, "b": self.b, "delta": self.delta, "percent": self.percent}


RELATIVE_ROUNDING = 1e-9
"""The largest move of a headline number, relative to it, that is rounding (Change.residue): a double's sums of a
replay's thousands of terms differ in their last dozen digits, never near a billionth (6 ns of a 6 s step)."""


ANALYSIS_GROUPS = ("critical path by kind", "critical path by term", "per GPU (mean)")
"""The groups read off a result's analysis: of the replayed step, which is the reported one unless sampled."""


@dataclass(frozen=True)
class Diff:
    headline: list[Change]
    why: dict[str, list[Change]]   # per group of terms that add up to the step: its terms, largest move first
    left_out: dict[str, str] = dataclasses.field(default_factory=dict)  # per group not compared: why

    def to_dict(self) -> dict:
        left_out = {"left_out": dict(self.left_out)} if self.left_out else {}
        return {"headline": [c.to_dict() for c in self.headline],
                "why": {group: [c.to_dict() for c in changes] for group, changes in self.why.items()}, **left_out}


def read_result(path: Path) -> dict:
    """A `simulate --json` result from `path`; bad input (unreadable, not JSON, a field missing or not a number)
    is a ConfigError naming the file and the field."""
    try:
        data = parse_json(read_input_text(path, MAX_RESULT_BYTES, "a simulation result"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: {not_utf8(exc)}") from None
    except EmptyJSON:
        raise ConfigError(f"{path}: empty: expected the JSON that `simulon simulate --json` writes") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not a JSON file (simulon simulate --json writes one): {exc}") from None
    except JSONTooDeep as exc:
        raise ConfigError(f"{path}: not JSON simulon reads: {exc}") from None
    except ValueError as exc:  # a device, a pipe, a file larger than any result
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object from simulon simulate --json, got {type(data).__name__}")
    other = [command for keys, command in OTHER_OUTPUTS if keys <= data.keys()]
    if other and "iteration_time_ms" not in data:
        raise ConfigError(f"{path}: the output of `{other[0]}`, not a simulation's: diff compares two results of "
                          "`simulon simulate --json` (simulate each scenario to compare, with --json)")
    if _number(data, ("iteration_time_ms",), path) <= 0:
        raise ConfigError(f"{path}: iteration_time_ms: expected a step time above 0, got {data['iteration_time_ms']!r}")
    for field in HEADLINE:
        _number(data, (field,), path)
    for term in BREAKDOWN:
        _number(data, ("breakdown", term), path)
    return data


OTHER_OUTPUTS = (
    (frozenset({"enumerated", "top", "refused"}), "simulon search --json"),
    (frozenset({"baseline", "best", "considered"}), "simulon plan-hetero --json"),
    (frozenset({"capacity_bytes", "fits", "stages"}), "simulon memory --json"),
    (frozenset({"rows", "mape_pct"}), "simulon validate --json"),
    (frozenset({"gpus", "fabric", "tiers"}), "simulon topology --json"),
)
"""The JSON objects other commands write, by keys each always holds: one given to diff is named as what it is (a
search's was told its step time was missing, as if a simulation's were damaged)."""

ROUNDING_MS = 1e-9
"""How far below 0 a term may lie from the rounding of the replay's sums (analysis.findings.FLOOR_MS is a
microsecond) and still be a term of a real result."""


def _number(data: object, keys: tuple[str, ...], path: Path, where: str = "") -> float:
    """The number, 0 or more (to ROUNDING_MS) and at most LARGEST_NUMBER, at `keys` of `data` (found at `where` in the
    file), else a ConfigError naming it: every number a result holds is a time, a rate or a count (a negative step
    time was diffed as -100.9%, one of 1e308 ms as +inf%)."""
    field = where + ".".join(keys)
    value = data
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise ConfigError(f"{path}: {field}: missing (is this simulon simulate --json output?)")
        value = value[key]
    number = json_number(value)
    if number is None or number < -ROUNDING_MS:
        raise ConfigError(f"{path}: {field}: expected a number of 0 or more (at most {LARGEST_NUMBER:g}), got "
                          f"{quoted(value)}")
    return number


def _section(data: dict, key: str, kind: type, path: Path, where: str = "") -> dict | list | None:
    """The part of a result at `key`, None where absent; a ConfigError naming it where it is not a `kind` (a part
    of another shape was skipped, or its terms read as 0)."""
    value = data.get(key)
    if value is not None and not isinstance(value, kind):
        what = "an object" if kind is dict else "a list"
        raise ConfigError(f"{path}: {where}{key}: expected {what}, got {value!r}")
    return value


def _terms(data: dict, path: Path) -> dict[str, dict[str, float]]:
    """Per group of terms adding up to the step: each term's ms."""
    groups = {"breakdown (mean GPU)": {t.removesuffix("_ms"): _number(data, ("breakdown", t), path)
                                       for t in BREAKDOWN if t != "overlapped_comm_ms"}}
    analysis = _section(data, "analysis", dict, path)
    if analysis is None:
        return groups
    path_summary = _section(analysis, "critical_path", dict, path, "analysis.") or {}
    for group, key in (("critical path by kind", "by_kind_ms"), ("critical path by term", "by_term_ms")):
        found = _section(path_summary, key, dict, path, "analysis.critical_path.")
        if found is not None:
            groups[group] = {name: _number(found, (name,), path, f"analysis.critical_path.{key}.") for name in found}
    rows = _section(analysis, "per_gpu", list, path, "analysis.")
    if rows:
        groups["per GPU (mean)"] = _mean_exposure(rows, path)
    return groups


def _mean_exposure(rows: list, path: Path) -> dict[str, float]:
    """The mean over the GPUs of a result (each simulated GPU weighted by those it stands for) of each exposure
    term."""
    totals: dict[str, float] = {}
    weight = 0.0
    for i, row in enumerate(rows):
        where = f"analysis.per_gpu[{i}]."
        if not isinstance(row, dict):
            raise ConfigError(f"{path}: analysis.per_gpu[{i}]: expected an object, got {row!r}")
        w = _number(row, ("stands_for",), path, where)
        if w <= 0:
            raise ConfigError(f"{path}: {where}stands_for: expected at least 1, got {w:g}")
        weight += w
        terms = {"compute-bound": ("compute_bound_ms",), "memory-bound": ("memory_bound_ms",),
                 "bubble": ("bubble_ms",)}
        exposed = _section(row, "exposed_ms", dict, path, where) or {}
        terms |= {f"exposed {k}": ("exposed_ms", k) for k in exposed}
        for name, keys in terms.items():
            totals[name] = totals.get(name, 0.0) + w * _number(row, keys, path, where)
    return {name: value / weight for name, value in totals.items()}


def partial_replay(data: dict, path: Path) -> str | None:
    """Where a result's analysis covers fewer micro-batches than its step (micro-batch sampling), a sentence saying
    so; None where the analysis is the step's own."""
    sampling = data.get("micro_batch_sampling")
    if sampling is None:
        return None
    if not isinstance(sampling, dict):
        raise ConfigError(f"{path}: micro_batch_sampling: expected an object, got {sampling!r}")
    replayed = _number(sampling, ("trace_and_analysis_of",), path, "micro_batch_sampling.")
    whole = _number(sampling, ("micro_batches",), path, "micro_batch_sampling.")
    return (f"{path} replayed {replayed:g} of its step's {whole:g} micro-batches and extrapolated the step; "
            "its analysis covers that replay alone, so these terms do not add up to the step")


def diff(a: dict, b: dict, path_a: Path, path_b: Path) -> Diff:
    """What changed from result `a` (read from `path_a`) to `b`: headline numbers, and per group of terms the
    terms that moved, largest move first (ties by name); a term missing from one result counts as 0 there. Where
    either result is sampled, the groups read off its analysis are left out (`Diff.left_out`: see the module
    docstring)."""
    headline = [Change(name, _number(a, (key,), path_a), _number(b, (key,), path_b)) for key, name in HEADLINE.items()]
    terms_a, terms_b = _terms(a, path_a), _terms(b, path_b)
    partial = "; ".join(why for why in (partial_replay(a, path_a), partial_replay(b, path_b)) if why)
    left_out = {group: partial for group in ANALYSIS_GROUPS if partial and group in terms_a and group in terms_b}
    for group in left_out:
        del terms_a[group], terms_b[group]
    why = {}
    for group in terms_a.keys() & terms_b.keys():
        names = sorted(terms_a[group].keys() | terms_b[group].keys())
        changes = [Change(n, terms_a[group].get(n, 0.0), terms_b[group].get(n, 0.0)) for n in names]
        why[group] = sorted(changes, key=lambda c: (-abs(c.delta), c.name))
    order = list(terms_a)
    return Diff(headline, {group: why[group] for group in order if group in why}, left_out)
