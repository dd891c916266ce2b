"""Where a search's replays and a sweep's points run: a local process pool (the default) or a Ray cluster
(`simulon[ray]`).

Both run one picklable function over a list of jobs and hand each result back as soon as it is finished, with
the job's index, so that the search can record it (search/cache.py) before the next one ends. The answer does
not depend on the executor: each job is a whole, deterministic replay.

Ray: `ray.init(address)` joins a running cluster (`ray start --head`, or `auto`), or, with no address, starts a
local one for the command and stops it after; a session that already called `ray.init` is used as it is. The
workers import simulon, so every node needs the same simulon installed (see Ray's runtime environments).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Protocol

from .config.errors import ConfigError

RAY_MISSING = ("--executor ray: Ray is not installed; install the optional extra with `uv sync --extra ray` "
               "(or `pip install 'simulon[ray]'`)")


class Executor(Protocol):
    def map_unordered(self, function: Callable[[Any], Any], jobs: list[Any]) -> Iterator[tuple[int, Any]]:
        """(index, result) of every job, in the order they finish."""


class ProcessExecutor:
    """A local process pool, all cores unless told."""

    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1

    def map_unordered(self, function: Callable[[Any], Any], jobs: list[Any]) -> Iterator[tuple[int, Any]]:
        with ProcessPoolExecutor(max_workers=min(self.workers, len(jobs)) or 1) as pool:
            futures = {pool.submit(function, job): index for index, job in enumerate(jobs)}
            for future in as_completed(futures):
                yield futures[future], future.result()


class RayExecutor:
    """Tasks on a Ray cluster: the one at `address`, else the session's, else a local one started here."""

    def __init__(self, address: str | None = None):
        try:
            import ray
        except ImportError:
            raise ConfigError(RAY_MISSING) from None
        self.ray, self.address = ray, address

    def map_unordered(self, function: Callable[[Any], Any], jobs: list[Any]) -> Iterator[tuple[int, Any]]:
        ray = self.ray
        started = not ray.is_initialized()
        if started:
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False)
        try:
            task = ray.remote(function)
            pending = {task.remote(job): index for index, job in enumerate(jobs)}
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                yield pending.pop(ready[0]), ray.get(ready[0])
        finally:
            if started:
                ray.shutdown()


def executor(kind: str, workers: int | None = None, address: str | None = None) -> Executor:
    """The executor a command names: `process` or `ray`."""
    if kind == "process":
        return ProcessExecutor(workers)
    if kind == "ray":
        return RayExecutor(address)
    raise ConfigError(f"--executor: expected process or ray, got {kind!r}")
