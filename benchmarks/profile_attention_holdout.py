"""Held-out error of the cuDNN attention fit on the shipped GPU profiles (H100 and H200): the whole compute fit
(scripts/fit_compute.py) repeated without each sequence length's attention kernels (2,048, 4,096 and 8,192: a different
set of models at each, as the profiles' headers list), and without each GPU's, then those kernels predicted; each line
also by GPU. A GPU held out borrows the nearest fitted GPU's
parameters (Calibrations.attention), as a GPU without a profile does.

    uv run python benchmarks/profile_attention_holdout.py [../shared/validation/kernels.csv]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from fit_compute import SETTINGS, fit_observations, table_argument

from simulon.compute.calibration import Calibrations
from simulon.compute.fit import fit_calibration, predict


def seq(obs) -> int:
    return int(dict(obs.specs[0].shape)["seq_q"])


def report(label: str, obs: list, cal: Calibrations) -> None:
    errors = [100 * (p / o.seconds - 1) for p, o in zip(predict(obs, cal), obs, strict=True)]
    print(f"{label}: {summary(errors)}" + "".join(
        f"; {gpu} {summary([e for e, o in zip(errors, obs, strict=True) if o.gpu == gpu])}"
        for gpu in sorted({o.gpu for o in obs})))


def summary(errors: list[float]) -> str:
    return f"{len(errors)} kernels, MAPE {statistics.fmean(abs(e) for e in errors):.1f}%, " \
           f"mean {statistics.fmean(errors):+.1f}%"


def main(table: str) -> None:
    everything = fit_observations(table)
    profiled = [o for o in everything if o.family == "attention" and o.repeats > 1]
    held_out = [(f"sequence {length}", [o for o in profiled if seq(o) == length])
                for length in sorted({seq(o) for o in profiled})]
    held_out += [(gpu, [o for o in profiled if o.gpu == gpu]) for gpu in sorted({o.gpu for o in profiled})]
    for label, held in held_out:
        doc = fit_calibration([o for o in everything if o not in held], Calibrations.with_fit({}), SETTINGS)
        report(f"{label} held out", held, Calibrations.with_fit(doc))
    report("in sample (the shipped calibration)", profiled, Calibrations.shipped())


if __name__ == "__main__":
    main(table_argument(__doc__.splitlines()[0]))
