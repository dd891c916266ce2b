"""DeepSeek sparse attention against dense MLA by sequence length: where DeepSeek-V3.2's attention starts to pay.

    uv run python benchmarks/bench_sparse_attention.py [--gpu H800] [--tp 1,8]

For one DeepSeek-V3 and one DeepSeek-V3.2 layer's attention block (norm, MLA's projections, the attention, the
output projection; V3.2's also the absorbed up-projections, the lightning indexer and its KL loss), one sequence
per micro-batch, forward and backward, the calibrated compute model's time on one GPU of an HGX H800 node, sequence
parallelism on where tp > 1 (its communication is not counted here), at 4K to 128K tokens. No table holds a
measured sparse-attention kernel: every attention-like part runs on the run's attention fit (LayerKernels
sparse_impl). The DeepSeek-V3.2-Exp report's inference costs on H800 show its prefill's cost per token growing
far more slowly with the position than V3.1's, the indexer's quadratic term left (and for short prefills it runs
DSA as masked MHA, not the MQA form Megatron-Core trains in): a plausibility check, not a validation.
"""

from __future__ import annotations

import argparse

from simulon.compute.analytical import AnalyticalModel
from simulon.config.common import DType
from simulon.config.loading import parse_scenario
from simulon.workload.kernels import Phase
from simulon.workload.layer_kernels import LayerKernels

SEQUENCES = (4096, 8192, 16384, 32768, 65536, 131072)


def attention_block_ms(model: str, seq: int, tp: int, gpu: str) -> float:
    sc = parse_scenario({"datacenter": {"from": "hgx-h800", "cluster": {"num_nodes": 1}, "node": {"gpu": gpu}},
                         "workload": {"model": {"from": model, "num_layers": 4, "mtp_layers": 0},
                                      "parallelism": {"tp": tp, "sequence_parallel": tp > 1},
                                      "training": {"num_gpus": tp, "global_batch_size": 1, "sequence_length": seq}}})
    kernels = LayerKernels.of(sc.workload)
    compute = AnalyticalModel(sc.datacenter.groups[0].gpu, DType.bf16, sustained_load=True)
    specs = [spec for name in kernels.block_kernels("attention")
             for phase, spec in kernels[name].items() if phase != Phase.recompute]
    return float(compute.seconds(specs).sum()) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="H800")
    parser.add_argument("--tp", default="1,8", help="tensor-parallel sizes, comma-separated")
    args = parser.parse_args()
    for tp in (int(t) for t in args.tp.split(",")):
        print(f"One attention block on one {args.gpu}, tp {tp}, forward + backward (ms)")
        print(f"{'tokens':>7} {'V3 (dense MLA)':>15} {'V3.2 (DSA)':>11} {'V3.2 / V3':>10}")
        for seq in SEQUENCES:
            dense, sparse = (attention_block_ms(m, seq, tp, args.gpu) for m in ("deepseek-v3", "deepseek-v3.2"))
            print(f"{seq:>7} {dense:>15.2f} {sparse:>11.2f} {sparse / dense:>10.2f}")
        print()


if __name__ == "__main__":
    main()
