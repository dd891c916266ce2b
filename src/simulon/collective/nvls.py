"""NVLink SHARP (NVLS): the NVSwitch reduces and multicasts.

Reduce-scatter: each member asks the switch for its shard; the switch pulls that shard from every other
member (one flow up from each) and sends the sum down to the asker, who adds its own part. All-gather:
each member writes its shard to the switch once (one flow up) and the switch writes it to every other
member (one flow down each). An all-reduce is both, shard by shard, pipelined in chunks. Across nodes
(NVLS-tree) each member reduces one shard of its node's data through the switch, the members of one rail
combine theirs over NCCL's binary trees, and the switch multicasts the result back inside each node.
"""

from __future__ import annotations

import numpy as np

from .common import SWITCH, FlowBuilder, FlowSet
from .nccl import DEFAULT_ARCHITECTURE, architecture, nvls_chunk_bytes, nvls_tuning, pipeline_chunks
from .shape import GroupShape
from .tree import btree_parent, dtree_parent, pipelined_reduce_broadcast


def _switch_reduce(out: FlowBuilder, members: np.ndarray, owners: np.ndarray, chunk: float, chunks: int,
                   channel: int) -> np.ndarray:
    """In each of B switch domains (members [B, n], owners [B, o]): each member sends its part of the other
    owners' shards up (one flow per chunk); the switch sends each owner the sum of its shard, to which the
    owner adds its own part from local memory. So a member's link carries the same bytes whatever the
    group size, as the measured NVLS all-reduce bandwidth (flat from 2 to 72 GPUs) says. Returns the down
    flows [chunks, B, o]."""
    b, n = members.shape
    o = owners.shape[1]
    others = o - (members[:, :, None] == owners[:, None, :]).sum(axis=2)             # [B, n]
    j = np.arange(chunks)[:, None, None]
    up = out.count + (j * b + np.arange(b)[None, :, None]) * n + np.arange(n)         # [chunks, B, n]
    prev_up = np.where(j > 0, up - b * n, -1)[..., None]
    out.add(np.broadcast_to(members, up.shape), SWITCH, chunk * others, channel, j, prev_up.reshape(-1, 1),
            tag=len(out.group))
    down = out.count + (j * b + np.arange(b)[None, :, None]) * o + np.arange(o)       # [chunks, B, o]
    prev_down = np.where(j > 0, down - b * o, -1)[..., None]
    parents = np.concatenate([np.broadcast_to(up[:, :, None, :], (chunks, b, o, n)), prev_down], axis=3)
    out.add(SWITCH, np.broadcast_to(owners, down.shape), chunk, channel, chunks + j,
            parents.reshape(down.size, -1), tag=len(out.group) + 1)
    return down


def _multicast(out: FlowBuilder, members: np.ndarray, owners: np.ndarray, ready: np.ndarray, chunk: float,
               chunks: int, channel: int, step0: int) -> None:
    """In each of B switch domains: each owner writes its shard chunk to the switch once `ready[j, b, owner,
    :]` arrived; the switch writes every owner's chunk to every other member (one flow per member, chunk)."""
    b, o = owners.shape
    j = np.arange(chunks)[:, None, None]
    up = out.count + (j * b + np.arange(b)[None, :, None]) * o + np.arange(o)         # [chunks, B, o]
    prev = np.where(j > 0, up - b * o, -1)[..., None]
    out.add(np.broadcast_to(owners, up.shape), SWITCH, chunk, channel, step0 + j,
            np.concatenate([ready, prev], axis=3).reshape(up.size, -1), tag=len(out.group) + 2)
    others = members[:, :, None] != owners[:, None, :]                                 # [B, n, o]
    receivers = others.any(axis=2)                                                      # an owner alone gets none
    r = int(receivers[0].sum())                                                         # the same in every domain
    targets = members[receivers].reshape(b, r)
    others = others[receivers].reshape(b, r, o)
    down = out.count + (j * b + np.arange(b)[None, :, None]) * r + np.arange(r)       # [chunks, B, r]
    sources = np.where(others[None], up[:, :, None, :], -1)                            # [chunks, B, r, o]
    parents = np.concatenate([sources, np.where(j > 0, down - b * r, -1)[..., None]], axis=3)
    out.add(SWITCH, np.broadcast_to(targets, down.shape), chunk * others.sum(axis=2), channel,
            step0 + chunks + j, parents.reshape(down.size, -1), tag=len(out.group) + 3)


def default_chunk(tree: bool, size: float, channels: int, nodes: int, heads: int) -> float:
    """NCCL's chunk where the caller gives none (collective.tuner gives the communicator's): as NCCL cuts it
    with the default architecture's tuning and no NIC limit."""
    return nvls_chunk_bytes(tree, size, channels, heads,
                            nvls_tuning(architecture(DEFAULT_ARCHITECTURE), nodes, heads, float("inf")))


def nvls_chunks(tree: bool, shape: GroupShape, size: float, channels: int, protocol: str, lanes: int = 1,
                chunk_bytes: float | None = None) -> int:
    """The chunks an NVLS (or, with `tree`, NVLS-tree) collective cuts each head's part of a channel's data into:
    NCCL's `chunk_bytes` (the tuner's), or by default as default_chunk cuts them. NVLS's heads are a domain's
    members, NVLS-tree's the members of each node."""
    heads = shape.regular("nvls_tree") if tree else shape.n
    chunk_bytes = chunk_bytes or default_chunk(tree, size, channels * lanes, shape.nodes if tree else 1, heads)
    return pipeline_chunks(size / channels / lanes / heads, protocol, chunk_bytes)


def nvls_flow_count(shape: GroupShape, size: float, channels: int, protocol: str, lanes: int = 1, *, reduce: bool,
                    gather: bool, chunk_bytes: float | None = None) -> int:
    """How many flows nvls makes (counted without making them): per channel and chunk, the reduction's flow up
    from every member and down to every member, the gather's likewise."""
    chunks = nvls_chunks(False, shape, size, channels, protocol, lanes, chunk_bytes)
    return (2 * reduce + 2 * gather) * chunks * shape.n * channels


def nvls_tree_flow_count(shape: GroupShape, size: float, channels: int, protocol: str, lanes: int = 1, *,
                         chunk_bytes: float | None = None) -> int:
    """How many flows nvls_tree_all_reduce makes (counted without making them): per channel, rail and chunk, each
    node's members up to its switch and its sum down to the rail's head (n + nodes), the heads' tree up and down
    (2 (nodes - 1)), each head up to its switch and the switch down to the node's other members (nodes + n -
    nodes)."""
    m, nodes = shape.regular("nvls_tree"), shape.nodes
    chunks = nvls_chunks(True, shape, size, channels, protocol, lanes, chunk_bytes)
    return (2 * shape.n + 3 * nodes - 2) * chunks * m * channels


def nvls(group: tuple[int, ...], shape: GroupShape, size: float, channels: int, protocol: str, lanes: int = 1, *,
         reduce: bool, gather: bool, chunk_bytes: float | None = None) -> FlowSet:
    """NVLS all-reduce (reduce and gather), reduce-scatter (reduce) or all-gather (gather) in one domain, each
    member's part of a channel's data cut into NCCL's chunks (`chunk_bytes`, the tuner's: nccl.nvls_chunk_bytes)."""
    if shape.nodes > 1:
        raise ValueError("nvls runs inside one NVLink domain; across nodes use nvls_tree")
    n = len(group)
    out = FlowBuilder(group, switch="scale_up")
    positions = np.arange(n)[None, :]
    chunks = nvls_chunks(False, shape, size, channels, protocol, lanes, chunk_bytes)
    chunk = size / (n * channels * chunks)
    for ch in range(channels):
        if reduce:
            down = _switch_reduce(out, positions, positions, chunk, chunks, ch)[..., None]
        else:
            down = np.full((chunks, 1, n, 1), -1, dtype=np.int64)
        if gather:
            _multicast(out, positions, positions, down, chunk, chunks, ch, 2 * chunks)
    return out.build()


def nvls_tree_all_reduce(group: tuple[int, ...], shape: GroupShape, size: float, channels: int,
                         protocol: str, lanes: int = 1, *, chunk_bytes: float | None = None) -> FlowSet:
    """NVLS-tree all-reduce, each head's part of a channel's data cut into NCCL's chunks (`chunk_bytes`, the
    tuner's: nccl.nvls_chunk_bytes)."""
    if shape.nodes < 2:
        raise ValueError("nvls_tree needs more than one node (inside one node, use nvls)")
    m = shape.regular("nvls_tree")
    if m < 2:
        raise ValueError("nvls_tree reduces inside each node through the NVSwitch: it needs two or more members "
                         "per node (with one, use tree)")
    out = FlowBuilder(group, switch="scale_up")
    trees = (btree_parent(shape.nodes), dtree_parent(shape.nodes))
    chunks = nvls_chunks(True, shape, size, channels, protocol, lanes, chunk_bytes)
    chunk = size / (m * channels * chunks)
    by_node = np.stack(shape.members)                                          # [nodes, m]
    for ch in range(channels):
        for rail in range(m):
            heads = by_node[:, rail]
            reduced = np.full((chunks, len(group)), -1, dtype=np.int64)
            reduced[:, heads] = _switch_reduce(out, by_node, heads[:, None], chunk, chunks, ch)[:, :, 0]
            parent = np.full(len(group), -2, dtype=np.int64)
            node_parent = trees[ch % 2]
            parent[heads] = np.where(node_parent >= 0, heads[np.maximum(node_parent, 0)], -1)
            held = pipelined_reduce_broadcast(out, parent, chunk, chunks, ch, 2 * chunks, reduced)
            _multicast(out, by_node, heads[:, None], held[:, heads, None, :], chunk, chunks, ch, 4 * chunks)
    return out.build()
