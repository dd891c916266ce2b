"""PXN (PCI x NVLink): a flow to a GPU on another node and another rail first crosses NVLink to the
member of its own node on the destination's rail, which sends it through its NIC, so that traffic stays
on one rail of a rail-optimized fabric.
"""

from __future__ import annotations

import numpy as np

from .common import FlowSet
from .shape import GroupShape


def relay_tag(src: np.ndarray, proxy: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
    """The tag of a relay's second part: the proxy forwards to one receiver the parts of several senders of its
    node, in the same step and channel, so the tag names both how far round the group the receiver is from the
    proxy and how far the sender is, past the tags of direct flows (0 to n): a folded member's relays map onto
    its representative's one for one (dag.builder)."""
    return n + 1 + (src - proxy) % n * n + (dst - proxy) % n


def relay_cross_rail(flows: FlowSet, shape: GroupShape) -> FlowSet:
    """The same flows with every cross-node, cross-rail one split at its rail-aligned proxy: the first part
    keeps the flow's parents, the second waits for the first, and the flow's children wait for the second."""
    src, dst = flows.src_pos, flows.dst_pos
    domain = np.asarray(shape.domain, dtype=np.int64)
    local = shape.local
    proxy = np.full(len(flows), -1, dtype=np.int64)
    p2p = (src >= 0) & (dst >= 0)
    cross = p2p & (domain[np.maximum(src, 0)] != domain[np.maximum(dst, 0)])
    cross &= local[np.maximum(src, 0)] != local[np.maximum(dst, 0)]
    for f in np.flatnonzero(cross):
        members = shape.members[domain[src[f]]]
        if local[dst[f]] < len(members):
            proxy[f] = members[local[dst[f]]]
    relayed = np.flatnonzero(proxy >= 0)
    if not len(relayed):
        return flows
    second = len(flows) + np.arange(len(relayed))
    remap = np.arange(len(flows))
    remap[relayed] = second
    child_parents = remap[flows.parent_idx]
    counts = np.concatenate([np.diff(flows.parent_ptr), np.ones(len(relayed), dtype=np.int64)])
    parent_idx = np.concatenate([child_parents, relayed])
    new_dst = dst.copy()
    new_dst[relayed] = proxy[relayed]

    def extend(column: np.ndarray, tail: np.ndarray) -> np.ndarray:
        return np.concatenate([column, tail])

    n = len(flows.group)
    return FlowSet(flows.group, extend(src, proxy[relayed]), extend(new_dst, dst[relayed]),
                   extend(flows.size, flows.size[relayed]), extend(flows.channel, flows.channel[relayed]),
                   extend(flows.step, flows.step[relayed]),
                   extend(flows.tag, relay_tag(src[relayed], proxy[relayed], dst[relayed], n)),
                   np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), parent_idx, switch=flows.switch)
