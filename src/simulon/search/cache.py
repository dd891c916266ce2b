"""Search results kept on disk by configuration hash, so that a search killed and restarted loses nothing.

Two kinds of entry, each a small JSON file named by the BLAKE2b hash of everything that determines it:

* `estimates/<hash>.json`: a search's enumerate-prune-estimate phase (every feasible strategy with its estimate,
  the counts by rule and by memory term, the closest miss), keyed by the searched scenario as validated, the GPU
  count, the restrictions, whether fp8 is tried, and the code fingerprint;
* `replays/<hash>.json`: one replayed step time, keyed by the replayed scenario as validated and the code
  fingerprint. A replay is written the moment it finishes, so a restart replays only what had not finished.

The code fingerprint hashes every source and data file of the installed simulon package (the models, the
compute and network calibration fits, the templates): an entry written by another model version or calibration
is never read. Entries are written atomically (export/files.py write_atomic): a search killed mid-write leaves
no half-written entry, and an unreadable entry is treated as missing: one that is not JSON, or whose JSON is not
the shape its reader expects (`get`'s `read` raises on it: a field missing, of the wrong type, a time that is not
a finite positive number).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..export.files import write_atomic

T = TypeVar("T")

MALFORMED = (KeyError, IndexError, TypeError, ValueError, AttributeError)
"""What a reader raises on an entry of the wrong shape."""

DEFAULT_FOLDER = Path(".simulon-cache")
"""Where `simulon search` keeps its entries unless told otherwise (`--cache DIR`)."""

PACKAGE_SUFFIXES = (".py", ".yaml", ".yml", ".json", ".csv")
"""The package files whose content the code fingerprint covers."""


@functools.cache
def code_fingerprint() -> str:
    """A hash of every source and data file of the simulon package this process runs."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.blake2b(digest_size=16)
    for path in sorted(p for p in root.rglob("*") if p.suffix in PACKAGE_SUFFIXES and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def digest(payload: Any) -> str:
    """The hash of a JSON-able value (keys sorted: the same value always hashes the same)."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(text.encode(), digest_size=20).hexdigest()


class Cache:
    """Entries under one folder, created when the first is written."""

    def __init__(self, folder: Path | str):
        self.folder = Path(folder)
        self.hits: Counter[str] = Counter()  # entries read, by kind

    def key(self, payload: Any) -> str:
        """The hash naming the entry of `payload` under this code version."""
        return digest({"code": code_fingerprint(), "payload": payload})

    def path(self, kind: str, key: str) -> Path:
        return self.folder / kind / f"{key}.json"

    def get(self, kind: str, key: str, read: Callable[[Any], T] = lambda value: value) -> T | None:
        """The entry as `read` makes it of its JSON, or None where there is none, it cannot be read, or `read`
        finds it of the wrong shape (raises one of MALFORMED)."""
        try:
            value = read(json.loads(self.path(kind, key).read_text()))
        except (OSError, *MALFORMED):
            return None
        self.hits[kind] += 1
        return value

    def put(self, kind: str, key: str, value: Any) -> None:
        path = self.path(kind, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(value, sort_keys=True))


def finite_positive(value: Any) -> float:
    """A time (or a size) an entry records: a finite positive number (not a yes/no), else ValueError."""
    if finite_number(value) <= 0:
        raise ValueError(f"expected a finite positive number, got {value!r}")
    return float(value)


def finite_number(value: Any) -> float:
    """A number an entry records: finite (not a yes/no), else ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    return float(value)
