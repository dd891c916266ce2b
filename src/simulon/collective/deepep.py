"""DeepEP's internode all-to-all (deepseek-ai/DeepEP, csrc/kernels/internode.cu; DeepSeek-V3, arXiv 2412.19437
section 3.2.2): what a member sends to the members of another node crosses the scale-out fabric once, to the
member of that node at the sender's own index there (so on the sender's rail: under one leaf of a
rail-optimized fabric), which forwards each part over NVLink to its receiver; parts for members of the
sender's own node go straight over NVLink.

Two payloads:

- `deepep`: an all-to-all buffer whose parts are all distinct (size/n to every member, as NCCL's all-to-all):
  the message to a node carries that node's parts, and bytes are conserved (what leaves a member is what its
  receivers get).
- `deepep:E:G:K:k` (`routed_name`), an MoE token dispatch: the buffer holds a member's tokens top_k times (one
  copy per chosen expert, the buffer Megatron's all-to-all dispatcher sends), its E experts are spread evenly
  over the members in order, in G equal groups, and every token's k experts lie in K of the groups
  (node-limited routing, section 2.1.2). A token crosses to a node once if any of its experts are there and
  reaches each member holding any of them once (DeepEP deduplicates per node and per rank). Under uniform
  routing (K groups uniformly, then k experts uniformly among theirs) the expected bytes follow from
  `hit_probability`.

Combine runs the same legs the other way; under uniform routing its volumes are the dispatch's, and it is
simulated with the dispatch's flows (the legs in the dispatch's order: the same two hops in series).

A group whose nodes hold different numbers of members still runs: a sender whose index has no member on a
node sends to that node's members directly. Channels split every part evenly.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache

import numpy as np

from .common import FlowBuilder, FlowSet
from .shape import GroupShape
from .types import CollType

NAME = "deepep"
"""The algorithm's name in the catalog (collective.algorithms); routed payloads add their routing to it."""


@dataclass(frozen=True)
class Routing:
    """Node-limited top-k routing: `experts` in `groups` equal groups, a token's `top_k` among `group_topk` of
    them."""

    experts: int
    groups: int
    group_topk: int
    top_k: int

    def __post_init__(self) -> None:
        if min(self.experts, self.groups, self.group_topk, self.top_k) < 1:
            raise ValueError(f"routing counts must be positive: {self}")
        if self.experts % self.groups or self.group_topk > self.groups:
            raise ValueError(f"{self.groups} groups of {self.experts} experts, {self.group_topk} chosen, do not fit")
        if self.top_k > self.group_topk * (self.experts // self.groups):
            raise ValueError(f"top_k {self.top_k} exceeds the experts of {self.group_topk} groups")


def routed_name(routing: Routing) -> str:
    """The catalog name of deepep carrying MoE tokens routed as `routing` says."""
    return f"{NAME}:{routing.experts}:{routing.groups}:{routing.group_topk}:{routing.top_k}"


ROUTING_NUMBER = re.compile(r"[0-9]{1,9}")
"""A count in a deepep name: ASCII digits (str.isdigit also passes '²', which int() refuses)."""


def parse_name(name: str) -> Routing | None:
    """The routing a deepep name carries (None: plain `deepep`); ValueError for a malformed one."""
    if name == NAME:
        return None
    head, _, rest = name.partition(":")
    parts = rest.split(":")
    if head != NAME or len(parts) != 4 or not all(ROUTING_NUMBER.fullmatch(p) for p in parts):
        raise ValueError(f"{name!r} is not {NAME} or {NAME}:EXPERTS:GROUPS:GROUP_TOPK:TOP_K")
    return Routing(*(int(p) for p in parts))


@cache
def hit_probability(routing: Routing, holders: int) -> float:
    """The probability that one of `holders` equal holders of the experts (in order: experts
    [j E/h, (j+1) E/h) on holder j), averaged over the holders, receives at least one of a token's experts.

    Under uniform routing the chosen groups are a uniform K-subset of the G groups and the k experts a uniform
    k-subset of their K E/G experts. Holder j overlaps group i by c_i experts; if the chosen groups give it x
    experts in all, it is missed with probability C(KE/G - x, k) / C(KE/G, k) (hypergeometric), and a subset T
    of the groups it overlaps is exactly the chosen part of them with probability C(G - |O|, K - |T|) / C(G, K).
    Summed over T by a small dynamic programme over (|T|, x). Without groups (G = K = 1) this is
    1 - C(E - E/h, k) / C(E, k).
    """
    e, g, kg, k = routing.experts, routing.groups, routing.group_topk, routing.top_k
    if holders < 1 or e % holders:
        raise ValueError(f"{holders} holders cannot share {e} experts evenly")
    per_group, per_holder, pool = e // g, e // holders, kg * (e // g)
    total = 0.0
    for j in range(holders):
        lo, hi = j * per_holder, (j + 1) * per_holder
        overlaps = [min(hi, (i + 1) * per_group) - max(lo, i * per_group) for i in range(lo // per_group,
                                                                                          (hi - 1) // per_group + 1)]
        ways = {(0, 0): 1}                                     # (groups of T, experts they give) -> subsets
        for c in overlaps:
            for (m, x), count in list(ways.items()):
                ways[(m + 1, x + c)] = ways.get((m + 1, x + c), 0) + count
        outside = g - len(overlaps)
        missed = sum(count * math.comb(outside, kg - m) * math.comb(pool - x, k)
                     for (m, x), count in ways.items() if 0 <= kg - m <= outside)
        total += 1.0 - missed / (math.comb(g, kg) * math.comb(pool, k))
    return total / holders


def leg_bytes(size: float, shape: GroupShape, routing: Routing | None) -> tuple[float, float]:
    """(bytes a member sends over the fabric to one other node of `per_node` members, bytes one member receives
    from one other over NVLink) for a buffer of `size` bytes per member: every part distinct (routing None: the
    parts of the node's members), or routed tokens (each token once per node and once per member it goes to)."""
    n = shape.n
    if routing is None:
        per_rank = size / max(n, 1)
        return per_rank * (shape.per_node or 1), per_rank
    token_bytes = size / routing.top_k
    return token_bytes * hit_probability(routing, shape.nodes), token_bytes * hit_probability(routing, n)


def deepep_all_to_all(group: tuple[int, ...], shape: GroupShape, size: float, channels: int,
                      routing: Routing | None = None) -> FlowSet:
    """Step 0: each member's sends to the other members of its node (NVLink) and to its rail peer on every other
    node (the fabric); step 1: each rail peer forwards to every other member of its node what the senders of
    all other nodes sent it (one flow per receiver, waiting for all of them)."""
    n = len(group)
    out = FlowBuilder(group)
    _check_routing(routing, shape)
    node_bytes, rank_bytes = (b / channels for b in leg_bytes(size, shape, routing))
    domain = np.asarray(shape.domain, dtype=np.int64)
    local = shape.local
    sizes = np.asarray([len(m) for m in shape.members], dtype=np.int64)
    member_at = np.full((shape.nodes, int(sizes.max(initial=0))), -1, dtype=np.int64)  # [node, index] -> position
    member_at[domain, local] = np.arange(n)
    src, dst = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    same = (domain[src] == domain[dst]) & (src != dst)
    # no member at the sender's index on the receiver's node: straight to each of that node's members
    direct = same | ((domain[src] != domain[dst]) & (local[src] >= sizes[domain[dst]]))
    senders = np.repeat(np.arange(n), shape.nodes)
    nodes = np.tile(np.arange(shape.nodes), n)
    held = local[senders] < sizes[nodes]                            # the node has a member at the sender's index
    relay = np.where(held, member_at[nodes, np.minimum(local[senders], member_at.shape[1] - 1)], -1)
    legs = (nodes != domain[senders]) & (relay >= 0)
    senders, relay = senders[legs], relay[legs]
    leg_size = node_bytes if routing else rank_bytes * sizes[domain[relay]]
    into = np.argsort(relay, kind="stable")                     # each relay's incoming legs, grouped
    counts = np.bincount(relay, minlength=n)
    width = int(counts.max(initial=0))
    slot = np.arange(len(relay)) - np.repeat(np.cumsum(counts) - counts, counts)
    fwd_src, fwd_dst = src[same & (counts[src] > 0)], dst[same & (counts[src] > 0)]
    for ch in range(channels):
        out.add(src[direct], dst[direct], rank_bytes, ch, 0)
        first = out.add(senders, relay, leg_size, ch, 0)
        if not len(fwd_src):
            continue
        table = np.full((n, width), -1, dtype=np.int64)
        table[relay[into], slot] = first[into]
        out.add(fwd_src, fwd_dst, rank_bytes * counts[fwd_src], ch, 1, table[fwd_src])
    return out.build()


def _check_routing(routing: Routing | None, shape: GroupShape) -> None:
    """Routed tokens need the experts spread evenly over the members and the members evenly over the nodes."""
    if routing is None:
        return
    if shape.per_node is None or routing.experts % max(shape.n, 1):
        raise ValueError(f"{NAME} with routed tokens needs {routing.experts} experts spread evenly over the "
                         f"{shape.n} members and as many members on every node, got "
                         f"{sorted({len(m) for m in shape.members})} per node")


def symmetry(ctype: CollType, shape: GroupShape) -> int | None:
    """Inside one node, or with one member per node, every member sends alike: 1. Nodes holding their members in
    a row repeat node by node (a member's rail peers and its node's members move with it). Otherwise none."""
    if shape.flat_ring:
        return 1
    return shape.per_node if shape.blocked else None
