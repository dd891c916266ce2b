"""Bad input: the one exception for it, and the plain one-line messages that name what is wrong."""

from __future__ import annotations

import yaml


class ConfigError(Exception):
    """Bad input: the message names the file, the field and the problem (CLI exit status 2)."""


def one_line(message: str) -> str:
    """Messages quote user text; keep them on one line whatever that text holds."""
    return message.replace("\r", "\\r").replace("\n", "\\n")


def yaml_problem(exc: yaml.YAMLError) -> tuple[str, str]:
    """(" at line L, column C" or "", the problem) of a YAML parse error, for a one-line message."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return where, getattr(exc, "problem", None) or "invalid YAML"
