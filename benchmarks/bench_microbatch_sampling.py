"""Micro-batch sampling against the full replay: the step time extrapolated from two small micro-batch counts
(src/simulon/sampling.py) over the step replayed whole, and the wall time and peak memory of both.

    uv run python benchmarks/bench_microbatch_sampling.py [--only seed-64,moe-96,...]

Scenarios whose full replay is affordable on a laptop:
* `seed-64`: the seed example (Llama-2 7B, tp2 pp2, 1F1B) at 64 micro-batches.
* `moe-96`: examples/moe_96gpu.yaml (pp6, 10 micro-batches, MoE all-to-alls, data-parallel reductions): too few
  micro-batches to sample (6 and 12 are not fewer), so both runs replay all; `moe-96-40`: the same at 40.
* `moe-96-interleaved`: the same with vpp 2 over 36 micro-batches (interleaved 1F1B).
* `gpt3-1024`: examples/gpt3_175b_1024gpu.yaml (tp8 pp8 dp16, 96 micro-batches).
* `seed-zb-h1`, `seed-zb-v`, `seed-dualpipe`, `seed-dualpipev`: the seed example at 64 micro-batches on pp 2 under
  the zero-bubble and DualPipe schedules (on pp 2 their steady state starts early; still a check of their counts).

Each run is a fresh `simulon simulate --json` process, timed with wait4 for its peak RSS. The machine is shared (2
cores, other jobs running): compare the walls within one run.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

CLI = "from simulon.cli.app import main; main()"
ROOT = Path(__file__).resolve().parents[1]


def _example(name: str) -> dict:
    return yaml.safe_load((ROOT / "examples" / name).read_text())


def _with(base: dict, parallelism: dict, batch: int) -> dict:
    data = copy.deepcopy(base)
    data["workload"]["parallelism"].update(parallelism)
    data["workload"]["training"]["global_batch_size"] = batch
    return data


def scenarios() -> dict[str, dict]:
    seed, moe = _example("scenario.yaml"), _example("moe_96gpu.yaml")  # seed: dp 1; moe: dp 4
    return {
        "seed-64": _with(seed, {"num_microbatches": 64}, 64),
        "moe-96": moe,
        "moe-96-40": _with(moe, {"num_microbatches": 40}, 160),
        "moe-96-interleaved": _with(moe, {"vpp": 2, "num_microbatches": 36}, 144),
        "gpt3-1024": _example("gpt3_175b_1024gpu.yaml"),
        "seed-zb-h1": _with(seed, {"num_microbatches": 64, "pipeline_schedule": "zb_h1"}, 64),
        "seed-zb-v": _with(seed, {"num_microbatches": 64, "pipeline_schedule": "zb_v", "vpp": 2}, 64),
        "seed-dualpipe": _with(seed, {"num_microbatches": 64, "pipeline_schedule": "dualpipe"}, 64),
        "seed-dualpipev": _with(seed, {"num_microbatches": 64, "pipeline_schedule": "dualpipev", "vpp": 2}, 64),
    }


def run(path: Path, mode: str) -> tuple[dict, float, float]:
    """(the --json summary, wall seconds, peak RSS MiB) of one `simulon simulate` process."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-c", CLI, "simulate", str(path), "--json", "--max-memory", "none",
                                 "--micro-batches", mode], stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise RuntimeError(f"{path.name} --micro-batches {mode}: {err.read().strip()[-500:]}")
        out.seek(0)
        return json.loads(out.read()), wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(scenarios()))
    args = parser.parse_args()
    table = scenarios()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only.split(","):
            path = Path(tmp) / f"{name}.yaml"
            path.write_text(yaml.safe_dump(table[name]))
            full, full_wall, full_rss = run(path, "all")
            sampled, wall, rss = run(path, "sample")
            info = sampled.get("micro_batch_sampling")
            how = (f"{info['simulated'][0]} and {info['simulated'][1]} of {info['micro_batches']}" if info
                   else "not sampled (too few micro-batches)")
            ratio = sampled["iteration_time_ms"] / full["iteration_time_ms"]
            print(f"{name}: micro-batches {how}; step {sampled['iteration_time_ms']:,.2f} ms sampled / "
                  f"{full['iteration_time_ms']:,.2f} ms full = {ratio:.5f} ({100 * (ratio - 1):+.3f}%); MFU "
                  f"{100 * sampled['mfu']:.2f}% / {100 * full['mfu']:.2f}%; wall {wall:.1f} s / {full_wall:.1f} s; "
                  f"peak RSS {rss:,.0f} MiB / {full_rss:,.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
