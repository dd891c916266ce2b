"""Held-out error of the attention fits, one GPU at a time, without refitting: each GPU's attention rows (the kernels
table's and the shipped profiles', as scripts/fit_compute.py fits them) predicted by the shipped calibration with that
GPU taken out, beside the in-sample error of the same rows.

    uv run python benchmarks/attention_gpu_holdout.py [../shared/validation/kernels.csv]

Attention is fitted per GPU, library and dtype (compute/fit.py), on the GPU's own GEMM clock, so taking a GPU out of
the shipped calibration leaves every other attention fit as a refit without its rows would make it. A best-shape GEMM
fit on the held-out GPU's shape response (`shape_from`) is taken out with it: refitted without that GPU, it rests on
another chip's, whose instruction differs, and lends nothing (Calibrations.native_shape), so the held-out GPU's clock
comes from the nearest full fit, as in `benchmarks/leave_one_out.py kernels --by gpu`, which refits everything and
takes far longer. Prints, per GPU and for its forward and backward rows apart, the MAPE of throughput and its bias
(positive: predicted too fast).
"""

from __future__ import annotations

import copy
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import yaml
from fit_compute import OUT, fit_observations, table_argument

from simulon.compute.calibration import Calibrations
from simulon.compute.fit import predict
from simulon.workload.kernels import Phase


def without(document: dict, gpu: str) -> dict:
    """The calibration document with `gpu` taken out, and every best-shape GEMM fit resting on its shape response."""
    held = copy.deepcopy(document)
    del held["gpus"][gpu]
    for other, entry in list(held["gpus"].items()):
        entry["gemm"] = {d: p for d, p in (entry.get("gemm") or {}).items() if p.get("shape_from") != gpu}
        if not entry["gemm"] and not entry.get("attention"):
            del held["gpus"][other]
        elif not entry["gemm"]:
            del entry["gemm"]
    return held


def summary(errors: list[float]) -> str:
    if not errors:
        return "-"
    return f"{statistics.fmean(map(abs, errors)):5.1f}% ({len(errors)} rows, bias {statistics.fmean(errors):+.1f}%)"


def main(table: str) -> None:
    rows = [o for o in fit_observations(table) if o.family == "attention"]
    document = yaml.safe_load(OUT.read_text())  # the shipped calibration
    for gpu in sorted({o.gpu for o in rows}):
        mine = [o for o in rows if o.gpu == gpu]
        errors = {}
        for label, cal in (("in sample", Calibrations.with_fit(document)),
                           ("held out", Calibrations.with_fit(without(document, gpu)))):
            errors[label] = [100 * (o.seconds / p - 1) for o, p in zip(mine, predict(mine, cal), strict=True)]
        print(f"{gpu}: " + "; ".join(f"{label} {summary(e)}" for label, e in errors.items()))
        for phase, forward in (("forward", True), ("backward", False)):
            chosen = [i for i, o in enumerate(mine) if len(o.specs) == 1 and (o.specs[0].phase == Phase.fwd) == forward]
            if chosen:
                print(f"  {phase}: " + "; ".join(f"{label} {summary([e[i] for i in chosen])}"
                                                 for label, e in errors.items()))


if __name__ == "__main__":
    main(table_argument(__doc__.splitlines()[0]))
