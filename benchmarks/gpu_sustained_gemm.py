"""Sustained tensor-core throughput on the local GPU: one square GEMM repeated back to back for a while, its
TFLOP/s printed per second of running, so that the clock a training step settles at (compute/data/calibration.yaml
`sustained_clock`) can be read off a real GPU rather than assumed. Needs torch and a CUDA GPU.

    python benchmarks/gpu_sustained_gemm.py [--size 8192] [--seconds 15] [--dtype bf16|fp8]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from simulon.cli.profile import need_torch
from simulon.config.errors import ConfigError
from simulon.profiling.timing import first_and_settled


def need_gpu(device: str = "cuda") -> None:
    """Exit 2 with `simulon profile gpu`'s one-line refusal (cli.profile.need_torch) where torch is not installed
    or, for `device` cuda, no CUDA GPU is visible: what every GPU script here needs before it times anything."""
    try:
        need_torch(device)
    except ConfigError as exc:
        print(f"{sys.argv[0]}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def square_gemm(n: int, dtype: str) -> Callable[[], object]:
    """One n x n x n GEMM on random operands, bf16 or fp8 (torch._scaled_mm, unit scales, bf16 out)."""
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    if dtype == "fp8":
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t().contiguous().t()
        one = torch.ones((), device="cuda")
        return lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return lambda: a @ b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--dtype", choices=("bf16", "fp8"), default="bf16")
    args = parser.parse_args()
    need_gpu()
    import torch

    n = args.size
    gemm = square_gemm(n, args.dtype)
    flops = 2.0 * n ** 3
    for _ in range(10):
        gemm()
    torch.cuda.synchronize()
    began, rates = time.perf_counter(), []
    while time.perf_counter() - began < args.seconds:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        count = 0
        while count < 50:
            gemm()
            count += 1
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) * 1e-3
        rates.append(count * flops / seconds / 1e12)
        print(f"{time.perf_counter() - began:7.2f} s  {rates[-1]:7.1f} TFLOP/s", flush=True)
    first, last = first_and_settled(rates)
    print(f"{args.dtype} {n}^3: first {first:.1f} TFLOP/s, settled (last third) {last:.1f} TFLOP/s, "
          f"ratio {last / first:.3f}")


if __name__ == "__main__":
    main()
