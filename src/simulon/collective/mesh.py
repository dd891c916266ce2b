"""Rings in a full mesh: a node whose GPUs are linked pairwise (AMD's xGMI) has no switch to share, so a
ring's channels can each take a different Hamiltonian cycle of the members and together use every link."""

from __future__ import annotations

from functools import cache

import numpy as np


@cache
def disjoint_cycles(k: int) -> tuple[tuple[int, ...], ...]:
    """Arc-disjoint directed Hamiltonian cycles over k vertices, each starting at 0: k-1 of them, which use
    every arc of the complete digraph, except for k = 4 and 6, which have no such decomposition (Tillson,
    1980) and get k-2. Found by depth-first search, which takes milliseconds for the sizes of a node."""
    if k < 3:
        return (tuple(range(k)),)
    target = k - 2 if k in (4, 6) else k - 1
    free = ~np.eye(k, dtype=bool)   # arcs no cycle uses yet
    found: list[tuple[int, ...]] = []

    def paths(path: list[int]):
        if len(path) == k:
            if free[path[-1], 0]:
                yield tuple(path)
            return
        for v in range(1, k):
            if v not in path and free[path[-1], v]:
                yield from paths([*path, v])

    def extend() -> bool:
        if len(found) == target:
            return True
        for cycle in paths([0]):
            arcs = (np.array(cycle), np.roll(cycle, -1))
            free[arcs] = False
            found.append(cycle)
            if extend():
                return True
            found.pop()
            free[arcs] = True
        return False

    extend()
    return tuple(found)
