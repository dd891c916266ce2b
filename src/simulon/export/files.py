"""Write output files atomically: a temporary name in the same folder, then a rename.

A rename replaces whatever the name held, so only a regular file (or a new name) is written that way: a symbolic
link is followed (its target replaced, the link kept), and a device or a named pipe (/dev/null, /dev/stdout, a
FIFO) is written through, as a plain open() would, never replaced by a file.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def write_atomic(path: str | Path, text: str | bytes) -> None:
    """Write text, or bytes (a PNG), to `path` so that it holds either the old content or the whole new one (a
    device or pipe gets the bytes as they are written)."""
    path = Path(os.path.realpath(path)) if Path(path).is_symlink() else Path(path)
    mode = "wb" if isinstance(text, bytes) else "w"
    try:
        kind = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        kind = stat.S_IFREG
    try:
        if not stat.S_ISREG(kind) and not stat.S_ISDIR(kind):
            with open(path, mode) as f:
                f.write(text)
            return
        _replace(path, text, mode)
    except OSError as exc:  # a write fails without a name (a full disk): say which output
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise


def _replace(path: Path, text: str | bytes, mode: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # what a plain open() would give, not mkstemp's 0600
        with os.fdopen(fd, mode) as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
