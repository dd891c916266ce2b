"""Megatron-Core rank layout: tensor-parallel fastest, then context, data, pipeline.

Expert layers lay the same ranks of a pipeline stage out again, expert-tensor-parallel fastest, then expert
parallel, then expert-data parallel (Megatron-Core's expert RankGenerator, order tp-ep-dp; "MoE parallel
folding"). With expert tensor parallelism equal to tp (the default), expert parallelism is carved out of the
data(x context) dimension: ep consecutive dp*cp indices form an expert-parallel group, and ranks ep apart
the expert-data-parallel group.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

AXES = ("tp", "cp", "dp", "pp")


@dataclass(frozen=True)
class RankLayout:
    tp: int
    cp: int
    dp: int
    pp: int
    ep: int = 1
    fsdp: int = 1  # ranks of the data x context dimension a parameter is sharded over (FSDP)
    etp: int | None = None  # expert tensor parallelism (default tp)
    cp_a2a: int = 1  # consecutive context-parallel ranks that split the heads by all-to-all (the rest: a ring)
    embedding_stages: tuple[int, ...] = ()  # stages holding word-embedding copies (default: the first and last)

    @property
    def expert_tp(self) -> int:
        return self.etp or self.tp

    @property
    def fsdp_replicas(self) -> int:
        """Copies of each FSDP shard (hybrid sharding: shard inside groups, replicate across them)."""
        return self.cp * self.dp // self.fsdp

    @property
    def num_gpus(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    @property
    def edp(self) -> int:
        """Size of the expert-data-parallel group (gradient sync of expert weights)."""
        return self.tp * self.cp * self.dp // (self.ep * self.expert_tp)

    @property
    def expert_fsdp(self) -> int:
        """Ranks an expert parameter's FSDP shards span: those holding the same experts (the expert-data-parallel
        group), in the share of data x context the FSDP group takes (all of it but under HSDP): fsdp / ep where
        the experts split over tp as the dense layers do, tp / etp times that where they split over fewer."""
        return max(self.edp * self.fsdp // (self.cp * self.dp), 1)

    def rank(self, tp: int = 0, cp: int = 0, dp: int = 0, pp: int = 0) -> int:
        return tp + self.tp * (cp + self.cp * (dp + self.dp * pp))

    @cached_property
    def coords(self) -> np.ndarray:
        """coords[rank] = (tp, cp, dp, pp) index of every rank."""
        ranks = np.arange(self.num_gpus)
        tp = ranks % self.tp
        cp = ranks // self.tp % self.cp
        dp = ranks // (self.tp * self.cp) % self.dp
        pp = ranks // (self.tp * self.cp * self.dp)
        return np.stack([tp, cp, dp, pp], axis=1)

    def stage_of(self, rank: int) -> int:
        return int(self.coords[rank, 3])

    def group(self, axis: str, rank: int) -> tuple[int, ...]:
        """The ranks of `rank`'s process group along one axis, in ring order.

        axis is one of tp, cp, dp, pp, cp_a2a and cp_p2p (context parallelism's all-to-all groups and the ring
        between them, Megatron's hierarchical context-parallel groups), ep (expert parallel), etp (expert tensor
        parallel), edp (expert data parallel) or dp_cp (data x context, the dense-gradient group), fsdp /
        fsdp_replica (the FSDP shard group and its replicas), emb (the stages holding the word embedding: the first
        and the last, or embedding_stages) or mirror (stage s and
        stage pp - 1 - s, which DualPipe makes hold the same layers).
        """
        t, c, d, p = (int(x) for x in self.coords[rank])
        if axis in AXES:
            sizes = {"tp": self.tp, "cp": self.cp, "dp": self.dp, "pp": self.pp}
            idx = {"tp": t, "cp": c, "dp": d, "pp": p}
            return tuple(self.rank(**{**idx, axis: i}) for i in range(sizes[axis]))
        if axis in ("cp_a2a", "cp_p2p"):  # hierarchical context parallelism: all-to-all inside blocks of
            inner = c % self.cp_a2a           # consecutive cp ranks, the ring between the blocks
            members = (range(c - inner, c - inner + self.cp_a2a) if axis == "cp_a2a"
                       else range(inner, self.cp, self.cp_a2a))
            return tuple(self.rank(t, m, d, p) for m in members)
        if axis == "etp":  # expert tensor parallelism: consecutive ranks, as the expert layout puts it fastest
            start = rank - rank % self.expert_tp
            return tuple(range(start, start + self.expert_tp))
        dc = c + self.cp * d  # position along the flattened data x context dimension
        if axis in ("ep", "edp") and self.expert_tp != self.tp:
            return self._expert_group(axis, rank)
        if axis == "dp_cp":
            members = range(self.cp * self.dp)
        elif axis == "ep":
            members = range(dc - dc % self.ep, dc - dc % self.ep + self.ep)
        elif axis == "fsdp":
            members = range(dc - dc % self.fsdp, dc - dc % self.fsdp + self.fsdp)
        elif axis == "fsdp_replica":
            members = range(dc % self.fsdp, self.cp * self.dp, self.fsdp)
        elif axis == "emb":  # copies of the word embedding (tied, or multi-token prediction's) share one matrix
            return tuple(self.rank(t, c, d, s) for s in self.embedding_stages or (0, self.pp - 1))
        elif axis == "mirror":
            return tuple(sorted((self.rank(t, c, d, p), self.rank(t, c, d, self.pp - 1 - p))))
        elif axis == "edp":
            members = range(dc % self.ep, self.cp * self.dp, self.ep)
        else:
            raise ValueError(f"unknown process-group axis {axis!r}")
        return tuple(self.rank(tp=t, cp=m % self.cp, dp=m // self.cp, pp=p) for m in members)

    def _expert_group(self, axis: str, rank: int) -> tuple[int, ...]:
        """Expert-parallel or expert-data-parallel group when experts have their own tensor parallelism: the
        stage's ranks decomposed expert-tp fastest, then ep, then edp."""
        per_stage = self.tp * self.cp * self.dp
        base, m = rank - rank % per_stage, rank % per_stage
        etp, ep = self.expert_tp, self.ep
        t, e, d = m % etp, m // etp % ep, m // (etp * ep)
        if axis == "ep":
            return tuple(base + t + etp * (i + ep * d) for i in range(ep))
        return tuple(base + t + etp * (e + ep * j) for j in range(self.edp))
