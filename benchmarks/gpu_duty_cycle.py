"""How far a GPU's clock falls when its tensor cores are busy only part of the time: a block of GEMMs, then a gap
(the GPU idle, as while a training step waits on communication, or streaming HBM, as in its memory-bound kernels),
repeated for seconds at several duty cycles. `gpu_sustained_gemm.py` is the duty cycle 1 case, whose settled rate
the calibration's `sustained_clock` holds. Needs torch and a CUDA GPU.

    python3 benchmarks/gpu_duty_cycle.py [--size 8192] [--seconds 6] [--duty 1,0.8,0.4] [--dtype bf16|fp8] -o OUT.json

Each configuration starts from a GPU left idle for 2 s; the GEMM block (about 2 ms) is timed with CUDA events, the
gap is a host sleep after the block has finished (idle) or a chain of device-to-device copies queued behind it
(copy), sized from the block's burst time (the fastest of three blocks once the clock is back up from idle) so that
the GEMMs fill `duty` of the loop. Prints and writes each configuration's block time in its first tenth and settled
(last third), and the loop's wall time per block (block and gap: the duty cycle reached).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_sustained_gemm import need_gpu, square_gemm

from simulon.profiling.timing import first_and_settled, queued_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--duty", default="1,0.8,0.6,0.4")
    parser.add_argument("--dtype", choices=("bf16", "fp8"), default="bf16")
    args = parser.parse_args()
    need_gpu()
    import torch

    n = args.size
    gemm = square_gemm(n, args.dtype)
    src = torch.empty(1 << 28, device="cuda", dtype=torch.bfloat16)  # 512 MiB: several times the L2
    dst = torch.empty_like(src)

    def copy() -> None:
        dst.copy_(src)

    for _ in range(5):
        gemm()
        copy()
    copy_ms = statistics.median(queued_ms(copy, 1) for _ in range(10))
    block = max(1, round(2.0 / queued_ms(gemm, 1)))
    results = []
    for filler in ("idle", "copy"):
        for duty in (float(d) for d in args.duty.split(",")):
            if filler == "copy" and duty == 1.0:
                continue
            torch.cuda.synchronize()
            time.sleep(2.0)
            burst_ms = min(queued_ms(gemm, block) for _ in range(3))  # the clock back up from idle
            gap_ms = burst_ms * (1 - duty) / duty
            copies = round(gap_ms / copy_ms)
            blocks, began = [], time.perf_counter()
            while time.perf_counter() - began < args.seconds:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(block):
                    gemm()
                end.record()
                if filler == "copy":
                    for _ in range(copies):
                        copy()
                    end.synchronize()
                else:
                    end.synchronize()
                    if gap_ms > 0:
                        time.sleep(gap_ms * 1e-3)
                blocks.append(start.elapsed_time(end))
            wall_ms = (time.perf_counter() - began) * 1e3 / len(blocks)
            first, settled = first_and_settled(blocks)
            results.append({"filler": filler, "duty": duty, "gemms_per_block": block, "burst_ms": burst_ms,
                            "gap_ms": gap_ms, "copies": copies if filler == "copy" else 0, "wall_ms": wall_ms,
                            "first_ms": first, "settled_ms": settled, "blocks": len(blocks),
                            "tflops_settled": 2 * n ** 3 * block / settled / 1e9})
            r = results[-1]
            print(f"{filler:4s} duty {duty:.2f}: block of {block} GEMMs {first:.3f} ms first, {settled:.3f} settled "
                  f"(ratio {settled / first:.3f}, {r['tflops_settled']:.0f} TFLOP/s), {wall_ms:.3f} ms a loop, "
                  f"over {len(blocks)} blocks",
                  flush=True)
            args.output.write_text(json.dumps({"size": n, "dtype": args.dtype, "copy_ms": copy_ms, "runs": results},
                                              indent=1))


if __name__ == "__main__":
    main()
