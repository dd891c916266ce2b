"""Seconds of one simulation pass of scripts/calibrate_collectives.py over each family's rows, and of its setup.

    uv run python benchmarks/bench_calibrate_collectives.py [--runs 3] [--family hopper]

A family's fit simulates its rows once per parameter and up to three times more in each of its OUTER rounds, after
one pass at the start; the setup (reading the table into cases and sorting them into families) is paid once a run.
Printed per family: rows, parameters, the median over `--runs` passes of the pass's CPU and wall seconds, and the
full refit they imply: the setup, then 1 + OUTER x (parameters + 3) passes at the median wall time (an upper bound on
the passes, as a round whose first trial step lowers the loss runs one trial pass, not three; the minimiser's own
time on the linear model, under a second a round, left out).
The machine may be shared, so compare medians taken together, CPU seconds above all.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import statistics
import time
from pathlib import Path

from simulon.network.calibration import shipped_table
from simulon.validate.report import read_table

ROOT = Path(__file__).resolve().parents[1]
CSV = ROOT.parent / "shared/validation/collectives.csv"


def calibrate_script():
    """scripts/calibrate_collectives.py as a module."""
    spec = importlib.util.spec_from_file_location("calibrate_collectives", ROOT / "scripts/calibrate_collectives.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu_seconds() -> float:
    """CPU seconds of this process."""
    return time.process_time()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=CSV)
    parser.add_argument("--runs", type=int, default=3, help="passes timed per family (the median is printed)")
    parser.add_argument("--family", action="append", help="time only this GPU or NIC family (repeatable)")
    args = parser.parse_args()
    calibrate = calibrate_script()
    calibrate.use_compiled_replay()  # as the script's main does (SIMULON_REPLAY=python: the Python loop)
    cpu, wall = cpu_seconds(), time.perf_counter()
    cases = calibrate.fit_cases(read_table(args.csv))
    table = copy.deepcopy(shipped_table())
    fits = list(calibrate.family_fits(cases, table, lambda family: args.family is None or family in args.family))
    setup = time.perf_counter() - wall
    print(f"setup (cases and families): {cpu_seconds() - cpu:.2f} s CPU, {setup:.2f} s wall")
    for label, params, data in fits:
        cpus, walls = [], []
        for _ in range(args.runs):
            cpu, wall = cpu_seconds(), time.perf_counter()
            data.simulate(table)
            walls.append(time.perf_counter() - wall)
            cpus.append(cpu_seconds() - cpu)
        passes = 1 + calibrate.OUTER * (len(params) + 3)
        refit = setup + passes * statistics.median(walls)
        print(f"{label}: {len(data.measured)} rows, {len(params)} parameters: one pass "
              f"{statistics.median(cpus):.2f} s CPU, {statistics.median(walls):.2f} s wall (median of {args.runs}); "
              f"refit <= {passes} passes, about {refit / 60:.1f} min")


if __name__ == "__main__":
    main()
