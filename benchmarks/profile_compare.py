"""Two GPU profiles against each other at the shapes both measured: the time ratio by kernel family, and for the MLP
activations (Megatron-Core's fused SwiGLU or GELU, compiled per shape) the bandwidth each GPU reached, against its
own HBM bandwidth and against the model's (a fraction of HBM bandwidth for every one-pass kernel).

    uv run python benchmarks/profile_compare.py [PROFILE_A PROFILE_B] [--min-ms 0.14]

Defaults: the shipped H100 and H200 profiles. A kernel is one run of the same name, phase, dtype and shape in both
files; its time is the median of its runs. Families are `simulon validate profile`'s (validate/profile.py family),
the activations apart by direction. Activations shorter than --min-ms on either GPU are left out of their lines: a
compiled call shorter than the host's 50-90 us shows the host instead. The profile's key does not say whether an
activation is gated; its bytes per element do (the tracer's: SwiGLU's backward moves 10 bytes an element, GELU's 6),
which the lines leave to the reader.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

from simulon.compute.profile import spec_of_run
from simulon.config.common import DType
from simulon.config.dc import GPUSpec
from simulon.validate.profile import SHIPPED_PROFILES, family, validate_profile

ACTIVATIONS = ("mlp_act", "moe_expert_act", "moe_shared_act")


def measured(gpu: GPUSpec) -> dict[str, tuple[float, float, str]]:
    """Per kernel key: measured and predicted milliseconds (validate_profile's median and model), and a family."""
    found = {}
    for row in validate_profile(gpu).rows:
        run = gpu.kernel_runs[row.index]
        spec = spec_of_run(run.kernel, run.params)
        name = family(spec, DType(str(run.params.get("dtype", "bf16"))))
        if run.kernel in ACTIVATIONS:
            name = f"activation {run.params.get('phase')}"
        found[run.kernel + json.dumps(run.params, sort_keys=True)] = (row.measured, row.predicted, name)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="*", type=Path,
                        default=[SHIPPED_PROFILES / "h100-sxm5-80gb.yaml", SHIPPED_PROFILES / "h200-sxm5-141gb.yaml"])
    parser.add_argument("--min-ms", type=float, default=0.14)
    args = parser.parse_args()
    if len(args.profiles) != 2:
        parser.error("give two profiles, or none for the shipped H100 and H200")
    gpus = [GPUSpec.model_validate({"from": str(p)}) for p in args.profiles]
    runs = [measured(g) for g in gpus]
    common = sorted(runs[0].keys() & runs[1].keys())
    a, b = (g.name for g in gpus)
    print(f"{len(common)} kernels measured on both: {a} ({len(runs[0])}) and {b} ({len(runs[1])})")
    print(f"HBM bandwidth: {a} {gpus[0].memory_bandwidth / 1e12:.2f} TB/s, {b} {gpus[1].memory_bandwidth / 1e12:.2f} "
          f"TB/s (ratio {gpus[1].memory_bandwidth / gpus[0].memory_bandwidth:.2f})")
    by_family: dict[str, list[str]] = defaultdict(list)
    for key in common:
        by_family[runs[0][key][2]].append(key)
    print(f"\n{'family':24s} {'kernels':>7s} {'time ' + a + ' / ' + b:>36s} {'model says':>10s}")
    for name, keys in sorted(by_family.items()):
        ratio = statistics.median(runs[0][k][0] / runs[1][k][0] for k in keys)
        model = statistics.median(runs[0][k][1] / runs[1][k][1] for k in keys)
        print(f"{name:24s} {len(keys):7d} {ratio:36.3f} {model:10.3f}")
    print(f"\nactivations of {args.min_ms} ms and more on both (bytes the tracer counts over the median time):")
    print(f"{'kernel':16s} {'phase':7s} {'GB':>6s} {a + ' TB/s':>22s} {'of HBM':>7s} {b + ' TB/s':>22s} {'of HBM':>7s}"
          f" {'time ratio':>10s} {'model ' + b:>14s}")
    for key in common:
        (ta, _, name), (tb, pb, _) = runs[0][key], runs[1][key]
        if not name.startswith("activation") or min(ta, tb) < args.min_ms:
            continue
        kernel, params = key[:key.index("{")], json.loads(key[key.index("{"):])
        moved = float(params["bytes"])
        rate_a, rate_b = moved / ta / 1e9, moved / tb / 1e9
        print(f"{kernel:16s} {params['phase']:7s} {moved / 1e9:6.2f} {rate_a:22.2f} "
              f"{rate_a * 1e12 / gpus[0].memory_bandwidth:7.0%} {rate_b:22.2f} "
              f"{rate_b * 1e12 / gpus[1].memory_bandwidth:7.0%} {ta / tb:10.3f} {pb / tb - 1:+14.1%}")


if __name__ == "__main__":
    main()
