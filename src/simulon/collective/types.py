"""The collectives simulon decomposes into point-to-point flows (a pipeline send is not one of them)."""

from __future__ import annotations

import re
from enum import IntEnum


class CollType(IntEnum):
    AllReduce = 0
    AllGather = 1
    ReduceScatter = 2
    AllToAll = 3
    SendRecv = 4  # a ring shift: every member sends the whole message to the next one and receives it from the
    #               previous one (nccl-tests' sendrecv_perf; XLA's collective-permute over source-target pairs
    #               i -> i+1; a pipeline's stage-to-stage sends are its pairs)


POINT_TO_POINT = frozenset({CollType.AllToAll, CollType.SendRecv})
"""The collectives NCCL runs as grouped send/receive calls (not through NCCL_ALGO's collective algorithms)."""

GATHER_SCATTER = frozenset({CollType.AllGather, CollType.ReduceScatter})
"""The collectives whose NVLS kernel in one domain is a multicast or multicast-reduce and one loop of 8 warps that
gathers from or scatters to the domain's members one after another (NCCL src/device/all_gather.h and
reduce_scatter.h, RunWorkColl NCCL_ALGO_NVLS: nThreadsGather / nThreadsScatter 8 * WARP_SIZE; prims_simple.h
ScatterGatherOp's loop over fan.nrecv() / fan.nsend() peers), where an all-reduce splits the rest of its 16 warps
between a scatter (6), a gather (5) and a reduce (5) running side by side (all_reduce.h)."""


COLLECTIVE_NAMES = {**{t.name.lower(): t for t in CollType}, "permute": CollType.SendRecv}
"""Collectives by name, as `collective_named` reads them: the CollType names (allreduce, allgather, reducescatter,
alltoall, sendrecv: what `simulon collective --op` lists) and XLA's permute, its ring shift."""


def collective_named(name: str) -> CollType | None:
    """The collective a name denotes, in any case and with or without '_', '-' or spaces between its words
    (allreduce, all_reduce, AllReduce, all-reduce), or None."""
    return COLLECTIVE_NAMES.get(re.sub(r"[\s_-]+", "", name.lower()))


def coll_type(name: str | CollType) -> CollType:
    """The collective `name` denotes: a CollType, or a name as collective_named reads it (AllReduce, allreduce,
    all_reduce, permute, ...); ValueError listing the names otherwise. The one parser of a collective's name, for
    the seed's decompose_collective, the pipeline's time_collective and the CLI's --op alike."""
    if isinstance(name, CollType):
        return name
    found = collective_named(name) if isinstance(name, str) else None
    if found is None:
        raise ValueError(f"expected one of {', '.join(COLLECTIVE_NAMES)}, got {name!r}")
    return found
