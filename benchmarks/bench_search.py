"""How long `simulon search` takes on the issue's benchmark: Llama 3 70B on 1,024 H100 (128 DGX H100), global batch
512 x 8,192 tokens, every dimension searched, the best 10 replayed.

    uv run python benchmarks/bench_search.py [--repeat 3] [--replay 10]

Prints each run's wall time (a fresh process each: start-up included), its counts, the median, and the winner.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCENARIO = """\
datacenter:
  from: dgx-h100
  cluster: {num_nodes: 128}
workload:
  framework: megatron
  model: {from: llama-3-70b}
  training: {global_batch_size: 512, sequence_length: 8192}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--replay", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "llama3_70b_1024.yaml"
        path.write_text(SCENARIO)
        command = [sys.executable, "-c", "from simulon.cli.app import main; main()", "search", str(path),
                   "--replay", str(args.replay), "--json", "--no-cache"]
        walls = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            run = subprocess.run(command, check=True, capture_output=True, text=True)
            walls.append(time.perf_counter() - start)
            data = json.loads(run.stdout)
            best = data["top"][0]
            print(f"{walls[-1]:6.1f} s wall: {data['enumerated']:,} enumerated, {data['pruned']:,} pruned, "
                  f"{data['infeasible']:,} infeasible, {data['estimated']:,} estimated, {data['replayed']} replayed; "
                  f"best tp{best['tp']} pp{best['pp']} vpp{best['vpp']} dp{best['dp']} cp{best['cp']} "
                  f"{best['sharding']} {best['dtype']}: {best['iteration_time_ms']:,.0f} ms, MFU "
                  f"{100 * best['mfu']:.1f}%")
        print(f"median {statistics.median(walls):.1f} s over {args.repeat} runs")


if __name__ == "__main__":
    main()
