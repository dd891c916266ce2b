"""Where a group's members sit: which scale-up domain (node, or NVLink domain) holds each position.

Hierarchical algorithms (rings that cross nodes once per channel, trees over nodes, NVLS within a node)
need it; a group inside one domain, or with one member per domain, is "flat".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .mesh import disjoint_cycles


@dataclass(frozen=True)
class GroupShape:
    domain: tuple[int, ...]   # per position: its domain, numbered in order of first appearance
    rail_aligned: bool = False  # the fabric is rail-optimized: rings should cross nodes on one rail
    mesh: bool = False          # a domain's GPUs are linked pairwise (no switch): rings spread over the links

    @classmethod
    def of(cls, group, domain_gpus: int, rail_aligned: bool = False, mesh: bool = False) -> GroupShape:
        first: dict[int, int] = {}
        return cls(tuple(first.setdefault(int(r) // domain_gpus, len(first)) for r in group), rail_aligned, mesh)

    @classmethod
    def flat(cls, n: int) -> GroupShape:
        """Every member in one domain."""
        return cls((0,) * n)

    @property
    def n(self) -> int:
        return len(self.domain)

    @cached_property
    def nodes(self) -> int:
        return max(self.domain, default=-1) + 1

    @cached_property
    def members(self) -> list[np.ndarray]:
        """Positions of each domain's members, in group order."""
        domain = np.asarray(self.domain, dtype=np.int64)
        return [np.flatnonzero(domain == d) for d in range(self.nodes)]

    @cached_property
    def local(self) -> np.ndarray:
        """Each position's index among its domain's members."""
        local = np.zeros(self.n, dtype=np.int64)
        for m in self.members:
            local[m] = np.arange(len(m))
        return local

    @property
    def per_node(self) -> int | None:
        """Members per domain when every domain holds the same number, else None."""
        sizes = {len(m) for m in self.members}
        return sizes.pop() if len(sizes) == 1 else None

    @cached_property
    def rotations(self) -> int:
        """After how many channels every domain's row of members starts at the same member again (a ring's channel
        c leaves each domain by its member c mod the domain's count, ring.ring_order): the members per domain, or
        the least common multiple of the counts where domains hold different numbers."""
        return math.lcm(*(len(m) for m in self.members)) if self.n else 1

    @cached_property
    def mesh_cycles(self) -> int:
        """How many different rings a domain's members take in a mesh (1 on a switch): channels that many
        apart run the same flows."""
        return math.lcm(*(len(disjoint_cycles(len(m))) for m in self.members)) if self.mesh and self.n else 1

    @cached_property
    def blocked(self) -> bool:
        """Every domain holds the same number of members, at consecutive positions, domains in order: a shift of
        positions by a multiple of the members per domain maps domain k onto domain k + shift / per_node."""
        per_node = self.per_node
        return per_node is not None and all(d == p // per_node for p, d in enumerate(self.domain))

    @property
    def flat_ring(self) -> bool:
        """One domain, or one member per domain: every member sees the same links (rotation symmetric)."""
        return self.nodes <= 1 or self.per_node == 1

    def regular(self, algorithm: str) -> int:
        """Members per domain, refusing groups whose domains hold different numbers of members."""
        per_node = self.per_node
        if per_node is None:
            raise ValueError(f"{algorithm} needs the same number of group members on every node, got "
                             f"{sorted({len(m) for m in self.members})}")
        return per_node
