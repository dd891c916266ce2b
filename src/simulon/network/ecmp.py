"""Deterministic ECMP: a flow's choice among equal-cost next hops is a hash of its endpoints.

Switches hash header fields, so the same pair of endpoints always takes the same path and different pairs
spread (and sometimes collide) over the paths. A fixed integer mix (splitmix64's finaliser) keeps the
choice identical from run to run and machine to machine.
"""

from __future__ import annotations

import numpy as np

_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def ecmp_hash(*keys: np.ndarray) -> np.ndarray:
    """A well-mixed unsigned 64-bit hash of integer key arrays (broadcast together)."""
    h = np.zeros(np.broadcast(*keys).shape, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for key in keys:
            h = (h ^ np.asarray(key).astype(np.uint64)) * _MIX[0]
            h ^= h >> np.uint64(30)
            h *= _MIX[1]
            h ^= h >> np.uint64(27)
            h *= _MIX[2]
            h ^= h >> np.uint64(31)
    return h


def ecmp_choice(count: int, *keys: np.ndarray) -> np.ndarray:
    """Which of `count` equal-cost paths each flow takes (int64 in [0, count))."""
    return (ecmp_hash(*keys) % np.uint64(count)).astype(np.int64)
