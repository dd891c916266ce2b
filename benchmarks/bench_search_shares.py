"""How evenly a search's space is dealt to its workers (search.space.Space.shares): every (tp, pp, vpp) block with
strategies is estimated alone, in a fresh search (cold caches, as a worker's first part starts; its later parts
reuse that search, search.run.part_search, so the finishing times below are upper bounds), and its time recorded;
then, for several worker counts (ESTIMATE_PARTS_PER_WORKER parts each, taken in turn by the first free worker), the
time the last worker finishes is worked out from those block times, for the shares dealt by Space.work's weight, by
the strategies alone, and every parts-th as before; with the ideal, the blocks' total over the workers. A block
takes its time whatever machine runs it beside it, so the worker counts this machine lacks are priced from it.

    uv run python benchmarks/bench_search_shares.py [--case deepseek-v3|llama3-70b]

(cases of benchmarks/bench_search.py; DeepSeek-V3's 20 blocks take about 8 minutes on one core).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_search import CASES

from simulon.search.run import ESTIMATE_PARTS_PER_WORKER, Search, load_search_scenario
from simulon.search.space import deal


def finish(part_times: list[float], workers: int) -> float:
    """When the last of `workers` finishes, each taking the next part when free."""
    free = [0.0] * workers
    for t in part_times:
        free[free.index(min(free))] += t
    return max(free)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), default="deepseek-v3")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "case.yaml"
        path.write_text(CASES[args.case])
        sc, num_gpus = load_search_scenario(path)
    space = Search(sc, num_gpus).space
    passing = [count for _, count in space.passing()]
    work = space.work()
    seconds = [0.0] * len(passing)
    for position, count in enumerate(passing):
        if count:
            started = time.perf_counter()
            Search(sc, num_gpus).estimate_blocks((position,))
            seconds[position] = time.perf_counter() - started
            print(f"block {position}: {count:,} strategies, {seconds[position]:.1f} s", flush=True)
    total = sum(seconds)
    print(f"{sum(1 for c in passing if c)} blocks with strategies of {len(passing)}, {total:.1f} s in all")
    for workers in (2, 4, 8, 16):
        parts = ESTIMATE_PARTS_PER_WORKER * workers
        ways = {"Space.work": deal(work, parts), "strategies alone": deal(passing, parts),
                "every parts-th": [[p for p in range(len(passing)) if p % parts == part] for part in range(parts)]}
        times = {name: finish([sum(seconds[p] for p in share) for share in shares], workers)
                 for name, shares in ways.items()}
        print(f"{workers:2d} workers: " + ", ".join(f"{name} {t:.1f} s" for name, t in times.items())
              + f"; ideal {total / workers:.1f} s, largest block {max(seconds):.1f} s")


if __name__ == "__main__":
    main()
