"""Ring algorithms as NCCL runs them: the buffer is split into channels, each channel into n chunks,
and at every step each rank sends one chunk to its successor in the ring.

Per rank, a ring reduce-scatter or all-gather sends (n-1)/n of the buffer, an all-reduce 2(n-1)/n.
"""

from __future__ import annotations

import numpy as np

from .common import FlowSet


def _ring(group: tuple[int, ...], chunk: float, steps: int, channels: int) -> FlowSet:
    """`steps` ring steps over `channels` channels; flow (step, pos, ch) forwards what pos-1 sent at step-1."""
    n = len(group)
    step, pos, ch = (a.ravel() for a in np.meshgrid(np.arange(steps), np.arange(n), np.arange(channels),
                                                    indexing="ij"))
    index = lambda s, p, c: (s * n + p) * channels + c  # noqa: E731 - the layout of the meshgrid above
    parent = np.where(step > 0, index(step - 1, (pos - 1) % n, ch), -1)
    return FlowSet(group, pos, (pos + 1) % n, np.full(len(step), chunk), ch, step, parent)


def ring_reduce_scatter(group: tuple[int, ...], size: float, channels: int) -> FlowSet:
    """size: the input buffer of each rank (nccl-tests convention)."""
    n = len(group)
    return _ring(group, size / (n * channels), n - 1, channels)


def ring_all_gather(group: tuple[int, ...], size: float, channels: int) -> FlowSet:
    """size: the gathered output buffer of each rank (nccl-tests convention)."""
    n = len(group)
    return _ring(group, size / (n * channels), n - 1, channels)


def ring_all_reduce(group: tuple[int, ...], size: float, channels: int) -> FlowSet:
    """Reduce-scatter then all-gather: 2(n-1) steps, one chain per channel."""
    n = len(group)
    return _ring(group, size / (n * channels), 2 * (n - 1), channels)


def all_to_all(group: tuple[int, ...], size: float, channels: int) -> FlowSet:
    """Every rank sends size/n to every other rank at once (NCCL's grouped send/recv); no chains."""
    n = len(group)
    src, offset, ch = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(1, n), np.arange(channels),
                                                      indexing="ij"))
    count = len(src)
    return FlowSet(group, src, (src + offset) % n, np.full(count, size / (n * channels)), ch,
                   np.zeros(count, dtype=np.int64), np.full(count, -1))
