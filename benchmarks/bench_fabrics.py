"""Whole training steps on the fabrics the systems are built with: wall time, peak memory, the prediction, and the
replay's speed in DAG nodes per second.

    uv run python benchmarks/bench_fabrics.py [--runs 3] [--only llama405b-16384,deepseek-v3-2048,...]

* `llama405b-16384`: Llama 3 405B on 16,384 H100, tp8 pp16 dp128 with the paper's uneven first and last stages
  (examples/llama3_405b_16384gpu.yaml) on the fabric dgx-h100 picks for that size: the DGX SuperPOD's three tiers
  (templates/topology/dgx-superpod-ndr-3-tier.yaml). The Llama 3 paper (Dubey et al. 2024, Table 4) measured
  about 400 TFLOP/s per GPU there.
* `deepseek-v3-2048`: DeepSeek-V3 671B on 2,048 H800 (hgx-h800: rail-optimized two tiers), pp16 ep64 as its
  paper (arXiv 2412.19437, section 3.2), its batch of 15,360 x 4,096 tokens, one-forward-one-backward schedule,
  its expert dispatch (DeepEP's, node-limited to 4 of 8 nodes: `moe_dispatcher: deepep`); `simulate`'s default
  `--micro-batches auto` replays 16 and 32 of its 120 micro-batches and extrapolates (sampling.py).
* `gpt3-1024-rail`, `gpt3-1024-rail-4:1`: GPT-3 175B on 1,024 A100, tp8 pp8 dp16 (examples/gpt3_175b_1024gpu.yaml)
  on a two-tier rail-optimized fat-tree (templates/topology/rail-optimized-fat-tree.yaml), non-blocking and with
  its leaves 4:1 oversubscribed.

Each run is a fresh process (imports included) timed with wait4 for its peak RSS; medians over --runs. Then one
in-process run gives the stages' times, the DAG's size and the replay's nodes per second. The machine these were
measured on is shared (2 cores, other jobs running): compare figures within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

CLI = "from simulon.cli.app import main; main()"
ROOT = Path(__file__).resolve().parents[1]
GPT3 = yaml.safe_load((ROOT / "examples/gpt3_175b_1024gpu.yaml").read_text())
DEEPSEEK = """\
datacenter:
  from: hgx-h800
  cluster: {num_nodes: 256}
workload:
  framework: megatron
  model: {from: deepseek-v3}
  parallelism: {tp: 1, pp: 16, ep: 64}
  training: {global_batch_size: 15360, micro_batch_size: 1, sequence_length: 4096, dtype: bf16, moe_dispatcher: deepep}
"""
TARGETS = {"llama405b-16384": (60, 4), "deepseek-v3-2048": (60, 4), "gpt3-1024-rail": (20, 2),
           "gpt3-1024-rail-4:1": (20, 2)}


def _gpt3_on(topology: dict | str) -> str:
    data = json.loads(json.dumps(GPT3))
    data["datacenter"]["network"] = {"scale_out": {"topology": topology}}
    return yaml.safe_dump(data)


def scenarios() -> dict[str, str]:
    return {
        "llama405b-16384": (ROOT / "examples/llama3_405b_16384gpu.yaml").read_text(),
        "deepseek-v3-2048": DEEPSEEK,
        "gpt3-1024-rail": _gpt3_on("rail-optimized-fat-tree"),
        "gpt3-1024-rail-4:1": _gpt3_on({"from": "rail-optimized-fat-tree", "oversubscription": 4.0}),
    }


def run_process(args: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS MiB) of one child process (on a shared machine the CPU time is the
    steadier figure)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-c", CLI, *args], stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            lines = err.read().strip().splitlines()
            raise Refused(lines[-1] if lines else f"exit {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


class Refused(Exception):
    """A run that exited with an error (the memory guard's refusal, say): its last line of output."""


def in_process(path: Path) -> dict:
    """One run's stages, timed in this process, with the prediction and the DAG's size."""
    from simulon.compute.calibration import Calibrations
    from simulon.compute.populate import populate
    from simulon.config.loading import load_scenario
    from simulon.engine.replay import replay
    from simulon.pipeline import TRAINING_RESHARE_WINDOW_S, build_dag, plan_dag, simulate
    from simulon.sampling import SAMPLE_ABOVE_NODES, chosen_counts, with_microbatches

    sc = load_scenario(path)
    counts = chosen_counts(sc, "auto")
    staged = sc  # a step `simulate` samples is staged at its larger count, the largest DAG it builds
    if counts is not None and plan_dag(sc).size().nodes > SAMPLE_ABOVE_NODES:
        staged = with_microbatches(sc, counts[1])
    t = time.perf_counter()
    dag, topology, fold = build_dag(staged)
    built = time.perf_counter() - t
    populate(dag, sc.datacenter.node.gpu, sc.workload.training.dtype)
    t = time.perf_counter()
    replay(dag, topology, fold, Calibrations.shipped().sm_count(sc.datacenter.node.gpu), TRAINING_RESHARE_WINDOW_S)
    replayed = time.perf_counter() - t
    nodes = dag.num_nodes
    del dag
    result = simulate(sc, micro_batches="auto").result
    return {"fabric": topology.fabric.spec.label, "nodes": nodes,
            "simulated_gpus": int((fold.multiplicity > 0).sum()), "build_s": built, "replay_s": replayed,
            "nodes_per_s": nodes / replayed, "iteration_ms": result.iteration_time_ms,
            "tflops_per_gpu": result.tflops_per_gpu, "sampled": None if staged is sc else list(counts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default=",".join(TARGETS))
    parser.add_argument("--in-process", type=Path, help=argparse.SUPPRESS)  # one scenario's stages, as JSON
    args = parser.parse_args()
    if args.in_process:
        print(json.dumps(in_process(args.in_process)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only.split(","):
            path = Path(tmp) / f"{name.replace(':', '_')}.yaml"
            path.write_text(scenarios()[name])
            try:
                walls, cpus, rss = zip(*(run_process(["simulate", str(path)]) for _ in range(args.runs)), strict=True)
            except Refused as refusal:
                print(f"{name}: not run: {refusal}", flush=True)
                continue
            wall_target, rss_target = TARGETS[name]
            detail = json.loads(subprocess.run([sys.executable, __file__, "--in-process", str(path)], check=True,
                                               capture_output=True, text=True).stdout)
            print(f"{name}: median {statistics.median(walls):.1f} s wall (min {min(walls):.1f}, max "
                  f"{max(walls):.1f}, {args.runs} runs; target < {wall_target} s), {statistics.median(cpus):.1f} s "
                  f"CPU, peak RSS {max(rss) / 1024:.2f} GiB (target < {rss_target} GB); fabric {detail['fabric']}; "
                  f"{detail['nodes']:,} DAG nodes over {detail['simulated_gpus']} simulated GPUs"
                  f"{_sampled(detail['sampled'])}; build "
                  f"{detail['build_s']:.1f} s, replay {detail['replay_s']:.1f} s = {detail['nodes_per_s']:,.0f} "
                  f"nodes/s; iteration {detail['iteration_ms']:,.0f} ms, {detail['tflops_per_gpu']:.0f} TFLOP/s "
                  "per GPU", flush=True)


def _sampled(counts: list[int] | None) -> str:
    return "" if counts is None else f" (micro-batches sampled at {counts[0]} and {counts[1]}: the larger's DAG)"


if __name__ == "__main__":
    main()
