"""PXN (PCI x NVLink): a flow to a GPU on another node and another rail first crosses NVLink to the
member of its own node on the destination's rail, which sends it through its NIC, so that traffic stays
on one rail of a rail-optimized fabric.
"""

from __future__ import annotations

import numpy as np

from .common import FlowSet
from .ring import RING_STEPS, point_to_point_flow_count, ring_flow_count, ring_order
from .shape import GroupShape
from .types import POINT_TO_POINT, CollType


def relay_tag(src: np.ndarray, proxy: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
    """The tag of a relay's second part: the proxy forwards to one receiver the parts of several senders of its
    node, in the same step and channel, so the tag names both how far round the group the receiver is from the
    proxy and how far the sender is, past the tags of direct flows (0 to n): a folded member's relays map onto
    its representative's one for one (dag.builder)."""
    return n + 1 + (src - proxy) % n * n + (dst - proxy) % n


def proxies(src: np.ndarray, dst: np.ndarray, shape: GroupShape) -> np.ndarray:
    """The rail-aligned proxy of each flow from position `src` to `dst` (-1: it goes straight): for a flow between
    two members of different domains and different local indices, the member of the sender's domain at the
    receiver's local index, where that domain has one."""
    domain = np.asarray(shape.domain, dtype=np.int64)
    local = shape.local
    table = np.full((max(shape.nodes, 1), max((len(m) for m in shape.members), default=1)), -1, dtype=np.int64)
    for d, members in enumerate(shape.members):
        table[d, :len(members)] = members
    s, d = np.maximum(src, 0), np.maximum(dst, 0)
    cross = (src >= 0) & (dst >= 0) & (domain[s] != domain[d]) & (local[s] != local[d])
    proxy = table[domain[s], np.minimum(local[d], table.shape[1] - 1)]
    return np.where(cross & (local[d] < table.shape[1]), proxy, -1)


def all_to_all_relays(shape: GroupShape) -> int:
    """How many of an all-to-all's flows (every member to every other, one channel) PXN relays, counted without
    making them: a sender at local index l of a domain of k members relays what it sends to the members of other
    domains at local indices below k other than l."""
    if shape.nodes < 2:
        return 0
    local = shape.local
    domain = np.asarray(shape.domain, dtype=np.int64)
    sizes = np.array([len(m) for m in shape.members], dtype=np.int64)
    at_index = np.bincount(local, minlength=int(sizes.max()))          # members at each local index, all domains
    others = np.concatenate([[0], np.cumsum(at_index - 1)])              # [k]: at indices below k, other domains
    return int((others[sizes[domain]] - (at_index[local] - 1)).sum())


def relay_cross_rail(flows: FlowSet, shape: GroupShape) -> FlowSet:
    """The same flows with every cross-node, cross-rail one split at its rail-aligned proxy: the first part
    keeps the flow's parents, the second waits for the first, and the flow's children wait for the second."""
    src, dst = flows.src_pos, flows.dst_pos
    proxy = proxies(src, dst, shape)
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


def pxn_flow_count(ctype: CollType, shape: GroupShape, channels: int) -> int:
    """How many flows a PXN collective makes (counted without making them): its ring's, all-to-all's or ring
    shift's, and a second for each it relays (each channel's ring makes the same hops at every step)."""
    n = shape.n
    if ctype == CollType.AllToAll:
        return point_to_point_flow_count(ctype, n, channels) + all_to_all_relays(shape) * channels
    positions = np.arange(n)
    if ctype in POINT_TO_POINT:
        relayed = int((proxies(positions, (positions + 1) % max(n, 1), shape) >= 0).sum()) if n > 1 else 0
        return point_to_point_flow_count(ctype, n, channels) + relayed * channels
    hops = 0
    for channel in range(channels):
        order = ring_order(shape, channel)
        hops += int((proxies(order, np.roll(order, -1), shape) >= 0).sum())
    return ring_flow_count(ctype, n, channels) + hops * RING_STEPS[ctype](n)
