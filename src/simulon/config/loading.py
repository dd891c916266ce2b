"""Read a scenario file into a validated ScenarioConfig, turning every problem into one plain message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .common import FieldError
from .errors import ConfigError, not_utf8, one_line, parse_yaml, read_yaml_text, yaml_problem
from .scenario import ScenarioConfig


def _dotted(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


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
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = "unknown key"
        elif first["type"] == "missing":
            message = "required field is missing"
    field = _dotted(loc) or "(top level)"
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return one_line(f"{source}: {field}: {message}{more}")


def parse_scenario(data: Any, source: str = "<scenario>", base_dir: Path | None = None) -> ScenarioConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: (top level): expected a mapping with a 'datacenter' block, "
                          f"got {type(data).__name__}")
    try:
        return ScenarioConfig.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, source)) from None


def load_scenario(path: str | Path) -> ScenarioConfig:
    """Load and validate a scenario YAML file; relative template paths resolve from its folder."""
    path = Path(path)
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
    return parse_scenario(data, str(path), path.parent)
