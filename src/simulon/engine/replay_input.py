"""What the replay's event loop reads, shared by its two forms (replay.py's Python loop, the reference, and
compiled.py's numba one): the kinds of its events, its constants, and per node the arrays it walks.

Nodes wait on their predecessors (successors in CSR form) and a streamed flow on its sender's previous
flow; kernels take their populated durations, stretched while collectives hold SMs of their GPU; markers
complete on the spot and change how many SMs the collectives of their GPU hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from ..dag.nodes import ExecutionDAG, NodeKind
from ..workload.kernels import KernelClass

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
NOT_CHANGED = -1.0
"""When the flows' links first changed since their rates were last shared, while none has."""


class Event(IntEnum):
    """What an entry of the replay's event queue marks; an entry is (time, sequence, kind, item, version)."""

    NODE_DONE = 0
    """A node (item) completes: a kernel's time is over, or a flow is delivered."""
    LAST_BYTE = 1
    """A flow's (item) last byte leaves its sender, if the flow's rate has not changed since (version)."""
    LAUNCHED = 2
    """A flow's (item) launch delay is over: it starts sending."""


@dataclass(frozen=True)
class NodeArrays:
    """Per node, what the event loop reads."""

    successors: np.ndarray     # CSR targets: the successors of node i are successors[successor_ptr[i]:...[i + 1]]
    successor_ptr: np.ndarray
    next_sends: np.ndarray     # CSR targets: a flow's sender's next flows (pipelined chunks), in stream order
    next_send_ptr: np.ndarray
    pending: np.ndarray        # dependencies not yet met: predecessors, and a streamed flow's previous one
    flow_of: np.ndarray        # flow index, or NO_FLOW
    duration: np.ndarray
    span: np.ndarray           # see channel_spans
    sm_bound: np.ndarray       # see sm_bound
    gpu: np.ndarray
    pipelined: np.ndarray | None = None  # see pipelined (None: no kernel is)


def retimed(arrays: NodeArrays) -> np.ndarray:
    """Per node: an SM-bound kernel re-timed as collectives join and leave its GPU (not one pipelined with its
    collective, which keeps the stretch it starts with: pipelined)."""
    sm = np.asarray(arrays.sm_bound, dtype=bool)
    return sm if arrays.pipelined is None else sm & ~np.asarray(arrays.pipelined, dtype=bool)


def csr(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Targets grouped by source, each group in the order given (stable), and per source the offset of its
    first target."""
    order = np.argsort(src, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))]).astype(np.int64)
    return np.asarray(dst, dtype=np.int64)[order], ptr


def channel_spans(dag: ExecutionDAG) -> np.ndarray:
    """Per node: the channels a rank's collective kernel takes when it joins (its start marker), minus
    them when it leaves (its end marker), else 0."""
    span = np.zeros(dag.num_nodes, dtype=np.int64)
    joins, leaves = dag.collective_spans()
    channels = np.array([c.channels for c in dag.collectives] + [0], dtype=np.int64)
    span[joins], span[leaves] = channels[dag.coll[joins]], -channels[dag.coll[leaves]]
    return span


def sm_bound(dag: ExecutionDAG) -> np.ndarray:
    """Per node: a kernel whose speed is its share of the SMs (GEMMs and attention, not bandwidth-bound)."""
    table = np.array([k.kclass in SM_BOUND for k in dag.kernel_specs] + [False])
    return table[dag.kernel]


def pipelined(dag: ExecutionDAG) -> np.ndarray:
    """Per node: a kernel pipelined with a collective it starts with (Transformer Engine's userbuffers' chunked GEMMs,
    whose collective's pieces run between the GEMM's chunks): it waits on the collective's start marker, or shares a
    launch marker (no collective's own) with it (dag.builder.local_nodes). It keeps the SMs it starts without for
    its whole time, where any other SM-bound kernel is re-timed as collectives join and leave its GPU
    (replay.replay)."""
    joins, _ = dag.collective_spans()
    starts = np.zeros(dag.num_nodes, dtype=bool)
    starts[joins] = True
    launch = (dag.kind == NodeKind.marker) & (dag.coll < 0)
    starts[dag.edge_src[starts[dag.edge_dst] & launch[dag.edge_src]]] = True
    flags = np.zeros(dag.num_nodes, dtype=bool)
    flags[dag.edge_dst[starts[dag.edge_src]]] = True
    return flags & (dag.kind == NodeKind.compute)


def node_arrays(dag: ExecutionDAG, flow_nodes: np.ndarray, sm_count: int) -> NodeArrays:
    """The node arrays of `dag` (the SM terms only with an `sm_count`)."""
    n = dag.num_nodes
    none = np.zeros(0, dtype=np.int64)
    stream_src = none if dag.stream_src is None else dag.stream_src
    stream_dst = none if dag.stream_dst is None else dag.stream_dst
    pending = np.bincount(dag.edge_dst, minlength=n) + np.bincount(stream_dst, minlength=n)
    flow_of = np.full(n, NO_FLOW, dtype=np.int64)
    flow_of[flow_nodes] = np.arange(len(flow_nodes))
    return NodeArrays(*csr(dag.edge_src, dag.edge_dst, n), *csr(stream_src, stream_dst, n),
                      pending.astype(np.int64), flow_of, np.asarray(dag.duration, dtype=np.float64),
                      channel_spans(dag) if sm_count else np.zeros(n, dtype=np.int64),
                      sm_bound(dag) if sm_count else np.zeros(n, dtype=bool), dag.gpu.astype(np.int64),
                      pipelined(dag) if sm_count else np.zeros(n, dtype=bool))
