"""nccl-tests conventions for reporting a collective: algorithm and bus bandwidth."""

from __future__ import annotations

from .types import CollType


def bus_bandwidth_factor(ctype: CollType, n: int) -> float:
    """busbw = algbw * factor: 2(n-1)/n for all-reduce, 1 for send/receive (each member's link carries the whole
    message), (n-1)/n for the others (nccl-tests PERFORMANCE.md and src/sendrecv.cu)."""
    if n <= 1:
        return 0.0
    if ctype == CollType.SendRecv:
        return 1.0
    return 2 * (n - 1) / n if ctype == CollType.AllReduce else (n - 1) / n
