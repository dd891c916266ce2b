"""How long `simulon sweep` takes on the issue's benchmark: GPT-3 175B (examples/gpt3_175b_1024gpu.yaml) from 16 to
1,024 A100s on a rail-optimized fat-tree, weak scaling (1.5 sequences per GPU: the example's batch of 1,536 at
1,024 GPUs), tp 8 and pp 2, 4, then 8 (the largest pipeline the GPU count allows, as in the example). The fabric is
the one the DGX A100 template builds for each size, its SuperPOD's rail-optimized leaves of 20 NICs on 40-port HDR
switches: two tiers up to 800 GPUs, three at 1,024 (`simulon topology` shows it).

    uv run python benchmarks/bench_sweep.py [--jobs 2] [--plots DIR]

Runs the sweep in a fresh process into an empty CSV and prints its wall time, every point and the scaling study;
then runs it again on the finished CSV (every row kept, nothing re-run) and prints that wall time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "gpt3_175b_1024gpu.yaml"
POINTS = "2:2:24,4:4:48,8:8:96,16:8:192,32:8:384,64:8:768,128:8:1536"
"""nodes (8 GPUs each) : pipeline stages : global batch."""
SWEPT = "cluster.num_nodes+parallelism.pp+training.global_batch_size"


def base_scenario() -> dict:
    """The example with dp left to follow from the GPU count, on the fabric its template picks for each size."""
    data = yaml.safe_load(EXAMPLE.read_text())
    del data["workload"]["parallelism"]["dp"]  # derived from the GPU count
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--plots", type=Path, default=None)
    args = parser.parse_args()
    data = base_scenario()
    with tempfile.TemporaryDirectory() as folder:
        scenario, csv = Path(folder) / "gpt3.yaml", Path(folder) / "sweep.csv"
        scenario.write_text(yaml.safe_dump(data))
        command = [sys.executable, "-c", "from simulon.cli.app import main; main()", "sweep", str(scenario),
                   "--set", f"{SWEPT}={POINTS}",
                   "-o", str(csv), "--jobs", str(args.jobs), "--json",
                   *(["--plots", str(args.plots)] if args.plots else [])]
        for run in ("first run", "resumed"):
            start = time.perf_counter()
            out = subprocess.run(command, check=True, capture_output=True, text=True)
            wall = time.perf_counter() - start
            result = json.loads(out.stdout)
            print(f"{run}: {wall:.1f} s wall, {len(result['rows'])} points, {result['kept']} kept from the CSV")
            if run == "first run":
                for row in result["rows"]:
                    print(describe(row))
                for series in result["scaling"]:
                    print(f"  {series['kind']} scaling, efficiency "
                          + ", ".join(f"{g}: {100 * e:.0f}%" for g, e in zip(series["gpus"], series["efficiency"],
                                                                          strict=True))
                          + f"; {series['worst']}")


def describe(row: dict[str, str]) -> str:
    ms = {k: float(row[k]) for k in ("step_ms", "bubble_ms", "exposed_dp_comm_ms", "exposed_pp_comm_ms")}
    return (f"  {int(row['num_gpus']):5,} GPUs: step {ms['step_ms']:8,.0f} ms, {float(row['tokens_per_s']):9,.0f} "
            f"tokens/s, MFU {100 * float(row['mfu']):.1f}%, bubble {ms['bubble_ms']:6,.0f} ms, exposed dp "
            f"{ms['exposed_dp_comm_ms']:5,.0f} ms, exposed pp {ms['exposed_pp_comm_ms']:5,.0f} ms, peak memory "
            f"{float(row['peak_memory_gib']):.1f} GiB")

if __name__ == "__main__":
    main()
