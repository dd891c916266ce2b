"""A layer's kernels looped for seconds on a real GPU (`gpu_layer_loop.py`'s output) against the calibrated compute
model under sustained load, the conditions `compute/populate.py` times a training step's kernels in: each tensor-core
kernel at the GEMM-loop's settled clock (`calibration.yaml` sustained_clock), each memory-bound kernel at the
model's fraction of HBM bandwidth.

    uv run python benchmarks/layer_loop_compare.py [LOOP.json] [--gpu H200-SXM5-141GB]

Prints, for each row's layer: its GEMMs looped alone, model against measured settled time; the whole layer likewise
(whose memory-bound kernels are the profiler's unfused PyTorch stand-ins, slower than the model's fused ones, so it
is the GEMM line that checks the model); and how hard the layer's tensor-core work throttles in the mix, its time
there (the settled layer less its memory-bound kernels timed alone, which the clock does not slow) over its time
alone, against the same ratio for its GEMMs looped alone.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from simulon.compute.analytical import GEMM_CLASSES, AnalyticalModel
from simulon.compute.profile import spec_of_run
from simulon.config.common import DType
from simulon.config.dc import GPUSpec
from simulon.workload.kernels import KernelClass, KernelSpec

ROOT = Path(__file__).resolve().parents[1]
LOOPS = ROOT / "benchmarks/device_runs/2026-11-30-h200/layer_loop.json"


def sustained_ms(gpu: GPUSpec, dtype: DType, specs: list[KernelSpec]) -> list[float]:
    """Each kernel's model milliseconds under sustained load (a training step's conditions)."""
    return list(AnalyticalModel(gpu, dtype, sustained_load=True).seconds(specs) * 1e3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("loops", nargs="?", type=Path, default=LOOPS)
    parser.add_argument("--gpu", default="H200-SXM5-141GB")
    args = parser.parse_args()
    gpu = GPUSpec.model_validate({"from": args.gpu})
    print(f"{'row':>4} {'model':9s} {'GEMMs: measured':>15} {'model':>7} {'err':>6}   {'layer: measured':>15}"
          f" {'model':>7} {'err':>6}   tensor work looped/alone: in the layer, GEMMs alone")
    for run in json.loads(args.loops.read_text()):
        entries = run["kernels"]
        specs = [spec_of_run(e["kernel"], e["params"]) for e in entries]
        sustained = sustained_ms(gpu, DType(entries[0]["params"]["dtype"]), specs)
        gemm = [i for i, s in enumerate(specs) if s.kclass in GEMM_CLASSES]
        memory = [i for i, s in enumerate(specs) if s.kclass == KernelClass.memory]
        gemm_model, layer_model = sum(sustained[i] for i in gemm), sum(sustained)
        memory_alone = sum(entries[i]["alone_ms"] for i in memory)
        tensor_alone = sum(e["alone_ms"] for e in entries) - memory_alone
        in_mix = (run["layer"]["settled_ms"] - memory_alone) / tensor_alone
        gemms_alone = run["gemms"]["settled_ms"] / run["gemms"]["alone_sum_ms"]
        print(f"{run['row']:4d} {run['model']:9s} {run['gemms']['settled_ms']:15.3f} {gemm_model:7.3f}"
              f" {gemm_model / run['gemms']['settled_ms'] - 1:+6.1%}   {run['layer']['settled_ms']:15.3f}"
              f" {layer_model:7.3f} {layer_model / run['layer']['settled_ms'] - 1:+6.1%}"
              f"   {in_mix:.3f}, {gemms_alone:.3f}")


if __name__ == "__main__":
    main()
