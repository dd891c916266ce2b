"""Bad input: the one exception for it, and the plain one-line messages that name what is wrong."""

from __future__ import annotations

import codecs
import errno
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

MAX_YAML_BYTES = 16 * 2**20
"""The largest scenario or template file read: the biggest shipped one is a GPU with a measured profile of a
few hundred KiB, so 16 MiB leaves room for large profiles while a device like /dev/zero is refused at once."""


class ConfigError(Exception):
    """Bad input: the message names the file, the field and the problem (CLI exit status 2)."""


def one_line(message: str) -> str:
    """Messages quote user text; keep them on one line whatever that text holds."""
    return message.replace("\r", "\\r").replace("\n", "\\n")


_TYPE_TAG = re.compile(r"(?:int|float|str|bool|bytes|none|any|decimal|complex|date|datetime|time|timedelta|uuid|url"
                       r"|callable|constrained-[a-z]+|[a-z][a-z-]*\[.*\])", re.DOTALL)
"""A pydantic-core type label: `int`, `constrained-int`, `list[int]`, `dict[str,int]`, `literal['a','b']`,
`function-after[check(), int]`, `enum[E]`, `lax-or-strict[...]`; no key of a scenario is written so."""


def _model_names() -> set[str]:
    """The class names of every pydantic model defined (a model branch of a union is tagged by its class name)."""
    names, todo = set(), [BaseModel]
    while todo:
        for model in todo.pop().__subclasses__():
            names.add(model.__name__)
            todo.append(model)
    return names


def field_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """A pydantic error location without its union-branch tags: validating `int | list[int]`, pydantic reports each
    branch's error at the value's location plus the branch's type (`('stage_groups', 0, 'int')`, `(..., 0,
    'list[int]')`), a model branch by its class name (`('u', 'NodeSpec', 'gpu')`). Those name no field the author
    wrote; field names (snake_case keys), list indices and mapping keys stay. A discriminated union's tag (the
    discriminator's value) is not recognised: the scenario's schema has none."""
    models: set[str] | None = None
    kept = []
    for part in loc:
        if isinstance(part, str):
            if _TYPE_TAG.fullmatch(part):
                continue
            if not part.islower():  # a model's class name, or a key such as 'H100': only the former is dropped
                models = _model_names() if models is None else models
                if part in models:
                    continue
        kept.append(part)
    return tuple(kept)


_MAX_SHOWN = 60
"""Characters of a value quoted in a message, so that the message stays one readable line."""


def shown(value: Any) -> str:
    """A value given in a scenario as its author wrote it in YAML, cut short when long."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = repr(value)
        kind = "the text "
    elif isinstance(value, dict):
        keys = ", ".join(f"{key}: ..." for key in list(value)[:4])
        text, kind = "{" + keys + ("}" if len(value) <= 4 else ", ...}"), "a mapping "
    elif isinstance(value, list):
        text, kind = repr(value), "a list "
    else:
        text, kind = repr(value), ""
    text = one_line(text)
    return kind + (text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN - 3] + "...")


_BYTE_ORDER_MARKS = {b"\xff\xfe\x00\x00": "UTF-32", b"\x00\x00\xfe\xff": "UTF-32", b"\xff\xfe": "UTF-16",
                     b"\xfe\xff": "UTF-16"}


def not_utf8(exc: UnicodeDecodeError) -> str:
    """What to say of a file that is not UTF-8 text (a latin-1 file, a binary one): where, and what to do."""
    for mark, encoding in _BYTE_ORDER_MARKS.items():
        if bytes(exc.object[:len(mark)]) == mark:
            return f"{encoding} text, not UTF-8 (it starts with a {encoding} byte-order mark); save it as UTF-8"
    return (f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
            "save it as UTF-8")


def yaml_problem(exc: yaml.YAMLError) -> tuple[str, str]:
    """(" at line L, column C" or "", the problem) of a YAML parse error, for a one-line message."""
    if isinstance(exc, yaml.reader.ReaderError):
        return f" at character {exc.position}", f"{exc.reason} (U+{int(exc.character):04X})"
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or "invalid YAML"
    if "'\\t'" in problem:  # an editor's tab: PyYAML takes none to indent, nor after a key's colon
        problem += " (a tab: indent with spaces, and put a space, not a tab, after a key's colon)"
    return where, problem


MAX_RESULT_BYTES = 2**31
"""The largest result file (`simulate --json`, `collective --json`, a sweep's CSV) `diff` and `plot` read: 2 GiB,
some twenty times the JSON of the largest shipped example, so that a device like /dev/zero is refused at once
rather than read until the process is killed."""


_READ: ContextVar[list[Path] | None] = ContextVar("files_read", default=None)
"""The files read_input_text has read inside `recording_reads`, None outside it."""


@contextmanager
def recording_reads() -> Iterator[list[Path]]:
    """The input files read within the block, in the order read: what loading a scenario reads besides the
    scenario (its template files, its HuggingFace configs), so that no output overwrites any of them."""
    read: list[Path] = []
    token = _READ.set(read)
    try:
        yield read
    finally:
        _READ.reset(token)


def read_input_text(path: Path, max_bytes: int, holds: str, encoding: str = "utf-8-sig") -> str:
    """An input file's text, UTF-8 unless `encoding` says otherwise, whatever the locale's encoding (a refusal tells
    the user to save the file as UTF-8: under LC_ALL=C a UTF-8 scenario was refused as 'not UTF-8 text', and
    Windows' cp1252 would misread it), a leading byte-order mark dropped (Notepad and Excel's 'CSV UTF-8' write one:
    a result JSON holding it was refused as 'not a JSON file'). Raises OSError for what cannot be read (a folder, a
    missing file), ValueError for what is no input file (a device, a pipe, a file over `max_bytes`, more than
    `holds` holds) and UnicodeDecodeError."""
    recording = _READ.get()
    if recording is not None:
        recording.append(path)
    info = path.stat()
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    if not path.is_file():
        raise ValueError("not a regular file")
    if info.st_size > max_bytes:
        raise ValueError(f"{info.st_size:,} bytes, more than {holds} holds ({max_bytes:,})")
    try:
        return path.read_text(encoding=encoding)
    except UnicodeDecodeError as exc:  # utf-8-sig counts offsets past the byte-order mark it dropped: count the file's
        mark = codecs.BOM_UTF8 if encoding == "utf-8-sig" and path.read_bytes().startswith(codecs.BOM_UTF8) else b""
        raise UnicodeDecodeError(exc.encoding, mark + exc.object, exc.start + len(mark), exc.end + len(mark),
                                 exc.reason) from None


def read_yaml_text(path: Path) -> str:
    """A YAML input file's text. Raises OSError for what cannot be read (a folder, a missing file), ValueError for
    what is no input file (a device, a pipe, a file over MAX_YAML_BYTES) and UnicodeDecodeError."""
    return read_input_text(path, MAX_YAML_BYTES, "a scenario or template")


class NestedTooDeep(yaml.YAMLError):
    """YAML whose nesting is deeper than the parser's recursion follows."""

    problem = "nested deeper than the parser follows"


class ScenarioLoader(yaml.SafeLoader):
    """PyYAML's safe loader reading numbers as YAML 1.2 does: `1e9` and `8E-3` are floats, where YAML 1.1 wants
    a decimal point and a signed exponent (`1.0e+9`) and reads the rest as text; and refusing a key given twice
    in one mapping (PyYAML keeps the last silently; YAML 1.2 says keys are unique), a merge (`<<: *base`) aside,
    whose keys a mapping may override."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        if isinstance(node, yaml.MappingNode):
            refuse_duplicate_keys(self, node)
        return super().construct_mapping(node, deep=deep)


def refuse_duplicate_keys(loader: yaml.SafeLoader, node: yaml.MappingNode) -> None:
    """A ConstructorError at the second of two equal keys of the mapping `node`, naming the line of the first."""
    first: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            earlier = first.setdefault(key, key_node)
        except TypeError:  # an unhashable key: PyYAML's own construction refuses it
            continue
        if earlier is not key_node:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {shown(key).removeprefix('the text ')} (first at line "
                f"{earlier.start_mark.line + 1}); keep one", key_node.start_mark)


YAML_12_CORE = {
    "tag:yaml.org,2002:bool": (r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    "tag:yaml.org,2002:int": (r"^(?:[-+]?[0-9][0-9_]*|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    "tag:yaml.org,2002:float": (r"^(?:[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
                                r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", "-+.0123456789"),
}
"""YAML 1.2's core schema for booleans and numbers (yaml.org/spec/1.2.2, 10.3.2), in place of PyYAML's YAML 1.1 ones:
`1e9` is a float; `2:1` is text (YAML 1.1 read it as the base-60 integer 121, so that an oversubscription written
as vendors write it became 121:1), `010` is ten (1.1: octal eight), `0b11`, `yes` and `off` are text; underscores
between digits (`1_000`) still group them, as PyYAML reads them."""
YAML_11_ONLY = ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value")
"""PyYAML's YAML 1.1 types that YAML 1.2's core schema reads as text: a date (`2024-01-01`, which became a Python
date, so that a model named so was refused as 'expected text, got datetime.date(2024, 1, 1)') and the value key `=`
(which no safe constructor builds: 'could not determine a constructor for the tag')."""
ScenarioLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in YAML_12_CORE and tag not in YAML_11_ONLY]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
for _tag, (_pattern, _firsts) in YAML_12_CORE.items():
    ScenarioLoader.add_implicit_resolver(_tag, re.compile(_pattern), list(_firsts))

MAX_INTEGER_DIGITS = 4000
"""The longest whole number read (Python refuses to convert more than 4,300 digits; no count simulon reads is near)."""


def construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    """A YAML 1.2 integer: decimal (leading zeros and all), 0o octal or 0x hexadecimal; one too long to be a count
    is refused as the file's problem, not Python's."""
    text = loader.construct_scalar(node)
    if len(text) > MAX_INTEGER_DIGITS:
        raise yaml.constructor.ConstructorError(None, None, f"a whole number of {len(text):,} digits, more than "
                                                f"any count (at most {MAX_INTEGER_DIGITS:,})", node.start_mark)
    if text.startswith(("0o", "0x")):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)


ScenarioLoader.add_constructor("tag:yaml.org,2002:int", construct_int)


def parse_yaml(text: str) -> Any:
    """Parse YAML (numbers as YAML 1.2 writes them), turning nesting too deep for the parser into a YAMLError
    like any other."""
    try:
        return yaml.load(text, Loader=ScenarioLoader)  # a SafeLoader subclass
    except RecursionError:
        raise NestedTooDeep() from None


class JSONTooDeep(ValueError):
    """JSON the parser cannot follow: nested deeper than its recursion, or a number too long to convert."""


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise JSONTooDeep(f"a whole number of {len(text):,} digits, more than any count (at most "
                          f"{MAX_INTEGER_DIGITS:,})")
    return int(text)


class EmptyJSON(ValueError):
    """JSON text holding nothing (or only white space): its readers say the file is empty, where Python's parser
    said 'Expecting value: line 1 column 1 (char 0)'."""


def parse_json(text: str, **kwargs: Any) -> Any:
    """json.loads, with nesting deeper than the parser follows and numbers too long to convert raised as
    JSONTooDeep, a ValueError saying so (they were a RecursionError and Python's own limit message), and text
    holding nothing as EmptyJSON."""
    if not text.strip():
        raise EmptyJSON("empty")
    try:
        return json.loads(text, parse_int=_json_int, **kwargs)
    except RecursionError:
        raise JSONTooDeep("nested deeper than the parser follows") from None


LARGEST_NUMBER = 1e150
"""The largest size of a number read from a result file (`plot`, `diff`): far beyond any time, rate, count or size a
result holds (a step of 1e150 ms), and small enough that the sums, ratios and margins made of it stay finite (a bin
of 1e308 ms, or a margin of 1.5 times a prediction of 1e308, overflowed to infinity and ended `plot` in an internal
error; a step of 1e308 ms was diffed as +inf%)."""


def json_number(value: Any) -> float | None:
    """`value` as a float where it is a JSON number of size at most LARGEST_NUMBER: not a yes/no, not text (a JSON
    string "4" was drawn as 4), not NaN or infinite, and not a whole number too large for a float (a 400-digit one
    ended `diff` and `plot` in an internal error); else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if abs(number) <= LARGEST_NUMBER else None


def quoted(value: Any, limit: int = 40) -> str:
    """A value read from a file as a message quotes it: its repr, or for one longer than `limit` characters its
    first half-limit characters and its length."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit // 2]}... ({len(text):,} characters)"
