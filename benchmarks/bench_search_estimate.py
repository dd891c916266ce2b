"""How long a search's enumerate-prune-estimate phase takes in one process, in wall and CPU seconds (CPU time is
what to compare on a shared machine), and what it finds: the counts and the winner, to check that a faster
phase gives the same answer. The cases are bench_search.py's; `--fix` restricts the space as `simulon search
--fix` does, for a slice of it.

    uv run python benchmarks/bench_search_estimate.py [--case llama3-70b|deepseek-v3] [--fix NAME=V1,V2 ...]
        [--repeat 1] [--profile 30]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import tempfile
import time
from pathlib import Path

from bench_search import CASES

from simulon.cli.search import limits_from
from simulon.search.run import Search, load_search_scenario


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), default="llama3-70b")
    parser.add_argument("--fix", action="append", default=[], help="NAME=V1,V2 (as simulon search --fix)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--profile", type=int, default=0, help="print this many functions by cumulative time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{args.case}.yaml"
        path.write_text(CASES[args.case])
        sc, asked = load_search_scenario(path)
    cpus = []
    for _ in range(args.repeat):
        search = Search(sc, asked, limits_from({}, args.fix))
        profile = cProfile.Profile() if args.profile else None
        wall, cpu = time.perf_counter(), time.process_time()
        if profile:
            profile.enable()
        phase = search.estimated(workers=1)
        if profile:
            profile.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        cpus.append(cpu)
        best = phase.candidates[0] if phase.candidates else None
        print(f"{wall:6.1f} s wall, {cpu:6.1f} s CPU: {phase.enumerated:,} enumerated, "
              f"{sum(phase.pruned.values()):,} pruned, {sum(phase.infeasible.values()):,} infeasible, "
              f"{len(phase.candidates):,} estimated; best "
              f"{'none' if best is None else f'{1e3 * best[0].iteration_s:,.3f} ms {best[1]}'}")
        if profile:
            pstats.Stats(profile).sort_stats("cumulative").print_stats(args.profile)
    print(f"median {statistics.median(cpus):.1f} s CPU over {args.repeat} runs")


if __name__ == "__main__":
    main()
