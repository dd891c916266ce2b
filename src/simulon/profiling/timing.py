"""Timing a kernel: warm-up, then one measurement per repetition (a pair of CUDA events around each run, all queued
before the host waits, on a GPU; the wall clock on the CPU), then outliers dropped with Tukey's fences."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

TUKEY_FENCE = 1.5
"""Tukey's rule: a time more than 1.5 interquartile ranges outside the quartiles is an outlier."""


def without_outliers(times: list[float]) -> list[float]:
    """The times inside Tukey's fences (all of them when there are too few to have quartiles)."""
    if len(times) < 4:
        return list(times)
    q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
    low, high = q1 - TUKEY_FENCE * (q3 - q1), q3 + TUKEY_FENCE * (q3 - q1)
    return [t for t in times if low <= t <= high]


def time_ms(run: Callable[[], object], repetitions: int, warmup: int, device: str) -> list[float]:
    """Milliseconds of each of `repetitions` calls after `warmup` untimed ones, outliers dropped."""
    import torch

    for _ in range(warmup):
        run()
    times = []
    if device == "cuda":  # the host queues every run before waiting, so a short kernel is not timed waiting for
        torch.cuda.synchronize()  # its own launch (it still is where the host launches slower than the GPU runs)
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(repetitions)]
        for start, end in events:
            start.record()
            run()
            end.record()
        torch.cuda.synchronize()
        times = [float(start.elapsed_time(end)) for start, end in events]
    else:
        for _ in range(repetitions):
            began = time.perf_counter()
            run()
            times.append((time.perf_counter() - began) * 1e3)
    return without_outliers(times)


def queued_ms(run: Callable[[], object], count: int) -> float:
    """Milliseconds of `count` calls queued back to back between two CUDA events (the host waits once, at the end)."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(count):
        run()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end))


def first_and_settled(times: list[float]) -> tuple[float, float]:
    """The median of a long loop's first tenth of timings (before the power limit bites) and of its last third
    (settled)."""
    return (statistics.median(times[: max(len(times) // 10, 1)]),
            statistics.median(times[-max(len(times) // 3, 1):]))
