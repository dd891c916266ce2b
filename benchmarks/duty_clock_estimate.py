"""What a clock that follows the GPU's duty cycle would do to training rows, to first order: the question the lent
H200's duty-cycle runs (`gpu_duty_cycle.py`) raise and the simulator does not yet model.

    uv run python benchmarks/duty_clock_estimate.py [ROW ...]

First, from each committed duty-cycle run that recorded its loop's wall time, how much of a GEMM block's throttling
each millisecond of gap takes back: (the block's settled time back to back - its settled time with the gap) / the
gap, for every gap of 0.1 ms and more after which the block is still throttled (slower than the fastest block of
that run's gaps of its kind by 2% or more: an idle GPU wakes slowly), the median per kind of gap (idle, copying).
Then each row (an index into the training table, as `simulon validate training --json` numbers them; default
Megatron-Core's weak-scaling rows) simulated as the validation does, its first simulated GPU's step split into
compute-bound, memory-bound and idle time (`analysis.exposure`: exposed communication and bubble), and its step less
the throttling that gap time would take back: min(compute-bound x (1 - sustained_clock), memory-bound x copy rate +
idle x idle rate), against what the row measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from simulon.analysis.exposure import exposure
from simulon.compute.calibration import Calibrations
from simulon.validate.report import read_table
from simulon.validate.training import measured_iteration, scenario_from_row, simulate_row, with_source_layouts

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "benchmarks/device_runs/2026-11-30-h200"
TABLE = ROOT.parent / "shared/validation/training.csv"
WEAK_SCALING = list(range(10, 19))


def takeback_rates(paths: list[Path]) -> dict[str, float]:
    """Milliseconds of throttling each millisecond of gap takes back, by kind of gap (idle, copy), over the runs."""
    rates: dict[str, list[float]] = {"idle": [], "copy": []}
    for path in paths:
        runs = json.loads(path.read_text())["runs"]
        back_to_back = next(r["settled_ms"] for r in runs if r["duty"] == 1.0)
        for r in runs:
            gap = r["wall_ms"] - r["settled_ms"]
            fastest = min(other["settled_ms"] for other in runs if other["filler"] == r["filler"])
            if r["duty"] < 1.0 and gap > 0.1 and r["settled_ms"] > 1.02 * fastest:
                rates[r["filler"]].append((back_to_back - r["settled_ms"]) / gap)
                print(f"{path.name}: {r['filler']} gap {gap:.3f} ms a block, takes back "
                      f"{rates[r['filler']][-1]:.2f} ms a ms")
    return {kind: statistics.median(values) for kind, values in rates.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="*", type=int)
    parser.add_argument("--table", type=Path, default=TABLE)
    args = parser.parse_args()
    rate = takeback_rates([RUNS / "duty_cycle-2.json", RUNS / "duty_cycle_fp8.json"])
    print(f"median: idle {rate['idle']:.2f}, copying {rate['copy']:.2f} ms of throttling taken back a ms of gap")
    rows = with_source_layouts(read_table(str(args.table)))
    cal = Calibrations.shipped()
    print(f"{'row':>4} {'model':12s} {'clock':>5} {'step ms':>8} {'compute':>8} {'memory':>7} {'idle':>7}"
          f" {'measured':>8} {'error':>7} {'duty clock':>10}")
    for i in args.rows or WEAK_SCALING:
        sc = scenario_from_row(rows[i])
        sim = simulate_row(sc)
        gpu, dtype = sc.datacenter.node.gpu, sc.workload.training.dtype
        sustained = cal.gemm(gpu, dtype)[0].sustained_clock
        split = exposure(sim.dag, sim.timeline, gpu.peak_flops(dtype) / gpu.memory_bandwidth)[0]
        idle = sum(split.exposed_ms.values()) + split.bubble_ms
        taken = min(split.compute_bound_ms * (1 - sustained),
                    split.memory_bound_ms * rate["copy"] + idle * rate["idle"])
        step, measured = sim.result.iteration_time_ms, measured_iteration(rows[i], sim, sc)[1] * 1e3
        print(f"{i:4d} {rows[i]['model'][:12]:12s} {sustained:5.3f} {step:8.1f} {split.compute_bound_ms:8.1f}"
              f" {split.memory_bound_ms:7.1f} {idle:7.1f} {measured:8.1f} {step / measured - 1:+7.1%}"
              f" {(step - taken) / measured - 1:+10.1%}", flush=True)


if __name__ == "__main__":
    main()
