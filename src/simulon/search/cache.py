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
no half-written entry, and an unreadable entry is treated as missing.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from ..export.files import write_atomic

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

    def get(self, kind: str, key: str) -> Any | None:
        """The entry, or None where there is none (or it cannot be read)."""
        try:
            value = json.loads(self.path(kind, key).read_text())
        except (OSError, ValueError):
            return None
        self.hits[kind] += 1
        return value

    def put(self, kind: str, key: str, value: Any) -> None:
        path = self.path(kind, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(value, sort_keys=True))
