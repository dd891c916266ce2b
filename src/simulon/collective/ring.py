"""Ring algorithms as NCCL runs them: the buffer is split into channels, each channel into n chunks,
and at every step each rank sends one chunk to its successor in the ring.

A ring visits each node's members in a row and crosses to the next node once (on one rail, when the
fabric is rail-optimized). Channel c starts its runs at member c (mod the members per node), so different
channels leave a node through different GPUs, and so through different NICs. Per rank, a ring
reduce-scatter or all-gather sends (n-1)/n of the buffer, an all-reduce 2(n-1)/n.

In a full mesh (every pair of a node's GPUs has its own link) the channels take turns over arc-disjoint
Hamiltonian cycles of the node's members, as RCCL's rings do on an xGMI mesh, so that together they use
every link instead of loading one link per neighbour.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .common import FlowBuilder, FlowSet
from .mesh import disjoint_cycles
from .nccl import constants, p2p_channel
from .shape import GroupShape
from .types import CollType


def ring_order(shape: GroupShape, channel: int) -> np.ndarray:
    """Positions in the order channel `channel`'s ring visits them: each node's members in a row starting at
    member `channel`. On a rail-optimized fabric every other node is visited backwards, so that the ring
    leaves a node from the member (and so the NIC, the rail) it enters the next one by. In a mesh the row
    follows one of the members' disjoint cycles, a different one per channel."""
    if not shape.n:
        return np.zeros(0, dtype=np.int64)
    runs = []
    for node, members in enumerate(shape.members):
        if shape.mesh:
            cycles = disjoint_cycles(len(members))
            members = members[list(cycles[channel % len(cycles)])]
        run = np.roll(members, -(channel % len(members)))
        runs.append(run[::-1] if shape.rail_aligned and node % 2 else run)
    return np.concatenate(runs)


def _ring(group: tuple[int, ...], shape: GroupShape, chunk: float, steps: int, channels: int,
          one_period: bool = False) -> FlowSet:
    """`steps` ring steps over `channels` channels; flow (step, k, ch) forwards what ring member k-1 sent
    at step-1. `one_period`: only the first step, marked as repeated `steps` times."""
    n = len(group)
    out = FlowBuilder(group)
    built = 1 if one_period else steps
    step, k, ch = (a.ravel() for a in np.meshgrid(np.arange(built), np.arange(n), np.arange(channels),
                                                  indexing="ij"))
    orders = np.stack([ring_order(shape, c) for c in range(channels)]) if n else np.zeros((channels, 0), int)
    index = lambda s, p, c: (s * n + p) * channels + c  # noqa: E731 - the layout of the meshgrid above
    before = step - 1 + (1 if one_period and steps > 1 else 0)  # in a period, the parent is in the period before
    parent = np.where(before >= 0, index(np.maximum(before, 0), (k - 1) % max(n, 1), ch), -1)
    out.add(orders[ch, k], orders[ch, (k + 1) % max(n, 1)], chunk, ch, step, parent[:, None])
    return replace(out.build(), periods=steps if one_period else 1)


RING_STEPS = {CollType.AllReduce: lambda n: 2 * (n - 1), CollType.AllGather: lambda n: n - 1,
              CollType.ReduceScatter: lambda n: n - 1}
"""Steps of a ring collective over n members: an all-reduce is a reduce-scatter then an all-gather."""


def ring_flow_count(ctype: CollType, n: int, channels: int, one_period: bool = False) -> int:
    """How many flows a ring collective's decomposition makes (counted without making them): every member sends
    once a step on each channel, one step when `one_period`."""
    return (1 if one_period else RING_STEPS[ctype](n)) * n * channels


def point_to_point_flow_count(ctype: CollType, n: int, channels: int) -> int:
    """How many flows all_to_all (every member to every other) or ring_shift (to the next) makes over `channels`
    parts a peer."""
    if n < 2:
        return 0
    return (n * (n - 1) if ctype == CollType.AllToAll else n) * channels


def ring_reduce_scatter(group: tuple[int, ...], shape: GroupShape, size: float, channels: int,
                        one_period: bool = False) -> FlowSet:
    """size: the input buffer of each rank (nccl-tests convention)."""
    n = len(group)
    return _ring(group, shape, size / (n * channels), RING_STEPS[CollType.ReduceScatter](n), channels, one_period)


def ring_all_gather(group: tuple[int, ...], shape: GroupShape, size: float, channels: int,
                    one_period: bool = False) -> FlowSet:
    """size: the gathered output buffer of each rank (nccl-tests convention)."""
    n = len(group)
    return _ring(group, shape, size / (n * channels), RING_STEPS[CollType.AllGather](n), channels, one_period)


def ring_all_reduce(group: tuple[int, ...], shape: GroupShape, size: float, channels: int,
                    one_period: bool = False) -> FlowSet:
    """Reduce-scatter then all-gather: 2(n-1) steps, one chain per channel."""
    n = len(group)
    return _ring(group, shape, size / (n * channels), RING_STEPS[CollType.AllReduce](n), channels, one_period)


_LOCAL_PASS = {CollType.ReduceScatter: "reduce", CollType.AllGather: "copy", CollType.AllReduce: "reduce_copy"}


def ring_local_pass(ctype: CollType, domains: int) -> str:
    """The step that ends each loop of a channel without moving anything over a link ("" if none): NCCL's
    ring kernels reduce the last chunk a rank receives into its output ("reduce", reduce-scatter) or copy it
    out ("copy", all-gather), in the thread block that also sends over NVLink, so those links idle
    meanwhile. An all-reduce loop ("reduce_copy") also writes its reduced chunk to its output as it sends it
    on, before the final copy. One such step per loop is why a 2-rank ring reaches less bus bandwidth than an
    8-rank one on the same links. A ring across `domains` > 1 has none: a NIC keeps sending from the proxy's
    FIFO while the GPU copies; nor have all-to-all's direct sends."""
    return "" if domains > 1 else _LOCAL_PASS.get(ctype, "")


def ring_shift(group: tuple[int, ...], shape: GroupShape, size: float, channels: int) -> FlowSet:
    """Every member sends the whole `size` to the next member of the group and receives it from the previous one
    (nccl-tests' sendrecv_perf: peer rank+1; XLA's collective-permute with pairs i -> i+1 mod n), each message cut
    over `channels` of NCCL's point-to-point channels as a peer's part of a grouped send is. All flows start at
    once: nothing waits for anything."""
    n = len(group)
    out = FlowBuilder(group)
    if n < 2:
        return out.build()
    src, part = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(channels), indexing="ij"))
    out.add(src, (src + 1) % n, size / channels, p2p_channel(np.ones_like(part), part), 0)
    return out.build()


def all_to_all(group: tuple[int, ...], shape: GroupShape, size: float, channels: int) -> FlowSet:
    """Every rank sends size/n to every other rank (NCCL's grouped send/recv), `channels` parts per peer."""
    if shape.nodes > 1:
        return _in_rounds_of_peers(group, size, channels, shape.per_node if shape.blocked else None)
    return _over_point_to_point_channels(group, size, channels, serial=not shape.mesh)


def _over_point_to_point_channels(group: tuple[int, ...], size: float, channels: int,
                                  serial: bool = True) -> FlowSet:
    """Inside one NVLink domain NCCL cuts each peer's part over `channels` of its point-to-point channels:
    part j for the peer at offset r on channel (r + j with its bits reversed) mod the channel count. A
    channel's thread block serves its parts one after another, the next once what it received before has
    arrived, each at most at its copy rate: the busiest channel sets the pace, so ranks that do not spread
    evenly over the channels (72 over 32) take longer than their bytes need.

    Not `serial` (a full mesh: every pair of GPUs has its own link): every part starts at once. A channel's
    parts there go to different peers, so over different links, and taken in turn they split the peers
    into waves (8 parts a peer among 8 ranks: a shared channel serves offsets 1-3 first, 5-7 second, and
    offset 4 alone), each wave loading its peers' links with all their parts while the other links idle:
    time grew with the channels (x2 from 4 to 8 channels on an MI300X node, x7 at 32). On a switch every part
    shares the member's one port, whichever peer it goes to, and the turns cost only their hops. The parts of
    a channel then each get the channel's copy rate (unbounded on the meshes calibrated so far)."""
    n = len(group)
    out = FlowBuilder(group)
    if n < 2:
        return out.build()
    offset, part = (a.ravel() for a in np.meshgrid(np.arange(1, n), np.arange(channels), indexing="ij"))
    channel = p2p_channel(offset, part)
    if not serial:
        src, slot = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(offset.size), indexing="ij"))
        out.add(src, (src + offset[slot]) % n, size / (n * channels), channel[slot], 0)
        return out.build()
    order = np.lexsort((part, offset, channel))                  # each channel's parts, in the order served
    first = np.r_[True, channel[order][1:] != channel[order][:-1]]
    position = np.empty(order.size, dtype=np.int64)
    position[order] = np.arange(order.size) - np.maximum.accumulate(np.where(first, np.arange(order.size), 0))
    before = np.full(order.size, -1)
    before[order[~first]] = order[np.flatnonzero(~first) - 1]     # the part served just before, per part
    per_rank = order.size
    src = np.repeat(np.arange(n), per_rank)
    slot = np.tile(np.arange(per_rank), n)
    prior = before[slot]
    sender = (src - offset[np.maximum(prior, 0)]) % n             # who sent this rank that earlier part
    parent = np.where(prior >= 0, sender * per_rank + prior, -1)
    out.add(src, (src + offset[slot]) % n, size / (n * channels), channel[slot], np.tile(position, n),
            parent[:, None])
    return out.build()


def _in_rounds_of_peers(group: tuple[int, ...], size: float, channels: int, per_node: int | None = None) -> FlowSet:
    """Across nodes NCCL works through the peers in rounds, as many peers at once as its point-to-point channels
    serve (the k-th peer of its schedule in round (k-1) // peers_per_round), and a rank moves to the next round once
    the previous one's receive arrived: a large group pays one hop per round. The schedule is NCCL's p2pSchedule
    (init.cc) where the group is `per_node` members on every node in a row: node deltas in its quadratic order,
    each with every local delta in that order (p2p_deltas), so that in a round every rank sends to the same node and
    local offsets, all of them over the NICs or all over NVLink, and ranks one node apart do the same. Otherwise by
    offset round the group (k: the member k on). In that order ranks of one node mixed NVLink and NIC peers in a
    round and drifted apart: every GPU of 4 DGX H100 simulated, a 64 MiB all-to-all took 1,604 us where one member
    standing for the rest took 1,125 (NCCL's order: 1,125 either way)."""
    n = len(group)
    if per_node is None or n % per_node:
        node_delta, local_delta, nodes, per_node = np.arange(n), np.zeros(n, dtype=np.int64), n, 1
    else:
        nodes = n // per_node
        node_delta, local_delta = (a.ravel() for a in np.meshgrid(p2p_deltas(nodes), p2p_deltas(per_node),
                                                                  indexing="ij"))
    node_delta, local_delta = node_delta[1:], local_delta[1:]  # the first is the rank itself
    src, slot, ch = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n - 1), np.arange(channels),
                                                    indexing="ij"))

    def member(position: np.ndarray, nodes_on: np.ndarray, locals_on: np.ndarray) -> np.ndarray:
        node, local = np.divmod(position, per_node)
        return (node + nodes_on) % nodes * per_node + (local + locals_on) % per_node

    per_round = constants()["p2p_peers_per_round"]
    before = np.maximum(slot - per_round, 0)  # the same place of the previous round
    sender = member(src, -node_delta[before], -local_delta[before])  # who sent this rank that round's receive
    parent = np.where(slot >= per_round, (sender * (n - 1) + before) * channels + ch, -1)  # meshgrid order
    out = FlowBuilder(group)
    out.add(src, member(src, node_delta[slot], local_delta[slot]), size / (n * channels), ch, slot // per_round,
            parent[:, None])
    return out.build()


def p2p_deltas(count: int) -> np.ndarray:
    """The deltas NCCL's p2pSchedule takes among `count` nodes (or a node's ranks), in order: the quadratic sequence
    d_{r+1} = (d_r + r + 1) mod 2^ceil(log2 count), which visits every residue of the power of two once, less those
    of `count` or more (init.cc: nodeDelta, localDelta); 0, the own one, first."""
    span = 1 << max(count - 1, 0).bit_length()
    deltas, delta = [], 0
    for step in range(1, span + 1):
        if delta < count:
            deltas.append(delta)
        delta = (delta + step) & (span - 1)
    return np.array(deltas, dtype=np.int64)
