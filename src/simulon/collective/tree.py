"""NCCL's double binary tree all-reduce: a chain inside each node, two complementary binary trees over
the nodes, half the channels on each (in one tree a node is a leaf where in the other it is inner).

Data flows up the tree, reduced at every hop, to the root, then back down. Each channel's data moves
in chunks that pipeline through the tree: a rank forwards chunk j once it has it from all its children
(or, going down, from its parent), and sends its chunks over one edge in order.
"""

from __future__ import annotations

import math

import numpy as np

from .common import FlowBuilder, FlowSet
from .mesh import disjoint_cycles
from .nccl import pipeline_chunks, tree_ll128_chunk_bytes
from .shape import GroupShape


def btree_parent(n: int) -> np.ndarray:
    """Parent of every rank of NCCL's binary tree over n ranks (rank 0 is the root: -1)."""
    parent = np.full(n, -1, dtype=np.int64)
    for rank in range(1, n):
        bit = rank & -rank  # lowest set bit
        up = (rank ^ bit) | (bit << 1)
        parent[rank] = up if up < n else rank ^ bit
    return parent


def dtree_parent(n: int) -> np.ndarray:
    """The second tree, complementary to the first: mirrored for an even count, shifted by one for an odd."""
    first = btree_parent(n)
    ranks = np.arange(n)
    if n % 2 == 0:
        mirrored = first[n - 1 - ranks]
        return np.where(mirrored >= 0, n - 1 - mirrored, -1)
    shifted = first[(ranks - 1) % n]
    return np.where(shifted >= 0, (shifted + 1) % n, -1)


def chain_parents(shape: GroupShape, channel: int, node_parent: np.ndarray) -> np.ndarray:
    """Parent position of every member for one channel: along its node's chain towards the chain head, and from a
    head to the head of its parent node. Across nodes NCCL's search starts each channel from a NIC, so its chain
    from the member near it (here the node's member `channel` mod members); inside one NVLink domain the
    communicator's topology has no network (src/graph/paths.cc, ncclTopoTrimSystem: system->inter = 0), and
    the search takes the first channel in PCI order and replays that order for the others (src/graph/search.cc,
    ncclTopoSearchRec, "Intra-node only"): every channel runs down one chain of the members in order, whose inner
    members send each byte twice, which NCCL's model prices as its tree's half of the bus bandwidth. In a full mesh
    (xGMI) a chain's hops are single links, not a switch port: the chains follow the members' disjoint cycles, a
    different one per channel, as the rings do (ring.ring_order), so that together they use every link, as the
    graph search, which books each link's bandwidth, spreads them."""
    by_node = np.stack(shape.members)                                  # regular: [nodes, members per node]
    if shape.mesh:
        cycles = disjoint_cycles(by_node.shape[1])
        by_node = by_node[:, list(cycles[channel % len(cycles)])]
    start = 0 if shape.nodes == 1 else channel % by_node.shape[1]
    chains = np.roll(by_node, -start, axis=1)
    parent = np.full(shape.n, -1, dtype=np.int64)
    parent[chains[:, 1:].ravel()] = chains[:, :-1].ravel()
    heads = chains[:, 0]
    inner = node_parent >= 0
    parent[heads[inner]] = heads[node_parent[inner]]
    return parent


def _children(parent: np.ndarray, senders: np.ndarray, n: int) -> np.ndarray:
    """[n, most children] table of each position's children (-1 padded)."""
    order = senders[np.argsort(parent[senders], kind="stable")]
    owners = parent[order]
    counts = np.bincount(owners, minlength=n)
    table = np.full((n, max(int(counts.max(initial=0)), 1)), -1, dtype=np.int64)
    slot = np.arange(len(order)) - np.concatenate([[0], np.cumsum(counts)])[owners]
    table[owners, slot] = order
    return table


def pipelined_reduce_broadcast(out: FlowBuilder, parent: np.ndarray, chunk: float, chunks: int, channel: int,
                               step0: int = 0, after: np.ndarray | None = None) -> np.ndarray:
    """Reduce chunks up a tree and broadcast them back down; return when each member holds each result.

    `parent[p]`: p's parent position, -1 at the root, -2 for positions outside the tree. `after[j, p]`
    (optional, -1 for none): a flow that must arrive before p sends chunk j up (or, at the root, down).
    Returns [chunks, n, k] flow indices (-1 padded): member p holds reduced chunk j once they arrive.
    """
    n = len(parent)
    senders = np.flatnonzero(parent >= 0)
    s = len(senders)
    idx = np.full(n, -1, dtype=np.int64)
    idx[senders] = np.arange(s)
    kid_table = _children(parent, senders, n)
    width = kid_table.shape[1]
    after = np.full((chunks, n), -1, dtype=np.int64) if after is None else after
    j = np.arange(chunks)[:, None, None]
    base_up = out.count
    base_down = base_up + chunks * s
    up = lambda jj, p: np.where((p >= 0) & (jj >= 0), base_up + jj * s + idx[np.maximum(p, 0)], -1)  # noqa: E731
    down = lambda jj, p: np.where((p >= 0) & (jj >= 0), base_down + jj * s + idx[np.maximum(p, 0)], -1)  # noqa: E731
    p = senders[None, :, None]
    q = parent[senders][None, :, None]
    up_parents = _columns((chunks, s), up(j, kid_table[senders][None]), up(j - 1, p), after[:, senders][:, :, None])
    root_parent = parent[np.maximum(q, 0)] < 0
    from_parent = np.where(root_parent, -1, down(j, q))
    from_root = np.where(root_parent, up(j, kid_table[np.maximum(q, 0)][..., 0, :]), -1)
    root_after = np.where(root_parent, after[:, np.maximum(q[0, :, 0], 0)][:, :, None], -1)
    down_parents = _columns((chunks, s), from_parent, from_root, root_after, down(j - 1, p))
    steps = np.arange(chunks)[:, None]
    out.add(np.broadcast_to(senders, (chunks, s)), np.broadcast_to(parent[senders], (chunks, s)), chunk, channel,
            step0 + steps, up_parents.reshape(chunks * s, up_parents.shape[2]))
    out.add(np.broadcast_to(parent[senders], (chunks, s)), np.broadcast_to(senders, (chunks, s)), chunk, channel,
            step0 + chunks + steps, down_parents.reshape(chunks * s, down_parents.shape[2]))
    held = np.full((chunks, n, width), -1, dtype=np.int64)
    held[:, senders, 0] = down(j, p)[:, :, 0]
    roots = np.flatnonzero(parent == -1)
    held[:, roots, :] = up(j, kid_table[roots][None])
    return held


def _columns(shape: tuple[int, int], *parts: np.ndarray) -> np.ndarray:
    """Parent columns side by side, each broadcast over (chunks, senders)."""
    return np.concatenate([np.broadcast_to(a, (*shape, a.shape[-1])) for a in parts], axis=2)


def tree_chunks(shape: GroupShape, size: float, channels: int, protocol: str, lanes: int = 1,
                chunk_bytes: float | None = None) -> int:
    """The chunks a tree all-reduce cuts each channel's data into (an LL128 tree's as NCCL cuts them:
    nccl.tree_ll128_chunk_bytes; a Simple tree's in `chunk_bytes`, one slot of the platform's NCCL_BUFFSIZE,
    nccl.simple_tree_chunk_bytes, None: NCCL's default slot), refusing groups whose nodes hold different numbers
    of members."""
    per_node = shape.regular("tree")
    per_channel = size / channels / lanes
    chunk = tree_ll128_chunk_bytes(per_channel, shape.nodes, per_node) if protocol == "ll128" else None
    hops = per_node + math.ceil(math.log2(shape.nodes))  # about a chunk's hops up a node's chain and the node tree
    return pipeline_chunks(per_channel, protocol, chunk or (chunk_bytes if protocol == "simple" else None), hops,
                           2 * (shape.n - 1) * channels)  # every member but the root, up and down (tree_flow_count)


def tree_flow_count(shape: GroupShape, size: float, channels: int, protocol: str, lanes: int = 1,
                    chunk_bytes: float | None = None) -> int:
    """How many flows tree_all_reduce makes (counted without making them): on each channel every member but the
    root sends each chunk up and receives it back down."""
    return 2 * tree_chunks(shape, size, channels, protocol, lanes, chunk_bytes) * (shape.n - 1) * channels


def tree_all_reduce(group: tuple[int, ...], shape: GroupShape, size: float, channels: int,
                    protocol: str, lanes: int = 1, chunk_bytes: float | None = None) -> FlowSet:
    chunks = tree_chunks(shape, size, channels, protocol, lanes, chunk_bytes)
    out = FlowBuilder(group)
    trees = (btree_parent(shape.nodes), dtree_parent(shape.nodes))
    per_channel = size / channels
    for ch in range(channels):
        parent = chain_parents(shape, ch // 2, trees[ch % 2])
        pipelined_reduce_broadcast(out, parent, per_channel / chunks, chunks, ch)
    return out.build()
