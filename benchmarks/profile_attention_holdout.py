"""Held-out error of the cuDNN attention fit on the shipped H100 profile: the whole compute fit
(scripts/fit_compute.py) repeated without each sequence length's attention kernels (each a different set of models:
GPT-3 175B at 2,048; Llama 2, Nemotron-4 and Mixtral at 4,096; Llama 3 at 8,192), then those kernels predicted.

    uv run python benchmarks/profile_attention_holdout.py [../shared/validation/kernels.csv]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from fit_compute import SETTINGS, fit_observations

from simulon.compute.calibration import Calibrations
from simulon.compute.fit import fit_calibration, predict


def seq(obs) -> int:
    return int(dict(obs.specs[0].shape)["seq_q"])


def report(label: str, obs: list, cal: Calibrations) -> None:
    errors = [100 * (p / o.seconds - 1) for p, o in zip(predict(obs, cal), obs, strict=True)]
    print(f"{label}: {len(obs)} kernels, MAPE {statistics.fmean(abs(e) for e in errors):.1f}%, "
          f"mean {statistics.fmean(errors):+.1f}%")


def main(table: str) -> None:
    everything = fit_observations(table)
    profiled = [o for o in everything if o.family == "attention" and o.repeats > 1]
    for length in sorted({seq(o) for o in profiled}):
        held = [o for o in profiled if seq(o) == length]
        doc = fit_calibration([o for o in everything if o not in held], Calibrations.with_fit({}), SETTINGS)
        report(f"sequence {length} held out", held, Calibrations.with_fit(doc))
    report("in sample (the shipped calibration)", profiled, Calibrations.shipped())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/validation/kernels.csv")
