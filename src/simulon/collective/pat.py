"""PAT (NCCL's Parallel Aggregated Trees) for all-gather and reduce-scatter at scale: log2(n) steps
instead of the ring's n-1, each member aggregating what it forwards.

All-gather as a Bruck exchange: at step k every member sends the 2^k blocks it holds to the member 2^k
behind it (the last step sends what is still missing). Reduce-scatter runs the same exchange backwards,
each member sending partial sums 2^k ahead. Per member (n-1)/n of the buffer moves either way.
"""

from __future__ import annotations

import numpy as np

from .common import FlowBuilder, FlowSet
from .shape import GroupShape


def bruck_steps(n: int) -> int:
    """Steps of a Bruck exchange over n members: ceil(log2 n)."""
    return max(n - 1, 0).bit_length()


def pat_flow_count(n: int, channels: int) -> int:
    """How many flows a PAT all-gather or reduce-scatter makes (counted without making them): every member sends
    once a step on each channel."""
    return bruck_steps(n) * n * channels


def _bruck(group: tuple[int, ...], size: float, channels: int, gather: bool) -> FlowSet:
    n = len(group)
    out = FlowBuilder(group)
    steps = bruck_steps(n)
    block = size / (n * channels)
    pos = np.arange(n)
    ch = np.arange(channels)[:, None]
    prev = np.full((channels, n), -1, dtype=np.int64)   # flow index each member received at the last step
    for t in range(steps):
        k = t if gather else steps - 1 - t
        dist = 1 << k
        blocks = min(dist, n - dist)
        peer = (pos - dist) % n if gather else (pos + dist) % n
        flows = out.add(np.broadcast_to(pos, (channels, n)), np.broadcast_to(peer, (channels, n)), blocks * block,
                        ch, t, prev.reshape(-1, 1))
        prev = np.empty_like(prev)
        prev[:, peer] = flows
    return out.build()


def pat_all_gather(group: tuple[int, ...], shape: GroupShape, size: float, channels: int) -> FlowSet:
    return _bruck(group, size, channels, gather=True)


def pat_reduce_scatter(group: tuple[int, ...], shape: GroupShape, size: float, channels: int) -> FlowSet:
    return _bruck(group, size, channels, gather=False)
