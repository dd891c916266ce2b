"""Bad input: the one exception for it, and the plain one-line messages that name what is wrong."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import yaml

MAX_YAML_BYTES = 16 * 2**20
"""The largest scenario or template file read: the biggest shipped one is a GPU with a measured profile of a
few hundred KiB, so 16 MiB leaves room for large profiles while a device like /dev/zero is refused at once."""


class ConfigError(Exception):
    """Bad input: the message names the file, the field and the problem (CLI exit status 2)."""


def one_line(message: str) -> str:
    """Messages quote user text; keep them on one line whatever that text holds."""
    return message.replace("\r", "\\r").replace("\n", "\\n")


def not_utf8(exc: UnicodeDecodeError) -> str:
    """What to say of a file that is not UTF-8 text (a latin-1 file, a binary one): where, and what to do."""
    return (f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
            "save it as UTF-8")


def yaml_problem(exc: yaml.YAMLError) -> tuple[str, str]:
    """(" at line L, column C" or "", the problem) of a YAML parse error, for a one-line message."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return where, getattr(exc, "problem", None) or "invalid YAML"


def read_yaml_text(path: Path) -> str:
    """A YAML input file's text. Raises OSError for what cannot be read (a folder, a missing file), ValueError for
    what is no input file (a device, a pipe, a file over MAX_YAML_BYTES) and UnicodeDecodeError."""
    info = path.stat()
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    if not path.is_file():
        raise ValueError("not a regular file")
    if info.st_size > MAX_YAML_BYTES:
        raise ValueError(f"{info.st_size:,} bytes, more than a scenario or template holds ({MAX_YAML_BYTES:,})")
    return path.read_text()


class NestedTooDeep(yaml.YAMLError):
    """YAML whose nesting is deeper than the parser's recursion follows."""

    problem = "nested deeper than the parser follows"


def parse_yaml(text: str) -> Any:
    """Parse YAML, turning nesting too deep for the parser into a YAMLError like any other."""
    try:
        return yaml.safe_load(text)
    except RecursionError:
        raise NestedTooDeep() from None
