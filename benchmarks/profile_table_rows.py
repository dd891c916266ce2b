"""Profile, on the local GPU, the kernels of training-table rows: each row's model (one layer of each kind, the
embedding, head and loss, the gradient buffers and the optimizer) at the row's tensor- and expert-parallel size,
sequence length, dtype and attention library, as `simulon validate training` builds the row's scenario
(`validate.training.scenario_from_row`). What `simulon profile gpu --model` does for a template, for a row the
templates do not name (Megatron-Core's weak-scaling GPTs, say). Appends `kernel_runs` to OUTPUT, as the command does.

    python3 benchmarks/profile_table_rows.py -o OUT.yaml --name H200-SXM5-141GB [--batch-size 1,2] [--table T] ROW ...

ROW is an index into the training table (`simulon validate training --json` numbers them the same way);
`--batch-size` sweeps micro-batch sizes in place of the row's. Needs torch and a CUDA GPU (`--device cpu` for a
dry run on small rows); on a machine where simulon cannot be installed, run it from the repository's root with
PYTHONPATH=src and simulon's dependencies importable. Then compare with the calibrated model by
`simulon validate profile OUT.yaml`, or simulate the rows on it with `benchmarks/profile_training_rows.py --profile`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_sustained_gemm import need_gpu

from simulon.cli.profile import gpu_identity
from simulon.compute.profile import REPETITIONS, WARMUP
from simulon.config.errors import ConfigError
from simulon.config.scenario import ScenarioConfig
from simulon.profiling.plan import SweepPoint
from simulon.profiling.run import profile_point
from simulon.profiling.store import ProfileFile
from simulon.validate.report import read_table
from simulon.validate.training import scenario_from_row, with_source_layouts

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT.parent / "shared/validation/training.csv"
NEW_FILE_GPU = "H100-SXM5-80GB"


def sweep_points(scenario: ScenarioConfig, batches: list[int] | None) -> list[SweepPoint]:
    """The row's shape as profile sweep points: its model block, at its own micro-batch or each of `batches`."""
    wl = scenario.workload
    model = wl.model.model_dump(mode="json", exclude_none=True)
    t, p = wl.training, wl.parallelism
    return [SweepPoint(model, t.sequence_length, batch, t.dtype, p.tp, p.ep, t.attention)
            for batch in (batches or [t.micro_batch_size])]


def open_profile(output: Path, name: str | None, device: str) -> ProfileFile:
    """OUTPUT opened as `simulon profile gpu` opens it: a new file starts from the GPU template `name` (by default
    NEW_FILE_GPU) resolves to, an existing one must be that GPU's (where `name` is given) and timed on `device`.
    Exits 2 with the command's message where it is not."""
    try:
        identity = {} if output.exists() else gpu_identity(output, name or NEW_FILE_GPU, None, None, None)
        store = ProfileFile(output, identity, device)
        store.check_identity({"--name": name})
    except ConfigError as exc:
        print(f"{sys.argv[0]}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    return store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="+", type=int)
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--name", help=f"the GPU's shipped template name or alias (a new file: {NEW_FILE_GPU})")
    parser.add_argument("--table", type=Path, default=TABLE)
    parser.add_argument("--batch-size", help="micro-batch sizes to sweep (a comma list) in place of the row's")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--epoch-num", type=int, default=REPETITIONS)
    parser.add_argument("--warmup", type=int, default=WARMUP)
    args = parser.parse_args()
    rows = with_source_layouts(read_table(str(args.table)))
    batches = [int(b) for b in args.batch_size.split(",")] if args.batch_size else None
    store = open_profile(args.output, args.name, args.device)
    need_gpu(args.device)
    for i in args.rows:
        for point in sweep_points(scenario_from_row(rows[i]), batches):
            r = profile_point(point, store, args.device, args.epoch_num, args.warmup)
            print(f"row {i} ({rows[i]['model']}; {point.describe()}): {r.timed} timed, {r.skipped} already in the "
                  f"file, {r.out_of_memory} out of memory, {r.unsupported} not timeable on {args.device}", flush=True)
    print(f"wrote {store.path}")


if __name__ == "__main__":
    main()
