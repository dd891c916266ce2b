"""simulon's per-layer kernel times on the MIT cluster's GPUs against Sailor's measured per-layer profile.

Sailor (eth-easl/sailor, sailor/Planner/simulations/profiles_tmp.json) profiled OPT-350M (hidden 1024, sequence
2048) layer by layer on each GPU type: profiles[model][gpu][micro-batch][tp][layer] = [forward s, backward s,
update s], layer 0 the embedding, 1-24 the transformer layers, 25 the head. With tp = 1 no communication is in
the figure, so it checks the compute model alone: the kernels of one transformer layer (workload/layer_kernels.py,
Megatron's unfused attention, as Megatron-DeepSpeed runs without --use-flash-attn) timed by the calibrated model
under sustained load, summed per pass, in fp32 and fp16. Nothing is fitted to the profile. The profile's
forward/backward split looks skewed (backward 2.5-2.8 x forward; an unsynchronised forward timer would move
work into the backward), so the sum of the two passes is the figure to compare.

    uv run python scripts/sailor_layer_times.py PATH/TO/sailor/sailor/Planner/simulations/profiles_tmp.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from simulon.compute.analytical import AnalyticalModel
from simulon.config.common import DType
from simulon.config.dc import GPUSpec
from simulon.config.loading import parse_scenario
from simulon.workload.kernels import Phase
from simulon.workload.layer_kernels import LayerKernels

GPUS = {"RTX-3090": "rtx-3090", "RTX-2080": "rtx-2080-ti", "Titan-RTX": "titan-rtx"}  # Sailor's name: template
HEAD = ("final_norm", "lm_head", "loss")
NOT_LAYER = ("embedding", *HEAD)
BACKWARD = (Phase.bwd_ig, Phase.bwd_wg)


def pass_seconds(gpu: str, dtype: str, mbs: int, names: tuple[str, ...] | None) -> tuple[float, float]:
    """(forward, backward) seconds of the kernels `names` (None: one transformer layer's) of OPT-350M at tp 1."""
    sc = parse_scenario({"datacenter": {"from": "sailor-mit-titan-rtx", "cluster": {"num_nodes": 1},
                                        "node": {"gpu": {"from": gpu}}},
                         "workload": {"model": {"from": "opt-350m"}, "parallelism": {"tp": 1},
                                      "training": {"num_gpus": 1, "global_batch_size": mbs, "micro_batch_size": mbs,
                                                   "sequence_length": 2048, "dtype": dtype,
                                                   "attention": "unfused"}}}, "layer")
    kernels = LayerKernels.of(sc.workload)
    chosen = [n for n in kernels.table if (n in names if names else n not in NOT_LAYER)]
    model = AnalyticalModel(GPUSpec.model_validate({"from": gpu}), DType(dtype), sustained_load=True)

    def total(phases: tuple[Phase, ...]) -> float:
        specs = [kernels[n][p] for n in chosen for p in phases if p in kernels[n]]
        reps = [kernels.repeats(n) for n in chosen for p in phases if p in kernels[n]]
        return float(sum(r * t for r, t in zip(reps, model.seconds(specs), strict=True)))

    return total((Phase.fwd,)), total(BACKWARD)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profiles", type=Path)
    parser.add_argument("--mbs", type=int, nargs="+", default=[1, 2, 4, 8])
    args = parser.parse_args(argv)
    measured = json.loads(args.profiles.read_text())["OPT-350"]
    print("gpu        mbs part  | measured fwd  bwd ms | fp32 fwd  bwd ms (err %, fwd+bwd) | fp16 fwd bwd ms (sum)")
    for name, gpu in GPUS.items():
        for mbs in args.mbs:
            layers = measured[name].get(str(mbs), {}).get("1")
            if layers is None:
                continue
            for part, index, names in (("layer", "1", None), ("head", str(max(map(int, layers))), HEAD)):
                fwd, bwd = layers[index][0] * 1e3, layers[index][1] * 1e3
                f32 = [s * 1e3 for s in pass_seconds(gpu, "fp32", mbs, names)]
                f16 = [s * 1e3 for s in pass_seconds(gpu, "fp16", mbs, names)]
                err = [100 * (p - m) / m for p, m in zip((*f32, sum(f32)), (fwd, bwd, fwd + bwd), strict=True)]
                err16 = 100 * (sum(f16) - fwd - bwd) / (fwd + bwd)
                print(f"{name:10s} {mbs:3d} {part:5s} | {fwd:8.2f} {bwd:8.2f}    | {f32[0]:8.2f} {f32[1]:8.2f} "
                      f"({err[0]:+4.0f}, {err[1]:+4.0f}, {err[2]:+4.0f}) | {f16[0]:8.2f} {f16[1]:8.2f} ({err16:+4.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
