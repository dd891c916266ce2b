"""Fit the caching allocator's overhead: reserved = allocated + overhead x (short-lived blocks at the peak).

    uv run python scripts/fit_memory_allocator.py [--csv memory.csv] [--write]

For every row of the memory table that measured both torch.cuda.max_memory_allocated and
max_memory_reserved (mem_kind allocated with "reserved=... GiB" in its notes), the measured excess
(reserved - allocated) is divided by the transient bytes the memory model predicts at the measured stage's
peak (a layer's forward or backward transient, or the optimizer step's). The overhead is the median of those
ratios; the leave-one-out error of the reserved figure (measured allocated + the overhead fitted without the
row x its predicted transient bytes) is printed beside it.
`--write` stores the median in src/simulon/memory/data/allocator.yaml, which memory/runtime.py reads.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import yaml

from simulon.config.units import GiB
from simulon.memory import estimate_memory
from simulon.validate.memory import Unsupported, measurements, scenario_from_row, stages_measured
from simulon.validate.report import read_table, shipped_table

OUT = Path(__file__).resolve().parents[1] / "src/simulon/memory/data/allocator.yaml"


def ratios(rows: list[dict[str, str]]) -> list[tuple[int, float, float, float]]:
    """(row, measured allocated GiB, measured reserved GiB, predicted transient GiB) of every row with both."""
    found = []
    for index, row in enumerate(rows):
        try:
            measured = dict(measurements(row))
            if "allocated" not in measured or "reserved" not in measured:
                continue
            report = estimate_memory(scenario_from_row(row))
        except Unsupported:
            continue
        stage = max(stages_measured(report, row), key=lambda s: s.allocated)
        found.append((index, measured["allocated"], measured["reserved"], stage.transient / GiB))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", default=str(shipped_table("memory")))
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    found = ratios(read_table(args.csv))
    overheads = [(reserved - allocated) / transient for _, allocated, reserved, transient in found]
    overhead = statistics.median(overheads)
    errors = []
    for k, (index, allocated, reserved, transient) in enumerate(found):
        left_out = statistics.median(overheads[:k] + overheads[k + 1:])
        predicted = allocated + left_out * transient
        errors.append(abs(predicted - reserved) / reserved * 100)
        print(f"row {index:3d}: allocated {allocated:7.2f} reserved {reserved:7.2f} GiB, "
              f"transient {transient:6.2f} GiB, overhead {overheads[k]:.3f}, "
              f"leave-one-out reserved error {errors[-1]:.2f}%")
    print(f"{len(found)} rows: overhead median {overhead:.4f} (min {min(overheads):.3f}, max {max(overheads):.3f}); "
          f"leave-one-out reserved MAPE {statistics.fmean(errors):.2f}%, worst {max(errors):.2f}%")
    if args.write:
        OUT.write_text(
            "# PyTorch caching allocator: reserved = allocated + overhead x (short-lived blocks at the peak).\n"
            "# Written by: uv run python scripts/fit_memory_allocator.py --write (median over the memory table's\n"
            f"# rows with both figures: {len(found)} SimuMax B200 runs, Megatron-Core + TE).\n"
            + yaml.safe_dump({"overhead": round(overhead, 4),
                              "source": f"median of {len(found)} rows of memory.csv with allocated and reserved"},
                             sort_keys=False))
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
