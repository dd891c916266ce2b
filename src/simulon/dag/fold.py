"""Symmetry folding: simulate one representative per class of identical GPUs.

Data-parallel replicas (and tensor-parallel peers) run the same kernels on the same shapes and, on a
symmetric placement, see the same links. Simulating rank r with coordinate 0 along the folded axes
stands for all of them; flows to folded peers land on the representative's own links, weighted so
that every link still carries the traffic of its whole class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..workload.layout import RankLayout

FoldMode = Literal["auto", "full", "symmetric"]
AUTO_FULL_MAX_GPUS = 64
"""`auto` expands every GPU up to this size (a trace with every GPU reads best), and folds above it."""


@dataclass(frozen=True)
class Fold:
    """rep[g]: the simulated GPU that stands for GPU g (rep[g] == g for simulated GPUs)."""

    rep: np.ndarray
    axes: tuple[str, ...]

    @property
    def multiplicity(self) -> np.ndarray:
        """How many GPUs each GPU stands for (0 for GPUs that are not simulated)."""
        return np.bincount(self.rep, minlength=len(self.rep))

    def is_simulated(self, rank: int) -> bool:
        return int(self.rep[rank]) == rank

    @classmethod
    def identity(cls, num_gpus: int) -> Fold:
        return cls(np.arange(num_gpus), ())


def _axis_symmetric(stride: int, size: int, gpus_per_node: int) -> bool:
    """A group of `size` ranks `stride` apart sees the same links from every member when it lies inside
    one node, or when each member sits at the same position of a different node."""
    if size == 1:
        return False  # nothing to fold
    inside_node = gpus_per_node % (stride * size) == 0
    one_per_node = stride % gpus_per_node == 0
    return inside_node or one_per_node


def _nics_consistent(rep: np.ndarray, gpus_per_nic: int) -> bool:
    """Folding maps each NIC onto one representative NIC: GPUs sharing a NIC must have reps sharing one."""
    nic_of_rep = (rep // gpus_per_nic).reshape(-1, gpus_per_nic)
    return bool((nic_of_rep == nic_of_rep[:, :1]).all())


def choose_fold(layout: RankLayout, gpus_per_node: int, gpus_per_nic: int, mode: FoldMode = "auto") -> Fold:
    """Fold the data- and tensor-parallel axes whose placement is symmetric (or none, for `full`)."""
    if mode == "full" or (mode == "auto" and layout.num_gpus <= AUTO_FULL_MAX_GPUS):
        return Fold.identity(layout.num_gpus)
    coords = layout.coords.copy()
    axes = []
    for axis, column, stride, size in (("dp", 2, layout.tp * layout.cp, layout.dp), ("tp", 0, 1, layout.tp)):
        if layout.cp > 1 and axis == "dp":
            continue  # context-parallel peers differ in their ring-attention partners
        if _axis_symmetric(stride, size, gpus_per_node):
            trial = coords.copy()
            trial[:, column] = 0
            rep = layout.rank(*trial.T)
            if _nics_consistent(rep, gpus_per_nic):
                coords, axes = trial, [*axes, axis]
    rep = np.asarray(layout.rank(*coords.T), dtype=np.int64)
    return Fold(rep, tuple(axes))
