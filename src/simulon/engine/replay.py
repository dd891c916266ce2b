"""Discrete-event replay of an ExecutionDAG over the network.

Kernels and markers take their populated durations. Flows are fluid: they share every link they cross
max-min fairly (progressive filling, weighted by how many flows a folded flow stands for), and rates
are recomputed only when a flow starts or ends, and only for the flows connected to it through shared
links. A flow is delivered one path latency after its last byte leaves.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ..dag.fold import Fold
from ..dag.nodes import ExecutionDAG, NodeKind
from ..network.topology import Topology

_EPS = 1e-12


@dataclass(frozen=True)
class Timeline:
    """When every node started and finished (seconds). Flows: first byte sent, delivered."""

    start: np.ndarray
    finish: np.ndarray
    links: np.ndarray        # [flows, hops] link ids of each flow, in dag flow order
    flow_nodes: np.ndarray   # node id of each flow

    @property
    def makespan(self) -> float:
        return float(self.finish.max()) if len(self.finish) else 0.0


class _FlowNetwork:
    """Active flows, their rates, and the max-min fair share over the links they cross."""

    def __init__(self, links: np.ndarray, capacity: np.ndarray, weight: np.ndarray):
        self.links = links.tolist()
        self.weight = [[float(weight[l]) for l in row] for row in links]
        self.capacity = capacity.tolist()
        self.on_link: list[set[int]] = [set() for _ in range(len(capacity))]
        self.remaining: dict[int, float] = {}
        self.rate: dict[int, float] = {}
        self.since: dict[int, float] = {}
        self.version: dict[int, int] = {}
        self.dirty: set[int] = set()

    def add(self, f: int, size: float, now: float) -> None:
        self.remaining[f] = size
        self.rate[f] = 0.0
        self.since[f] = now
        self.version[f] = self.version.get(f, 0) + 1
        for link in self.links[f]:
            self.on_link[link].add(f)
            self.dirty.add(link)

    def remove(self, f: int) -> None:
        for link in self.links[f]:
            self.on_link[link].discard(f)
            self.dirty.add(link)
        del self.remaining[f], self.rate[f], self.since[f]

    def reshare(self, now: float) -> list[tuple[float, int, int]]:
        """Recompute rates of every flow connected to a changed link; return their new finish events."""
        flows: set[int] = set()
        links: set[int] = set()
        frontier = list(self.dirty)
        self.dirty = set()
        while frontier:
            link = frontier.pop()
            if link in links:
                continue
            links.add(link)
            for f in self.on_link[link]:
                if f not in flows:
                    flows.add(f)
                    frontier.extend(self.links[f])
        if not flows:
            return []
        for f in flows:  # bring progress up to now at the old rate
            self.remaining[f] = max(self.remaining[f] - self.rate[f] * (now - self.since[f]), 0.0)
            self.since[f] = now
        cap = {link: self.capacity[link] for link in links}
        load = dict.fromkeys(links, 0.0)
        for f in flows:
            for link, w in zip(self.links[f], self.weight[f], strict=True):
                load[link] += w
        unfrozen = set(flows)
        while unfrozen:
            share = min(cap[link] / load[link] for link in load if load[link] > _EPS)
            bottlenecks = [link for link in load if load[link] > _EPS and cap[link] / load[link] <= share * (1 + 1e-9)]
            frozen = {f for link in bottlenecks for f in self.on_link[link] if f in unfrozen}
            for f in frozen:
                self.rate[f] = share
                for link, w in zip(self.links[f], self.weight[f], strict=True):
                    cap[link] -= share * w
                    load[link] -= w
            for link in bottlenecks:
                load[link] = 0.0
            unfrozen -= frozen
        events = []
        for f in flows:
            self.version[f] += 1
            finish = now + self.remaining[f] / self.rate[f] if self.rate[f] > 0 else float("inf")
            events.append((finish, f, self.version[f]))
        return events


def replay(dag: ExecutionDAG, topology: Topology, fold: Fold) -> Timeline:
    """Run the DAG to completion; return every node's start and finish time."""
    if dag.duration is None:
        raise ValueError("the DAG has no kernel durations: populate it first")
    n = dag.num_nodes
    order = np.argsort(dag.edge_src, kind="stable")
    succ = dag.edge_dst[order].tolist()
    succ_ptr = np.concatenate([[0], np.cumsum(np.bincount(dag.edge_src, minlength=n))]).tolist()
    pending = np.bincount(dag.edge_dst, minlength=n).tolist()

    flow_nodes = np.flatnonzero(dag.kind == NodeKind.flow)
    links, latency = topology.routes(dag.gpu[flow_nodes], dag.peer[flow_nodes], fold)
    flow_of = np.full(n, -1, dtype=np.int64)
    flow_of[flow_nodes] = np.arange(len(flow_nodes))
    flow_of = flow_of.tolist()
    net = _FlowNetwork(links, topology.capacity, topology.fold_weights(fold))
    sizes = dag.size[flow_nodes].tolist()
    latency = latency.tolist()
    duration = dag.duration.tolist()

    start = [0.0] * n
    finish = [-1.0] * n
    # events: (time, sequence, kind, item); kind 0 = node completes, 1 = flow's last byte leaves
    events: list[tuple[float, int, int, int, int]] = []
    seq = 0
    now = 0.0

    def begin(node: int, t: float) -> None:
        nonlocal seq
        start[node] = t
        f = flow_of[node]
        if f >= 0:
            net.add(f, sizes[f], t)
        else:
            seq += 1
            heapq.heappush(events, (t + duration[node], seq, 0, node, 0))

    for node in np.flatnonzero(np.asarray(pending) == 0).tolist():
        begin(node, 0.0)
    done = 0
    while True:
        if net.dirty and (not events or events[0][0] > now + _EPS * max(now, 1.0)):
            for finish_time, f, version in net.reshare(now):
                seq += 1
                heapq.heappush(events, (finish_time, seq, 1, f, version))
        if not events:
            break
        t, _, kind, item, version = heapq.heappop(events)
        now = t
        if kind == 1:
            if net.version.get(item) != version or item not in net.rate:
                continue  # superseded by a later rate change
            net.remove(item)
            seq += 1
            node = int(flow_nodes[item])
            heapq.heappush(events, (t + latency[item], seq, 0, node, 0))
            continue
        finish[item] = t
        done += 1
        for s in succ[succ_ptr[item]:succ_ptr[item + 1]]:
            pending[s] -= 1
            if pending[s] == 0:
                begin(s, t)
    if done != n:
        stuck = n - done
        raise RuntimeError(f"replay stalled with {stuck} of {n} nodes unfinished (a dependency cycle in the DAG)")
    return Timeline(np.asarray(start), np.asarray(finish), links, flow_nodes)
