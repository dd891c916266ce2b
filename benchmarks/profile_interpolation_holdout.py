"""Held-out error of a profile's interpolation (compute/profile.py KernelProfile.seconds): on each shipped GPU
profile, each distinct profiled shape of a kernel (name, phase, dtype, shape) is asked for as if it had not been
profiled (`seconds(..., exact=False)`), so the profile answers from the kernel's other shapes, and the answer is
compared with the shape's measured median. The model's conditions are the profiler's, so the comparison is with what
was measured, not carried to a training step's clock.

    uv run python benchmarks/profile_interpolation_holdout.py [PROFILE.yaml ...]

Prints, per profile and per kernel class, the median and mean absolute error and how many held-out shapes were answered
outside the measured/model ratios of two profiled shapes that bracket it along one parameter, every other parameter
the same (below both neighbours is the failure this counts).
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

from simulon.compute.analytical import AnalyticalModel
from simulon.compute.profile import PROFILE_REPEATS, KernelProfile, run_class, spec_of_run
from simulon.config.common import DType
from simulon.config.dc import GPUSpec
from simulon.validate.profile import SHIPPED_PROFILES


def key(run) -> tuple:
    return run.kernel, tuple(sorted((k, str(v)) for k, v in run.params.items()))


def ratio_of(runs, model: AnalyticalModel) -> float:
    """A shape's measured median over the model's time."""
    return statistics.median(t for r in runs for t in r.times_ms) * 1e-3 / float(
        model.seconds([spec_of_run(runs[0].kernel, runs[0].params)])[0])


def bracketing(shape: tuple, shapes: dict[tuple, list], model: AnalyticalModel) -> list[tuple[float, float]]:
    """For each numeric parameter along which the shape has profiled neighbours on both sides (every other parameter
    the same), the measured/model ratios of the nearest below and the nearest above: an answer between two such
    neighbours is expected between their ratios."""
    kernel, params = shape
    pairs = []
    for name, value in params:
        try:
            here = float(value)
        except ValueError:
            continue
        rest = {item for item in params if item[0] != name}
        line = [(float(v), same) for (k, other), same in shapes.items() if k == kernel and other != params
                for n, v in other if n == name and set(other) - {(n, v)} == rest]
        below = [item for item in line if item[0] < here]
        above = [item for item in line if item[0] > here]
        if below and above:
            low, high = max(below, key=lambda item: item[0]), min(above, key=lambda item: item[0])
            pairs.append((ratio_of(low[1], model), ratio_of(high[1], model)))
    return pairs


def held_out(path: Path) -> dict[str, list[tuple[float, bool]]]:
    """Per kernel class, (signed % error, outside a pair of bracketing neighbours' ratios) of each held-out shape."""
    gpu = GPUSpec.model_validate({"from": str(path)})
    shapes: dict[tuple, list] = defaultdict(list)
    for run in gpu.kernel_runs:
        if run.times_ms:
            shapes[key(run)].append(run)
    by_class: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    profiles: dict[str, tuple[AnalyticalModel, KernelProfile]] = {}
    for shape, runs in sorted(shapes.items(), key=lambda kv: repr(kv[0])):
        dtype = DType(str(runs[0].params.get("dtype", "bf16")))
        if dtype.value not in profiles:
            model = AnalyticalModel(gpu, dtype, repeats=PROFILE_REPEATS)
            profiles[dtype.value] = model, KernelProfile(gpu, dtype, model)
        model, profile = profiles[dtype.value]
        spec = spec_of_run(runs[0].kernel, runs[0].params)
        answer = profile.seconds(spec, exact=False)  # as if this shape had not been profiled
        if answer is None:
            continue
        measured = statistics.median(t for r in runs for t in r.times_ms) * 1e-3
        ratio = answer / float(model.seconds([spec])[0])
        outside = any(not min(pair) * (1 - 1e-9) <= ratio <= max(pair) * (1 + 1e-9)
                      for pair in bracketing(shape, shapes, model))
        by_class[run_class(runs[0].params).name].append((100 * (answer / measured - 1), outside))
    return by_class


def main(paths: list[Path]) -> None:
    for path in paths:
        for kclass, rows in sorted(held_out(path).items()):
            errors = [abs(e) for e, _ in rows]
            print(f"{path.name:28s} {kclass:10s} {len(rows):4d} shapes: "
                  f"median |error| {statistics.median(errors):6.2f}%, mean {statistics.fmean(errors):6.2f}%, "
                  f"outside its bracketing neighbours' ratios {sum(o for _, o in rows)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="*", type=Path, help="GPU profiles (default: the shipped ones)")
    args = parser.parse_args()
    for missing in (p for p in args.profiles if not p.is_file()):
        parser.error(f"{missing}: no such file")
    main(args.profiles or sorted(SHIPPED_PROFILES.glob("*.yaml")))
