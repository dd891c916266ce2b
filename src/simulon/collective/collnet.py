"""CollNet: all-reduce with the reduction done in the scale-out switches (InfiniBand SHARP).

Chain: each node reduces its channel's data along a chain to one member, which sends it up to the
switch and gets the sum of all nodes back, then broadcasts it down the chain. Direct: every member of a
node takes one shard, gathers it from the others over NVLink, exchanges it with the switch through its
own NIC and sends the result to the others.
"""

from __future__ import annotations

import numpy as np

from .common import SWITCH, FlowBuilder, FlowSet
from .nccl import COLLNET_DIRECT_DEPTH, collnet_chunk_bytes, pipeline_chunks
from .shape import GroupShape
from .tree import pipelined_reduce_broadcast


def _multi_node(shape: GroupShape, algorithm: str) -> int:
    if shape.nodes < 2:
        raise ValueError(f"{algorithm} reduces across nodes in the network; a group inside one node has none")
    return shape.regular(algorithm)


def _switch_round_trip(out: FlowBuilder, heads: np.ndarray, ready: np.ndarray, chunk: float, chunks: int,
                       channel: int, step0: int) -> np.ndarray:
    """Heads [nodes] send chunk j up once ready[j, node, :] arrived; the switch returns the sum of all
    nodes' chunk j to every head. Returns the down flows [chunks, nodes]."""
    nodes = len(heads)
    j = np.arange(chunks)[:, None]
    up = out.count + j * nodes + np.arange(nodes)[None, :]
    prev_up = np.where(j > 0, up - nodes, -1)[..., None]
    n = len(out.group)
    out.add(np.broadcast_to(heads, (chunks, nodes)), SWITCH, chunk, channel, step0 + j,
            np.concatenate([ready, prev_up], axis=2).reshape(chunks * nodes, -1), tag=n)
    down = up + chunks * nodes
    parents = np.concatenate([np.broadcast_to(up[:, None, :], (chunks, nodes, nodes)),
                              np.where(j > 0, down - nodes, -1)[..., None]], axis=2)
    out.add(SWITCH, np.broadcast_to(heads, (chunks, nodes)), chunk, channel, step0 + chunks + j,
            parents.reshape(chunks * nodes, -1), tag=n + 1)
    return down


def collnet_chunks(direct: bool, shape: GroupShape, size: float, channels: int, protocol: str, lanes: int = 1) -> int:
    """The chunks CollNet cuts each part into: a channel's data in the chain, each head's shard of it in direct
    (nccl.collnet_chunk_bytes)."""
    m = _multi_node(shape, "collnet_direct" if direct else "collnet_chain")
    part = size / channels / lanes / (m if direct else 1)
    return pipeline_chunks(part, protocol, collnet_chunk_bytes(part, direct, COLLNET_DIRECT_DEPTH if direct else m))


def collnet_flow_count(direct: bool, shape: GroupShape, size: float, channels: int, protocol: str,
                       lanes: int = 1) -> int:
    """How many flows a CollNet all-reduce makes (counted without making them), per channel and chunk. Chain:
    every member up and down its node's chain or, the chain's head, to the switch and back (2 n). Direct: each of
    a node's m heads gathers its shard from the m - 1 others, sends it to the switch and back, and scatters it to
    them (2 n m)."""
    chunks = collnet_chunks(direct, shape, size, channels, protocol, lanes)
    return 2 * shape.n * (shape.regular("collnet") if direct else 1) * chunks * channels


def collnet_chain_all_reduce(group: tuple[int, ...], shape: GroupShape, size: float, channels: int,
                             protocol: str, lanes: int = 1) -> FlowSet:
    m = _multi_node(shape, "collnet_chain")
    out = FlowBuilder(group, switch="scale_out")
    chunks = collnet_chunks(False, shape, size, channels, protocol, lanes)
    chunk = size / (channels * chunks)
    for ch in range(channels):
        parent = np.full(len(group), -1, dtype=np.int64)
        heads = []
        for members in shape.members:
            chain = np.roll(members, -(ch % m))
            parent[chain[1:]] = chain[:-1]
            heads.append(chain[0])
        heads = np.asarray(heads)
        # the chain's broadcast starts when the switch's sum is back: its down flows come after the chain's
        tree_flows = 2 * chunks * int((parent >= 0).sum())
        first_switch = out.count + tree_flows
        down = first_switch + chunks * len(heads) + np.arange(chunks)[:, None] * len(heads) + np.arange(len(heads))
        after = np.full((chunks, len(group)), -1, dtype=np.int64)
        after[:, heads] = down
        held = pipelined_reduce_broadcast(out, parent, chunk, chunks, ch, 0, after)
        _switch_round_trip(out, heads, held[:, heads, :], chunk, chunks, ch, chunks)
    return out.build()


def collnet_direct_all_reduce(group: tuple[int, ...], shape: GroupShape, size: float, channels: int,
                              protocol: str, lanes: int = 1) -> FlowSet:
    m = _multi_node(shape, "collnet_direct")
    out = FlowBuilder(group, switch="scale_out")
    chunks = collnet_chunks(True, shape, size, channels, protocol, lanes)
    chunk = size / (channels * chunks * m)
    by_node = np.stack(shape.members)                      # [nodes, m] positions
    others = np.array([[i for i in range(m) if i != lead] for lead in range(m)], dtype=np.int64).reshape(m, m - 1)
    j = np.arange(chunks)[:, None, None, None]
    for ch in range(channels):
        # members send each shard's part to its owner over NVLink
        src = by_node[:, others][None]                     # [1, nodes, m(owner), m-1]
        dst = np.broadcast_to(by_node[:, :, None], src.shape)
        gather = out.count + np.arange(src.size * chunks).reshape(chunks, *src.shape[1:])
        prev = np.where(j > 0, gather - src.size, -1)[..., None]
        out.add(np.broadcast_to(src, gather.shape), np.broadcast_to(dst, gather.shape), chunk, ch,
                j, prev.reshape(-1, 1))
        for lead in range(m):
            ready = gather[:, :, lead, :]                  # [chunks, nodes, m-1]
            down = _switch_round_trip(out, by_node[:, lead], ready, chunk, chunks, ch, chunks)
            targets = by_node[:, others[lead]]             # [nodes, m-1]
            scatter = out.count + np.arange(chunks * targets.size).reshape(chunks, *targets.shape)
            parents = np.stack([np.broadcast_to(down[:, :, None], scatter.shape),
                                np.where(np.arange(chunks)[:, None, None] > 0, scatter - targets.size, -1)], axis=3)
            out.add(np.broadcast_to(by_node[:, lead][:, None], scatter.shape), np.broadcast_to(targets, scatter.shape),
                    chunk, ch, 3 * chunks + np.arange(chunks)[:, None, None], parents.reshape(-1, 2))
    return out.build()
