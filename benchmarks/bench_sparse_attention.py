"""DeepSeek sparse attention against dense MLA by sequence length: where DeepSeek-V3.2's attention starts to pay.

    uv run python benchmarks/bench_sparse_attention.py [--gpu H800] [--tp 1,8]

No table holds a measured sparse-attention kernel; every attention-like part of DSA runs on cuDNN's attention fit
(layer_kernels.SPARSE_ATTENTION_FIT). First, that fit against the one published figure there is: FlashMLA's README
(github deepseek-ai/FlashMLA) gives its sparse MLA prefill, in the MQA form DSA runs in (128 query heads, one
576-wide key, 512-wide values, top-2,048 keys per query), at up to 640 TFLOP/s forward on an H800 SXM5 (CUDA 12.8)
and up to 1,450 on a B200 (CUDA 12.9); the model's forward at those shapes, at the burst clock a microbenchmark runs
at, beside them.

Then, for one DeepSeek-V3 and one DeepSeek-V3.2 layer's attention block (norm, MLA's projections, the attention, the
output projection; V3.2's also the absorbed up-projections, the lightning indexer and its KL loss), one sequence per
micro-batch, forward and backward, the calibrated compute model's time on one GPU of an HGX H800 node, sequence
parallelism on where tp > 1 (its communication not counted), at 4K to 128K tokens, both attentions on cuDNN's fit
(V3's dense one as Transformer Engine runs it on Hopper). The DeepSeek-V3.2-Exp report's inference costs on H800
show its prefill's cost per token growing far more slowly with the position than V3.1's, the indexer's quadratic
term left (and for short prefills it runs DSA as masked MHA, not the MQA form Megatron-Core trains in): a
plausibility check, not a validation.

Last, whole steps of the two models' attention and dense MLP (two layers, no experts, no MTP module) on one DGX H100
node at 64K tokens, one sequence, tp 1 and 8 (the replay's step), and the search's estimate of the V3.2 step over its
replay at 8K tokens, 8 sequences, for three strategies.
"""

from __future__ import annotations

import argparse

from simulon.compute.analytical import AnalyticalModel
from simulon.config.common import DType
from simulon.config.loading import parse_scenario
from simulon.pipeline import simulate
from simulon.search.run import Search, apply, scenario_for
from simulon.search.space import Strategy
from simulon.workload.kernels import Phase, attention
from simulon.workload.layer_kernels import SPARSE_ATTENTION_FIT, LayerKernels

SEQUENCES = (4096, 8192, 16384, 32768, 65536, 131072)


def attention_block_ms(model: str, seq: int, tp: int, gpu: str) -> float:
    sc = parse_scenario({"datacenter": {"from": "hgx-h800", "cluster": {"num_nodes": 1}, "node": {"gpu": gpu}},
                         "workload": {"model": {"from": model, "num_layers": 4, "mtp_layers": 0},
                                      "parallelism": {"tp": tp, "sequence_parallel": tp > 1},
                                      "training": {"num_gpus": tp, "global_batch_size": 1, "sequence_length": seq,
                                                   "attention": "cudnn"}}})
    kernels = LayerKernels.of(sc.workload)
    compute = AnalyticalModel(sc.datacenter.groups[0].gpu, DType.bf16, sustained_load=True)
    specs = [spec for name in kernels.block_kernels("attention")
             for phase, spec in kernels[name].items() if phase != Phase.recompute]
    return float(compute.seconds(specs).sum()) * 1e3


FLASHMLA_SPARSE_PREFILL = {"hgx-h800": 640.0, "dgx-b200": 1450.0}
"""FlashMLA's sparse MLA prefill forward, "up to" TFLOP/s, as its README states them (H800 SXM5, B200)."""


def flashmla_check() -> None:
    print("Sparse MLA prefill forward (128 heads, 576/512 dims, top-2,048): model against FlashMLA's published peak")
    print(f"{'system':>9} {'queries':>8} {'model TFLOP/s':>14} {'FlashMLA up to':>15}")
    for system, published in FLASHMLA_SPARSE_PREFILL.items():
        gpu = parse_scenario({"datacenter": {"from": system, "cluster": {"num_nodes": 1}}}).datacenter.groups[0].gpu
        compute = AnalyticalModel(gpu, DType.bf16)
        for queries in (4096, 16384, 65536):
            spec = attention(Phase.fwd, 1, 128, 1, queries, 2048, 576, 512, False, 2.0, SPARSE_ATTENTION_FIT)
            rate = spec.hw_flops / float(compute.seconds([spec])[0]) / 1e12
            print(f"{system:>9} {queries:>8} {rate:>14.0f} {published:>15.0f}")
    print()


def dense_layers(model: str, seq: int, tp: int, batch: int) -> dict:
    """The model's attention with a dense MLP: two layers on one DGX H100 node, tp GPUs."""
    return {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}, "node": {"gpus_per_node": tp}},
            "workload": {"model": {"from": model, "num_layers": 2, "mtp_layers": 0, "moe": None},
                         "parallelism": {"tp": tp, "sequence_parallel": tp > 1},
                         "training": {"num_gpus": tp, "global_batch_size": batch, "sequence_length": seq,
                                      "attention": "cudnn"}}}


def steps() -> None:
    print("Two layers (attention and dense MLP) on one DGX H100 node, 65,536 tokens, one sequence: step (ms)")
    print(f"{'tp':>3} {'V3':>9} {'V3.2':>9} {'V3.2 / V3':>10}")
    for tp in (1, 8):
        dense, sparse = (simulate(parse_scenario(dense_layers(m, 65536, tp, 1))).result.iteration_time_ms
                         for m in ("deepseek-v3", "deepseek-v3.2"))
        print(f"{tp:>3} {dense:>9.1f} {sparse:>9.1f} {sparse / dense:>10.2f}")
    print()
    sc = parse_scenario(dense_layers("deepseek-v3.2", 8192, 8, 8))
    search = Search(sc)
    print("V3.2's search estimate over its replay (8 H100, 8,192 tokens, 8 sequences)")
    for tp, pp, dp in ((8, 1, 1), (4, 2, 1), (2, 1, 4)):
        strategy = Strategy(tp, pp, 1, dp, 1, 1, tp, 1, True, "none", "distributed_optimizer", "bf16", False)
        estimated = search.estimator.estimate(strategy, apply(sc.workload, strategy)).iteration_s * 1e3
        replayed = simulate(scenario_for(sc, strategy, 8)).result.iteration_time_ms
        print(f"tp{tp} pp{pp} dp{dp}: {estimated:.1f} / {replayed:.1f} ms = {estimated / replayed:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="H800")
    parser.add_argument("--tp", default="1,8", help="tensor-parallel sizes, comma-separated")
    args = parser.parse_args()
    flashmla_check()
    for tp in (int(t) for t in args.tp.split(",")):
        print(f"One attention block on one {args.gpu}, tp {tp}, forward + backward (ms)")
        print(f"{'tokens':>7} {'V3 (dense MLA)':>15} {'V3.2 (DSA)':>11} {'V3.2 / V3':>10}")
        for seq in SEQUENCES:
            dense, sparse = (attention_block_ms(m, seq, tp, args.gpu) for m in ("deepseek-v3", "deepseek-v3.2"))
            print(f"{seq:>7} {dense:>15.2f} {sparse:>11.2f} {sparse / dense:>10.2f}")
        print()
    steps()


if __name__ == "__main__":
    main()
