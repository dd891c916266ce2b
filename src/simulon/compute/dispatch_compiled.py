"""dispatch.py's greedy list scheduling compiled by numba, step for step: a binary min-heap of the SMs' free times in
an array, each CTA added to the earliest. The same additions in the same order as the Python heap give the same free
times (which SM takes a tie does not change them), so the same makespan to the bit (tests/compute/test_dispatch.py).
Cached next to this file, as engine/compiled.py's loop is."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def greedy_makespan(sequence: np.ndarray, slots: int) -> float:
    free = np.zeros(slots)
    for j in range(sequence.shape[0]):
        value = free[0] + sequence[j]
        pos = 0
        while True:  # sift the root's new value down
            child = 2 * pos + 1
            if child >= slots:
                break
            if child + 1 < slots and free[child + 1] < free[child]:
                child += 1
            if free[child] < value:
                free[pos] = free[child]
                pos = child
            else:
                break
        free[pos] = value
    return free.max()
