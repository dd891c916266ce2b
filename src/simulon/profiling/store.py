"""The GPU YAML a profile is appended to: what it had is kept, runs already there (or known to run out
of memory) are skipped, and every save is a temporary file renamed over the old one. The file is checked before
anything is timed: an existing one must load as a GPU (and be the GPU the options name, and timed on the same
device), a new one must be a GPU that will load (a GPU no shipped template names needs a spec sheet the options do
not give). Runs timed on a CPU (`--device cpu`, a dry run) are marked `device: cpu`, which no GPU loads
(config.dc.KernelRun)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..compute.profile import PROFILE_REPEATS
from ..config.dc import GPUSpec, KernelRun
from ..config.errors import ConfigError, not_utf8, parse_yaml, read_yaml_text
from ..config.loading import describe_validation_error
from ..config.templates import other_document, template_stem
from ..export.files import write_atomic

DEVICES = {"cuda": "the GPU (--device cuda)", "cpu": "a CPU (--device cpu, a dry run)"}
IDENTITY = {"--name": "name", "--vendor": "vendor", "--memory-capacity-gb": "memory_capacity_gb", "--tdp-w": "tdp_w"}
"""The options of `simulon profile gpu` that say which GPU it is, and the GPU field each gives."""


def run_key(kernel: str, params: dict[str, Any]) -> str:
    return kernel + json.dumps(params, sort_keys=True)


class ProfileFile:
    def __init__(self, path: Path, identity: dict[str, Any], device: str = "cuda"):
        """Open `path` (a GPU YAML, possibly absent) to add runs timed on `device` (cuda or cpu); a new file starts
        from `identity` (name, vendor...), and from the shipped template of that name if there is one, so that it
        loads as a GPU by itself. Raises ConfigError where the file is no GPU, or would be none, or was timed on the
        other device."""
        self.path = path
        self.header = ""
        self.device = device
        self.existed = path.exists()
        if self.existed:
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
            other = other_document("gpu", doc)
            if other:
                raise ConfigError(f"{path}: is {other}, not a GPU file: write the profile to a file of its own")
            for key in ("kernel_runs", "oom_kernel_runs"):
                if not isinstance(doc.get(key, []), list):
                    raise ConfigError(f"{path}: {key}: expected a list of runs")
            lines = text.splitlines(keepends=True)
            self.header = "".join(line for line in _leading_comments(lines))
            self.doc = doc
        else:
            stem = template_stem("gpu", str(identity.get("name", "")))
            self.doc = {**({"from": stem} if stem else {}), **identity}
        self.gpu = self._loaded()
        timed_on = {run.device for run in (*self.gpu.kernel_runs, *self.gpu.oom_kernel_runs)} - {device}
        if timed_on:
            raise ConfigError(f"{path}: its kernel runs were timed on {DEVICES[timed_on.pop()]}, and a profile's "
                              f"runs are all timed on one device: write the runs of {DEVICES[device]} to another "
                              "file")
        self.done = {run_key(r.get("kernel", ""), r.get("params", {}))
                     for key in ("kernel_runs", "oom_kernel_runs") for r in self.doc.get(key, [])
                     if isinstance(r, dict)}

    def _loaded(self) -> GPUSpec:
        """The file's GPU, as a scenario would load it (runs timed on a CPU let through)."""
        try:
            gpu = GPUSpec.model_validate(self.doc, context={"base_dir": self.path.parent, KernelRun.CPU_TIMES: True})
        except ValidationError as exc:
            if self.existed:
                raise ConfigError(describe_validation_error(exc, str(self.path))) from None
            raise ConfigError(describe_validation_error(exc, f"{self.path} (the new GPU the options give)")) from None
        return gpu

    def check_identity(self, given: dict[str, Any]) -> None:
        """Raise ConfigError if an option naming the GPU (IDENTITY: `--name H200`, given, not None) contradicts the
        existing file's GPU: a profile file is one GPU's."""
        if not self.existed:
            return
        for option, value in given.items():
            if value is None:
                continue
            field = IDENTITY[option]
            have = getattr(self.gpu, field)
            if field == "name":
                stem = template_stem("gpu", str(value))
                same = value == have or (stem is not None and stem == template_stem("gpu", have))
            elif isinstance(value, float) and isinstance(have, int | float):
                same = abs(value - have) <= 1e-9 * max(abs(have), 1.0)
            else:
                same = value == have
            if not same:
                raise ConfigError(f"{self.path}: {option} {value} contradicts the file's GPU ({field}: {have}): a "
                                  "profile file is one GPU's: leave the option out, or write this GPU's profile to "
                                  "another file")

    def has(self, kernel: str, params: dict[str, Any]) -> bool:
        return run_key(kernel, params) in self.done

    def add(self, kernel: str, params: dict[str, Any], times_ms: list[float] | None,
            back_to_back: int | None = None) -> None:
        """Record a timed run, or (times_ms None) a configuration that ran out of memory; `back_to_back`: the runs of
        the kernel in the timed loop, where not the profiler's defaults (config.dc.KernelRun.back_to_back)."""
        key = "kernel_runs" if times_ms is not None else "oom_kernel_runs"
        run: dict[str, Any] = {"kernel": kernel, **({"device": self.device} if self.device != "cuda" else {}),
                               "params": params}
        if times_ms is not None:
            run["times_ms"] = [round(t, 6) for t in times_ms]
            if back_to_back is not None and back_to_back != PROFILE_REPEATS:
                run["back_to_back"] = back_to_back
        self.doc.setdefault(key, []).append(run)
        self.done.add(run_key(kernel, params))

    def save(self) -> None:
        write_atomic(self.path, self.header + yaml.safe_dump(self.doc, sort_keys=False))


def _leading_comments(lines: list[str]):
    for line in lines:
        if line.strip() and not line.lstrip().startswith("#"):
            return
        yield line
