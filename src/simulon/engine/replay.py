"""Discrete-event replay of an ExecutionDAG over the network.

Kernels and markers take their populated durations. Flows are fluid: they share every link they cross
max-min fairly (progressive filling, Bertsekas and Gallager's Data Networks 6.5.2, see fair_share.py;
weighted by how many flows a folded flow stands for, each flow at most at its own rate limit), and rates
are recomputed only when a flow starts or ends, and only for the flows connected to it through shared
links. A flow starts its launch delay after it is ready and is delivered one path latency after its last
byte leaves; a sender's next flow that waits for it may start as soon as that last byte has left.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from ..dag.fold import Fold
from ..dag.nodes import ExecutionDAG
from ..network.topology import Topology
from ..progress import REPORT_EVERY
from ..workload.kernels import KernelClass
from .fair_share import FlowNetwork, link_rows
from .flows import FlowProperties, flow_properties

SM_BOUND = (KernelClass.gemm, KernelClass.grouped_gemm, KernelClass.attention)
MAX_HELD_SHARE = 0.5
"""Collectives hold at most half a GPU's SMs: the CTAs of more concurrent collectives wait for SMs that
running kernels free (a bound for many overlapping collectives, not a fitted value)."""
SAME_TIME = 1e-12
"""Events this close (relative to the time, at least 1 s) to now happen now: rates are reshared only once
they are all handled, so that flows starting together share one computation."""
NO_FLOW = -1
"""A node that is not a flow (in the node -> flow index)."""
NOT_FINISHED = -1.0
"""The finish time of a node that has not finished yet."""


class Event(IntEnum):
    """What an entry of the replay's event queue marks; an entry is (time, sequence, kind, item, version)."""

    NODE_DONE = 0
    """A node (item) completes: a kernel's time is over, or a flow is delivered."""
    LAST_BYTE = 1
    """A flow's (item) last byte leaves its sender, if the flow's rate has not changed since (version)."""
    LAUNCHED = 2
    """A flow's (item) launch delay is over: it starts sending."""


@dataclass(frozen=True)
class Timeline:
    """When every node started and finished (seconds). Flows: first byte sent, delivered."""

    start: np.ndarray
    finish: np.ndarray
    links: np.ndarray        # [flows, hops] link ids of each flow (NO_LINK padded), in dag flow order
    flow_nodes: np.ndarray   # node id of each flow

    @property
    def makespan(self) -> float:
        return float(self.finish.max()) if len(self.finish) else 0.0


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


@dataclass(frozen=True)
class _Nodes:
    """Per node, what the event loop reads (plain lists: the loop reads them one item at a time)."""

    successors: list[int]            # CSR targets (see _successors)
    successor_ptr: list[int]
    next_sends: dict[int, list[int]]  # flow node -> the sender's next flows (pipelined chunks)
    pending: list[int]               # dependencies not yet met: predecessors, and a streamed flow's previous one
    flow_of: list[int]               # flow index, or NO_FLOW
    duration: list[float]
    span: list[int]                  # see _channel_spans
    sm_bound: list[bool]             # see _sm_bound
    gpu: list[int]


def _nodes(dag: ExecutionDAG, flow_nodes: np.ndarray, sm_count: int) -> _Nodes:
    """The node lists of `dag` (the SM terms only with an `sm_count`)."""
    n = dag.num_nodes
    none = np.zeros(0, dtype=np.int64)
    stream_src = none if dag.stream_src is None else dag.stream_src
    stream_dst = none if dag.stream_dst is None else dag.stream_dst
    next_sends: dict[int, list[int]] = {}
    for a, b in zip(stream_src.tolist(), stream_dst.tolist(), strict=True):
        next_sends.setdefault(a, []).append(b)
    pending = (np.bincount(dag.edge_dst, minlength=n) + np.bincount(stream_dst, minlength=n)).tolist()
    flow_of = np.full(n, NO_FLOW, dtype=np.int64)
    flow_of[flow_nodes] = np.arange(len(flow_nodes))
    return _Nodes(*_successors(dag.edge_src, dag.edge_dst, n), next_sends, pending, flow_of.tolist(),
                  dag.duration.tolist(), _channel_spans(dag) if sm_count else [0] * n,
                  _sm_bound(dag) if sm_count else [False] * n, dag.gpu.tolist())


def replay(dag: ExecutionDAG, topology: Topology, fold: Fold, sm_count: int = 0, window_s: float = 0.0,
           advance: Callable[[int], None] | None = None) -> Timeline:
    """Run the DAG to completion; return every node's start and finish time.

    With the GPU's `sm_count`, a GEMM or attention kernel that starts while collectives run on its GPU gets
    the SMs they leave: NCCL's kernel holds one SM per channel for the whole collective, so the kernel runs
    sm_count / (sm_count - held) longer. 0 leaves every kernel its measured time.

    Flows that start or finish within `window_s` of each other share one max-min rate computation (0: one
    per distinct time); a flow starting inside the window waits for it.

    `advance(done)` is told every progress.REPORT_EVERY finished nodes how many are finished."""
    if dag.duration is None:
        raise ValueError("the DAG has no kernel durations: populate it first")
    props = flow_properties(dag, topology, fold)
    net = FlowNetwork(link_rows(props.links), topology.capacity, topology.fold_weights(fold.rep), props.cap)
    nodes = _nodes(dag, props.nodes, sm_count)
    start, finish = _run(nodes, props, net, dag.num_gpus, sm_count, window_s, advance or _unreported)
    stuck = finish.count(NOT_FINISHED)
    if stuck:
        n = dag.num_nodes
        raise RuntimeError(f"replay stalled with {stuck} of {n} nodes unfinished (a dependency cycle in the DAG)")
    return Timeline(np.asarray(start), np.asarray(finish), props.links, props.nodes)


def _unreported(done: int) -> None:
    pass


def _run(nodes: _Nodes, props: FlowProperties, net: FlowNetwork, num_gpus: int, sm_count: int,
         window_s: float, advance: Callable[[int], None]) -> tuple[list[float], list[float]]:
    """The event loop: start every ready node, reshare the links once nothing more happens now, take the next
    event; each node that completes (and each flow whose last byte leaves) releases the nodes waiting on it.
    Returns every node's start and finish time (NOT_FINISHED where a cycle stalled it)."""
    succ, succ_ptr, next_send, pending = nodes.successors, nodes.successor_ptr, nodes.next_sends, nodes.pending
    flow_of, duration, span, sm_bound, gpu_of = nodes.flow_of, nodes.duration, nodes.span, nodes.sm_bound, nodes.gpu
    sizes, latency, delay, flow_node = props.wire.tolist(), props.latency.tolist(), props.delay.tolist(), \
        props.nodes.tolist()
    node_done, last_byte, launched = Event.NODE_DONE, Event.LAST_BYTE, Event.LAUNCHED
    held = [0] * num_gpus  # SMs the collectives running on each GPU hold
    n = len(flow_of)
    start = [0.0] * n
    finish = [NOT_FINISHED] * n
    events: list[tuple[float, int, int, int, int]] = []
    push, pop = heapq.heappush, heapq.heappop
    seq = 0
    now = 0.0
    done, report_at = 0, REPORT_EVERY  # finished nodes, and when next to report them
    ready = np.flatnonzero(np.asarray(pending) == 0).tolist()  # nodes whose dependencies are all met
    while True:
        if ready:  # start a ready node
            node = ready.pop()
            start[node] = now
            f = flow_of[node]
            if f != NO_FLOW:
                if delay[f] > 0:
                    seq += 1
                    push(events, (now + delay[f], seq, launched, f, 0))
                else:
                    net.add(f, sizes[f], now)
                continue
            if duration[node] > 0:
                seq += 1
                busy = duration[node]
                if sm_bound[node] and held[gpu_of[node]]:
                    busy *= sm_count / (sm_count - min(held[gpu_of[node]], MAX_HELD_SHARE * sm_count))
                push(events, (now + busy, seq, node_done, node, 0))
                continue
            held[gpu_of[node]] += span[node]  # markers complete on the spot
            finish[node] = now
            done += 1
            released = succ[succ_ptr[node]:succ_ptr[node + 1]]
        else:
            if net.dirty and (not events or events[0][0] > now + max(SAME_TIME * max(now, 1.0), window_s)):
                for finish_time, f, version in net.reshare(now):
                    seq += 1
                    push(events, (finish_time, seq, last_byte, f, version))
            if not events:
                break
            now, _, kind, item, version = pop(events)
            if kind == last_byte:
                if net.version[item] != version or item not in net.rate:
                    continue  # superseded by a later rate change
                net.remove(item)
                seq += 1
                node = flow_node[item]
                push(events, (now + latency[item], seq, node_done, node, 0))
                released = next_send[node] if next_send and node in next_send else ()
            elif kind == launched:
                start[flow_node[item]] = now
                net.add(item, sizes[item], now)
                continue
            else:
                finish[item] = now
                released = succ[succ_ptr[item]:succ_ptr[item + 1]]
                done += 1
                if done >= report_at:
                    advance(done)
                    report_at = done + REPORT_EVERY
        for s in released:  # the nodes waiting on this one
            pending[s] -= 1
            if pending[s] == 0:
                ready.append(s)
    return start, finish
