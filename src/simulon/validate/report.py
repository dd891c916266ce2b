"""A validation report: per-row measured vs predicted, skipped rows with reasons, MAPE overall and by subset, and
the floor under that MAPE where a table holds rows it does not tell apart.

The floor: rows whose every cell but the measured ones is the same (XLA's collective-permute table, for one, lists
three send patterns per size without saying which a row measured) get one prediction from any deterministic model,
so their spread is error no model reading the table can remove. For each such set the least sum of absolute
percentage errors is reached at one of its own measurements (the sum is convex and piecewise linear in the
prediction, with its corners there); a row alone has a floor of 0.

Reading a table, shared by the four validators: table_rows refuses a table without a column its validator needs (one
ConfigError naming the file and the columns) and reads the informational columns it lacks as blank; cell_number is
the one reading of a numeric cell (blank or `unknown`: not given; a count must be a whole number, a measurement a
finite one), and bad_cell the reason a row whose numeric cell is neither is skipped ("pp: 'two' is not a number");
overfull the reason a row that runs on more GPUs than it states is.
"""

from __future__ import annotations

import csv
import errno
import io
import math
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, get_args

from ..config.errors import ConfigError, read_input_text
from ..config.frameworks import sharding_named
from ..config.templates import AmbiguousTemplate, find_template, template_stem_loose
from ..config.workload import SCHEDULE_CHUNKS, ContextParallelComm, ScheduleName


@dataclass(frozen=True)
class Comparison:
    index: int            # 0-based data row of the table
    subset: str
    metric: str           # what was compared, e.g. "iter_time_s", "busbw_GBps", "kernel_tflops"
    measured: float
    predicted: float
    group: str = ""       # a finer key for reports (GPU, hardware family, kernel family)
    alike: str = ""       # equal for rows the table does not tell apart (inputs_key); "" for a row of its own

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted - self.measured) / self.measured


@dataclass(frozen=True)
class Skipped:
    index: int
    reason: str


@dataclass
class ValidationReport:
    rows: list[Comparison] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def mape_pct(self) -> float:
        return mape(self.rows)

    def mape_by(self, key: str) -> dict[str, float]:
        """MAPE per value of `key` ("subset", "group" or "metric")."""
        groups: dict[str, list[Comparison]] = defaultdict(list)
        for row in self.rows:
            groups[getattr(row, key)].append(row)
        return {name: mape(rows) for name, rows in sorted(groups.items())}

    def floor_by(self, key: str) -> dict[str, float]:
        """Per value of `key`, the least MAPE a model reading only the table could reach (see the module)."""
        floors = least_errors(self.rows)
        groups: dict[str, list[float]] = defaultdict(list)
        for row, floor in zip(self.rows, floors, strict=True):
            groups[getattr(row, key)].append(floor)
        return {name: statistics.fmean(values) for name, values in sorted(groups.items())}

    def usable(self) -> ValidationReport:
        """The report with every comparison whose error is no finite number (a measured value of 0, or one so small
        or large that the division overflows; a prediction that overflowed) moved to the skipped rows, saying why:
        its JSON then holds no NaN or Infinity, which JSON does not have."""
        rows, skipped = [], list(self.skipped)
        for row in self.rows:
            try:
                finite = math.isfinite(row.error_pct)
            except (ZeroDivisionError, OverflowError):
                finite = False
            if finite:
                rows.append(row)
            else:
                skipped.append(Skipped(row.index, f"{row.metric}: measured {row.measured:g} and predicted "
                                                  f"{row.predicted:g} give no finite error"))
        return ValidationReport(rows, sorted(skipped, key=lambda s: s.index))

    def to_dict(self, groups: bool = False) -> dict:
        """The report as design.md's `--json` format; `groups` adds each row's group (for the plot drawn beside it)."""
        rows = [{**{k: v for k, v in asdict(r).items() if (groups or k != "group") and k != "alike"},
                 "error_pct": r.error_pct} for r in self.rows]
        return {"rows": rows, "skipped": [asdict(s) for s in self.skipped],
                "mape_pct": self.mape_pct if self.rows else None, "mape_pct_by_subset": self.mape_by("subset"),
                "floor_pct_by_subset": self.floor_by("subset")}


def mape(rows: list[Comparison]) -> float:
    return statistics.fmean(abs(r.error_pct) for r in rows) if rows else float("nan")


def inputs_key(row: dict[str, str], measured: Iterable[str]) -> str:
    """A key equal for rows whose every cell but the `measured` ones is the same: rows no model reading the table can
    tell apart (more columns than a validator reads, so that the floor they give is a lower bound)."""
    skip = set(measured)
    return "\x1f".join(f"{column}={value.strip()}" for column, value in row.items()
                        if column not in skip and column is not None and isinstance(value, str))


def least_errors(rows: list[Comparison]) -> list[float]:
    """Each row's absolute percentage error under the prediction that serves its `alike` set best: 0 for a row of its
    own, else at the set's best single value (one of its measurements: see the module)."""
    sets: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        if row.alike:
            sets[row.alike].append(i)
    floors = [0.0] * len(rows)
    for members in sets.values():
        measured = [rows[i].measured for i in members]
        best = min(measured, key=lambda p: (sum(abs(p / m - 1.0) for m in measured), p))
        for i, m in zip(members, measured, strict=True):
            floors[i] = 100.0 * abs(best / m - 1.0)
    return floors


TABLES = ("training", "collectives", "kernels", "memory")
"""The published-measurement tables shipped in data/ (copies of the project's shared/validation/, with their
README naming every source; `python scripts/sync_validation_tables.py` refreshes them)."""


def shipped_table(name: str) -> Path:
    """The path of a shipped measurement table (`training`, `collectives`, `kernels` or `memory`)."""
    if name not in TABLES:
        raise ValueError(f"no shipped table {name!r} (shipped: {', '.join(TABLES)})")
    return Path(str(resources.files("simulon.validate") / "data" / f"{name}.csv"))


MAX_TABLE_BYTES = 2**30
"""The largest measurement table read: 1 GiB, a thousand times the shipped ones."""
REASONS_WHEN_NONE = 5
"""Skip reasons a table (or a profile) none of whose rows could be compared is refused with."""


def read_table(path: str | Path) -> list[dict[str, str]]:
    """The rows of a measurement table as dicts of strings; blank cells, and the cells a short row lacks, are ''.
    A UTF-8 byte-order mark before the header, and spaces around its names, are dropped. OSError for what is no table
    file (a device or a pipe, read without end), as for a missing one; UnicodeDecodeError for text that is not UTF-8;
    ValueError for a file over MAX_TABLE_BYTES or text the csv module cannot split into cells (naming the line)."""
    try:
        text = read_input_text(Path(path), MAX_TABLE_BYTES, "a measurement table")
    except ValueError as exc:
        if isinstance(exc, UnicodeDecodeError):
            raise
        raise OSError(errno.EINVAL, str(exc), str(path)) from None
    reader = csv.DictReader(io.StringIO(text, newline=""), restval=None)  # None: a cell past a short row's end
    records = Records(reader.reader)
    reader.reader = records  # type: ignore[misc]
    try:
        if reader.fieldnames:  # "source, model": ' model' was no column model ("column(s) model missing")
            reader.fieldnames = [name.strip() for name in reader.fieldnames]
        twice(reader.fieldnames or ())
        return [TableRow(row, len(reader.fieldnames or ()), records.count) for row in reader]
    except csv.Error as exc:
        raise ValueError(f"line {reader.reader.line_num}: {exc}") from None


def twice(header: list[str] | tuple[str, ...]) -> None:
    """ValueError for a header naming a column twice (the csv module keeps the last, so one of them was ignored)."""
    names = list(header)
    for at, name in enumerate(names):
        if name.strip() and name in names[:at]:
            raise ValueError(f"line 1: column {name!r} appears twice in the header (columns "
                             f"{names.index(name) + 1} and {at + 1}); one of them would be ignored")


class Records:
    """A csv reader that counts the records it has read, the header and blank lines included: csv.DictReader skips a
    blank line, which a spreadsheet shows as an empty row, so that a row's position among the data rows is not the
    row a user finds it on (a row after one blank line was reported one row above its own)."""

    def __init__(self, reader):
        self.reader, self.count = reader, 0

    def __iter__(self) -> Records:
        return self

    def __next__(self) -> list[str]:
        record = next(self.reader)
        self.count += 1
        return record

    @property
    def line_num(self) -> int:
        return self.reader.line_num


class TableRow(dict):
    """A row of a table read by read_table: its cells by column ('' for those past a short line's last cell), with
    the columns its line lacks (`lacks`), the cells past the header's last column (`extra`: the csv module's under
    the key None), how many cells it had (`cells`), the header's count (`width`) and the row a spreadsheet shows it
    on (`number`: the header is row 1, and a blank line is a row); a row built otherwise (a plain dict) has none of
    them."""

    def __init__(self, cells_by_column: dict, width: int | None = None, number: int | None = None):
        super().__init__({k: "" if v is None else v for k, v in cells_by_column.items() if k is not None})
        self.lacks: tuple[str, ...] = tuple(k for k, v in cells_by_column.items() if v is None)
        self.extra: tuple[str, ...] = tuple(cells_by_column.get(None) or ())
        self.width = width
        self.cells = None if width is None else width - len(self.lacks) + len(self.extra)
        self.number = number


def short_row(row: dict[str, str], needed: Iterable[str]) -> str | None:
    """Why a row read by read_table whose cells do not fill the header is not evaluated: it has fewer cells than the
    header and a `needed` column is among those it lacks ("the row has 10 cells, fewer than the header's 60: it lacks
    collective, ..."), or it has more (an unquoted comma splits a cell, and every cell after it stands in the next
    column: a memory row's notes lost the reserved figure after such a comma, and was compared without it), else None
    (a row short only of cells it does not need is read with them blank). A row whose every cell is blank (a
    spreadsheet's empty row, saved as commas alone) is named as blank, not by the first cell a validator reads (it was
    "hardware: '' names no shipped GPU" to one validator, "collective '' is not one simulon models" to another)."""
    if row and not any(str(value).strip() for value in row.values()):
        return "the row is blank (every cell empty)"
    cells, width = getattr(row, "cells", None), getattr(row, "width", None)
    extra = getattr(row, "extra", ())
    if extra:
        return (f"the row has {cells} cells, more than the header's {width} ({', '.join(map(repr, extra))} past its "
                "last column): a cell holding a comma must be quoted")
    lacking = [c for c in needed if c in getattr(row, "lacks", ())]
    if not lacking:
        return None
    return f"the row has {cells} cells, fewer than the header's {width}: it lacks {', '.join(lacking)}"


def flag(row: dict[str, str], column: str) -> bool | None:
    """A yes/no cell (yes, true, no, false, any case), or None when blank or anything else ("unknown")."""
    return {"yes": True, "true": True, "no": False, "false": False}.get((row.get(column) or "").strip().lower())


NOT_GIVEN = ("", "unknown")
"""Cells that say the source did not give a value: blank, or `unknown` (the memory table's word), any case."""


def stated_flag(row: dict[str, str], column: str) -> bool | None:
    """A yes/no cell (flag), None where not given (NOT_GIVEN); BadCell naming the cell where it is other text (a
    memory row's sp 'perhaps' was read as not given)."""
    stated = flag(row, column)
    if stated is None and (row.get(column) or "").strip().lower() not in NOT_GIVEN:
        raise BadCell(f"{column}: {row[column].strip()!r} is neither yes nor no")
    return stated


def expert_tp_cell(row: dict[str, str], tp: int, model: dict) -> dict[str, int]:
    """The parallelism setting a row's etp cell gives (expert_tensor_parallel), for the model block `model` (a template
    by name, "from", or shapes): nothing where blank or the model has no experts and the cell splits nothing (1 or
    tp, the setting written out); Unsupported, naming the column, where it splits the experts of a model without
    them or is below 1 (count)."""
    etp = count(row, "etp")
    template = (find_template("model", model["from"]) if "from" in model else None) or {}
    experts = bool(model.get("moe") or template.get("moe"))
    if etp is not None and etp not in (1, tp) and not experts:  # 1: the setting written out, splitting nothing
        raise Unsupported(f"etp: {etp} splits the experts of a model without them (tp {tp})")
    return {"expert_tensor_parallel": etp} if etp and experts else {}


SHARDINGS_READ = "ZeRO-1/2/3, FULL_SHARD, SHARD_GRAD_OP, FSDP=N, distopt, DDP and none"
"""What a zero_or_fsdp cell may name, as a refusal of one naming none of them says (sharding_cell)."""


def sharding_cell(text: str) -> dict[str, Any] | None:
    """The workload.parallelism settings of the sharding a zero_or_fsdp cell names (config.frameworks
    sharding_named), None where it names none: the name before a parenthetical note first, then the note
    ('DeepSpeed (ZeRO stage 2)'), so that 'SHARD_GRAD_OP (ZeRO-3 equiv.)', as llm-foundry's table names its
    MPT-1b runs' sharding with a wrong gloss, is SHARD_GRAD_OP (ZeRO-2), and 'ZeRO-2 (FSDP=8)' ZeRO-2 over 8 ranks
    (fsdp_group_cell)."""
    name, _, note = text.partition("(")
    named = sharding_named(name) or sharding_named(note)
    return None if named is None else dict(named[1])


def fsdp_group_cell(text: str) -> int | None:
    """The ranks a parameter is sharded over that a zero_or_fsdp cell gives as 'FSDP=N' (in any case, anywhere in
    the cell: 'ZeRO-3 (FSDP=8)'), None where it gives none; Unsupported, naming the column, where N is below 1."""
    found = re.search(r"fsdp\s*=\s*([^\s,;)]+)", text, re.IGNORECASE)
    if found is None:
        return None
    size = count({"zero_or_fsdp": found.group(1)}, "zero_or_fsdp")
    if size is None:
        raise Unsupported(f"zero_or_fsdp: {text.strip()!r} gives FSDP={found.group(1)}, not a number of ranks")
    return size


NO_RECOMPUTATION = ("none", "no", "off")


def recompute_cell(row: dict[str, str]) -> tuple[str, list[str]] | None:
    """(none, full or selective; the modules a selective cell names in parentheses, 'selective (core_attn, mlp)' or
    'selective(core_attn+layernorm)') of a row's recompute cell, None where not given; BadCell for other text (a
    word read as no recomputation changed a row's prediction by half)."""
    text = (row.get("recompute") or "").strip().lower()
    if text in NOT_GIVEN:
        return None
    if text in NO_RECOMPUTATION:
        return "none", []
    kind = next((k for k in ("full", "selective") if text.startswith(k)), None)
    if kind is None:
        raise BadCell(f"recompute: {text!r} is none of none, full or selective (the modules in parentheses)")
    return kind, re.findall(r"[a-z_]+", text.partition("(")[2])


def recomputed_layers(row: dict[str, str]) -> int | None:
    """The layers of each model chunk a row's full recomputation re-runs (recompute_num_layers, Megatron's 'block'
    method), where its recompute cell gives their number in parentheses ('full(4)', 'full (block, 4 layers)'); None
    where it gives none (every layer: 'full', 'full (activation checkpointing)'). BadCell where the parentheses
    hold several numbers, or a number under selective recomputation, which re-runs modules, not a count of layers."""
    text = (row.get("recompute") or "").strip().lower()
    numbers = re.findall(r"\d+(?:\.\d+)?", text.partition("(")[2])
    if not numbers:
        return None
    if not text.startswith("full") or len(numbers) > 1 or not numbers[0].isdigit():
        raise BadCell(f"recompute: {text!r} gives a layer count only as full recomputation's one whole number "
                      "('full(4)': the layers of each model chunk that recompute)")
    return int(numbers[0])


PIPELINE_COLUMNS = {"pipeline_schedule": get_args(ScheduleName), "context_parallel_comm": get_args(ContextParallelComm)}
"""Optional columns of the training and memory tables named as the scenario's fields (workload.parallelism), and
their values: a user's table may state its pipeline schedule and its context-parallel exchange (Megatron's
--cp-comm-type), which no shipped row does; a cell is read in any case and with any separators ('ZB-H1', 'DualPipe V',
'all-gather'), and a value none of these is the scenario's to refuse, naming the field."""


def _bare(text: str) -> str:
    return re.sub(r"[\s_-]+", "", text.strip().lower())


def pipeline_cells(row: dict[str, str]) -> dict[str, str]:
    """The parallelism fields a row's PIPELINE_COLUMNS state (blank or `unknown` cells left out), each as its field's
    value where the cell names one loosely, else as written."""
    stated = {}
    for column, values in PIPELINE_COLUMNS.items():
        text = (row.get(column) or "").strip()
        if text.lower() not in NOT_GIVEN:
            stated[column] = next((value for value in values if _bare(value) == _bare(text)), text)
    return stated


def stated_vpp(row: dict[str, str], pp: int) -> int | None:
    """The vpp a row's vpp cell gives, else the one its stated schedule runs (SCHEDULE_CHUNKS: zb_v and dualpipev
    two chunks a rank, zb_h1 and dualpipe one, 1f1b one), else None (its framework's habit decides)."""
    given = count(row, "vpp")
    if given is not None:
        return given
    schedule = pipeline_cells(row).get("pipeline_schedule")
    if schedule == "1f1b" or (pp == 1 and schedule not in SCHEDULE_CHUNKS):
        return 1
    return SCHEDULE_CHUNKS.get(schedule or "")


class Unsupported(Exception):
    """A row a validator cannot turn into what it simulates; the message says why (the row is skipped with it)."""


class BadCell(ValueError):
    """A cell of a numeric column whose text is not the number the column holds; the message names the column and
    the text: "tp: 'two' is not a number"."""


STATED_SIZE_SUFFIX = re.compile(r"\s+\d+(\.\d+)?[BM]$", re.IGNORECASE)
"""A parameter count written after a model's name ('Grok-1 314B', 'DeepSeek V3 671B'), which its template's name
leaves out."""


def model_stem(name: str) -> str | None:
    """The shipped model template a row's model name names loosely (config.templates.template_stem_loose), else the
    one it names less a parameter count after it (STATED_SIZE_SUFFIX), or None; Unsupported where it reads as two
    ("gpt3_1_3b": GPT-3 1.3B or 13B), which skips the row, not the table. Shared by the training and memory
    validators, so that a name one of them reads the other does (the memory table's 'DeepSeek V3 671B' had no
    template there)."""
    try:
        return template_stem_loose("model", name) or template_stem_loose("model", STATED_SIZE_SUFFIX.sub("", name))
    except AmbiguousTemplate as exc:
        raise Unsupported(str(exc)) from None


def cell_number(row: dict[str, str], column: str, whole: bool = False) -> float | int | None:
    """The number in a cell of a numeric column: None where the source gave none (NOT_GIVEN, or the column absent),
    an int for a `whole` column (counts: GPUs, parallel sizes, batches, bytes; '8' or '8.0'), else a finite float.
    BadCell for any other text ('two', '843 ms', '1MiB'; nan, inf, 1e400 measure nothing; '8.5' is no count)."""
    text = (row.get(column) or "").strip()
    if text.lower() in NOT_GIVEN:
        return None
    if "_" in text:  # Python reads '1_000' as 1000; the tables write no such number
        raise BadCell(f"{column}: {text!r} is not a number")
    if re.fullmatch(r"[+-]?[0-9]{1,300}", text):  # longer is no count: a float ends near 1e308, and int() refuses
        # 4,300 digits and more
        return int(text)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise BadCell(f"{column}: {text!r} is not a number")
    if whole:
        if value != int(value):
            raise BadCell(f"{column}: {text!r} is not a whole number")
        return int(value)
    return value


def bad_cell(row: dict[str, str], whole: Iterable[str] = (), real: Iterable[str] = ()) -> str | None:
    """Why a row cannot be evaluated because of a numeric cell (the first `whole` column, then `real` column, whose
    text is not its number: BadCell's message; or a `real` column, a measurement, that is negative: a bus bandwidth
    of -1 beside the time a row was compared on, or a throughput of -5 beside its step time, passed), or None when
    every such cell is a number or not given. A count's own validator says what a negative one is."""
    for columns, is_whole in ((whole, True), (real, False)):
        for column in columns:
            try:
                value = cell_number(row, column, is_whole)
            except BadCell as exc:
                return str(exc)
            if not is_whole and value is not None and value < 0:
                return f"{column}: {row[column].strip()} is negative (a measurement is 0 or more)"
    return None


AGREEMENT = 0.05
"""How far apart (relative) a row's measured cells that are exact conversions of each other may be beyond the rounding
of their printed cells (half a unit in each cell's last digit: nccl-tests prints a bus bandwidth of 0.00 for its
smallest sizes) before the row is skipped as contradicting itself (contradicting). A collectives row's bus bandwidth,
algorithm bandwidth and time with its message size are printed from one measurement (busbw = algbw x the bus factor,
algbw = bytes / time), and the shipped table's rows agree to within 1e-5 beyond their rounding; a training row's
iteration time and token rates are one another given its batch, sequence length and GPUs (training.implied_iterations
says why its sample rate and FLOP rates are not held to it). 5% lets through a source
that prints them from differently averaged runs and stops a unit mix-up (GiB/s read as GB/s is 7.4%) or a cell in the
wrong column."""


def printed(text: str) -> tuple[float, float]:
    """A numeric cell's value and half a unit in its last printed digit ('0.00': 0.005; '24361': 0.5; '1.5e3': 50)."""
    value = float(text)
    mantissa, _, exponent = text.strip().lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return value, 0.5 * 10.0 ** (int(exponent or 0) - decimals)


def amount(value: float) -> str:
    """A derived quantity or ratio as a message prints it: 1,879,048; 175; 2.06; 0.0035."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def contradicting(given: dict[str, tuple[float, float, float, str]]) -> str | None:
    """Why a row whose measured cells, each read as one quantity, contradict each other is not compared (which cells,
    and how far apart), or None where they agree. `given`: per cell, the lowest and highest value of the quantity its
    printed digits allow (printed), the value it gives, and how a message names it; two cells contradict each other
    where their intervals lie over AGREEMENT apart."""
    found = []
    columns = list(given)
    for i, first in enumerate(columns):
        for second in columns[i + 1:]:
            (low1, high1, value1, text1), (low2, high2, value2, text2) = given[first], given[second]
            (_, lower_high), (upper_low, _) = sorted(((low1, high1), (low2, high2)))
            if upper_low > lower_high * (1.0 + AGREEMENT):
                apart = f"{amount(max(value1, value2) / min(value1, value2))}x apart" \
                    if min(value1, value2) > 0 else "one of them zero"
                found.append(f"{text1} and {text2} are {apart}")
    if not found:
        return None
    return f"measured cells contradict each other beyond their rounding and {AGREEMENT:.0%}: " + "; ".join(found)


def overfull(gpus: int, what: str, nodes: int | None, gpus_per_node: int, stated_gpus: int | None = None) -> str | None:
    """Why a row contradicts itself, where the `gpus` it runs on (`what` they are: "a group of 16", "16 GPUs") exceed
    the GPUs it states (`stated_gpus`), or the nodes it states hold fewer: a row measured on some of its GPUs is
    possible, one measured on more than it has is not, and is not compared. None where it holds together."""
    if stated_gpus is not None and gpus > stated_gpus:
        return f"{what} on {stated_gpus} GPUs: the row contradicts itself"
    if nodes is not None and gpus > nodes * gpus_per_node:
        held = f"{nodes} node{'s' if nodes != 1 else ''} of {gpus_per_node} GPUs"
        return f"{what} on {held}: the row contradicts itself"
    return None


def number(row: dict[str, str], column: str) -> float | None:
    """A numeric cell as a float, or None when not given or not a number (cell_number's reading; a validator skips a
    row whose numeric cells do not read first, bad_cell)."""
    try:
        value = cell_number(row, column)
    except BadCell:
        return None
    return None if value is None else float(value)


def count(row: dict[str, str], column: str, default: int | None = None) -> int | None:
    """A count cell (GPUs, a parallel degree, a batch, a length): `default` where blank; Unsupported, naming the
    column, where it is below 1 (a degree of 0 divided by zero in a layout's arithmetic, or was read as 1; a batch of
    0 was read as none given)."""
    value = number(row, column)
    if value is None:
        return default
    if value < 1:
        raise Unsupported(f"{column}: {value:g} is not a count (it must be at least 1)")
    return int(value)


def table_rows(rows: list[dict[str, str]], source: str, what: str, required: Iterable[str],
               optional: Iterable[str] = (), one_of: Iterable[str] = ()) -> list[dict[str, str]]:
    """The rows of a table a validator reads, every `optional` column it lacks read as blank; a ConfigError naming
    `source` (the file) and the `required` columns it lacks (or, where it has none of `one_of`, those), "not a
    `what`". A header that is one cell holding ';' or tabs is named as not comma-separated."""
    if not rows:
        return rows
    header = [c for c in rows[0] if c is not None]
    missing = [c for c in required if c not in header]
    choices = list(one_of)
    if choices and not any(c in header for c in choices):
        missing.append(f"one of {'/'.join(choices)}")
    if missing:
        hint = ""
        if len(header) == 1 and any(sep in header[0] for sep in ";\t"):
            hint = " (its header is one cell: the table must be comma-separated)"
        raise ConfigError(f"{source}: column(s) {', '.join(missing)} missing: not {what}{hint}")
    absent = [c for c in optional if c not in header]
    if not absent:
        return rows
    return [_with_blanks(row, absent) for row in rows]


def _with_blanks(row: dict[str, str], absent: list[str]) -> dict[str, str]:
    """The row with the `absent` columns read as blank, keeping what a TableRow knows of its line."""
    if not isinstance(row, TableRow):
        return {**row, **dict.fromkeys(absent, "")}
    filled = TableRow({**row, **dict.fromkeys(absent, "")}, number=row.number)
    filled.lacks, filled.extra, filled.width, filled.cells = row.lacks, row.extra, row.width, row.cells
    return filled
