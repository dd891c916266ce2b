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

Without a fold, or on a fabric of one tier, a flow loads its own route.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

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

    def rows(self) -> tuple[list[list[int]], list[list[float]]]:
        """Each flow's links, and its weights on them, as lists."""
        bounds = list(pairwise(self.ptr.tolist()))
        links, weights = self.link.tolist(), self.weight.tolist()
        return [links[a:b] for a, b in bounds], [weights[a:b] for a, b in bounds]


def flow_loads(dag: ExecutionDAG, topology: Topology, fold: Fold, props: FlowProperties) -> LinkLoads:
    """The links every flow of `props` loads under `fold`: its route, weighted by the fold (by 1 for a physical
    flow), with its hops above the leaves replaced by its counterparts' where it is folded and leaves its domain
    (see the module's docstring)."""
    weight = topology.fold_weights(fold.rep)
    if props.physical is None or not props.physical.any():
        routes = LinkLoads.of_routes(props.links, weight)
    else:
        per_hop = weight[np.maximum(props.links, 0)]
        per_hop[props.physical] = 1.0
        valid = props.links != NO_LINK
        routes = LinkLoads(np.concatenate([[0], np.cumsum(valid.sum(axis=1))]).astype(np.int64),
                           props.links[valid].astype(np.int64), per_hop[valid])
    if fold.trivial or topology.inner_links_from >= topology.num_links:
        return routes
    src, dst = dag.gpu[props.nodes].astype(np.int64), dag.peer[props.nodes].astype(np.int64)
    domain = topology.domain_gpus
    spread = (dst >= 0) & (src // domain != np.maximum(dst, 0) // domain) & (fold.multiplicity[src] > 1)
    if props.physical is not None:
        spread &= ~props.physical
    if not spread.any():
        return routes
    rows = np.flatnonzero(spread)
    keys, key_of_row = _pair_keys(dag, props.nodes[rows], src[rows], dst[rows])
    fp_ptr, fp_link, fp_count = _footprints(keys, dag, topology, fold)
    return _merged(props.links, routes, rows, key_of_row, fp_ptr, fp_link, fp_count, topology.inner_links_from)


def _pair_keys(dag: ExecutionDAG, nodes: np.ndarray, src: np.ndarray, dst: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (group, sender, receiver) of flows, the group an index into the DAG's distinct collective
    groups (-1: a pipeline send), and each flow's index among them."""
    coll = dag.coll[nodes].astype(np.int64)
    groups = {c.group for c in dag.collectives}
    index = {g: i for i, g in enumerate(sorted(groups))}
    group_of_coll = np.array([index[c.group] for c in dag.collectives] + [-1], dtype=np.int64)
    group = group_of_coll[np.where(coll == NO_COLLECTIVE, len(dag.collectives), coll)]
    keys, key_of_row = np.unique(np.stack([group, src, dst], axis=1), axis=0, return_inverse=True)
    return keys, key_of_row.ravel()


def _footprints(keys: np.ndarray, dag: ExecutionDAG, topology: Topology, fold: Fold
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per key (group, sender, receiver): the inner links (leaf uplinks and above) its counterparts cross and how
    many cross each, in CSR form (links in increasing order)."""
    groups = sorted({c.group for c in dag.collectives})
    senders, receivers, owner = [], [], []
    for k, (g, s, d) in enumerate(keys.tolist()):
        ms, md = fold.counterparts(s, d, groups[g] if g >= 0 else None)
        senders.append(ms)
        receivers.append(md)
        owner.append(np.full(len(ms), k, dtype=np.int64))
    senders, receivers, owner = np.concatenate(senders), np.concatenate(receivers), np.concatenate(owner)
    links, _, _ = topology.routes(senders, receivers)
    inner = links >= topology.inner_links_from
    pair = np.repeat(owner, inner.sum(axis=1)) * topology.num_links + links[inner]
    counted, count = np.unique(pair, return_counts=True)
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
