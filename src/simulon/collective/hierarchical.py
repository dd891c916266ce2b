"""Hierarchical collectives: rings inside each node over NVLink, rings across nodes over the NICs, one per
rail (the members with the same local index), so that only 1/m of the data crosses the network.

All-reduce: reduce-scatter in the node, all-reduce of each member's shard across its rail, all-gather in
the node. Reduce-scatter: in the node, then across the rail. All-gather: across the rail, then in the node.
A member starts a phase once it has received the last chunk of the previous one. In a full mesh (AMD's xGMI) the
node's rings take turns over the members' disjoint cycles, channel by channel, as NCCL's rings do there (ring.py):
rotations of one cycle load the same links, one of a member's seven on an MI300X.
"""

from __future__ import annotations

import numpy as np

from .common import FlowBuilder, FlowSet
from .mesh import disjoint_cycles
from .shape import GroupShape
from .types import CollType


def ring_phase(out: FlowBuilder, rings: list[np.ndarray], chunk: float, steps: int, channel: int, step0: int,
               after: np.ndarray) -> np.ndarray:
    """`steps` steps of the given rings (position arrays) on one channel; each member's first send waits for
    `after[pos]`. Returns the last flow each position receives (unchanged where it has none)."""
    last = after.copy()
    for ring in rings:
        r = len(ring)
        if r < 2 or steps < 1:
            continue
        base = out.count
        s, k = np.meshgrid(np.arange(steps), np.arange(r), indexing="ij")
        parent = np.where(s > 0, base + (s - 1) * r + (k - 1) % r, after[ring][k])
        out.add(ring[k], ring[(k + 1) % r], chunk, channel, step0 + s, parent.reshape(-1, 1))
        last[ring[(np.arange(r) + 1) % r]] = base + (steps - 1) * r + np.arange(r)
    return last


def hierarchical_flow_count(shape: GroupShape, channels: int, ctype: CollType) -> int:
    """How many flows hierarchical makes (counted without making them), per channel: each node's ring of m
    members, m - 1 steps, once for a reduce-scatter or an all-gather and twice for an all-reduce; each rail's ring
    over the nodes, nodes - 1 steps, twice that for an all-reduce."""
    m, nodes = shape.regular("hierarchical"), shape.nodes
    phases = 2 if ctype == CollType.AllReduce else 1
    return phases * (nodes * m * (m - 1) + m * nodes * (nodes - 1)) * channels


def hierarchical(group: tuple[int, ...], shape: GroupShape, size: float, channels: int, ctype: CollType) -> FlowSet:
    m = shape.regular("hierarchical")
    nodes = shape.nodes
    out = FlowBuilder(group)
    by_node = np.stack(shape.members)                    # [nodes, m]
    per_channel = size / channels
    cycles = disjoint_cycles(m) if shape.mesh else (tuple(range(m)),)
    for ch in range(channels):
        intra = [np.roll(row[list(cycles[ch % len(cycles)])], -(ch % m)) for row in by_node]
        rails = [by_node[:, lead] for lead in range(m)]
        last = np.full(len(group), -1, dtype=np.int64)
        step = 0
        if ctype in (CollType.AllReduce, CollType.ReduceScatter):
            last = ring_phase(out, intra, per_channel / m, m - 1, ch, step, last)
            step += m - 1
        if ctype == CollType.AllReduce:
            last = ring_phase(out, rails, per_channel / (m * nodes), 2 * (nodes - 1), ch, step, last)
            step += 2 * (nodes - 1)
        else:
            last = ring_phase(out, rails, per_channel / (m * nodes), nodes - 1, ch, step, last)
            step += nodes - 1
        if ctype in (CollType.AllReduce, CollType.AllGather):
            ring_phase(out, intra, per_channel / m, m - 1, ch, step, last)
    return out.build()
