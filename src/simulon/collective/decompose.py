"""decompose_collective: the public entry point from a collective to its P2P flows."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..workload.program import CollType
from .common import CollectiveResult, FlowSet, P2PFlow
from .ring import all_to_all, ring_all_gather, ring_all_reduce, ring_reduce_scatter

_ALGORITHMS: dict[str, dict[CollType, Callable[[tuple[int, ...], float, int], FlowSet]]] = {
    "ring": {
        CollType.AllReduce: ring_all_reduce,
        CollType.AllGather: ring_all_gather,
        CollType.ReduceScatter: ring_reduce_scatter,
        CollType.AllToAll: all_to_all,
    },
}
KNOWN_ALGORITHMS = ("ring", "tree", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat", "auto")


def _coll_type(name: str | CollType) -> CollType:
    if isinstance(name, CollType):
        return name
    try:
        return CollType[name]
    except KeyError:
        valid = ", ".join(t.name for t in CollType if t != CollType.PP_Send)
        raise ValueError(f"unknown collective type {name!r} (valid: {valid})") from None


def flow_set(collective_type: str | CollType, group: Sequence[int], size: float, channels: int,
             algorithm: str = "ring") -> FlowSet:
    """The flows of one collective instance, column-wise (what the DAG builder uses)."""
    if algorithm not in _ALGORITHMS:
        state = "is not built yet" if algorithm in KNOWN_ALGORITHMS else "is unknown"
        raise ValueError(f"collective algorithm {algorithm!r} {state} (built: {', '.join(_ALGORITHMS)})")
    if channels < 1:
        raise ValueError(f"num_channels must be at least 1, got {channels}")
    if size < 0:
        raise ValueError(f"data_size must not be negative, got {size}")
    group = tuple(int(r) for r in group)
    if len(set(group)) != len(group):
        raise ValueError(f"group_ranks has repeated ranks: {list(group)}")
    ctype = _coll_type(collective_type)
    if ctype not in _ALGORITHMS[algorithm]:
        raise ValueError(f"{ctype.name} has no {algorithm} decomposition")
    return _ALGORITHMS[algorithm][ctype](group, float(size), channels)


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
    for i, parent in enumerate(flows.parent):
        if parent >= 0:
            records[i].parent_flow_ids.append(flow_id_start + int(parent))
            records[int(parent)].child_flow_ids.append(flow_id_start + i)
    result = CollectiveResult(_coll_type(collective_type).name, algorithm, list(flows.group), float(data_size),
                              num_channels, records)
    return result, flow_id_start + len(records)
