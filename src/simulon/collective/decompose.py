"""From a collective to its P2P flows through the catalog of algorithms (collective.algorithms), and the seed's
decompose_collective."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from .algorithms import CATALOG, Algorithm, Decomposition, Unrunnable, algorithm_for, asked_algorithm, find_algorithm
from .common import CollectiveResult, FlowSet, P2PFlow, check_message_size
from .nccl import PROTOCOLS, channel_argument
from .shape import GroupShape
from .types import POINT_TO_POINT, CollType, coll_type

ALGORITHMS: dict[str, dict[CollType, Decomposition]] = {name: dict(a.decompositions) for name, a in CATALOG.items()}
"""Algorithm -> the collectives it does, and their decompositions (the catalog's, by name)."""


def local_pass(name: str, ctype: CollType, domains: int) -> str:
    """The step that ends each loop of a channel of algorithm `name` over `domains` scale-up domains without
    moving anything over a link ("" if none; see Algorithm)."""
    return find_algorithm(name).local_pass(ctype, domains)


def sliced_steps(name: str, ctype: CollType, protocol: str) -> bool:
    """Whether algorithm `name`'s flows of `ctype` under `protocol` are steps of NCCL's Simple ring, handed on slice
    by slice (see Algorithm.sliced)."""
    return find_algorithm(name).sliced(ctype, protocol)


def symmetry(name: str, ctype: CollType, shape: GroupShape) -> int | None:
    """The smallest shift of positions that maps the flows of algorithm `name` onto themselves (see Algorithm)."""
    return find_algorithm(name).symmetry(ctype, shape)


def checked(name: str, ctype: CollType) -> Algorithm:
    """The algorithm that runs a collective of this type when `name` is chosen (an all-to-all runs as send/receive
    whatever is chosen for collectives: algorithms.algorithm_for), refusing an unknown name, or one that does
    not do this collective."""
    name = algorithm_for(ctype, name)
    found = find_algorithm(name)
    if ctype not in found.decompositions:
        does = ", ".join(t.name for t in found.decompositions)
        raise Unrunnable(f"{ctype.name} has no {name} decomposition ({name} does {does})")
    return found


def flow_set(collective_type: str | CollType, group: Sequence[int], size: float, channels: int,
             algorithm: str = "ring", protocol: str = "simple", shape: GroupShape | None = None,
             one_period: bool = False, steady: bool = False, chunk_bytes: float | None = None) -> FlowSet:
    """The flows of one collective instance, column-wise (what the DAG builder uses).

    `shape` says which node each member sits on (default: all on one node). Channels with identical flows
    are simulated once, each simulated channel carrying `lanes` channels' bytes: they share the same links
    equally and finish together, so this changes nothing but the cost. `one_period`: a ring's first step
    only, marked as repeated (for steady-state estimates of huge rings; other algorithms ignore it); `steady`:
    that step carrying every step's bytes, without parents (FlowSet.in_steady_state). `chunk_bytes`: NCCL's
    chunk for an NVLS algorithm or a Simple tree (collective.tuner's Choice; None: as NCCL cuts it by default).
    """
    if algorithm == "auto":
        raise ValueError("algorithm 'auto' is chosen per datacenter: resolve it with collective.tuner first")
    ctype = coll_type(collective_type)
    record = checked(algorithm, ctype)
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r} (valid: {', '.join(PROTOCOLS)})")
    channel_argument(channels)
    if not math.isfinite(size) or size < 0:
        raise ValueError(f"data_size must be a finite number of bytes, not negative, got {size}")
    group = tuple(_rank(r) for r in group)
    if len(set(group)) != len(group):
        raise ValueError(f"group_ranks has repeated ranks: {list(group)}")
    if not group:
        raise ValueError("group_ranks is empty: a collective needs at least two ranks")
    shape = shape or GroupShape.flat(len(group))
    if len(shape.domain) != len(group):
        raise ValueError(f"the group shape has {len(shape.domain)} members, the group {len(group)}")
    simulated = _simulated_channels(record, ctype, shape, channels)
    decomposition = record.decompositions[ctype]
    if (one_period or steady) and record.first_period and ctype in record.first_period:
        decomposition = record.first_period[ctype]
    chunking = {"chunk_bytes": chunk_bytes} if record.chunked else {}
    flows = decomposition(group, shape, float(size), simulated, protocol, channels // simulated, **chunking)
    flows = replace(flows, symmetry=record.symmetry(ctype, shape), lanes=channels // simulated,
                    grouped_sends=ctype in POINT_TO_POINT, send_receive=ctype == CollType.SendRecv,
                    local_pass=record.local_pass(ctype, shape.nodes))
    return flows.in_steady_state() if steady else flows


def _rank(rank: object) -> int:
    """A group member's rank: a whole number, not negative (a flow's -1 is the switch, common.SWITCH)."""
    try:
        number = int(rank)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise ValueError(f"group_ranks holds {rank!r}, not a rank") from None
    if number != rank or number < 0 or isinstance(rank, bool):
        raise ValueError(f"group_ranks holds {rank!r}: a rank is a whole number from 0")
    return number


def flow_count(collective_type: str | CollType, shape: GroupShape, size: float, channels: int,
               algorithm: str = "ring", protocol: str = "simple", one_period: bool = False,
               chunk_bytes: float | None = None) -> int:
    """How many flows flow_set makes for the same arguments (the group given by its `shape`), counted without
    making them, so that a collective too large for memory can be refused before it is built: exactly, but for an
    all-to-all through DeepEP (at most n (n - 1) a simulated channel, every pair it considers while routing)."""
    if algorithm == "auto":
        raise ValueError("algorithm 'auto' is chosen per datacenter: resolve it with collective.tuner first")
    ctype = coll_type(collective_type)
    record = checked(algorithm, ctype)
    simulated = _simulated_channels(record, ctype, shape, channels)
    return record.count(ctype, shape, float(size), simulated, protocol, channels // simulated,
                        one_period and bool(record.first_period) and ctype in record.first_period, chunk_bytes)


def _simulated_channels(record: Algorithm, ctype: CollType, shape: GroupShape, channels: int) -> int:
    """The channels flow_set simulates: one period of channels with identical flows where `channels` is a whole
    number of periods, else every channel."""
    period = record.channel_period(ctype, shape) or 1
    return period if channels % period == 0 else channels


def every_channel(flows: FlowSet) -> FlowSet:
    """The flows of every channel a simulated channel stands for (`lanes`), each with its share of the bytes:
    channel k + lane * simulated repeats channel k, its parents in its own copy."""
    lanes = flows.lanes
    if lanes == 1:
        return flows
    count, simulated = len(flows.size), int(flows.channel.max()) + 1 if len(flows.size) else 1
    parents_per_flow = np.diff(flows.parent_ptr)
    copies = np.arange(lanes)

    def tiled(column: np.ndarray) -> np.ndarray:
        return np.tile(column, lanes)

    return replace(
        flows, src_pos=tiled(flows.src_pos), dst_pos=tiled(flows.dst_pos), size=tiled(flows.size) / lanes,
        channel=(flows.channel[None, :] + simulated * copies[:, None]).ravel(), step=tiled(flows.step),
        tag=tiled(flows.tag),
        parent_ptr=np.concatenate([[0], np.cumsum(tiled(parents_per_flow))]).astype(flows.parent_ptr.dtype),
        parent_idx=(flows.parent_idx[None, :] + count * copies[:, None]).ravel().astype(flows.parent_idx.dtype),
        lanes=1)


def decompose_collective(collective_type: str | CollType, group_ranks: Sequence[int], data_size: float,
                         num_channels: int = 1, algorithm: str | None = None, flow_id_start: int = 0,
                         gpus_per_node: int | None = None) -> tuple[CollectiveResult, int]:
    """Decompose one collective into P2PFlow records with parent/child chains, every channel's flows (channel
    ids 0 to num_channels - 1; the engine simulates identical channels once, see flow_set). `collective_type`: a
    CollType or its name, as time_collective and the CLI's --op read it (types.coll_type). `algorithm`: the one
    asked of this collective (None: ring, which runs an all-to-all or a send/receive as `p2p`); an all-to-all's or
    a send/receive's parts (num_channels a peer) lie on NCCL's point-to-point channels, numbered as NCCL numbers
    them, and a collective algorithm NCCL_ALGO cannot steer onto them is refused, as the CLI refuses it
    (algorithms.asked_algorithm: Unrunnable). The result names the algorithm that ran.

    `gpus_per_node`: rank r sits on node r // gpus_per_node (None: every rank on one node), so that the algorithms
    across nodes (tree's chains, collnet_direct, collnet_chain, nvls_tree) see the group's nodes.

    Returns the result and the next unused flow id, so that callers can number flows of several
    collectives without collisions (`flow_id_start`: a whole number from 0). A group of fewer than two ranks is
    refused (ValueError), as flow_set's other checks refuse theirs, and so is a `data_size` time_collective and the
    CLI refuse (common.check_message_size: positive, finite, at most an exabyte), in time_collective's words.
    """
    if isinstance(flow_id_start, bool) or not isinstance(flow_id_start, int) or flow_id_start < 0:
        raise ValueError(f"flow_id_start: a flow id is a whole number from 0, got {flow_id_start!r}")
    if len(group_ranks) < 2:
        raise ValueError(f"group_ranks {list(group_ranks)}: a collective needs at least two ranks")
    if gpus_per_node is not None and (isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int)
                                      or gpus_per_node < 1):
        raise ValueError(f"gpus_per_node must be a whole number of at least 1, got {gpus_per_node!r}")
    data_size = check_message_size(data_size)
    ranks = tuple(_rank(r) for r in group_ranks)
    shape = GroupShape.of(ranks, gpus_per_node) if gpus_per_node is not None else None
    ctype = coll_type(collective_type)
    algorithm = asked_algorithm(ctype, algorithm)
    flows = every_channel(flow_set(ctype, ranks, data_size, num_channels, algorithm, shape=shape))
    src, dst = flows.src, flows.dst
    records = [
        P2PFlow(flow_id=flow_id_start + i, src=int(src[i]), dst=int(dst[i]), bytes=float(flows.size[i]),
                channel=int(flows.channel[i]), step=int(flows.step[i]))
        for i in range(len(flows))
    ]
    for child, parent in zip(flows.parent_of.tolist(), flows.parent_idx.tolist(), strict=True):
        records[child].parent_flow_ids.append(flow_id_start + parent)
        records[parent].child_flow_ids.append(flow_id_start + child)
    result = CollectiveResult(ctype.name, algorithm, list(flows.group), float(data_size),
                              num_channels, records)
    return result, flow_id_start + len(records)
