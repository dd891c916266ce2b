"""Fit each MIT node template's host-path bandwidth to Sailor's OPT-350M layer profile at tensor parallelism 8.

Sailor (eth-easl/sailor, sailor/Planner/simulations/profiles_tmp.json) timed OPT-350M layer by layer on each
MIT GPU type at micro-batch 2 and tp 1, 2, 4 and 8; at tp 8 (the degree 7 of Sailor's 9 heterogeneous runs use)
each layer's figure holds its kernels and its tensor-parallel all-reduces, which on these nodes (no PCIe
peer-to-peer) cross the node's host paths. This finds, per node template, the host-path bandwidth at which
simulon's forward and backward of one micro-batch of the whole model at tp 8 on one node (the slope of the
iteration time over 2 and 4 micro-batches) equals the profile's sum over the model's 26 layers, by the secant
method. The templates (templates/datacenter/sailor-mit-*.yaml) carry its result. What it fits is an effective
figure: besides the host path it absorbs what simulon's kernels miss at tp 8. Nothing is read from the runs'
iteration times.

    uv run python scripts/sailor_host_path_fit.py PATH/TO/sailor
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sailor_host_paths import SAILOR_NAMES

from simulon.config.templates import find_template
from simulon.validate.hetero import NODE_TEMPLATES, node_microbatch_seconds

PROFILE = Path("sailor/Planner/simulations/profiles_tmp.json")
TP = 8
MICRO_BATCH = 2  # node_microbatch_seconds' default


def fit(gpu: str, target_s: float, start_gbps: float, rounds: int = 8) -> tuple[float, float]:
    """(bandwidth, its micro-batch seconds) by the secant method from the template's figure."""
    a, fa = start_gbps, node_microbatch_seconds(gpu, TP, start_gbps)
    b = start_gbps * (1.2 if fa > target_s else 0.8)
    fb = node_microbatch_seconds(gpu, TP, b)
    for _ in range(rounds):
        if abs(fb - target_s) < 1e-3 * target_s or fb == fa:
            break
        a, fa, b = b, fb, b + (target_s - fb) * (b - a) / (fb - fa)
        fb = node_microbatch_seconds(gpu, TP, b)
    return b, fb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sailor", type=Path, help="a checkout of eth-easl/sailor")
    args = parser.parse_args(argv)
    profile = json.loads((args.sailor / PROFILE).read_text())["OPT-350"]
    print("node template          template GB/s  fitted GB/s  simulon ms/mb  Sailor tp-8 profile ms/mb")
    for gpu, name in SAILOR_NAMES.items():
        layers = profile[name][str(MICRO_BATCH)][str(TP)]
        target = sum(fwd + bwd for fwd, bwd, _ in layers.values())
        template = find_template("datacenter", NODE_TEMPLATES[gpu])
        start = float(str(template["network"]["scale_up"]["host_path"]["bandwidth"]).removesuffix("GBps"))
        gbps, seconds = fit(gpu, target, start)
        print(f"{NODE_TEMPLATES[gpu]:22s} {start:13.2f} {gbps:12.2f} {seconds * 1e3:14.1f} {target * 1e3:26.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
