"""The GPU YAML a profile is appended to: what it had is kept, runs already there (or known to run out
of memory) are skipped, and every save is a temporary file renamed over the old one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ..config.errors import ConfigError, not_utf8, parse_yaml, read_yaml_text
from ..config.templates import template_stem
from ..export.files import write_atomic


def run_key(kernel: str, params: dict[str, Any]) -> str:
    return kernel + json.dumps(params, sort_keys=True)


class ProfileFile:
    def __init__(self, path: Path, identity: dict[str, Any]):
        """Open `path` (a GPU YAML, possibly absent); a new file starts from `identity` (name, vendor...),
        and from the shipped template of that name if there is one, so that it loads as a GPU by itself."""
        self.path = path
        self.header = ""
        if path.exists():
            try:
                text = read_yaml_text(path)  # a device such as /dev/zero, or a pipe, is refused, not read without end
                doc = parse_yaml(text)
            except OSError as exc:
                raise ConfigError(f"{path}: cannot read it as YAML: {exc.strerror or exc}") from None
            except UnicodeDecodeError as exc:
                raise ConfigError(f"{path}: {not_utf8(exc)}") from None
            except (ValueError, yaml.YAMLError) as exc:
                raise ConfigError(f"{path}: cannot read it as YAML: {getattr(exc, 'problem', None) or exc}") from None
            if doc is None:
                doc = {}
            if not isinstance(doc, dict):
                raise ConfigError(f"{path}: (top level): expected a GPU mapping, got {type(doc).__name__}")
            for key in ("kernel_runs", "oom_kernel_runs"):
                if not isinstance(doc.get(key, []), list):
                    raise ConfigError(f"{path}: {key}: expected a list of runs")
            lines = text.splitlines(keepends=True)
            self.header = "".join(line for line in _leading_comments(lines))
            self.doc = doc
        else:
            stem = template_stem("gpu", str(identity.get("name", "")))
            self.doc = {**({"from": stem} if stem else {}), **identity}
        self.done = {run_key(r.get("kernel", ""), r.get("params", {}))
                     for key in ("kernel_runs", "oom_kernel_runs") for r in self.doc.get(key, [])
                     if isinstance(r, dict)}

    def has(self, kernel: str, params: dict[str, Any]) -> bool:
        return run_key(kernel, params) in self.done

    def add(self, kernel: str, params: dict[str, Any], times_ms: list[float] | None) -> None:
        """Record a timed run, or (times_ms None) a configuration that ran out of memory."""
        key = "kernel_runs" if times_ms is not None else "oom_kernel_runs"
        run: dict[str, Any] = {"kernel": kernel, "params": params}
        if times_ms is not None:
            run["times_ms"] = [round(t, 6) for t in times_ms]
        self.doc.setdefault(key, []).append(run)
        self.done.add(run_key(kernel, params))

    def save(self) -> None:
        write_atomic(self.path, self.header + yaml.safe_dump(self.doc, sort_keys=False))


def _leading_comments(lines: list[str]):
    for line in lines:
        if line.strip() and not line.lstrip().startswith("#"):
            return
        yield line
