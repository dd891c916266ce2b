"""A transformer layer's kernels run back to back for seconds on the local GPU, against the same kernels each timed
alone: the clock a training step's mix of GEMMs, attention and memory-bound kernels settles at, where
`gpu_sustained_gemm.py` reads it for one GEMM alone (the calibration's `sustained_clock`, which the simulator
applies to a training step's tensor-core work). Needs torch and a CUDA GPU.

    python3 benchmarks/gpu_layer_loop.py [--table T] [--seconds 12] [--batch-size B] -o OUT.json ROW ...

For each training-table row (an index, as `simulon validate training --json` numbers them) the layer is the row's
(`validate.training.scenario_from_row`): its forward kernels in the planner's order, then its backward ones in
reverse, each the profiler's stand-in (`profiling.recipes`). Each kernel is first timed alone as `simulon profile
gpu` times it (`profiling.timing.time_ms`: a short queued loop, near the burst clock); then the whole layer, and its
GEMMs alone, each loop back to back for `--seconds`, timed in batches. Prints and writes (OUT.json) each kernel's
time alone, and each loop's first-tenth and settled (last third) time per layer against the sum of its kernels'
times alone. `layer_loop_compare.py` sets them against the calibrated model.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_sustained_gemm import need_gpu
from profile_table_rows import TABLE, sweep_points

from simulon.compute.analytical import GEMM_CLASSES
from simulon.compute.profile import REPETITIONS, WARMUP
from simulon.profiling.plan import plan
from simulon.profiling.timing import first_and_settled, queued_ms, time_ms
from simulon.validate.report import read_table
from simulon.validate.training import scenario_from_row, with_source_layouts
from simulon.workload.kernels import Phase

OUTSIDE_LAYER = {"embedding", "final_norm", "lm_head", "loss", "grad_zero", "grad_check", "grad_check_scale",
                 "optimizer"}


def loop(runs: list, seconds: float) -> list[float]:
    """Milliseconds per pass over `runs`, in batches of passes of about 50 ms, for `seconds`."""
    import torch

    def one_pass() -> None:
        for run in runs:
            run()

    one_pass()
    torch.cuda.synchronize()
    began = time.perf_counter()
    one_pass()
    torch.cuda.synchronize()
    passes = max(1, round(0.05 / max(time.perf_counter() - began, 1e-6)))
    per_pass, began = [], time.perf_counter()
    while time.perf_counter() - began < seconds:
        per_pass.append(queued_ms(one_pass, passes) / passes)
    return per_pass


def summary(per_pass: list[float], alone: float) -> dict[str, float]:
    first, settled = first_and_settled(per_pass)
    return {"alone_sum_ms": alone, "first_ms": first, "settled_ms": settled, "batches": len(per_pass)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="+", type=int)
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--table", type=Path, default=TABLE)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--batch-size", type=int, help="micro-batch size in place of the row's")
    args = parser.parse_args()
    need_gpu()
    from simulon.profiling.recipes import build  # imports torch

    rows = with_source_layouts(read_table(str(args.table)))
    report = []
    for i in args.rows:
        point = sweep_points(scenario_from_row(rows[i]), [args.batch_size] if args.batch_size else None)[0]
        kernels, planned = plan(point)
        layer = [item for item in planned if item.spec.name not in OUTSIDE_LAYER]
        order = ([item for item in layer if item.spec.phase == Phase.fwd]
                 + [item for item in reversed(layer) if item.spec.phase != Phase.fwd])
        runs, entries = [], []
        for item in order:
            run = build(item.spec, point, kernels, "cuda")
            median = statistics.median(time_ms(run, REPETITIONS, WARMUP, "cuda"))
            runs.append(run)
            entries.append({"kernel": item.spec.name, "params": item.params, "alone_ms": median,
                            "gemm": item.spec.kclass in GEMM_CLASSES})
        result = {"row": i, "model": rows[i]["model"], "point": point.describe(), "kernels": entries}
        for name, only_gemms in (("layer", False), ("gemms", True)):
            chosen = [k for k, e in enumerate(entries) if e["gemm"] or not only_gemms]
            alone = sum(entries[k]["alone_ms"] for k in chosen)
            result[name] = summary(loop([runs[k] for k in chosen], args.seconds), alone)
            s = result[name]
            print(f"row {i} {rows[i]['model']} {name}: alone {alone:.3f} ms, looped first {s['first_ms']:.3f} "
                  f"({s['first_ms'] / alone:.3f}), settled {s['settled_ms']:.3f} ({s['settled_ms'] / alone:.3f}) "
                  f"ms per pass over {s['batches']} batches", flush=True)
        report.append(result)
        args.output.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
