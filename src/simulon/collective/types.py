"""The collectives simulon decomposes into point-to-point flows (a pipeline send is not one of them)."""

from __future__ import annotations

from enum import IntEnum


class CollType(IntEnum):
    AllReduce = 0
    AllGather = 1
    ReduceScatter = 2
    AllToAll = 3


def coll_type(name: str | CollType) -> CollType:
    """A collective type from its name (`AllReduce`, ...), refusing unknown names."""
    if isinstance(name, CollType):
        return name
    try:
        return CollType[name]
    except KeyError:
        valid = ", ".join(t.name for t in CollType)
        raise ValueError(f"unknown collective type {name!r} (valid: {valid})") from None
