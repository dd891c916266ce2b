"""From a collective to its P2P flows: the registry of algorithms, and the seed's decompose_collective."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

from .collnet import collnet_chain_all_reduce, collnet_direct_all_reduce
from .common import CollectiveResult, FlowSet, P2PFlow
from .hierarchical import hierarchical
from .nccl import PROTOCOLS, constants
from .nvls import nvls, nvls_tree_all_reduce
from .pat import pat_all_gather, pat_reduce_scatter
from .pxn import relay_cross_rail
from .ring import all_to_all, ring_all_gather, ring_all_reduce, ring_reduce_scatter
from .shape import GroupShape
from .tree import tree_all_reduce
from .types import CollType, coll_type

AR, AG, RS, A2A = CollType.AllReduce, CollType.AllGather, CollType.ReduceScatter, CollType.AllToAll

Decomposition = Callable[[tuple[int, ...], GroupShape, float, int, str, int], FlowSet]
"""(group, shape, size, simulated channels, protocol, lanes: real channels per simulated one) -> flows."""


def _plain(fn) -> Decomposition:
    """An algorithm whose flows depend on neither the protocol nor a pipeline's chunks."""
    return lambda group, shape, size, channels, protocol, lanes: fn(group, shape, size, channels)


def _pxn(fn) -> Decomposition:
    """A ring-family algorithm whose cross-node, cross-rail sends go through the rail-aligned peer."""
    return lambda group, shape, size, channels, protocol, lanes: relay_cross_rail(fn(group, shape, size, channels),
                                                                                  shape)


_RING_STEPS = {AR: ring_all_reduce, AG: ring_all_gather, RS: ring_reduce_scatter}
_RING = {**_RING_STEPS, A2A: all_to_all}


def local_pass(algorithm: str, ctype: CollType, domains: int) -> str:
    """The step that ends each loop of a channel without moving anything over a link ("" if none): NCCL's
    ring kernels reduce the last chunk a rank receives into its output ("reduce", reduce-scatter) or copy it
    out ("copy", all-gather), in the thread block that also sends over NVLink, so those links idle
    meanwhile. An all-reduce loop ("reduce_copy") also writes its reduced chunk to its output as it sends it
    on, before the final copy. One such step per loop is why a 2-rank ring reaches less bus bandwidth than an
    8-rank one on the same links. A ring across `domains` > 1 has none: a NIC keeps sending from the proxy's
    FIFO while the GPU copies."""
    if algorithm != "ring" or ctype not in _RING_STEPS or domains > 1:
        return ""
    return _LOCAL_PASS[ctype]


_LOCAL_PASS = {RS: "reduce", AG: "copy", AR: "reduce_copy"}


ALGORITHMS: dict[str, dict[CollType, Decomposition]] = {
    "ring": {ctype: _plain(fn) for ctype, fn in _RING.items()},
    "tree": {AR: tree_all_reduce},
    "nvls": {AR: partial(nvls, reduce=True, gather=True), RS: partial(nvls, reduce=True, gather=False),
             AG: partial(nvls, reduce=False, gather=True)},
    "nvls_tree": {AR: nvls_tree_all_reduce},
    "collnet_direct": {AR: collnet_direct_all_reduce},
    "collnet_chain": {AR: collnet_chain_all_reduce},
    "pat": {AG: _plain(pat_all_gather), RS: _plain(pat_reduce_scatter)},
    "hierarchical": {ctype: _plain(partial(hierarchical, ctype=ctype)) for ctype in (AR, AG, RS)},
    "pxn": {ctype: _pxn(fn) for ctype, fn in _RING.items()},
}
"""Algorithm -> the collectives it does. NCCL's tree and CollNet do only all-reduce; PAT only all-gather
and reduce-scatter; all-to-all is a set of direct sends (ring's, or with PXN relays)."""


def symmetry(algorithm: str, ctype: CollType, shape: GroupShape) -> int | None:
    """The smallest shift of positions that maps the algorithm's flows onto themselves, so that a member may
    stand for the members that many positions away: 1 for direct sends, PAT, NVLS, and rings (or what
    degenerates to one) inside one node or with one member per node; a node's members for what repeats node
    by node (rings not bent to the rails, hierarchical, CollNet); None for trees, whose root is unlike the
    other members. Rings in a mesh take cycles no shift maps onto themselves."""
    if shape.mesh_cycles > 1 and algorithm in ("ring", "pxn") and ctype != A2A:
        return None
    if (ctype == A2A and algorithm == "ring") or algorithm in ("pat", "nvls") or (shape.flat_ring and \
            algorithm in ("ring", "pxn", "hierarchical")):
        return 1
    per_node = shape.per_node
    if per_node is None:
        return None
    if (algorithm in ("ring", "pxn") and not shape.rail_aligned) or algorithm == "hierarchical":
        return per_node
    if algorithm in ("collnet_direct", "collnet_chain"):
        return per_node
    return None


def channel_period(algorithm: str, ctype: CollType, shape: GroupShape) -> int:
    """Channels c and c + period have the same flows: a ring's channels differ only in which member (and
    NIC) they leave a node by (and in a mesh which cycle they take), a tree's in which tree and chain member
    they use."""
    per_node = shape.per_node or 1
    if ctype == A2A:  # inside a domain each of the channels a peer's part takes is its own
        return constants()["p2p_channels"] if shape.nodes == 1 else 1
    if algorithm in ("ring", "pxn"):
        return math.lcm(1 if shape.flat_ring else per_node, shape.mesh_cycles)
    if algorithm == "tree":
        return 2 * per_node
    if algorithm == "nvls_tree":
        return 2
    if algorithm == "collnet_chain":
        return per_node
    return 1


def check_algorithm(algorithm: str, ctype: CollType) -> None:
    """Refuse an unknown algorithm, or one that does not do this collective."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"collective algorithm {algorithm!r} is unknown (built: {', '.join(ALGORITHMS)}, auto)")
    if ctype not in ALGORITHMS[algorithm]:
        does = ", ".join(t.name for t in ALGORITHMS[algorithm])
        raise ValueError(f"{ctype.name} has no {algorithm} decomposition ({algorithm} does {does})")


def flow_set(collective_type: str | CollType, group: Sequence[int], size: float, channels: int,
             algorithm: str = "ring", protocol: str = "simple", shape: GroupShape | None = None,
             one_period: bool = False) -> FlowSet:
    """The flows of one collective instance, column-wise (what the DAG builder uses).

    `shape` says which node each member sits on (default: all on one node). Channels with identical flows
    are simulated once, each simulated channel carrying `lanes` channels' bytes: they share the same links
    equally and finish together, so this changes nothing but the cost. `one_period`: a ring's first step
    only, marked as repeated (for steady-state estimates of huge rings; other algorithms ignore it).
    """
    if algorithm == "auto":
        raise ValueError("algorithm 'auto' is chosen per datacenter: resolve it with collective.tuner first")
    ctype = coll_type(collective_type)
    check_algorithm(algorithm, ctype)
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r} (valid: {', '.join(PROTOCOLS)})")
    if channels < 1:
        raise ValueError(f"num_channels must be at least 1, got {channels}")
    if size < 0:
        raise ValueError(f"data_size must not be negative, got {size}")
    group = tuple(int(r) for r in group)
    if len(set(group)) != len(group):
        raise ValueError(f"group_ranks has repeated ranks: {list(group)}")
    shape = shape or GroupShape.flat(len(group))
    if len(shape.domain) != len(group):
        raise ValueError(f"the group shape has {len(shape.domain)} members, the group {len(group)}")
    period = channel_period(algorithm, ctype, shape)
    simulated = period if channels % period == 0 else channels
    if one_period and algorithm == "ring" and ctype in _RING_STEPS:
        flows = _RING_STEPS[ctype](group, shape, float(size), simulated, one_period=True)
    else:
        flows = ALGORITHMS[algorithm][ctype](group, shape, float(size), simulated, protocol, channels // simulated)
    return replace(flows, symmetry=symmetry(algorithm, ctype, shape), lanes=channels // simulated,
                   grouped_sends=ctype == A2A, local_pass=local_pass(algorithm, ctype, shape.nodes))


def decompose_collective(collective_type: str, group_ranks: Sequence[int], data_size: float,
                         num_channels: int = 1, algorithm: str = "ring",
                         flow_id_start: int = 0) -> tuple[CollectiveResult, int]:
    """Decompose one collective into P2PFlow records with parent/child chains.

    Returns the result and the next unused flow id, so that callers can number flows of several
    collectives without collisions.
    """
    flows = flow_set(collective_type, group_ranks, data_size, num_channels, algorithm)
    src, dst = flows.src, flows.dst
    records = [
        P2PFlow(flow_id=flow_id_start + i, src=int(src[i]), dst=int(dst[i]), bytes=float(flows.size[i]),
                channel=int(flows.channel[i]), step=int(flows.step[i]))
        for i in range(len(flows))
    ]
    for child, parent in zip(flows.parent_of.tolist(), flows.parent_idx.tolist(), strict=True):
        records[child].parent_flow_ids.append(flow_id_start + parent)
        records[parent].child_flow_ids.append(flow_id_start + child)
    result = CollectiveResult(coll_type(collective_type).name, algorithm, list(flows.group), float(data_size),
                              num_channels, records)
    return result, flow_id_start + len(records)
