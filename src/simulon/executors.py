"""Where a search's replays, a sweep's points and a validation's rows (training) and sweeps (collectives) run: a
local process pool (the default) or a Ray cluster (`simulon[ray]`).

Both run one picklable function over a list of jobs and hand each result back as soon as it is finished, with
the job's index, so that the search can record it (search/cache.py) before the next one ends. The answer does
not depend on the executor: each job is a whole, deterministic replay.

Memory: a job may say how many bytes it needs (`needs`, for a replay the guard's estimate, dag/size.py), and the
jobs running at once are admitted against the memory as a whole: on the process pool, a job starts only while the
needs of those running and its own add up to no more than the budget (the memory this machine has available when
the jobs are handed over, or a limit given), else it waits for one to finish; on Ray each task asks for its bytes
as Ray's `memory` resource, and Ray's scheduler places it where they are free. A job that needs more than the
budget (Ray: more than any node has) even alone is not started: it comes back as `Refused`, saying why, and the
other jobs go on. Jobs that size themselves (a sweep's points, a validation's rows and sweeps) run `in_shares`:
on the local pool each first within the limit over the jobs at once, and one planned to need more after the others,
admitted by its need; on Ray each is sized first and asks for its need.

Ray: `ray.init(address)` joins a running cluster (`ray start --head`, or `auto`; with no address, the one
RAY_ADDRESS names), or, with neither, starts a local one for the command (never the cluster a `ray start`
recorded), once, on its first jobs; every later step of the command (a search's estimate parts, its sizing, its
replays) runs on that same instance, and it is stopped when the command ends (the executor is a
context manager: `with executor(...) as runner`, error or not). A session that already called `ray.init` is used
as it is and left running. A task is never retried: Ray retries one whose worker died (3 times by default, and
one killed by the memory monitor without end), where a job that ran out of memory once will again; one killed for
its memory ends the command as a MemoryError on the local pool does. Joining an address is given RAY_JOIN_SECONDS:
Ray's own client retries an address where nothing answers, or something that is not Ray's GCS, for more than ten
minutes (ray 2.x, node.py's cluster-id retries), so the join runs on a thread the command stops waiting for, and
the command is refused. The workers import simulon, so every node needs the same simulon installed (see Ray's
runtime environments): a cluster joined at an address is asked, node by node, which simulon its workers run
(simulon_build: the version and a digest of the package), and one running another is refused before any job.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from functools import cache
from numbers import Integral
from pathlib import Path
from typing import Any, Protocol

from .config.errors import ConfigError
from .config.units import memory_amounts
from .dag.size import available_memory

RAY_MISSING = ("--executor ray: Ray is not installed; install the optional extra with `uv sync --extra ray` "
               "(or `pip install 'simulon[ray]'`)")

RAY_JOIN_SECONDS = 30.0
"""How long joining a Ray cluster at an address may take before the command is refused: a live cluster answers
within seconds (a local `ray start --head` in about one); Ray's client alone waits more than ten minutes on an
address where nothing answers (measured: `--ray-address 127.0.0.1:1`, still retrying after 10 min)."""


@dataclass(frozen=True)
class Refused:
    """A job not started: it needs more memory than the executor may use, even alone."""

    reason: str


class Executor(Protocol):
    def __enter__(self) -> Executor:
        """The executor, for the command's duration."""

    def __exit__(self, *exc: object) -> None:
        """Stop what the executor started for the command (a local Ray instance)."""

    def connect(self) -> None:
        """Reach the executor's workers (join the Ray cluster, or start the local instance) before anything is
        written, so that one that cannot be reached is refused with nothing half-written; nothing on a local pool."""

    def ceiling(self) -> float:
        """The most bytes one job may take (math.inf: no limit): one that needs more comes back as Refused, so a
        job that can shrink (a replay folding or sampling its step) is planned within it."""

    def map_unordered(self, function: Callable[[Any], Any], jobs: list[Any],
                      needs: list[float] | None = None) -> Iterator[tuple[int, Any]]:
        """(index, result) of every job, in the order they finish; `needs`: the bytes each job takes (None: no
        memory admission), a job that can never have them (more than `ceiling`) comes back as Refused."""


class Admission:
    """Which jobs may start, so that the bytes of those running never add up to more than `budget` and no more
    than `slots` run at once: each time one finishes, the waiting jobs are taken in order and every one that
    fits starts (a smaller one may pass a larger one that does not fit yet; the larger starts at the latest when
    everything before it has finished). A job needing more than the whole budget is refused at once."""

    def __init__(self, needs: list[float], budget: float, slots: int):
        if slots < 1:
            raise ValueError(f"expected at least one slot, got {slots}")
        self.needs, self.budget, self.slots = needs, budget, slots
        self.refused = {i: need for i, need in enumerate(needs) if need > budget}
        self.waiting = [i for i in range(len(needs)) if i not in self.refused]
        self.running: set[int] = set()

    @property
    def in_use(self) -> float:
        return sum(self.needs[i] for i in self.running)

    def start(self) -> list[int]:
        """The waiting jobs that start now (each counted as running until `finish`)."""
        started = []
        for index in list(self.waiting):
            if len(self.running) >= self.slots:
                break
            if self.in_use + self.needs[index] <= self.budget:
                self.waiting.remove(index)
                self.running.add(index)
                started.append(index)
        return started

    def finish(self, index: int) -> None:
        self.running.remove(index)

    @property
    def done(self) -> bool:
        return not self.waiting and not self.running


PROCESSES_PER_CPU = 4
"""Local worker processes allowed per CPU: a simulation keeps its CPU busy, so more run no faster, and each
process holds its own copy of the work (thousands of them would exhaust the machine's memory and processes)."""


def check_processes(count: object, name: str) -> int | None:
    """`count` (given as `name`: a parameter, or a command's option; None: the default) if it is a sensible number
    of local processes: at least one, and at most PROCESSES_PER_CPU for each CPU of this machine; else ValueError
    (TypeError for what is no whole number), naming `name`."""
    if count is None:
        return None
    if isinstance(count, bool) or not isinstance(count, Integral):
        raise TypeError(f"{name}: expected a whole number of processes, got {count!r}")
    if count < 1:
        raise ValueError(f"{name}: expected a positive number of processes, got {count}")
    cpus = os.cpu_count() or 1
    if count > PROCESSES_PER_CPU * cpus:
        raise ValueError(f"{name}: expected at most {PROCESSES_PER_CPU * cpus} processes ({PROCESSES_PER_CPU} for "
                         f"each of this machine's {cpus} CPUs; more run no faster), got {count}")
    return int(count)


def local_workers(count: int | None) -> int:
    """Processes of a local pool: `count`, or every core (None)."""
    return count or os.cpu_count() or 1


class ProcessExecutor:
    """A local process pool, all cores unless told; `memory`: the bytes the jobs may take together (None: what
    this machine has available when they are handed over; math.inf: no limit). Each map_unordered has its own
    pool: there is nothing to stop when the command ends."""

    def __init__(self, workers: int | None = None, memory: float | None = None):
        self.workers = local_workers(workers)
        self.memory = memory

    def __enter__(self) -> ProcessExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def connect(self) -> None:
        return None

    def budget(self) -> float:
        """The bytes the jobs of one map_unordered may take together: the limit given, else what this machine has
        available now."""
        if self.memory is not None:
            return self.memory
        available = available_memory()
        return math.inf if available is None else available

    def ceiling(self) -> float:
        return self.budget()

    def map_unordered(self, function: Callable[[Any], Any], jobs: list[Any],
                      needs: list[float] | None = None) -> Iterator[tuple[int, Any]]:
        if not jobs:
            return
        budget = self.budget() if needs is not None else math.inf
        admission = Admission(list(needs) if needs is not None else [0.0] * len(jobs), budget,
                              min(self.workers, len(jobs)))
        for index, need in sorted(admission.refused.items()):
            yield index, Refused("needs about {}, more than the {} the replays may use together".format(
                *memory_amounts(need, budget)))
        if admission.done:
            return
        with ProcessPoolExecutor(max_workers=admission.slots) as pool:
            futures: dict[Future, int] = {}
            while not admission.done:
                for index in admission.start():
                    futures[pool.submit(function, jobs[index])] = index
                finished, _ = wait(futures, return_when=FIRST_COMPLETED)
                for future in sorted(finished, key=futures.__getitem__):
                    index = futures.pop(future)
                    admission.finish(index)
                    yield index, future.result()


class RayExecutor:
    """Tasks on a Ray cluster: the one at `address`, else the session's, else a local one started here on the
    first jobs and kept for every later map_unordered until `close` (or the end of a `with` block) stops it."""

    def __init__(self, address: str | None = None, join_seconds: float = RAY_JOIN_SECONDS,
                 memory: float | None = None):
        try:
            import ray
        except ImportError:
            raise ConfigError(RAY_MISSING) from None
        self.ray, self.address, self.join_seconds = ray, address, join_seconds
        self.memory = memory  # the bytes one task may take (--max-memory; None: what its node offers)
        self.started = False  # whether this executor called ray.init (and so is the one to shut it down)

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> None:
        """Join the cluster (or start the local instance) unless this process already has."""
        if not self.ray.is_initialized():
            address, where = self.address, f"--ray-address {self.address}"
            if address is None and os.environ.get("RAY_ADDRESS"):  # Ray's own variable (a `ray job submit` driver's)
                address, where = os.environ["RAY_ADDRESS"], f"RAY_ADDRESS {os.environ['RAY_ADDRESS']}"
            # no address: "local", a new instance, not the cluster the last `ray start` on this machine recorded
            # (ray.init(address=None) joins that one, and one no longer running was waited for without end)
            options = {"address": "local" if address is None else address, "include_dashboard": False,
                       "log_to_driver": False}
            try:
                if address is None:  # a local instance: started here, nothing to wait for on the network
                    self.ray.init(**options)
                else:
                    within(self.join_seconds, lambda: self.ray.init(**options))
            except TimeoutError:
                raise ConfigError(f"{where}: cannot join the Ray cluster: no Ray cluster answered there within "
                                  f"{self.join_seconds:g} s") from None
            except (ConnectionError, RuntimeError, ValueError, self.ray.exceptions.RayError) as exc:
                # ValueError: an address Ray cannot read; RayError: AuthenticationError, no token for a cluster
                # that requires one
                if address is None:
                    raise ConfigError(f"--executor ray: cannot start a local Ray instance: {exc}") from None
                raise ConfigError(f"{where}: cannot join the Ray cluster: {exc}{auth_hint(exc)}") from None
            self.started = True
            if address is not None:  # another machine's workers may import another simulon: refused before any job
                check_builds(self.worker_builds())

    def worker_builds(self) -> dict[str, str | None]:
        """simulon_build of each live node that runs tasks (one with CPUs), by its address, as its workers import it
        (None: they cannot import it, no simulon or one without simulon_build), each asked by a task that takes no
        CPU pinned to the node; within the join limit, else a ConfigError naming the nodes that did not answer."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self.ray
        probe = ray.remote(num_cpus=0, max_retries=0)(simulon_build)
        asked = {probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False))
                 .remote(): node["NodeManagerAddress"]
                 for node in ray.nodes() if node["Alive"] and node["Resources"].get("CPU", 0) > 0}
        if not asked:  # no node runs tasks: there is nothing to ask
            return {}
        ready, late = ray.wait(list(asked), num_returns=len(asked), timeout=self.join_seconds)
        if late:
            raise ConfigError(f"--executor ray: the Ray nodes at {', '.join(sorted(asked[ref] for ref in late))} did "
                              f"not say which simulon their workers run within {self.join_seconds:g} s")
        builds: dict[str, str | None] = {}
        for ref in ready:
            try:
                builds[asked[ref]] = ray.get(ref)
            except ray.exceptions.RayTaskError:  # the function cannot be imported there
                builds[asked[ref]] = None
        return builds

    def node_memory(self) -> float:
        """The memory the largest live node offers (Ray's `memory` resource), which a task asks for as a whole."""
        self.connect()
        return max((node["Resources"].get("memory", 0.0) for node in self.ray.nodes() if node["Alive"]),
                   default=0.0)

    def ceiling(self) -> float:
        """What one task may take: the largest node's memory, and no more than --max-memory where given."""
        largest = self.node_memory()
        return largest if self.memory is None else min(largest, self.memory)

    def close(self) -> None:
        """Stop what `connect` started (a session's own Ray is left running)."""
        if self.started:
            self.ray.shutdown()
            self.started = False

    def map_unordered(self, function: Callable[[Any], Any], jobs: list[Any],
                      needs: list[float] | None = None) -> Iterator[tuple[int, Any]]:
        ray = self.ray
        self.connect()
        task = ray.remote(max_retries=0)(function)  # a job that fails (a worker killed) fails once, not four times
        pending = {}
        largest = self.node_memory() if needs is not None else math.inf
        for index, job in enumerate(jobs):
            need = needs[index] if needs is not None else 0.0
            if self.memory is not None and need > self.memory:
                yield index, Refused("needs about {}, more than the {} each Ray task may use (--max-memory)".format(
                    *memory_amounts(need, self.memory)))
            elif need > largest:
                yield index, Refused("needs about {}, more than the {} of memory any Ray node offers".format(
                    *memory_amounts(need, largest)))
            elif need > 0:
                pending[task.options(memory=math.ceil(need)).remote(job)] = index
            else:
                pending[task.remote(job)] = index
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            index = pending.pop(ready[0])
            try:
                outcome = ray.get(ready[0])
            except ray.exceptions.OutOfMemoryError:  # killed by its node's memory monitor: as a local MemoryError
                raise MemoryError(f"job {index} was killed by its Ray node's memory monitor") from None
            yield index, outcome


BUILD_SUFFIXES = (".py", ".yaml", ".csv")
"""The files of simulon's package its results depend on: its code, and the templates and tables it reads."""


def simulon_build() -> str:
    """simulon's version and a digest of its package's files (BUILD_SUFFIXES), which two installs share only where
    they compute the same numbers: the version alone stays the same between commits. A plain function, as Ray
    runs it on a node (RayExecutor.worker_builds); the digest is worked out once a process (package_digest)."""
    from . import __version__

    return f"{__version__}+{package_digest()}"


@cache
def package_digest() -> str:
    """The first 12 hex digits of a SHA-256 over simulon's package files (BUILD_SUFFIXES), by path (36 ms)."""
    root, digest = Path(__file__).parent, hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in BUILD_SUFFIXES and p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def check_builds(builds: dict[str, str | None]) -> None:
    """A ConfigError naming the Ray nodes (by address) whose workers import another simulon than this process
    (simulon_build; None: none they can run), since a job run there would give another answer or none: the workers
    import simulon, so every node needs the same one installed."""
    ours = simulon_build()
    other = {address: build for address, build in builds.items() if build != ours}
    if other:
        found = ", ".join(f"{address} ({build or 'none its workers can run'})" for address, build in sorted(
            other.items()))
        raise ConfigError(f"--executor ray: the Ray node{'s' if len(other) > 1 else ''} at {found} run"
                          f"{'' if len(other) > 1 else 's'} another simulon than this command's, {ours}; every node "
                          "needs the same simulon installed (see Ray's runtime environments)")


TOKEN_AUTH = ("; a cluster that requires Ray's token authentication tells a process without its token no more than "
              "that: to join it set RAY_AUTH_MODE=token and its token (RAY_AUTH_TOKEN, or the file "
              "RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token names)")
"""What a join that fails to connect adds where token authentication is not on: Ray turns it on for an address it
is given only under RAY_AUTH_MODE=token (ray 2.60, worker.py), and a cluster that requires a token then answers
every request with InvalidAuthToken, which reaches the caller only as 'Failed to connect to Ray cluster'."""


def auth_hint(exc: BaseException) -> str:
    """TOKEN_AUTH where a failure to join (`exc`) may be a cluster's token authentication that this process does not
    use (a ConnectionError without RAY_AUTH_MODE=token); else nothing."""
    on = os.environ.get("RAY_AUTH_MODE", "").lower() == "token"
    return TOKEN_AUTH if isinstance(exc, ConnectionError) and not on else ""


class NotFromMainThread(logging.Filter):
    """Drops ray.init's warning that it sets no SIGTERM handler off the main thread: the process keeps its own (the
    CLI's unwinds as an interrupt does, cli/errors.py), where ray.init on the main thread would replace it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


def within(seconds: float, call: Callable[[], Any]) -> Any:
    """`call()`'s result, or its exception, if it ends within `seconds`; else TimeoutError, `call` left running on a
    daemon thread that does not hold the process open."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = call()
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    quiet, ray_logger = NotFromMainThread(), logging.getLogger("ray._private.worker")
    ray_logger.addFilter(quiet)
    try:
        thread = threading.Thread(target=run, name="ray-join", daemon=True)
        thread.start()
        thread.join(seconds)
    finally:
        ray_logger.removeFilter(quiet)
    if thread.is_alive():
        raise TimeoutError(f"still running after {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")


@dataclass(frozen=True)
class Needs:
    """What a job run by `in_shares` returns when it was planned to need more memory than its share beside the jobs
    running with it, instead of running: the bytes it needs (at most the whole limit)."""

    bytes: float


def beyond_share(need: Callable[[], float], memory_limit: float | None, share: float | None) -> Needs | None:
    """What a job run by `in_shares` returns instead of running where it needs more than its `share` of
    `memory_limit` (`need()`, its bytes, asked only where the share is less than the limit); else None."""
    if share is None or memory_limit is None or share >= memory_limit:
        return None
    bytes_needed = need()
    return Needs(min(bytes_needed, memory_limit)) if bytes_needed > share else None


def in_shares(function: Callable[[Any], Any], jobs: list[tuple], workers: int | None, memory_limit: float | None,
              runner: Executor | None = None) -> Iterator[tuple[int, Any]]:
    """(index, result) of `function((*job, share))` for every job, in the order they finish. `share` is the bytes a job
    may take beside those running with it: None (the whole `memory_limit`) in this process (one worker or one job),
    `memory_limit` over the workers on a local pool of `workers` (None: every core). A job that returns Needs ran
    nothing: it runs again once the others are done with share None, on a pool that admits jobs as far as their
    needs add up to the limit (Admission). On `runner` (Ray, whose tasks share nodes it alone knows) every job is
    first sized (share 0: each comes back as Needs, unless it cannot run), then run asking for its need (by_needs:
    on Ray its `memory` resource), so that Ray starts on a node only the jobs whose needs fit there; `memory_limit`
    is then each job's, at most the runner's ceiling (task_limit). Each job is planned within the whole limit, so its
    result is the one it gives alone, however many ran beside it."""
    if runner is not None:
        needs: dict[int, float] = {}
        for index, outcome in runner.map_unordered(function, [(*job, 0.0) for job in jobs]):
            if isinstance(outcome, Needs):
                needs[index] = outcome.bytes
                continue
            yield index, outcome  # it cannot run, or there is no limit to size it against (it ran)
        yield from by_needs(runner, function, jobs, needs)
        return
    workers = local_workers(workers)
    if workers <= 1 or len(jobs) <= 1:
        for index, job in enumerate(jobs):
            yield index, function((*job, None))
        return
    at_once = min(workers, len(jobs))
    share = None if memory_limit is None else memory_limit / at_once
    later: dict[int, float] = {}
    for index, outcome in ProcessExecutor(workers, memory=math.inf).map_unordered(
            function, [(*job, share) for job in jobs]):
        if isinstance(outcome, Needs):
            later[index] = outcome.bytes
            continue
        yield index, outcome
    yield from by_needs(ProcessExecutor(workers, memory=memory_limit), function, jobs, later)


def by_needs(runner: Executor, function: Callable[[Any], Any], jobs: list[tuple],
             needs: dict[int, float]) -> Iterator[tuple[int, Any]]:
    """(index, result) of `function((*jobs[index], None))` for each job `needs` names, in the order they finish, run
    on `runner` admitted by its bytes (a job that can never have them comes back as Refused)."""
    order = sorted(needs)
    if not order:
        return
    for position, outcome in runner.map_unordered(function, [(*jobs[i], None) for i in order],
                                                  [needs[i] for i in order]):
        yield order[position], outcome


def task_limit(runner: Executor, memory_limit: float | None) -> float | None:
    """The bytes each of in_shares' jobs on `runner` may be planned within: `memory_limit` (None: no limit of its
    own), and no more than the runner's ceiling (on Ray the largest node's memory), so that a job planned within it
    can be admitted somewhere; None where neither limits it."""
    limit = min(runner.ceiling(), math.inf if memory_limit is None else memory_limit)
    return None if limit == math.inf else limit


def in_order_in_shares(function: Callable[[Any], Any], jobs: list[tuple], workers: int | None,
                       memory_limit: float | None, done: Callable[[int], None] = lambda count: None) -> list[Any]:
    """in_shares' results in the jobs' order, `done` told how many have finished as each does (a report that must
    not depend on the order they finish in: a validation's)."""
    results: dict[int, Any] = {}
    for index, outcome in in_shares(function, jobs, workers, memory_limit):
        results[index] = outcome
        done(len(results))
    return [results[index] for index in range(len(jobs))]


def executor(kind: str, workers: int | None = None, address: str | None = None,
             memory: float | None = None, workers_option: str = "--workers") -> Executor:
    """The executor a command names: `process` or `ray`; `memory`: the process pool's budget (ProcessExecutor), on
    Ray each task's (a job needing more is Refused, as the pool refuses one needing more than its budget).
    A Ray cluster's address with the local pool, or the pool's size (`workers_option`) with Ray, is refused: each
    is read by the other executor only."""
    if kind == "process":
        if address is not None:
            raise ConfigError("--ray-address: names a Ray cluster to join, which only --executor ray does")
        return ProcessExecutor(workers, memory)
    if kind == "ray":
        if workers is not None:
            raise ConfigError(f"{workers_option}: sizes the local process pool; --executor ray runs on the Ray "
                              "cluster's CPUs: leave it out")
        return RayExecutor(address, memory=memory)
    raise ConfigError(f"--executor: expected process or ray, got {kind!r}")
