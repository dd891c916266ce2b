"""Point-to-point flows that a collective decomposes into, with their dependencies, and the message sizes a
collective takes (check_message_size: the one check of decompose_collective's and time_collective's sizes)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from numbers import Real

import numpy as np

MAX_SIZE = 1e18
"""An exabyte: a message that large is a million times any GPU's memory (the bound of every size simulon reads,
config.units.check_size's among them: it lives here, below config, so that the collective package can check a
message against it)."""

SWITCH = -1
"""Position of the in-network reduction point (the NVSwitch with NVLS, the SHARP switch with CollNet): a
flow to it carries a member's data into the reduction, a flow from it the reduced (or multicast) data."""


@dataclass(frozen=True)
class FlowSet:
    """The flows of one collective instance, column-wise.

    Flow i may start once all its parents, `parent_idx[parent_ptr[i]:parent_ptr[i+1]]` (indices within
    this set), have arrived: in a ring, what a rank forwards at step s is what it received at step s-1; in
    a tree, what a rank sends up is the reduction of what all its children sent.
    `src_pos`/`dst_pos` are positions in the group (ranks are `group[pos]`), or SWITCH.
    `tag` tells apart the flows one member sends in one step and channel, the same way for every member
    when the set maps onto itself under a shift of positions by `symmetry` (None: by none), so that a
    member can stand for those a multiple of it away. `switch` names what SWITCH stands for: "scale_up" or
    "scale_out" ("" when unused).
    """

    group: tuple[int, ...]
    src_pos: np.ndarray
    dst_pos: np.ndarray
    size: np.ndarray
    channel: np.ndarray
    step: np.ndarray
    tag: np.ndarray
    parent_ptr: np.ndarray
    parent_idx: np.ndarray
    symmetry: int | None = 1
    switch: str = ""
    lanes: int = 1              # channels each simulated channel stands for (identical channels merged)
    periods: int = 1            # >1: the flows are one period of a schedule repeated this many times, each
                                # flow's parents in the period before (a ring's steps, for estimates at scale)
    grouped_sends: bool = False  # NCCL's grouped send/receive (all-to-all): its parts pay the p2p hop
    send_receive: bool = False   # one send and one receive a member (a ring shift): its own launch
    local_pass: str = ""         # how a member's channel handles its last received chunk before it is done:
                                 # a kind of network.calibration.LOCAL_PASSES or "" (see
                                 # collective.decompose.local_pass)

    def __len__(self) -> int:
        return len(self.size)

    def in_steady_state(self) -> FlowSet:
        """One period of a schedule repeated `periods` times (a ring's first step) as one flow per sender and
        channel carrying every period's bytes, with no parents: each hop of the ring streams its whole share
        while the others do, and pays its per-step latency `periods` times (engine/flows.py). What a ring of
        hundreds of members takes in a step too large to replay step by step (dag.fold.Fold.steady_rings)."""
        if self.periods == 1:
            return self
        return replace(self, size=self.size * self.periods, parent_ptr=np.zeros(len(self) + 1, dtype=np.int64),
                       parent_idx=np.zeros(0, dtype=np.int64))

    def parents(self, i: int) -> np.ndarray:
        return self.parent_idx[self.parent_ptr[i]:self.parent_ptr[i + 1]]

    @property
    def parent_of(self) -> np.ndarray:
        """For every parent link, the flow it belongs to (aligned with parent_idx)."""
        return np.repeat(np.arange(len(self)), np.diff(self.parent_ptr))

    @property
    def streamed(self) -> np.ndarray:
        """Per parent link: the parent is the previous flow its sender pushes (the switch, for legs out of
        it), so the child may start once the parent's last byte has left rather than when it arrives. A leg
        into the switch answers a load or store its GPU issued: the GPU's next one waits for it."""
        n = len(self.group)
        sender = np.where(self.src_pos >= 0, self.src_pos, n + self.dst_pos)
        sender = np.where(self.dst_pos == SWITCH, -1 - np.arange(len(self)), sender)
        return sender[self.parent_idx] == sender[self.parent_of]

    @property
    def src(self) -> np.ndarray:
        return _ranks(self.group, self.src_pos)

    @property
    def dst(self) -> np.ndarray:
        return _ranks(self.group, self.dst_pos)

    def bytes_sent_by(self, pos: int) -> float:
        return float(self.size[self.src_pos == pos].sum())

    def bytes_received_by(self, pos: int) -> float:
        return float(self.size[self.dst_pos == pos].sum())


def _ranks(group: tuple[int, ...], pos: np.ndarray) -> np.ndarray:
    ranks = np.asarray(group, dtype=np.int64)[np.maximum(pos, 0)] if len(group) else np.zeros(0, dtype=np.int64)
    return np.where(pos >= 0, ranks, SWITCH)


class FlowBuilder:
    """Accumulates blocks of flows; each block names up to a few parents per flow (-1: none)."""

    def __init__(self, group: tuple[int, ...], switch: str = ""):
        self.group, self.switch = group, switch
        self.cols: dict[str, list[np.ndarray]] = {k: [] for k in ("src", "dst", "size", "channel", "step", "tag")}
        self.parents: list[np.ndarray] = []   # per block: [count, k] parent indices, -1 padded
        self.count = 0

    def add(self, src, dst, size, channel, step, parents=None, tag=None) -> np.ndarray:
        """Append flows (arrays broadcast together); return their indices."""
        src, dst, size, channel, step = np.broadcast_arrays(*(np.asarray(a) for a in (src, dst, size, channel, step)))
        count = src.size
        n = len(self.group)
        if tag is None:  # a point-to-point flow is told apart by how far round the group it goes
            tag = np.where((src >= 0) & (dst >= 0), (dst - src) % max(n, 1), n)
        for key, value in zip(("src", "dst", "size", "channel", "step", "tag"),
                              (src, dst, size, channel, step, np.broadcast_to(tag, src.shape)), strict=True):
            self.cols[key].append(np.asarray(value).ravel())
        p = np.full((count, 0), -1, dtype=np.int64) if parents is None else np.asarray(parents, dtype=np.int64)
        self.parents.append(p.reshape(count, -1) if count else np.zeros((0, 0), dtype=np.int64))
        first = self.count
        self.count += count
        return np.arange(first, first + count).reshape(src.shape)

    def build(self) -> FlowSet:
        def col(key: str, dtype) -> np.ndarray:
            return np.concatenate(self.cols[key]).astype(dtype) if self.cols[key] else np.zeros(0, dtype=dtype)

        per_flow = [(p >= 0).sum(axis=1) for p in self.parents]   # block by block: no table as wide as the widest
        ptr = np.concatenate([[0], np.cumsum(np.concatenate(per_flow) if per_flow else [])]).astype(np.int64)
        parent_idx = np.concatenate([p[p >= 0] for p in self.parents] or [np.zeros(0)]).astype(np.int64)
        return FlowSet(self.group, col("src", np.int64), col("dst", np.int64), col("size", np.float64),
                       col("channel", np.int64), col("step", np.int64), col("tag", np.int64), ptr,
                       parent_idx, switch=self.switch)


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


def check_message_size(size: object) -> float:
    """A collective's message size in bytes: a positive finite number, at most an exabyte (MAX_SIZE, in the words
    of config.units.check_size); ValueError naming the size otherwise."""
    if isinstance(size, bool) or not isinstance(size, Real) or not math.isfinite(size) or size <= 0:
        raise ValueError(f"size {size!r} is not a positive finite number of bytes")
    if size > MAX_SIZE:
        raise ValueError(f"size {size!r}: {float(size):g} B is more than {MAX_SIZE:g} B (an exabyte)")
    return size  # type: ignore[return-value]
