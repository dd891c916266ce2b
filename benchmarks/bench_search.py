"""How long `simulon search` takes on the issue's benchmarks, every dimension searched, the best 10 replayed:

* `--case llama3-70b` (the default): Llama 3 70B on 1,024 H100 (128 DGX H100), global batch 512 x 8,192 tokens;
* `--case deepseek-v3`: DeepSeek-V3 on 2,048 H800 (256 HGX H800 nodes), DeepSeek-V3's own batch, 15,360 x 4,096
  tokens (DeepSeek-AI 2024, arXiv 2412.19437, section 4.2). No datacenter template names the system, so it is
  described inline: 8 H800 SXM5 per node on the NVLink switch of an HGX H100 baseboard cut to the H800's 400 GB/s
  (200 GB/s a direction; the h800-sxm template's nvlink_bandwidth), one 400 Gb/s ConnectX-7 per GPU (8 a node,
  as the paper's cluster), Quantum-2 switches.

    uv run python benchmarks/bench_search.py [--case llama3-70b|deepseek-v3] [--repeat 3] [--replay 10]

Prints each run's wall time (a fresh process each: start-up included), its counts, the median, and the winner.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = {
    "llama3-70b": """\
datacenter:
  from: dgx-h100
  cluster: {num_nodes: 128}
workload:
  framework: megatron
  model: {from: llama-3-70b}
  training: {global_batch_size: 512, sequence_length: 8192}
""",
    "deepseek-v3": """\
datacenter:
  datacenter: {name: hgx-h800}
  cluster: {num_nodes: 256}
  node:
    gpus_per_node: 8
    gpus_per_nic: 1
    gpu: {from: h800-sxm}
  network:
    scale_up:
      switch: {from: nvswitch-gen4, port_speed: 200GBps}
    scale_out:
      nic: {from: connectx-7-400g}
      switch: {from: quantum-2-qm9700}
workload:
  framework: megatron
  model: {from: deepseek-v3}
  training: {global_batch_size: 15360, sequence_length: 4096}
""",
}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), default="llama3-70b")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--replay", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{args.case}.yaml"
        path.write_text(CASES[args.case])
        command = [sys.executable, "-c", "from simulon.cli.app import main; main()", "search", str(path),
                   "--replay", str(args.replay), "--json", "--no-cache"]
        walls = []
        for _ in range(args.repeat):
            start, cpu = time.perf_counter(), _children_cpu()
            run = subprocess.run(command, capture_output=True, text=True)
            walls.append(time.perf_counter() - start)
            if run.returncode:
                sys.exit(f"search failed after {walls[-1]:.0f} s (exit {run.returncode}):\n{run.stderr[-4000:]}")
            cpu = _children_cpu() - cpu
            data = json.loads(run.stdout)
            best = data["top"][0]
            uneven = f" stages {best['first_layers']}/../{best['last_layers']}" if best["first_layers"] else ""
            print(f"{walls[-1]:6.1f} s wall ({cpu:.1f} s CPU): {data['enumerated']:,} enumerated, "
                  f"{data['pruned']:,} pruned, "
                  f"{data['infeasible']:,} infeasible, {data['estimated']:,} estimated, {data['replayed']} replayed; "
                  f"best tp{best['tp']} pp{best['pp']} vpp{best['vpp']} dp{best['dp']} cp{best['cp']} ep{best['ep']}"
                  f"{uneven} "
                  f"{best['sharding']} {best['dtype']}: {best['iteration_time_ms']:,.0f} ms, MFU "
                  f"{100 * best['mfu']:.1f}%")
        print(f"median {statistics.median(walls):.1f} s over {args.repeat} runs")


if __name__ == "__main__":
    main()
