"""Hybrid Mamba models: the SSD scan against flash attention by sequence length, and what a hybrid step costs.

    uv run python benchmarks/bench_hybrid.py [--gpu H100] [--runs 3]

1. For a Nemotron-H 8B layer on one GPU (tp 1, micro-batch 1), the calibrated compute model's time of the Mamba-2
   scan (its five kernels, forward and backward) and of FlashAttention-2 (forward and backward) at 2K to 16K
   tokens, and their ratio. No table holds a measured Mamba kernel; the Mamba-2 paper (arXiv 2405.21060, its
   efficiency benchmark) reports SSD faster than FlashAttention-2 from 2K tokens and about 6x at 16K, at its own
   head and state sizes on an A100: a plausibility check, not a validation.
2. For a Qwen3-Next layer on one GPU, the gated delta net's kernels between its projections against the gated
   attention's core (cuDNN), 2K to 64K tokens: flash-linear-attention's chunked delta rule is linear in the sequence,
   attention quadratic (workload/gated_delta.py; no table holds a measured delta-rule kernel).
3. Nemotron-H 8B on two DGX H100 nodes (tp 2, pp 2, sequence parallelism, 8K tokens, 16 micro-batches): the
   simulated step and its wall time, the median of --runs.
"""

from __future__ import annotations

import argparse
import statistics
import time

from simulon.compute.analytical import AnalyticalModel
from simulon.config.common import DType
from simulon.config.loading import parse_scenario
from simulon.pipeline import simulate
from simulon.workload.gated_delta import GDN_SCAN
from simulon.workload.kernels import Phase
from simulon.workload.layer_kernels import LayerKernels

SEQUENCES = (2048, 4096, 8192, 16384)


def kernels_ms(kernels: LayerKernels, model: AnalyticalModel, names) -> float:
    """The compute model's milliseconds of these kernels, forward and backward, one layer."""
    specs = [spec for name in names for phase, spec in kernels[name].items() if phase != Phase.recompute]
    return 1e3 * float(model.seconds(specs).sum())


def scan_and_flash_ms(gpu: str, seq: int) -> tuple[float, float]:
    """A Nemotron-H 8B layer's SSD scan and FlashAttention-2 core on one `gpu` at `seq` tokens, forward and backward
    (ms; README's figures, tests/workload/test_hybrid.py)."""
    sc = parse_scenario({"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}, "node": {"gpu": gpu}},
                         "workload": {"model": {"from": "nemotron-h-8b"},
                                      "training": {"num_gpus": 1, "global_batch_size": 1, "sequence_length": seq}}})
    kernels = LayerKernels.of(sc.workload)
    model = AnalyticalModel(sc.datacenter.groups[0].gpu, DType.bf16, sustained_load=True)
    scan, flash = (kernels_ms(kernels, model, names) for names in (kernels.mamba_scan, kernels.attention_core))
    return scan, flash


def scan_against_attention(gpu: str) -> None:
    print(f"Nemotron-H 8B, one layer on one {gpu}, forward + backward (ms)")
    print(f"{'tokens':>7} {'SSD scan':>9} {'flash':>9} {'flash / scan':>13}")
    for seq in SEQUENCES:
        scan, flash = scan_and_flash_ms(gpu, seq)
        print(f"{seq:>7,} {scan:>9.3f} {flash:>9.3f} {flash / scan:>13.2f}")


def delta_rule_against_attention(gpu: str) -> None:
    """Qwen3-Next's two mixers on one GPU (tp 1, one sequence): the gated delta net's kernels between its
    projections (workload/gated_delta.py GDN_SCAN: the chunked delta rule, its preparation and gated norm) against
    the gated attention's core (cuDNN's fused attention), forward and backward."""
    print(f"\nQwen3-Next, one layer's mixer core on one {gpu}, forward + backward (ms)")
    print(f"{'tokens':>7} {'delta rule':>11} {'attention':>10} {'attention / delta':>18}")
    for seq in (*SEQUENCES, 32768, 65536):
        sc = parse_scenario({"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}, "node": {"gpu": gpu}},
                             "workload": {"model": {"from": "qwen3-next-80b-a3b"},
                                          "training": {"num_gpus": 1, "global_batch_size": 1, "sequence_length": seq,
                                                       "attention": "cudnn"}}})
        kernels = LayerKernels.of(sc.workload)
        model = AnalyticalModel(sc.datacenter.groups[0].gpu, DType.bf16, sustained_load=True)
        delta, core = (kernels_ms(kernels, model, names) for names in (GDN_SCAN, kernels.attention_core))
        print(f"{seq:>7,} {delta:>11.3f} {core:>10.3f} {core / delta:>18.2f}")


def step(gpu: str, runs: int) -> None:
    sc = parse_scenario({
        "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 2}, "node": {"gpu": gpu}},
        "workload": {"model": {"from": "nemotron-h-8b"}, "parallelism": {"tp": 2, "pp": 2, "sequence_parallel": True},
                     "training": {"global_batch_size": 64, "sequence_length": 8192}}})
    walls, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = simulate(sc).result
        walls.append(time.perf_counter() - start)
    print(f"\nNemotron-H 8B on 2 DGX nodes of {gpu}, tp 2 pp 2 dp 4, 8K tokens, 16 micro-batches: "
          f"{result.iteration_time_ms:,.1f} ms, MFU {100 * result.mfu:.1f}%; simulated in "
          f"{statistics.median(walls):.2f} s (median of {runs})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="H100")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    scan_against_attention(args.gpu)
    delta_rule_against_attention(args.gpu)
    step(args.gpu, args.runs)


if __name__ == "__main__":
    main()
