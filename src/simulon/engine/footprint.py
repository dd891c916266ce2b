"""Folded flows on a fabric of several tiers: the fabric links that a simulated flow's counterparts load.

A simulated flow stands for one real flow of each GPU of its sender's class (dag.fold.Fold.counterparts). Inside
a scale-up domain their links are copies of the representative's, which carry the class's weight
(Topology.fold_weights); so are their NIC ports, each carrying by symmetry what the representative's carries. Above
the leaves they are not: ECMP hashes each counterpart onto its own uplinks, spines and cores, where the
counterparts of this and of every other flow active at the same time collide unevenly. So a folded flow that
leaves its domain loads every inner link (leaf uplink and above) its counterparts cross, weighted by how many of
them cross it (its footprint), and the fair share divides each such link among all the real flows on it: a
simulated flow moves all its counterparts at one rate, the one its most loaded link leaves it, the pace of its
slowest counterpart, which what waits for it waits for.

That pace is right for a pipeline send, and for a ring that keeps to one rail of a rail-optimized fabric (what
waits for it waits for the slowest rail's ring); a ring's steps are not one member's steps repeated when its hops
are slowed unevenly, so other collectives whose groups span several domains are expanded over every GPU
(Fold.expands): their flows are real flows (FlowProperties.physical), loading their own route with weight 1. A
group whose rails stay under their leaves (its nodes in one scalable unit of a rail-optimized fabric) is not
expanded: its rings, bent to the rails, never leave the leaves, and its all-to-alls' flows that cross rails load
their counterparts' spines here, as a pipeline send's do: within 0.3% of the full expansion on non-blocking
leaves (tests/dag/test_fold_rail_ring.py; benchmarks/bench_fold_accuracy.py's ds128: 1.0000 and 0.9973), but
1.5% fast to 6.7% slow at 2:1, where such steps are not folded along data parallelism (dag.fold.collective_shifts).

Footprints were first taken over the NIC ports too (one entry per counterpart): the same step times, but 86.6
million link entries and 5 GB for Llama 3 405B on 16,384 GPUs, against 11.8 million and 0.9 GB over the inner
links only.

A flow's connections (Topology.connections: NCCL's connection a channel between two GPUs, each of
NCCL_IB_QPS_PER_CONNECTION queue pairs) are hashed apart above the leaves under ECMP, so a flow standing for several
channels, or a grouped send's part, loads each of its connections' cables with the share of its bytes that
connection carries (Topology.connection_loads), a folded one its counterparts' connections'. The flow still moves
at one rate, its most loaded share's pace (NCCL's channels end a collective together). Before, a pair's every
channel took one path: a ring all-reduce of 256 MiB over 4 DGX H100 under ECMP ran at 85.7 GB/s bus bandwidth, now
170.5 (32 channels, 4 a flow), 226.4 at 4 queue pairs a connection, against adaptive routing's 337.0
(tests/network/test_ecmp_cables.py); and folded expert all-to-alls across pods, off by up to 9% on single cables,
keep within 0.2% of the full expansion (tests/dag/test_fold_three_tier.py).

Without a fold, or on a fabric of one tier, a flow loads its own route (above the leaves, its connections').
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from ..collective.types import POINT_TO_POINT
from ..dag.fold import Fold
from ..dag.nodes import ExecutionDAG
from ..network.fabric import NO_LINK
from ..network.topology import Topology
from .flows import NO_COLLECTIVE, FlowProperties


@dataclass(frozen=True)
class LinkLoads:
    """Per flow, the links it loads and how many real flows it stands for on each, in CSR form: flow f loads
    link[ptr[f]:ptr[f + 1]], with weight[ptr[f]:ptr[f + 1]]."""

    ptr: np.ndarray
    link: np.ndarray
    weight: np.ndarray

    @classmethod
    def of_routes(cls, links: np.ndarray, weight: np.ndarray) -> LinkLoads:
        """Flows loading their routes (`links`, NO_LINK padded), each link with its `weight` (per link)."""
        valid = links != NO_LINK
        link = links[valid]
        ptr = np.concatenate([[0], np.cumsum(valid.sum(axis=1))]).astype(np.int64)
        return cls(ptr, link.astype(np.int64), np.asarray(weight, dtype=np.float64)[link])

    def dense(self) -> tuple[np.ndarray, np.ndarray]:
        """([flows, slots] links NO_LINK padded, [flows, slots] weights 0-padded): the rows side by side."""
        counts = np.diff(self.ptr)
        width = int(counts.max(initial=0))
        links = np.full((len(counts), width), NO_LINK, dtype=np.int64)
        weight = np.zeros((len(counts), width))
        at = np.arange(len(self.link)) - np.repeat(self.ptr[:-1], counts)
        row = np.repeat(np.arange(len(counts)), counts)
        links[row, at], weight[row, at] = self.link, self.weight
        return links, weight

    def rows(self) -> tuple[list[list[int]], list[list[float]]]:
        """Each flow's links, and its weights on them, as lists."""
        bounds = list(pairwise(self.ptr.tolist()))
        links, weights = self.link.tolist(), self.weight.tolist()
        return [links[a:b] for a, b in bounds], [weights[a:b] for a, b in bounds]


def flow_loads(dag: ExecutionDAG, topology: Topology, fold: Fold, props: FlowProperties) -> LinkLoads:
    """The links every flow of `props` loads under `fold`: its route, weighted by the fold (by 1 for a physical
    flow), with its hops above the leaves replaced by its counterparts' where it is folded and leaves its domain,
    and by its connections' where those are hashed apart (see the module's docstring)."""
    weight = topology.fold_weights(fold.rep)
    if props.physical is None or not props.physical.any():
        routes = LinkLoads.of_routes(props.links, weight)
    else:
        per_hop = weight[np.maximum(props.links, 0)]
        per_hop[props.physical] = 1.0
        valid = props.links != NO_LINK
        routes = LinkLoads(np.concatenate([[0], np.cumsum(valid.sum(axis=1))]).astype(np.int64),
                           props.links[valid].astype(np.int64), per_hop[valid])
    if topology.connection_links_from >= topology.num_links:
        return routes
    src, dst = dag.gpu[props.nodes].astype(np.int64), dag.peer[props.nodes].astype(np.int64)
    leaves = topology.between_domains(src, dst)
    connections = flow_connections(dag, props.nodes, topology)
    folded = leaves & (fold.multiplicity[src] > 1)
    if props.physical is not None:
        folded &= ~props.physical
    own = leaves & ~folded & (connections > 1)
    if not folded.any() and not own.any():
        return routes
    rows = np.flatnonzero(folded | own)
    by_key = np.flatnonzero(folded[rows])
    keys, key_of_row = _pair_keys(dag, props.nodes[rows[by_key]], src[rows[by_key]], dst[rows[by_key]],
                                  connections[rows[by_key]])
    fp_ptr, fp_link, fp_count = _footprints(keys, dag, topology, fold)
    mine = rows[~folded[rows]]
    own_ptr, own_link, own_share = topology.connection_loads(src[mine], dst[mine], connections[mine], fold.rep,
                                                             props.physical[mine] if props.physical is not None
                                                             else None)
    own_weight = own_share * weight[own_link]  # a physical flow's connections carry its bytes alone
    if props.physical is not None:
        own_weight = np.where(np.repeat(props.physical[mine], np.diff(own_ptr)), own_share, own_weight)
    of_row = np.empty(len(rows), dtype=np.int64)
    of_row[by_key] = key_of_row
    of_row[~folded[rows]] = len(keys) + np.arange(len(mine))
    return _merged(props.links, routes, rows, of_row, np.concatenate([fp_ptr, fp_ptr[-1] + own_ptr[1:]]),
                   np.concatenate([fp_link, own_link]), np.concatenate([fp_count, own_weight]),
                   topology.connection_links_from)


def connection_spread(topology: Topology, links: np.ndarray, src: np.ndarray, dst: np.ndarray,
                      lanes: np.ndarray, grouped: np.ndarray) -> LinkLoads:
    """Unfolded flows loading their routes (`links`, NO_LINK padded) with weight 1, those that leave their domain
    on connections hashed apart (Topology.connections of their `lanes`, or a peer's where `grouped`) loading their
    connections' links above the leaves instead, each with the share of the flow's bytes it carries."""
    routes = LinkLoads.of_routes(links, np.ones(topology.num_links))
    if topology.connection_links_from >= topology.num_links:
        return routes
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    connections = topology.connections(lanes, grouped)
    rows = np.flatnonzero(topology.between_domains(src, dst) & (connections > 1))
    if not len(rows):
        return routes
    ptr, link, share = topology.connection_loads(src[rows], dst[rows], connections[rows])
    return _merged(links, routes, rows, np.arange(len(rows)), ptr, link, share, topology.connection_links_from)


def flow_connections(dag: ExecutionDAG, nodes: np.ndarray, topology: Topology) -> np.ndarray:
    """Per flow of `nodes`: the connections ECMP hashes apart for it where it leaves its domain
    (Topology.connections of its collective's lanes; a pipeline send's and a grouped send's part are a peer's)."""
    lanes = np.array([c.lanes for c in dag.collectives] + [1], dtype=np.int64)
    grouped = np.array([c.ctype in POINT_TO_POINT for c in dag.collectives] + [True])
    coll = dag.coll[nodes].astype(np.int64)
    index = np.where(coll == NO_COLLECTIVE, len(dag.collectives), coll)
    return topology.connections(lanes[index], grouped[index])


def _pair_keys(dag: ExecutionDAG, nodes: np.ndarray, src: np.ndarray, dst: np.ndarray, connections: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (group, sender, receiver, connections) of flows, the group an index into the DAG's distinct
    collective groups (-1: a pipeline send), and each flow's index among them."""
    coll = dag.coll[nodes].astype(np.int64)
    groups = {c.group for c in dag.collectives}
    index = {g: i for i, g in enumerate(sorted(groups))}
    group_of_coll = np.array([index[c.group] for c in dag.collectives] + [-1], dtype=np.int64)
    group = group_of_coll[np.where(coll == NO_COLLECTIVE, len(dag.collectives), coll)]
    keys, key_of_row = np.unique(np.stack([group, src, dst, connections], axis=1), axis=0, return_inverse=True)
    return keys, key_of_row.ravel()


def _footprints(keys: np.ndarray, dag: ExecutionDAG, topology: Topology, fold: Fold
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per key (group, sender, receiver, connections): the inner links (leaf uplinks and above) its counterparts'
    connections cross and how many counterparts' worth cross each (a connection counting its share), in CSR form
    (links in increasing order)."""
    if not len(keys):
        return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    groups = sorted({c.group for c in dag.collectives})
    senders, receivers, owner = [], [], []
    for k, (g, s, d, _) in enumerate(keys.tolist()):
        ms, md = fold.counterparts(s, d, groups[g] if g >= 0 else None)
        senders.append(ms)
        receivers.append(md)
        owner.append(np.full(len(ms), k, dtype=np.int64))
    senders, receivers, owner = np.concatenate(senders), np.concatenate(receivers), np.concatenate(owner)
    ptr, link, share = topology.connection_loads(senders, receivers, keys[owner, 3])
    pair = np.repeat(owner, np.diff(ptr)) * topology.num_links + link
    counted, inverse = np.unique(pair, return_inverse=True)
    count = np.bincount(inverse.ravel(), weights=share, minlength=len(counted))
    ptr = np.concatenate([[0], np.cumsum(np.bincount(counted // topology.num_links, minlength=len(keys)))])
    return ptr.astype(np.int64), counted % topology.num_links, count.astype(np.float64)


def _merged(links: np.ndarray, routes: LinkLoads, rows: np.ndarray, key_of_row: np.ndarray, fp_ptr: np.ndarray,
            fp_link: np.ndarray, fp_count: np.ndarray, shared_from: int) -> LinkLoads:
    """`routes` with the links from `shared_from` on of flows `rows` replaced by their key's footprint (after
    their other links)."""
    num_flows = len(links)
    kept = links != NO_LINK
    kept[rows] &= links[rows] < shared_from
    weight = np.zeros(links.shape)
    weight[links != NO_LINK] = routes.weight
    own = kept.sum(axis=1)
    extra = np.zeros(num_flows, dtype=np.int64)
    extra[rows] = np.diff(fp_ptr)[key_of_row]
    ptr = np.concatenate([[0], np.cumsum(own + extra)]).astype(np.int64)
    link = np.empty(ptr[-1], dtype=np.int64)
    out_weight = np.empty(ptr[-1], dtype=np.float64)
    at = np.repeat(ptr[:-1], own) + (np.cumsum(kept, axis=1) - 1)[kept]
    link[at], out_weight[at] = links[kept], weight[kept]
    counts = extra[rows]
    first = np.repeat(ptr[rows] + own[rows], counts)
    offset = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    source = np.repeat(fp_ptr[key_of_row], counts) + offset
    link[first + offset], out_weight[first + offset] = fp_link[source], fp_count[source]
    return LinkLoads(ptr, link, out_weight)
