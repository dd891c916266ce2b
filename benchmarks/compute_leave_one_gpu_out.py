"""Leave-one-GPU-out check of the compute model: refit without one GPU's rows, predict them by scaling.

    uv run python benchmarks/compute_leave_one_gpu_out.py [../shared/validation/kernels.csv]

For each GPU of the kernels table the calibration is refitted on the other GPUs' rows only, so the
held-out GPU is timed with the parameters of the nearest remaining GPU, its own dense peak scaling
compute-bound work and its own HBM bandwidth memory-bound work. Prints MAPE (of predicted throughput)
by held-out GPU and kernel family, over all held-out rows, and the mean over GPUs (SimAI reports
13-15% for its scaled model).
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from simulon.compute.calibration import Calibrations
from simulon.compute.fit import fit_calibration, predict
from simulon.validate.kernels import family, observations
from simulon.validate.report import read_table

ROOT = Path(__file__).resolve().parents[1]


def fit_settings():
    """The settings scripts/fit_compute.py fits the shipped calibration with."""
    spec = importlib.util.spec_from_file_location("fit_compute", ROOT / "scripts" / "fit_compute.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SETTINGS


def leave_one_out(path: str) -> dict[tuple[str, str], list[float]]:
    """(held-out GPU, family) -> percentage errors of predicted throughput."""
    obs = observations(read_table(path))
    settings, arch, memo = fit_settings(), Calibrations.with_fit({}), {}
    errors: dict[tuple[str, str], list[float]] = defaultdict(list)
    for gpu in sorted({o.gpu for o in obs}):
        held = [o for o in obs if o.gpu == gpu]
        cal = Calibrations.with_fit(fit_calibration([o for o in obs if o.gpu != gpu], arch, settings, memo))
        for o, predicted in zip(held, predict(held, cal), strict=True):
            errors[(gpu, family(o))].append(100.0 * (o.seconds / predicted - 1.0))
    return errors


def main(path: str) -> None:
    errors = leave_one_out(path)
    print(f"{'held-out GPU / family':40s} {'rows':>5s} {'MAPE %':>7s} {'bias %':>7s}")
    for (gpu, fam), errs in sorted(errors.items()):
        print(f"{gpu + ' / ' + fam:40s} {len(errs):5d} {statistics.fmean(map(abs, errs)):7.1f} "
              f"{statistics.fmean(errs):7.1f}")
    for fam in sorted({f for _, f in errors}):
        groups = {g: e for (g, f), e in errors.items() if f == fam}
        rows = [abs(x) for e in groups.values() for x in e]
        per_gpu = statistics.fmean(statistics.fmean(map(abs, e)) for e in groups.values())
        print(f"all held-out {fam:27s} {len(rows):5d} {statistics.fmean(rows):7.1f}   (mean over "
              f"{len(groups)} GPUs: {per_gpu:.1f})")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/validation/kernels.csv")
