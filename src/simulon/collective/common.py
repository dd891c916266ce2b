"""Point-to-point flows that a collective decomposes into."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class FlowSet:
    """The flows of one collective instance, column-wise.

    `parent[i]` is the index (within this set) of the flow that must arrive before flow i may start,
    or -1: in a ring, what a rank forwards at step s is what it received at step s-1.
    `src_pos`/`dst_pos` are positions in the group (ring order); ranks are `group[pos]`.
    """

    group: tuple[int, ...]
    src_pos: np.ndarray
    dst_pos: np.ndarray
    size: np.ndarray
    channel: np.ndarray
    step: np.ndarray
    parent: np.ndarray

    def __len__(self) -> int:
        return len(self.size)

    @property
    def src(self) -> np.ndarray:
        return np.asarray(self.group, dtype=np.int64)[self.src_pos]

    @property
    def dst(self) -> np.ndarray:
        return np.asarray(self.group, dtype=np.int64)[self.dst_pos]

    def bytes_sent_by(self, pos: int) -> float:
        return float(self.size[self.src_pos == pos].sum())

    def bytes_received_by(self, pos: int) -> float:
        return float(self.size[self.dst_pos == pos].sum())


@dataclass
class P2PFlow:
    """One flow with explicit dependency chains (MockNccl semantics)."""

    flow_id: int
    src: int
    dst: int
    bytes: float
    channel: int
    step: int
    parent_flow_ids: list[int] = field(default_factory=list)
    child_flow_ids: list[int] = field(default_factory=list)


@dataclass
class CollectiveResult:
    collective_type: str
    algorithm: str
    group_ranks: list[int]
    data_size: float
    num_channels: int
    flows: list[P2PFlow]
