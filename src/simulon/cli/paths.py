"""Options naming a file or a folder: an empty name (`-o ""`, an unset shell variable) is refused where the option is
read. A path made of it is '.', the current folder: `--plots ""` and `--cache ""` wrote into it, and a file option
was refused as 'is a folder', naming '.', which the user never wrote. And a path as an output file shows it
(shown_name). And an option's text given in bytes the locale cannot decode is read as the UTF-8 it was typed in
(typed_text)."""

from __future__ import annotations

import os
from pathlib import Path

import typer


def named_path(text: str) -> Path:
    """The path an option names (typer's `parser`); an empty name is a usage error (exit 2, one line)."""
    if not text:
        raise typer.BadParameter("an empty name: give the path of the file or folder")
    return Path(text)


FOLDER_ENDS = tuple(sep for sep in (os.sep, os.altsep) if sep)
"""How a folder's name may end, and a file's may not ('results/')."""


def named_file(text: str) -> Path:
    """The path an option naming a file gives (typer's `parser`): as named_path, and a name ending in a separator,
    a folder's, is a usage error. Path drops the separator: `-o results/` wrote the trace to a file named results."""
    if text.endswith(FOLDER_ENDS):
        raise typer.BadParameter(f"ends in {text[-1]!r}, as a folder's name does: give the file's name")
    return named_path(text)


def path_option(*names: str, folder: bool = False, **settings) -> typer.models.OptionInfo:
    """typer.Option for an option naming a file (read by `named_file`) or, with `folder`, a folder (`named_path`),
    shown as <path> in the help."""
    return typer.Option(*names, parser=named_path if folder else named_file, metavar="<path>", **settings)


def shown_name(path: Path) -> str:
    """`path` as text a UTF-8 file can hold: the bytes of a name that are not UTF-8 (a Latin-1 'caf\\xe9.yaml', which
    Python holds as surrogate escapes) shown as U+FFFD, as a terminal shows them; the report's title of such a
    scenario ended `simulon report` in 'internal error: UnicodeEncodeError ... surrogates not allowed'."""
    return os.fsencode(path).decode("utf-8", "replace")


def typed_text(text: str, option: str) -> str:
    """An option's value as the user typed it: under an ASCII locale (LC_ALL=C) Python holds an argument's non-ASCII
    bytes as surrogate escapes, and `--set workload.model.name=café` was refused as 'cannot read 'caf\\udcc3\\udca9':
    special characters are not allowed'; those bytes are read as UTF-8, as a terminal sends them. Bytes that are
    not UTF-8 either are a ConfigError naming the option."""
    from ..config.errors import ConfigError

    if not any("\udc80" <= char <= "\udcff" for char in text):
        return text
    raw = os.fsencode(text)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{option} {raw.decode('utf-8', 'replace')}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at "
                          f"offset {exc.start}); type it in UTF-8") from None
