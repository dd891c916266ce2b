"""How far the steady-state estimate (collectives too large to replay) lands from replay, by algorithm.

    uv run python benchmarks/bench_steady_state.py

One all-reduce (all-gather for PAT) over 4 DGX H100 nodes on Spectrum-X, whose scale-out switch reduces so
that CollNet runs too, sizes 16 KiB to 1 GiB: each size replayed flow by flow and estimated, and the ratio
estimate / replay printed (1.00: the same time).
"""

from __future__ import annotations

import simulon.pipeline as pipeline
from simulon.collective.types import CollType
from simulon.config.dc import DatacenterConfig

SIZES = [2.0**p for p in range(14, 31, 2)]
EVERY_GPU = tuple(range(32))
ONE_PER_NODE = tuple(range(0, 32, 8))
CASES = [("ring", CollType.AllReduce, EVERY_GPU), ("tree", CollType.AllReduce, EVERY_GPU),
         ("tree", CollType.AllReduce, ONE_PER_NODE), ("nvls_tree", CollType.AllReduce, EVERY_GPU),
         ("collnet_direct", CollType.AllReduce, EVERY_GPU), ("collnet_chain", CollType.AllReduce, EVERY_GPU),
         ("pat", CollType.AllGather, ONE_PER_NODE)]


def main() -> None:
    dc = DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": 4}, "network": {
        "scale_out": {"topology": "spectrum-x",
                      "switch": {"from": "spectrum-4-sn5600", "in_network_reduction": True}}}})
    labels = " ".join(f"{s / 2**10:g}K" if s < 2**20 else f"{s / 2**20:g}M" for s in SIZES)
    print(f"{'algorithm':>15} {'ranks':>5}  estimate / replay at {labels}")
    for algorithm, ctype, group in CASES:
        pipeline.REPLAY_MAX_FLOWS = 10**9
        replayed = pipeline.collective_sweep(dc, ctype, group, SIZES, algorithm)
        pipeline.REPLAY_MAX_FLOWS = 0
        estimated = pipeline.collective_sweep(dc, ctype, group, SIZES, algorithm)
        ratios = " ".join(f"{e.time_us / r.time_us:.2f}" for r, e in zip(replayed, estimated, strict=True))
        print(f"{algorithm:>15} {len(group):>5}  {ratios}")


if __name__ == "__main__":
    main()
