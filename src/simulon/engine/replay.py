"""Discrete-event replay of an ExecutionDAG over the network.

Kernels and markers take their populated durations. Flows are fluid: they share every link they cross
max-min fairly (progressive filling, weighted by how many flows a folded flow stands for, each flow at
most at its own rate limit), and rates are recomputed only when a flow starts or ends, and only for the
flows connected to it through shared links. A flow starts its launch delay after it is ready and is
delivered one path latency after its last byte leaves; a sender's next flow that waits for it may start
as soon as that last byte has left.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ..dag.fold import Fold
from ..dag.nodes import ExecutionDAG
from ..network.topology import Topology
from ..workload.kernels import KernelClass
from .flows import flow_properties

SM_BOUND = (KernelClass.gemm, KernelClass.grouped_gemm, KernelClass.attention)
MAX_HELD_SHARE = 0.5
"""Collectives hold at most half a GPU's SMs: the CTAs of more concurrent collectives wait for SMs that
running kernels free (a bound for many overlapping collectives, not a fitted value)."""
_EPS = 1e-12
_SAME_RATE = 1e-12
"""A recomputed rate this close (relative) to the old one is the old one: its finish event stands."""
_INF = float("inf")


@dataclass(frozen=True)
class Timeline:
    """When every node started and finished (seconds). Flows: first byte sent, delivered."""

    start: np.ndarray
    finish: np.ndarray
    links: np.ndarray        # [flows, hops] link ids of each flow (-1 padded), in dag flow order
    flow_nodes: np.ndarray   # node id of each flow

    @property
    def makespan(self) -> float:
        return float(self.finish.max()) if len(self.finish) else 0.0


def _rows(links: np.ndarray) -> list[list[int]]:
    """Each flow's links without the -1 padding (padding sits at the end of a row)."""
    counts = (links >= 0).sum(axis=1)
    rows = links.tolist()
    if (counts == links.shape[1]).all():
        return rows
    return [row[:k] for row, k in zip(rows, counts.tolist(), strict=True)]


class _FlowNetwork:
    """Active flows, their rates, and the max-min fair share over the links they cross."""

    def __init__(self, links: list[list[int]], capacity: np.ndarray, weight: np.ndarray, cap: np.ndarray):
        self.links = links
        self.weight = [[float(weight[link]) for link in row] for row in links]
        self.capacity = capacity.tolist()
        self.cap = cap.tolist()
        self.limited = bool(np.isfinite(cap).any())
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
        on_link, flow_links = self.on_link, self.links
        stack = [link for link in self.dirty if on_link[link]]
        seen_links = set(self.dirty)
        self.dirty = set()
        flows: list[int] = []
        seen_flows: set[int] = set()
        while stack:
            for f in on_link[stack.pop()]:
                if f not in seen_flows:
                    seen_flows.add(f)
                    flows.append(f)
                    for link in flow_links[f]:
                        if link not in seen_links:
                            seen_links.add(link)
                            stack.append(link)
        remaining, rate, since = self.remaining, self.rate, self.since
        before = [rate[f] for f in flows]
        for f in flows:  # bring progress up to now at the old rate
            remaining[f] = max(remaining[f] - rate[f] * (now - since[f]), 0.0)
            since[f] = now
        if len(flows) == 1:  # the common case: a flow alone on its links
            f = flows[0]
            share = min(self.capacity[link] / w for link, w in zip(flow_links[f], self.weight[f], strict=True))
            rate[f] = min(share, self.cap[f]) if self.limited else share
        else:
            self._progressive_filling(flows)
        events = []
        for f, old in zip(flows, before, strict=True):
            if old > 0 and abs(rate[f] - old) <= _SAME_RATE * old:
                rate[f] = old  # its finish event still holds: most of a big component keeps its share
                continue
            self.version[f] += 1
            finish = now + remaining[f] / rate[f] if rate[f] > 0 else _INF
            events.append((finish, f, self.version[f]))
        return events

    def _freeze(self, frozen, rate: float | None, cap: dict[int, float], load: dict[int, float]) -> None:
        """Fix the rate of `frozen` flows (at `rate`, or each at its own limit) and take it off their links."""
        for f in frozen:
            r = self.cap[f] if rate is None else rate
            self.rate[f] = r
            for link, w in zip(self.links[f], self.weight[f], strict=True):
                cap[link] -= r * w
                load[link] -= w

    def _progressive_filling(self, flows: list[int]) -> None:
        """Max-min fair rates: raise all rates together; freeze the flows of each link that fills up, and
        each flow that reaches its own limit."""
        cap: dict[int, float] = {}
        load: dict[int, float] = {}
        for f in flows:
            for link, w in zip(self.links[f], self.weight[f], strict=True):
                cap[link] = self.capacity[link]
                load[link] = load.get(link, 0.0) + w
        unfrozen = set(flows)
        while unfrozen:
            share = min((cap[link] / load[link] for link in load if load[link] > _EPS), default=_INF)
            if self.limited:
                lowest = min(self.cap[f] for f in unfrozen)
                if lowest <= share:
                    limited = {f for f in unfrozen if self.cap[f] <= lowest * (1 + 1e-9)}
                    self._freeze(limited, None, cap, load)
                    unfrozen -= limited
                    continue
            bottlenecks = [link for link in load if load[link] > _EPS and cap[link] / load[link] <= share * (1 + 1e-9)]
            frozen = {f for link in bottlenecks for f in self.on_link[link] if f in unfrozen}
            self._freeze(frozen, share, cap, load)
            for link in bottlenecks:
                load[link] = 0.0
            unfrozen -= frozen


def _successors(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[list[int], list[int]]:
    """Successor lists in CSR form (targets, and per node the offset of its first)."""
    order = np.argsort(src, kind="stable")
    return dst[order].tolist(), np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))]).tolist()


def _channel_spans(dag: ExecutionDAG) -> list[int]:
    """Per node: the channels a rank's collective kernel takes when it joins (its start marker), minus
    them when it leaves (its end marker), else 0."""
    span = np.zeros(dag.num_nodes, dtype=np.int64)
    joins, leaves = dag.collective_spans()
    channels = np.array([c.channels for c in dag.collectives] + [0], dtype=np.int64)
    span[joins], span[leaves] = channels[dag.coll[joins]], -channels[dag.coll[leaves]]
    return span.tolist()


def _sm_bound(dag: ExecutionDAG) -> list[bool]:
    """Per node: a kernel whose speed is its share of the SMs (GEMMs and attention, not bandwidth-bound)."""
    table = np.array([k.kclass in SM_BOUND for k in dag.kernel_specs] + [False])
    return table[dag.kernel].tolist()


def replay(dag: ExecutionDAG, topology: Topology, fold: Fold, sm_count: int = 0, window_s: float = 0.0) -> Timeline:
    """Run the DAG to completion; return every node's start and finish time.

    With the GPU's `sm_count`, a GEMM or attention kernel that starts while collectives run on its GPU gets
    the SMs they leave: NCCL's kernel holds one SM per channel for the whole collective, so the kernel runs
    sm_count / (sm_count - held) longer. 0 leaves every kernel its measured time.

    Flows that start or finish within `window_s` of each other share one max-min rate computation (0: one
    per distinct time); a flow starting inside the window waits for it."""
    if dag.duration is None:
        raise ValueError("the DAG has no kernel durations: populate it first")
    n = dag.num_nodes
    props = flow_properties(dag, topology, fold)
    none = np.zeros(0, dtype=np.int64)
    stream_src = none if dag.stream_src is None else dag.stream_src
    stream_dst = none if dag.stream_dst is None else dag.stream_dst
    succ, succ_ptr = _successors(dag.edge_src, dag.edge_dst, n)
    next_send: dict[int, list[int]] = {}  # flow node -> the sender's next flows (pipelined chunks)
    for a, b in zip(stream_src.tolist(), stream_dst.tolist(), strict=True):
        next_send.setdefault(a, []).append(b)
    pending = (np.bincount(dag.edge_dst, minlength=n) + np.bincount(stream_dst, minlength=n)).tolist()

    flow_of = np.full(n, -1, dtype=np.int64)
    flow_of[props.nodes] = np.arange(len(props.nodes))
    flow_of = flow_of.tolist()
    net = _FlowNetwork(_rows(props.links), topology.capacity, topology.fold_weights(fold.rep), props.cap)
    sizes = props.wire.tolist()
    latency = props.latency.tolist()
    delay = props.delay.tolist()
    duration = dag.duration.tolist()
    span = _channel_spans(dag) if sm_count else [0] * n
    sm_bound = _sm_bound(dag) if sm_count else [False] * n
    gpu_of = dag.gpu.tolist()
    held = [0] * dag.num_gpus  # SMs the collectives running on each GPU hold

    start = [0.0] * n
    finish = [-1.0] * n
    flow_node = props.nodes.tolist()
    # events: (time, sequence, kind, item, version); kind 0: a node completes, 1: a flow's last byte leaves,
    # 2: a flow's launch delay is over
    events: list[tuple[float, int, int, int, int]] = []
    push, pop = heapq.heappush, heapq.heappop
    seq = 0
    now = 0.0
    done = 0
    ready = np.flatnonzero(np.asarray(pending) == 0).tolist()  # nodes whose dependencies are all met
    while True:
        while ready:
            node = ready.pop()
            start[node] = now
            f = flow_of[node]
            if f >= 0:
                if delay[f] > 0:
                    seq += 1
                    push(events, (now + delay[f], seq, 2, f, 0))
                else:
                    net.add(f, sizes[f], now)
            elif duration[node] > 0:
                seq += 1
                busy = duration[node]
                if sm_bound[node] and held[gpu_of[node]]:
                    busy *= sm_count / (sm_count - min(held[gpu_of[node]], MAX_HELD_SHARE * sm_count))
                push(events, (now + busy, seq, 0, node, 0))
            else:  # markers complete on the spot
                held[gpu_of[node]] += span[node]
                finish[node] = now
                done += 1
                for s in succ[succ_ptr[node]:succ_ptr[node + 1]]:
                    pending[s] -= 1
                    if pending[s] == 0:
                        ready.append(s)
        if net.dirty and (not events or events[0][0] > now + max(_EPS * max(now, 1.0), window_s)):
            for finish_time, f, version in net.reshare(now):
                seq += 1
                push(events, (finish_time, seq, 1, f, version))
        if not events:
            break
        now, _, kind, item, version = pop(events)
        if kind == 1:
            if net.version[item] != version or item not in net.rate:
                continue  # superseded by a later rate change
            net.remove(item)
            seq += 1
            node = flow_node[item]
            push(events, (now + latency[item], seq, 0, node, 0))
            if next_send and node in next_send:
                for s in next_send[node]:
                    pending[s] -= 1
                    if pending[s] == 0:
                        ready.append(s)
            continue
        if kind == 2:
            start[flow_node[item]] = now
            net.add(item, sizes[item], now)
            continue
        finish[item] = now
        done += 1
        for s in succ[succ_ptr[item]:succ_ptr[item + 1]]:
            pending[s] -= 1
            if pending[s] == 0:
                ready.append(s)
    if done != n:
        stuck = n - done
        raise RuntimeError(f"replay stalled with {stuck} of {n} nodes unfinished (a dependency cycle in the DAG)")
    return Timeline(np.asarray(start), np.asarray(finish), props.links, props.nodes)
