"""Read a scenario file into a validated ScenarioConfig, turning every problem into one plain message."""

from __future__ import annotations

import difflib
import re
import types
import typing
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from .common import FieldError
from .errors import ConfigError, not_utf8, one_line, parse_yaml, read_yaml_text, shown, yaml_problem
from .scenario import ScenarioConfig


def _dotted(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


_EXPECTED = {
    "int_type": "a whole number", "int_parsing": "a whole number", "int_from_float": "a whole number",
    "float_type": "a number", "float_parsing": "a number", "finite_number": "a finite number",
    "string_type": "text", "bool_type": "true or false", "bool_parsing": "true or false",
    "model_type": "a mapping of fields", "model_attributes_type": "a mapping of fields",
    "dict_type": "a mapping", "list_type": "a list", "tuple_type": "a list",
}
"""What each of pydantic's wrong-type errors expects, as a reader of a YAML file would put it."""

def _number_hint(error: dict[str, Any]) -> str:
    """Why a number was refused where YAML or its author made it something else."""
    value = error.get("input")
    if isinstance(value, float) and error["type"] == "int_type" and value.is_integer():
        return f" (write it as {int(value)})"
    if isinstance(value, str) and error["type"] in ("int_type", "float_type"):
        try:
            float(value.replace("_", ""))
        except ValueError:
            return ""
        return " (write the number without quotes)"
    return ""


def _choice_hint(error: dict[str, Any]) -> str:
    """' (did you mean 'full'?)' where a value refused from a fixed set is one of them but for case or spelling
    ('FULL', 'selectiv', 'bf61')."""
    given = error.get("input")
    if not isinstance(given, str):
        return ""
    choices = re.findall(r"'([^']*)'", str(error["ctx"]["expected"]))
    lowered = {choice.lower(): choice for choice in choices}
    close = lowered.get(given.strip().lower()) or next(iter(difflib.get_close_matches(
        given.strip().lower(), list(lowered), n=1, cutoff=0.6)), None)
    return f" (did you mean {lowered[close.lower()]!r}?)" if close else ""


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's annotation may hold (through Optional, unions, lists and mappings)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) is typing.Annotated:
        return _models(typing.get_args(annotation)[0])
    return [m for arg in typing.get_args(annotation) if arg is not types.NoneType for m in _models(arg)]


@cache
def _key_homes() -> dict[str, tuple[str, ...]]:
    """Every key a scenario may hold -> the blocks (dotted paths) that hold it."""
    homes: dict[str, list[str]] = {}
    seen: set[tuple[type, str]] = set()

    def walk(model: type[BaseModel], path: str) -> None:
        for name, info in model.model_fields.items():
            key = info.alias or name
            homes.setdefault(key, []).append(path)
            for inner in _models(info.annotation):
                if (inner, path) not in seen and path.count(".") < 4:
                    seen.add((inner, path))
                    walk(inner, f"{path}.{key}" if path else key)

    walk(ScenarioConfig, "")
    return {key: tuple(dict.fromkeys(paths)) for key, paths in homes.items()}


def _block_keys(block: str) -> list[str]:
    """The keys the block at this dotted path may hold."""
    return [key for key, paths in _key_homes().items() if block in paths]


def _unknown_key_hint(loc: tuple[Any, ...]) -> str:
    """' (did you mean ...?)' for a key misspelt among its block's keys, or ' (it belongs in ...)' for one that
    another block holds (`recompute` under workload.training, where workload.parallelism holds it)."""
    names = [str(part) for part in loc if not isinstance(part, int)]
    if not names:
        return ""
    key, block = names[-1], ".".join(names[:-1])
    close = difflib.get_close_matches(key, _block_keys(block), n=1, cutoff=0.75)
    if close:
        return f" (did you mean {close[0]!r}?)"
    elsewhere = [path for path in _key_homes().get(key, ()) if path and path != block]
    if elsewhere:
        return f" (it belongs in {' or '.join(elsewhere[:2])})"
    return ""


def problem(error: dict[str, Any]) -> str:
    """One of pydantic's errors as a plain sentence holding the value given and what is expected."""
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"unknown key{_unknown_key_hint(tuple(error['loc']))}"
    if kind == "missing":
        return "required field is missing"
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, got {shown(error.get('input'))}{_number_hint(error)}"
    message = error["msg"].removeprefix("Value error, ")
    if kind in ("literal_error", "enum"):
        return f"expected {error['ctx']['expected']}, got {shown(error.get('input'))}{_choice_hint(error)}"
    if kind.startswith(("greater", "less", "too_", "string_")) and "input" in error:
        return f"{message[0].lower()}{message[1:]}, got {shown(error['input'])}"
    return message


def describe_validation_error(exc: ValidationError, source: str) -> str:
    """'file: field.path: problem' for the first error, with a count of the others."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = tuple(first["loc"])
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):
        loc = (*loc, *cause.field.split("."))
        message = cause.message
    else:
        message = problem(first)
    field = _dotted(loc) or "(top level)"
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return one_line(f"{source}: {field}: {message}{more}")


def parse_scenario(data: Any, source: str = "<scenario>", base_dir: Path | None = None) -> ScenarioConfig:
    if not isinstance(data, dict):
        given = "an empty file" if data is None else shown(data)
        raise ConfigError(f"{source}: (top level): expected a mapping with a 'datacenter' block, got {given}")
    try:
        return ScenarioConfig.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, source)) from None


def load_scenario(path: str | Path) -> ScenarioConfig:
    """Load and validate a scenario YAML file; relative template paths resolve from its folder."""
    path = Path(path)
    return parse_scenario(read_scenario_data(path), str(path), path.parent)


def read_scenario_data(path: Path) -> Any:
    """A scenario file's YAML, read as load_scenario reads it (one located message for any problem), not yet
    validated."""
    try:
        text = read_yaml_text(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: {not_utf8(exc)}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    try:
        data = parse_yaml(text)
    except yaml.YAMLError as exc:
        where, problem = yaml_problem(exc)
        raise ConfigError(f"{path}: (YAML){where}: {problem}") from None
    return data
