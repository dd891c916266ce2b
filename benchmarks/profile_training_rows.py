"""Training steps from measured kernels: each training-table row simulated twice, with the calibrated compute model
and with a GPU profile's measured kernel times (`gpu: {from: <profile>}`, compute/profile.py: a kernel the profile
lacks is interpolated from its measured shapes along the model, and every time is carried from the profiler's short
loops, at the clock each loop's length gives it, to a training step's settled clock by the model's ratio), against
what the row measured. What the profile's step misses is outside the durations of the kernels the tracer emits:
between them, on the host, in kernels it does not model, in the communication, or in a clock below the settled one.

    uv run python benchmarks/profile_training_rows.py [--profile P] [ROW ...]

Rows are indices into the training table (`simulon validate training --json` numbers them the same way); the
default is the NeMo 24.07 fp8 pretraining rows on H100s of 64 GPUs and fewer. The profile defaults to the shipped
H100 one, so the rows must run on H100s. Each row is simulated as `simulon validate training` does (folded,
micro-batches sampled where the step is large).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from simulon.analysis.result import SimulationResult
from simulon.config.scenario import ScenarioConfig
from simulon.sweep.points import with_value
from simulon.validate.report import number, read_table
from simulon.validate.training import compare_row, scenario_from_row, simulate_row

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT.parent / "shared/validation/training.csv"
H100_PROFILE = ROOT / "src/simulon/compute/data/profiles/h100-sxm5-80gb.yaml"
DEFAULT_SUBSET, DEFAULT_MAX_GPUS = "nemo_24.07_pretrain_fp8_h100", 64


def profiled(row: dict[str, str], profile: Path) -> SimulationResult:
    """The row's step with the profile as its GPU, simulated as the validation simulates it."""
    doc = scenario_from_row(row).model_dump(mode="json", by_alias=True, exclude_none=True)
    with_value(doc, "datacenter.node.gpu", {"from": str(profile)})
    return simulate_row(ScenarioConfig.model_validate(doc)).result


def shares(result: SimulationResult) -> str:
    """Where the step goes (result.breakdown: compute, exposed communication, bubble), in percent of it."""
    b, step = result.breakdown, result.iteration_time_ms
    return " ".join(f"{100 * b[k] / step:5.1f}" for k in ("compute_ms", "exposed_comm_ms", "bubble_ms"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="*", type=int)
    parser.add_argument("--profile", type=Path, default=H100_PROFILE)
    parser.add_argument("--table", type=Path, default=TABLE)
    args = parser.parse_args()
    rows = read_table(str(args.table))
    picked = args.rows or [i for i, r in enumerate(rows) if r["subset"] == DEFAULT_SUBSET
                           and (number(r, "num_gpus") or 0) <= DEFAULT_MAX_GPUS]
    errors: dict[str, list[float]] = {"model": [], "profile": []}
    print(f"{'row':>4} {'model':14s} {'GPUs':>5} {'measured s':>10} {'model s':>8} {'profile s':>9}"
          f" {'model':>7} {'profile':>7}   profile step %: compute exposed bubble")
    for i in picked:
        row = rows[i]
        compared = compare_row(i, row)
        measured, modelled = compared.measured, compared.predicted
        result = profiled(row, args.profile)
        seconds = result.iteration_time_ms / 1e3
        for name, value in (("model", modelled), ("profile", seconds)):
            errors[name].append(value / measured - 1)
        print(f"{i:4d} {row['model'][:14]:14s} {row['num_gpus']:>5} {measured:10.3f} {modelled:8.3f} {seconds:9.3f}"
              f" {modelled / measured - 1:+7.1%} {seconds / measured - 1:+7.1%}   {shares(result)}")
    for name, errs in errors.items():
        print(f"{name}: mean error {statistics.fmean(errs):+.1%}, MAPE {statistics.fmean(abs(e) for e in errs):.1%}"
              f" over {len(errs)} rows")


if __name__ == "__main__":
    main()
