"""The critical path of a replayed iteration: the chain of kernels, flows and waits that sets the step time.

engine/replay.py starts a node the moment its last dependency is met: every predecessor (a dependency edge)
has completed (a kernel its time, a marker at once, a flow on delivery), and, for a flow streamed behind its
sender's previous flow (the DAG's stream edges), that flow's last byte has left. A flow then waits its launch
delay, sends (at the max-min fair rate its links leave it), and is delivered one path latency after its last
byte; a kernel runs its populated time, longer while collectives hold SMs of its GPU. Nothing else waits.

So walking back from the node that finishes last, through the predecessor that released each node last, gives a
chain from time 0 to the step time with no gap: each step lasts from its release to where the next step was
released by it (its completion, or its last byte for a streamed successor), and splits into launch delay,
the time it would take alone (kernel time; a flow's bytes at its route's rate), the slowdown from sharing
(SMs held by collectives; links shared with other flows) and delivery latency. The critical-path method
(Kelley and Walker, 1959) on the replayed times rather than on estimates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dag.nodes import NO_NODE, ExecutionDAG, NodeKind
from ..engine.flows import FlowProperties
from ..engine.replay import Timeline
from ..network.fabric import NO_LINK
from ..workload.program import Stream
from .intervals import without_residue
from .kinds import KIND_NAMES, node_kinds

TERMS = ("compute", "compute_slowdown", "transfer", "link_contention", "launch", "delivery")
"""What a critical path's time is spent on: kernels at their own time and stretched by SMs held by collectives;
flows' bytes at their route's rate and slowed by flows sharing their links; collectives' launch delay; delivery:
path latency, and where a ring step ends in its receiver's local reduction or copy, that pass (engine/flows.py)."""
TOP_COLLECTIVES = 10
"""Collectives listed by their time on the path (the report's table shows them all)."""


@dataclass(frozen=True)
class CriticalPath:
    """The chain, in time order; per step (seconds) when it was released, when the next step was released by it,
    and its terms. Each step's end - release = wait + its TERMS; the steps follow each other without a gap."""

    nodes: np.ndarray
    released: np.ndarray
    ends: np.ndarray
    wait: np.ndarray          # release to start, less launch delay: 0 in the replay's model (a check)
    terms: dict[str, np.ndarray]

    @property
    def length(self) -> float:
        """Seconds from the first step's release to the last step's end: the sum of the steps."""
        return float((self.ends - self.released).sum())

    def shares(self, labels: np.ndarray) -> dict[str, float]:
        """Seconds of the path per label of its steps (`labels` per step), largest first, ties by label."""
        names, inverse = np.unique(labels.astype(str), return_inverse=True)
        seconds = np.bincount(inverse.ravel(), weights=self.ends - self.released, minlength=len(names))
        totals = dict(zip(names.tolist(), seconds.tolist(), strict=True))
        return dict(sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])))


def last_release_edges(dag: ExecutionDAG, timeline: Timeline, latency: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node: the predecessor that released it last (NO_NODE for a node without one), when it did, and
    whether through a stream edge (released by its last byte rather than its completion). `latency` per node:
    a flow's delivery latency, else 0."""
    n = dag.num_nodes
    finish = timeline.finish
    stream_src = np.zeros(0, np.int64) if dag.stream_src is None else dag.stream_src.astype(np.int64)
    stream_dst = np.zeros(0, np.int64) if dag.stream_dst is None else dag.stream_dst.astype(np.int64)
    src = np.concatenate([dag.edge_src.astype(np.int64), stream_src])
    dst = np.concatenate([dag.edge_dst.astype(np.int64), stream_dst])
    streamed = np.concatenate([np.zeros(len(dag.edge_src), bool), np.ones(len(stream_src), bool)])
    release = np.where(streamed, finish[src] - latency[src], finish[src])
    order = np.lexsort((release, dst))  # by node, then release: each node's last entry released it
    last = order[np.flatnonzero(np.diff(np.concatenate([dst[order], [-1]])) != 0)]
    pred = np.full(n, NO_NODE, dtype=np.int64)
    at = np.zeros(n)
    via_stream = np.zeros(n, dtype=bool)
    pred[dst[last]], at[dst[last]], via_stream[dst[last]] = src[last], release[last], streamed[last]
    return pred, at, via_stream


def critical_path(dag: ExecutionDAG, timeline: Timeline, props: FlowProperties, capacity: np.ndarray
                  ) -> CriticalPath:
    """The replayed iteration's critical path; `props` are the flows' properties the replay ran with
    (engine.flows.flow_properties), `capacity` the links' (bytes/s)."""
    latency = np.zeros(dag.num_nodes)
    latency[props.nodes] = props.delivered_latency(timeline.start[props.nodes], timeline.finish[props.nodes])
    pred, at, via_stream = last_release_edges(dag, timeline, latency)
    chain = [int(np.argmax(timeline.finish))] if dag.num_nodes else []
    ends_by_stream = [False]  # whether the path leaves each step at its last byte
    pred_list, via_list = pred.tolist(), via_stream.tolist()
    while chain and pred_list[chain[-1]] != NO_NODE:
        ends_by_stream.append(via_list[chain[-1]])
        chain.append(pred_list[chain[-1]])
    nodes = np.array(chain[::-1], dtype=np.int64)
    by_last_byte = np.array(ends_by_stream[::-1], dtype=bool)
    released = np.where(pred[nodes] == NO_NODE, 0.0, at[nodes])
    ends = np.where(by_last_byte, timeline.finish[nodes] - latency[nodes], timeline.finish[nodes])
    return _split(dag, timeline, props, capacity, nodes, released, ends, latency)


def _split(dag: ExecutionDAG, timeline: Timeline, props: FlowProperties, capacity: np.ndarray, nodes: np.ndarray,
           released: np.ndarray, ends: np.ndarray, latency: np.ndarray) -> CriticalPath:
    """The path with each step's time split into its terms."""
    is_flow = np.zeros(dag.num_nodes, dtype=bool)
    delay, alone = np.zeros(dag.num_nodes), np.asarray(dag.duration, dtype=np.float64).copy()
    is_flow[props.nodes], delay[props.nodes] = True, props.delay
    alone[props.nodes] = _alone_time(props, capacity)
    is_flow, launch, alone = is_flow[nodes], delay[nodes], alone[nodes]
    start = timeline.start[nodes]
    last_byte = timeline.finish[nodes] - latency[nodes]
    busy = np.minimum(last_byte, ends) - start
    alone = np.clip(alone, 0.0, busy)
    kernel = dag.kind[nodes] == NodeKind.compute
    terms = {"compute": np.where(kernel, alone, 0.0), "compute_slowdown": np.where(kernel, busy - alone, 0.0),
             "transfer": np.where(is_flow, alone, 0.0), "link_contention": np.where(is_flow, busy - alone, 0.0),
             "launch": launch, "delivery": ends - np.minimum(last_byte, ends)}
    return CriticalPath(nodes, released, ends, start - launch - released, terms)


def _alone_time(props: FlowProperties, capacity: np.ndarray) -> np.ndarray:
    """Per flow: seconds its wire bytes take alone on its route (its tightest link, or its own rate limit)."""
    route = np.where(props.links != NO_LINK, capacity[np.maximum(props.links, 0)], np.inf).min(axis=1)
    rate = np.minimum(route, props.cap)
    return np.where(np.isfinite(rate) & (rate > 0), props.wire / np.where(rate > 0, rate, 1.0), 0.0)


def path_summary(dag: ExecutionDAG, path: CriticalPath) -> dict:
    """The path in numbers (ms): its length, steps, and its time per term, kind (compute or TP, CP, EP, DP, PP
    communication), pipeline stage and stream, largest first. A term within IDLE_RESIDUE of the path is 0: kernels
    never slowed by SMs held read 8.5e-12 ms of compute_slowdown on a 495 ms path (intervals.without_residue)."""
    kinds = np.array(KIND_NAMES)[node_kinds(dag)[path.nodes]]
    streams = np.array([s.name for s in Stream])[dag.stream[path.nodes]]
    stages = np.array([f"stage {s}" for s in range(int(dag.stage.max(initial=0)) + 1)])[dag.stage[path.nodes]]
    length = path.length  # a term is each step's time less its other terms: its rounding alone reads 0
    ms = {name: without_residue(float(values.sum()), length) * 1e3 for name, values in path.terms.items()}
    return {"length_ms": length * 1e3, "steps": len(path.nodes),
            "kernels": int((dag.kind[path.nodes] == NodeKind.compute).sum()),
            "flows": int((dag.kind[path.nodes] == NodeKind.flow).sum()),
            "by_term_ms": dict(sorted(ms.items(), key=lambda kv: (-kv[1], kv[0]))),
            "by_kind_ms": _ms(path.shares(kinds)), "by_stage_ms": _ms(path.shares(stages)),
            "by_stream_ms": _ms(path.shares(streams)),
            "by_collective_ms": _top_collectives(path.shares(collective_names(dag, kinds, path.nodes)))}


def _top_collectives(seconds: dict[str, float]) -> dict[str, float]:
    """The TOP_COLLECTIVES collectives' time on the path (ms), without the kernels' (named "")."""
    return _ms(dict([(name, s) for name, s in seconds.items() if name][:TOP_COLLECTIVES]))


def collective_names(dag: ExecutionDAG, kinds: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Per node of `nodes` (whose kinds are `kinds`): its kind and collective, as "DP grad_reduce
    (ReduceScatter)" or "PP send"; the empty name "" for kernels."""
    names = np.array([f"{c.label} ({c.ctype.name})" for c in dag.collectives] + ["send"], dtype=object)
    named = np.char.add(np.char.add(kinds.astype(str), " "), names[dag.coll[nodes]].astype(str))
    return np.where(dag.kind[nodes] == NodeKind.compute, "", named)


def _ms(seconds: dict[str, float]) -> dict[str, float]:
    return {k: v * 1e3 for k, v in seconds.items()}
