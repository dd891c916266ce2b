"""Write every prediction simulon makes on a fixed set of inputs to a folder, to show that a change which
should not move any number moves none.

    uv run python scripts/snapshot_predictions.py DIR [--training-max-gpus 64] [--no-training] [--tables DIR]
    diff -r BEFORE_DIR AFTER_DIR

Run it from the root of each checkout to compare (the commit before a change in a `git worktree`, and the
change), with that checkout's environment: it snapshots the simulon the current folder installs.

What it records, each as the command's own output (JSON where the command has it):
- `simulon validate collectives` and `validate kernels` over the shipped tables (every row);
- the predicted iteration time of every training-table row up to --training-max-gpus GPUs (the larger
  rows take minutes each), or the reason the row is skipped;
- `simulon simulate --json` of the examples (the 16,384-GPU one aside) and of the 96-GPU MoE example on a
  spine-leaf and a rail-optimized fabric with interleaved stages, and the seed example's trace file;
- `simulon collective --json` of every algorithm and operation on four DGX H100 nodes (every GPU, and one
  GPU per node), a GB200 NVL72 domain and 64 GPUs of a rail-optimized three-tier fabric, at three sizes.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import yaml
from typer.testing import CliRunner

from simulon.cli.app import app
from simulon.collective import ALGORITHMS
from simulon.validate.report import shipped_table

ROOT = Path.cwd()
EXAMPLES = ("scenario.yaml", "moe_96gpu.yaml", "gpt3_175b_1024gpu.yaml", "llama3_405b_8192gpu.yaml")
OPS = ("allreduce", "allgather", "reducescatter", "alltoall")
COLLECTIVE_RUNS = {  # name: (datacenter block, groups)
    "h100x4": ({"from": "dgx-h100", "cluster": {"num_nodes": 4}}, ("0-31", "0,8,16,24")),
    "nvl72": ({"from": "gb200-nvl72", "cluster": {"num_nodes": 18}}, ("0-71",)),
    "three_tier": ({"from": "dgx-h100", "cluster": {"num_nodes": 16},
                    "network": {"scale_out": {"topology": "rail-optimized-3-tier",
                                              "switch": {"from": "quantum-2-qm9700", "latency": "0.5us"}}}},
                   ("0-63",)),
}


def invoke(args: list[str]) -> str:
    """A command's exit code, output and the message of any exception it ended with, as text (not the
    exception's type: what a refusal is called may change where its message does not)."""
    result = CliRunner().invoke(app, args)
    error = f"ended with: {result.exception}" if result.exception else ""
    return f"exit {result.exit_code}\n{result.output}{error}\n"


def fabric_variants(work: Path) -> list[Path]:
    """The 96-GPU MoE example on multi-tier fabrics (where folding and ECMP matter)."""
    base = yaml.safe_load((ROOT / "examples/moe_96gpu.yaml").read_text())
    paths = []
    for name, topology, parallelism, batch in (("moe_spine_leaf", "spine-leaf", {}, 40),
                                               ("moe_rail_vpp", "rail-optimized-fat-tree",
                                                {"vpp": 2, "num_microbatches": 12}, 48)):
        scenario = copy.deepcopy(base)
        scenario["datacenter"]["network"]["scale_out"]["topology"] = topology
        scenario["workload"]["parallelism"].update(parallelism)
        scenario["workload"]["training"]["global_batch_size"] = batch
        paths.append(work / f"{name}.yaml")
        paths[-1].write_text(yaml.safe_dump(scenario))
    return paths


def training_row(item: tuple[int, dict[str, str]]) -> str:
    from simulon.validate.training import Unsupported, compare_row

    index, row = item
    try:
        return f"{index}\t{compare_row(index, row)!r}"
    except Unsupported as exc:
        return f"{index}\tskipped: {exc}"


def snapshot(out: Path, tables: Path, training_max_gpus: int | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for table in ("collectives", "kernels"):
        (out / f"validate_{table}.txt").write_text(
            invoke(["validate", table, "--csv", str(tables / f"{table}.csv"), "--json"]))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for path in [ROOT / "examples" / name for name in EXAMPLES] + fabric_variants(work):
            (out / f"simulate_{path.stem}.txt").write_text(invoke(["simulate", str(path), "--json"]))
        invoke(["simulate", str(ROOT / "examples/scenario.yaml"), "-o", str(work / "trace.json")])
        (out / "seed_trace.json").write_bytes((work / "trace.json").read_bytes())
        for name, (datacenter, groups) in COLLECTIVE_RUNS.items():
            path = work / f"{name}.yaml"
            path.write_text(yaml.safe_dump({"datacenter": datacenter, "collective": {"algorithm": "auto"}}))
            lines = []
            for group in groups:
                for algorithm in ("auto", *ALGORITHMS):
                    for op in OPS:
                        lines.append(f"--- {group} {algorithm} {op}\n" + invoke(
                            ["collective", str(path), "--op", op, "--algorithm", algorithm, "--group", group,
                             "--sizes", "4KiB,1MiB,128MiB", "--json"]))
            (out / f"collective_{name}.txt").write_text("".join(lines))
    if training_max_gpus is not None:
        from simulon.validate.report import read_table

        rows = [(i, r) for i, r in enumerate(read_table(tables / "training.csv"))
                if int(r["num_gpus"] or 0) <= training_max_gpus]
        with ProcessPoolExecutor(2) as pool:
            (out / "validate_training_rows.txt").write_text("\n".join(pool.map(training_row, rows)) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--training-max-gpus", type=int, default=64)
    parser.add_argument("--no-training", action="store_true")
    parser.add_argument("--tables", type=Path, default=shipped_table("training").parent,
                        help="the measurement tables (default: the ones shipped with simulon)")
    args = parser.parse_args()
    snapshot(args.out, args.tables, None if args.no_training else args.training_max_gpus)
    print(json.dumps({"folder": str(args.out), "files": len(list(args.out.iterdir()))}))


if __name__ == "__main__":
    sys.exit(main())
