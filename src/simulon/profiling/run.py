"""Profile a sweep: for each point, time every planned kernel not yet in the file and save the file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .plan import SweepPoint, plan
from .store import ProfileFile


@dataclass
class PointResult:
    timed: int = 0
    skipped: int = 0
    out_of_memory: int = 0
    unsupported: int = 0


def profile_point(point: SweepPoint, store: ProfileFile, device: str, repetitions: int, warmup: int
                  ) -> PointResult:
    """Time one sweep point's kernels into `store` (saved afterwards, so an interrupted sweep resumes)."""
    import torch

    from .recipes import Unsupported, build
    from .timing import time_ms

    kernels, planned = plan(point)
    result = PointResult()
    for item in planned:
        if store.has(item.spec.name, item.params):
            result.skipped += 1
            continue
        try:
            run: Callable[[], object] = build(item.spec, point, kernels, device)
            times = time_ms(run, repetitions, warmup, device)
        except Unsupported:
            result.unsupported += 1
            continue
        except (torch.cuda.OutOfMemoryError, MemoryError):
            _release(device)
            store.add(item.spec.name, item.params, None)
            result.out_of_memory += 1
            continue
        except RuntimeError as exc:  # torch cannot run this stand-in here (a backend refusing a shape, say)
            print(f"  {item.spec.name} {item.spec.phase.name}: not timed, torch says: {str(exc).splitlines()[0]}")
            result.unsupported += 1
            continue
        finally:
            run = None  # type: ignore[assignment]  # free this kernel's tensors before the next
        store.add(item.spec.name, item.params, times, warmup + repetitions)
        result.timed += 1
    store.save()
    return result


def _release(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.empty_cache()
