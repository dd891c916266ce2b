"""Write output files atomically: a temporary name in the same folder, then a rename.

A rename replaces whatever the name held, so only a regular file (or a new name) is written that way: a symbolic
link is followed (its target replaced, the link kept), and a device or a named pipe (/dev/null, /dev/stdout, a
FIFO) is written through, as a plain open() would, never replaced by a file.

And check an output path before the work that fills it starts (check_writable): a command that would fail to
write, would overwrite its own input or a file its permissions protect, is refused at once and writes nothing.
"""

from __future__ import annotations

import errno
import gzip
import os
import stat
import tempfile
from pathlib import Path

from ..config.errors import ConfigError


def compressed_as_named(path: str | Path, text: str) -> str | bytes:
    """`text` as the file `path` names it: gzip-compressed for a name ending in .gz (as Perfetto opens a trace), with
    no time stamp, so that the same text gives the same bytes; else the text."""
    if Path(path).name.lower().endswith(".gz"):
        return gzip.compress(text.encode(), mtime=0)
    return text


def write_atomic(path: str | Path, text: str | bytes) -> None:
    """Write text, or bytes (a PNG), to `path` so that it holds either the old content or the whole new one (a
    device or pipe gets the bytes as they are written). Text is written as UTF-8 with its line ends as they are,
    whatever the platform and the locale's encoding: the same output gives the same bytes everywhere (under an ASCII
    locale a sweep rewriting its CSV's earlier 'café' row failed with UnicodeEncodeError; Windows would write CRLF)."""
    given = Path(path)
    data = text.encode("utf-8") if isinstance(text, str) else text
    try:
        kind = os.stat(given).st_mode  # through links: /dev/stdout into a pipe is a FIFO, not a file to replace
    except (FileNotFoundError, NotADirectoryError):
        kind = stat.S_IFREG
    path = Path(os.path.realpath(given)) if given.is_symlink() else given
    try:
        if not stat.S_ISREG(kind) and not stat.S_ISDIR(kind):
            with open(given, "wb") as f:
                f.write(data)
            return
        _replace(path, data)
    except OSError as exc:  # a write fails without a name (a full disk): say which output
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise


TEMPORARY_STEM = 32
"""The number of characters of the output's name that its temporary copy's name keeps (`.NAME.XXXXXXXX.tmp`).
Keeping the whole name failed for long ones: an output name may take up to NAME_MAX (255 bytes), and mkstemp's 14
bytes around it pushed the temporary name past that (a 245-character name failed after the work was done). The stem
only lets a person tell whose leftover a temporary file is. 32 characters are at most 128 bytes in UTF-8 (4 a
character), so the temporary name is at most 142 bytes, well under NAME_MAX; any length up to 60 characters (240 + 14
bytes) would do, and 32 is a choice, not a measurement."""


def _replace(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name[:TEMPORARY_STEM]}.", suffix=".tmp")
    try:
        try:  # what a plain open() would give, not mkstemp's 0600: an existing file's own permissions
            mode_bits = stat.S_IMODE(os.stat(path).st_mode)
        except (FileNotFoundError, NotADirectoryError):  # or a new file's, under the umask
            umask = os.umask(0)
            os.umask(umask)
            mode_bits = 0o666 & ~umask
        os.fchmod(fd, mode_bits)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_writable(path: Path, option: str, what: str = "file", suffixes: tuple[str, ...] = (),
                   inputs: tuple[Path, ...] = ()) -> None:
    """A ConfigError, before any work is done, unless the output `path` given by the command-line `option` can be
    written: a name ending in one of `suffixes` (when given), in a folder that exists and a file can be created in,
    not itself a folder, and not one of the command's `inputs` (writing it would destroy what was read)."""
    check_name(path, option)
    if suffixes and path.suffix.lower() not in suffixes:
        expected = " or ".join(suffixes)
        raise ConfigError(f"{option} {path}: expected a file name ending in {expected}, "
                          f"got {path.suffix or 'no suffix'!r}")
    check_parent(path, option)
    if path.is_dir():
        raise ConfigError(f"{option} {path}: is a folder; name the {what} to write")
    check_not_input(path, option, inputs)
    if written_in_place(path):
        check_not_read_only(path, option)
        check_can_create(Path(os.path.realpath(path)).parent, option, path)


def check_not_read_only(path: Path, option: str) -> None:
    """A ConfigError where the existing file `path` (given by `option`) may not be written (`chmod a-w`): the rename
    write_atomic makes needs only the folder's permission, so the file a user had protected was replaced, where a plain
    open() is refused (as for root, whom no permission stops, os.access says)."""
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(f"{option} {path}: the file is read-only (its permissions forbid writing it); make it "
                          "writable or name another file")


def check_name(path: Path, option: str) -> None:
    """A ConfigError where `path` (given by `option`) is a name no file can have: a part of it longer than the file
    system's NAME_MAX, or the whole longer than PATH_MAX (pathlib's is_dir and exists raise on it, not answer)."""
    try:
        os.lstat(path)
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise ConfigError(f"{option} {path}: cannot write: {exc.strerror}") from None


def check_parent(path: Path, option: str) -> None:
    """A ConfigError unless the folder `path` (given by `option`) is to be written in exists."""
    folder = path.parent if str(path.parent) else Path(".")
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{option} {path}: {str(folder)!r} is a file, not a folder")
    if not folder.is_dir():
        raise ConfigError(f"{option} {path}: folder {str(folder)!r} does not exist")


def written_in_place(path: Path) -> bool:
    """Whether write_atomic writes `path` by a temporary file renamed over it (a new name or a regular file),
    rather than through it (a device or a named pipe)."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return True


def check_can_create(folder: Path, option: str, path: Path) -> None:
    """A ConfigError unless a file can be created in `folder` (where `path`, given by `option`, is written): a
    read-only file system, a folder without write permission or one like /proc is refused before any work, not
    after it."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise ConfigError(f"{option} {path}: cannot create a file in folder {str(folder)!r}: "
                          f"{exc.strerror or exc}") from None


def check_regular_output(path: Path, option: str, what: str) -> None:
    """A ConfigError where the output `path` (given by `option`) exists and is no regular file (a device such as
    /dev/null or /dev/zero, a named pipe): for an output the command reads back, like a sweep's CSV."""
    if not written_in_place(path):
        raise ConfigError(f"{option} {path}: not a regular file; the {what} is read back, so name a file")


def check_not_input(path: Path, option: str, inputs: tuple[Path, ...]) -> None:
    """A ConfigError where the output `path` is (by any name, a link included) one of the files read."""
    for given in inputs:
        if path.exists() and given.exists() and os.path.samefile(path, given):
            raise ConfigError(f"{option} {path}: is the input file {str(given)!r}; writing it would overwrite "
                              "what was read, so name another file")


def check_folder_writable(path: Path, option: str) -> None:
    """A ConfigError unless `path` (given by `option`) is a folder, or can be created as one: a missing folder
    is created (the command's own output), a missing folder above it is not (a typo in the path, as with -o)."""
    check_name(path, option)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {path}: exists and is not a folder")
    if not path.exists():
        check_parent(path, option)
    check_can_create(path if path.exists() else (path.parent if str(path.parent) else Path(".")), option, path)
