"""Fit the roofline efficiencies in src/simulon/compute/data/roofline.yaml from a kernels table.

    uv run python scripts/fit_roofline.py ../shared/validation/kernels.csv

Per GPU: GEMM efficiency = median achieved/peak over bf16 GEMMs of at least 100 GFLOP (training-sized); attention
efficiency = median achieved/peak over FlashAttention-2 forward+backward runs (whose FLOP count
already halves causal attention, like the simulator's executed FLOPs). GPUs without rows use the
median over the fitted GPUs. This is the first-order model; the calibrated compute model replaces it.
"""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

import yaml

from simulon.config.common import DType
from simulon.config.dc import GPUSpec

OUT = Path(__file__).resolve().parents[1] / "src/simulon/compute/data/roofline.yaml"
# the table's hardware names -> shipped GPU templates
HARDWARE = {
    "B200": "b200", "NVIDIA B200 SXM": "b200",
    "Hopper sm_90 (H100-class; exact SKU not named)": "h100-sxm", "NVIDIA H100 SXM": "h100-sxm",
    "H100-SXM5-80GB": "h100-sxm",
    "A100-PCIe-80GB": "a100-pcie-80gb", "NVIDIA A100 PCIe": "a100-pcie-80gb",
    "A100-SXM4-80GB": "a100-sxm-80gb", "NVIDIA A100 SXM": "a100-sxm-80gb",
    "NVIDIA H200 SXM": "h200-sxm", "NVIDIA B300 SXM": "b300", "NVIDIA GB200 SXM": "gb200",
    "AMD MI300X": "mi300x", "AMD MI325X": "mi325x",
}
MIN_GEMM_FLOPS = 1e11  # training-sized GEMMs (a 4096-token, 4096x12288 projection is 4e11)
BF16 = ("bf16", "bf16 out, bf16 in", "bf16xbf16->bf16")


def fit(rows: list[dict[str, str]]) -> dict:
    gemm: dict[str, list[float]] = {}
    attn: dict[str, list[float]] = {}
    for row in rows:
        gpu = HARDWARE.get(row["hardware"])
        if gpu is None or not row["kernel_tflops"]:
            continue
        peak = GPUSpec.model_validate({"from": gpu}).peak_tflops[DType.bf16]
        achieved = float(row["kernel_tflops"]) / peak
        kernel = row["kernel"]
        if "best shape" in kernel:
            continue  # a brute-force search's best shape is the ceiling, not a typical training GEMM
        if row["dtype"] in BF16 and ("GEMM" in kernel or "dot" in kernel or "matmul" in kernel) \
                and "grouped" not in kernel:
            dims = [float(row[d] or 0) for d in ("M", "N", "K")]
            flops = 2 * dims[0] * dims[1] * dims[2] * float(row["batch"] or 1)
            if flops >= MIN_GEMM_FLOPS:
                gemm.setdefault(gpu, []).append(achieved)
        elif kernel == "attention fwd+bwd [FlashAttention-2]":
            attn.setdefault(gpu, []).append(achieved)
    fitted = {
        "gemm": {gpu: round(statistics.median(v), 4) for gpu, v in sorted(gemm.items())},
        "attention": {gpu: round(statistics.median(v), 4) for gpu, v in sorted(attn.items())},
    }
    for family in ("gemm", "attention"):
        fitted[family]["default"] = round(statistics.median(fitted[family].values()), 4)
    fitted["rows"] = {"gemm": {g: len(v) for g, v in sorted(gemm.items())},
                      "attention": {g: len(v) for g, v in sorted(attn.items())}}
    return fitted


def main(path: str) -> None:
    with open(path, newline="") as f:
        fitted = fit(list(csv.DictReader(f)))
    header = ("# Roofline efficiencies (achieved / dense bf16 peak), fitted by scripts/fit_roofline.py from\n"
              "# shared/validation/kernels.csv. Regenerate with:\n"
              "#   uv run python scripts/fit_roofline.py ../shared/validation/kernels.csv\n"
              "# memory_bound is an assumption, not a fit: the table has no bandwidth-bound kernels.\n")
    assumed = {"memory_bound": 0.8}
    tmp = OUT.with_suffix(".tmp")
    tmp.write_text(header + yaml.safe_dump({**fitted, **assumed}, sort_keys=False))
    tmp.replace(OUT)
    print(f"wrote {OUT}")
    print(yaml.safe_dump(fitted, sort_keys=False))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/validation/kernels.csv")
