"""Instantiate per-stage programs on every simulated rank and expand collectives into flows.

Each collective instance (one group, one call) is decomposed once, not once per member: every member
gets a start marker (it has reached the call on its stream) and an end marker (its part is done), and
the flows between them carry the algorithm's step-by-step dependencies.

A program's kernels (nine in ten of its ops) make the same nodes and edges on every rank that runs it, but
for the ids: they are worked out once per program (LocalNodes) and placed on each rank with numpy, while
the collectives and transfers, which ranks share, are made op by op. A collective call's nodes and edges are
those of its type, size and algorithm on its group (an Expansion, made once per group) moved to the call's first
id; the calls' columns and edges are written in batches when a rank's nodes are placed (an MoE step makes hundreds
of thousands of calls, mostly of a few signatures). Nodes and edges are numbered as if every op of every rank were
made in turn, so the DAG is the one an op-by-op build gives.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from ..collective.common import FlowSet
from ..collective.decompose import flow_set
from ..collective.shape import GroupShape
from ..collective.types import CollType
from ..network.topology import endpoints
from ..workload.kernels import KernelSpec, Phase
from ..workload.layout import RankLayout
from ..workload.program import CollectiveOp, ComputeOp, RecvOp, SendOp, StageProgram, Stream, program_of_rank
from .fold import Fold
from .nodes import NO_NODE, PIPELINE_SEND, CollectiveInstance, ExecutionDAG, NodeKind, PipelineSends, ranges

if TYPE_CHECKING:
    from ..collective.tuner import Choice, CollectivePlan


@dataclass(frozen=True)
class ExpansionTemplate:
    """One collective's markers, flows and edges relative to a base node id and group positions.

    Local node ids: members' (start, end) markers first, two per simulated position, then the kept flows.
    Every group of the same shape, size, algorithm and fold pattern reuses it.
    """

    simulated: tuple[int, ...]          # positions that get markers
    lanes: int                          # channels each simulated channel stands for
    steps: int                          # ring steps each flow carries (1 but in steady state)
    kind: np.ndarray                    # per local node: the markers, then the kept flows
    gpu: np.ndarray                     # per local node: its GPU's position
    peer: np.ndarray                    # per local node: a flow's receiver's position or switch endpoint code, or -1
    size: np.ndarray
    parent: np.ndarray                  # per local node: local node id of its first parent, or NO_NODE
    edge_src: np.ndarray                # local node ids
    edge_dst: np.ndarray
    stream_src: np.ndarray              # from a flow to its sender's next one (released at its last byte)
    stream_dst: np.ndarray

    @property
    def flow_src(self) -> np.ndarray:
        """Per kept flow: the position of its GPU (its sender, or the receiver of a switch leg)."""
        return self.gpu[2 * len(self.simulated):]

    @property
    def flow_dst(self) -> np.ndarray:
        """Per kept flow: the position of its receiver, or a switch endpoint code."""
        return self.peer[2 * len(self.simulated):]


@dataclass(frozen=True)
class Expansion:
    """One collective call's template placed on one group: what every call of that type, size and algorithm on the
    group shares (DAGBuilder keeps one per call signature and group, and adds only the base node id per call)."""

    choice: Choice
    template: ExpansionTemplate
    gpu: np.ndarray                     # per local node: its GPU
    peer: np.ndarray                    # per local node: a flow's receiver, a switch endpoint code, or -1
    members: tuple[tuple[int, int], ...]  # (rank, local id of its start marker) per simulated member
    stage: int                          # the pipeline stage of its first simulated member


@dataclass
class PendingNodes:
    """Nodes of collectives made but not yet placed into a part: each call's first node id and its Expansion,
    with the columns the call sets (DAGBuilder._place fills them for many calls at once)."""

    first: list[int]
    expansion: list[Expansion]
    coll: list[int]
    stream: list[int]
    layer: list[int]
    microbatch: list[int]

    @classmethod
    def empty(cls) -> PendingNodes:
        return cls([], [], [], [], [], [])

    def add(self, first: int, expansion: Expansion, coll: int, stream: int, layer: int, microbatch: int) -> None:
        """One call's nodes, from id `first`."""
        self.first.append(first)
        self.expansion.append(expansion)
        self.coll.append(coll)
        self.stream.append(stream)
        self.layer.append(layer)
        self.microbatch.append(microbatch)

    def fill(self, part: dict[str, np.ndarray], placed: int) -> None:
        """Write every pending call's nodes into `part`, whose first node id is `placed`."""
        if not self.first:
            return
        templates = [e.template for e in self.expansion]
        counts = np.fromiter((len(t.kind) for t in templates), dtype=np.int64, count=len(templates))
        first = np.asarray(self.first, dtype=np.int64)
        at = ranges(first - placed, first - placed + counts)
        part["kind"][at] = np.concatenate([t.kind for t in templates])
        part["gpu"][at] = np.concatenate([e.gpu for e in self.expansion])
        part["peer"][at] = np.concatenate([e.peer for e in self.expansion])
        part["size"][at] = np.concatenate([t.size for t in templates])
        parent = np.concatenate([t.parent for t in templates])
        part["parent"][at] = np.where(parent != NO_NODE, parent + np.repeat(first, counts), NO_NODE)
        part["kernel"][at] = -1
        for name, values in (("stream", self.stream), ("layer", self.layer), ("microbatch", self.microbatch),
                             ("coll", self.coll), ("stage", [e.stage for e in self.expansion])):
            part[name][at] = np.repeat(np.asarray(values, dtype=np.int64), counts)


def _placed_block(pairs: list[tuple[np.ndarray, np.ndarray, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Edges given relative to a base node id (local src, local dst, base) as one block of global ids."""
    if not pairs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    lens = np.fromiter((len(src) for src, _, _ in pairs), dtype=np.int64, count=len(pairs))
    bases = np.repeat(np.fromiter((base for _, _, base in pairs), dtype=np.int64, count=len(pairs)), lens)
    return (np.concatenate([src for src, _, _ in pairs]) + bases, np.concatenate([dst for _, dst, _ in pairs]) + bases)


def _last_steps(pos: np.ndarray, flows: FlowSet, n: int) -> np.ndarray:
    """Flows with the latest step among those of the same member (pos) and channel: when they arrive, the
    member's part of that channel is done."""
    valid = pos >= 0
    key = np.where(valid, flows.channel * n + pos, -1)
    latest = np.full(int(flows.channel.max(initial=0) + 1) * n, -1, dtype=np.int64)
    np.maximum.at(latest, key[valid], flows.step[valid])
    return valid & (flows.step == latest[np.maximum(key, 0)])


class _FlowNodes:
    """Local node ids of a collective's flows under a fold: a flow owned by a folded member is represented by
    the kept flow with the same step, channel and tag owned by its owner's representative."""

    def __init__(self, flows: FlowSet, owner: np.ndarray, kept: np.ndarray, fold: np.ndarray, first: int):
        self.first, self.fold, self.owner, self.kept = first, fold, owner, kept
        self.folded = bool((fold != np.arange(len(fold))).any())
        if self.folded:
            tags = int(flows.tag.max(initial=0)) + 1
            channels = int(flows.channel.max(initial=0)) + 1
            self.code = ((flows.step * channels + flows.channel) * tags + flows.tag) * len(fold)
            kept_code = self.code[kept] + owner[kept]
            self.order = np.argsort(kept_code, kind="stable")
            self.sorted_code = kept_code[self.order]

    def of(self, f: np.ndarray) -> np.ndarray:
        """The node standing for flows f (any flows of the set)."""
        if not self.folded:
            return self.first + f
        return self.first + self.order[np.searchsorted(self.sorted_code, self.code[f] + self.fold[self.owner[f]])]

    def of_kept(self, f: np.ndarray) -> np.ndarray:
        """The node of kept flows f."""
        return self.first + np.searchsorted(self.kept, f) if self.folded else self.first + f


def _check_foldable(flows: FlowSet, fold: np.ndarray, algorithm: str) -> None:
    n = len(fold)
    shift = (np.arange(n) - fold) % max(n, 1)
    if (fold != np.arange(n)).any() and (flows.symmetry is None or (shift % flows.symmetry).any()):
        raise RuntimeError(f"{algorithm} does not repeat as the fold needs: its members cannot be folded")


def _dependency_edges(flows: FlowSet, nodes: _FlowNodes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(edge src, edge dst, stream src, stream dst): each kept flow waits for its parents' arrival, or, where
    the parent is the previous flow its sender pushes, for the parent's last byte to leave (a stream edge)."""
    parent_of, parent_idx = flows.parent_of, flows.parent_idx
    link_kept = np.isin(parent_of, nodes.kept) if nodes.folded else np.ones(len(parent_of), dtype=bool)
    child_node = nodes.of_kept(parent_of[link_kept])
    streamed = flows.streamed[link_kept]
    parents = parent_idx[link_kept]
    return nodes.of(parents[~streamed]), child_node[~streamed], nodes.of(parents[streamed]), child_node[streamed]


def _chain_head_edges(flows: FlowSet, nodes: _FlowNodes, marker: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """A chain starts when its members have joined the collective: its sender, and its receiver for a
    point-to-point flow (a switch leg waits for its GPU only)."""
    kept = nodes.kept
    has_parent = np.diff(flows.parent_ptr)[kept] > 0
    heads = kept[~has_parent]
    p2p_heads = heads[(flows.src_pos[heads] >= 0) & (flows.dst_pos[heads] >= 0)]
    return [(marker[nodes.owner[heads]], nodes.of_kept(kept)[~has_parent]),
            (marker[nodes.fold[flows.dst_pos[p2p_heads]]], nodes.of_kept(p2p_heads))]


def _completion_edges(flows: FlowSet, nodes: _FlowNodes, marker: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """A member is done (its end marker, start + 1) when the last flows it sends and receives (per channel)
    have arrived."""
    n, fold = len(nodes.fold), nodes.fold
    sent = nodes.kept[_last_steps(flows.src_pos, flows, n)[nodes.kept]]
    received = np.flatnonzero(_last_steps(flows.dst_pos, flows, n) & (fold[np.maximum(flows.dst_pos, 0)]
                                                                      == flows.dst_pos))
    return [(nodes.of(sent), marker[flows.src_pos[sent]] + 1),
            (nodes.of(received), marker[flows.dst_pos[received]] + 1)]


def in_connection_order(flows: FlowSet) -> FlowSet:
    """`flows` where each flow between two members also waits for the last byte of the previous step's flow on
    its connection (same sender, receiver and channel), as a parent its sender pushed.

    NCCL posts a channel's steps to one connection in order (its NCCL_STEPS slots drain first in, first out),
    so a connection carries one step at a time. Without this, the steps a slow hop falls behind on would share
    its link all at once and finish together, starving the hops after it: a ring whose hops collide unevenly
    on the spines then ran up to 3x slower than its slowest hop allows."""
    p2p = np.flatnonzero((flows.src_pos >= 0) & (flows.dst_pos >= 0))
    if len(p2p) < 2:
        return flows
    order = p2p[np.lexsort((p2p, flows.step[p2p], flows.channel[p2p], flows.dst_pos[p2p], flows.src_pos[p2p]))]
    prev, this = order[:-1], order[1:]
    same = (flows.src_pos[prev] == flows.src_pos[this]) & (flows.dst_pos[prev] == flows.dst_pos[this]) & \
        (flows.channel[prev] == flows.channel[this]) & (flows.step[prev] < flows.step[this])
    child, parent = this[same], prev[same]
    new = ~_has_parent(flows.parent_ptr, flows.parent_idx, child, parent)
    if not new.any():
        return flows
    children = np.concatenate([flows.parent_of, child[new]])
    parents = np.concatenate([flows.parent_idx, parent[new]])
    by_child = np.argsort(children, kind="stable")   # each flow's parents as before, the connection's last
    ptr = np.concatenate([[0], np.cumsum(np.bincount(children, minlength=len(flows)))]).astype(np.int64)
    return replace(flows, parent_ptr=ptr, parent_idx=parents[by_child].astype(np.int64))


def _has_parent(ptr: np.ndarray, parents: np.ndarray, child: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Per pair, whether `parent` is already among `child`'s parents (CSR `ptr`, `parents`): each child's few
    parents compared column by column, not hashed (a 2,048-member ring's template has millions of flows)."""
    start, count = ptr[child], ptr[child + 1] - ptr[child]
    found = np.zeros(len(child), dtype=bool)
    for k in range(int(count.max()) if len(child) else 0):
        has = count > k
        found[has] |= parents[start[has] + k] == parent[has]
    return found


def fold_positions(group: tuple[int, ...], rep: np.ndarray) -> tuple[int, ...]:
    """The position in `group` of each member's representative."""
    position = {g: p for p, g in enumerate(group)}
    return tuple(position[int(rep[g])] for g in group)


def expansion_template(ctype: CollType, size: float, choice: Choice, shape: GroupShape,
                       fold_pos: tuple[int, ...], steady: bool = False) -> ExpansionTemplate:
    """The markers, flows and edges of one collective call on a group of this shape under this fold (every group
    of the same shape, size, algorithm and fold pattern shares it: DAGBuilder keeps those it built while it
    builds, and lets them go with it, so that runs one after another in a process do not pile them up)."""
    n = shape.n
    flows = flow_set(ctype, tuple(range(n)), size, choice.channels, choice.algorithm, choice.protocol, shape,
                     steady=steady, chunk_bytes=choice.chunk_bytes)
    flows = in_connection_order(flows)
    fold = np.asarray(fold_pos)
    _check_foldable(flows, fold, choice.algorithm)
    simulated = tuple(p for p in range(n) if fold[p] == p)
    marker = np.full(n, NO_NODE, dtype=np.int64)
    marker[list(simulated)] = 2 * np.arange(len(simulated))  # start; end is +1
    owner, dst = endpoints(flows.src_pos, flows.dst_pos, flows.switch)
    kept = np.flatnonzero(fold[owner] == owner) if len(flows) else np.zeros(0, dtype=np.int64)
    nodes = _FlowNodes(flows, owner, kept, fold, first=2 * len(simulated))
    starts = marker[list(simulated)]
    edge_src, edge_dst, stream_src, stream_dst = _dependency_edges(flows, nodes)
    edges = [(starts, starts + 1),   # a member's part ends no earlier than it starts
             (edge_src, edge_dst), *_chain_head_edges(flows, nodes, marker), *_completion_edges(flows, nodes, marker)]
    first_parent = np.full(len(flows), NO_NODE, dtype=np.int64)
    with_parent = np.flatnonzero(np.diff(flows.parent_ptr) > 0)
    first_parent[with_parent] = nodes.of(flows.parent_idx[flows.parent_ptr[with_parent]])
    markers = np.repeat(np.asarray(simulated, dtype=np.int64), 2)
    no_marker = np.full(len(markers), NO_NODE, dtype=np.int64)
    nodes = {"kind": np.concatenate([np.full(len(markers), NodeKind.marker), np.full(len(kept), NodeKind.flow)]),
             "gpu": np.concatenate([markers, owner[kept]]), "peer": np.concatenate([no_marker, dst[kept]]),
             "size": np.concatenate([np.zeros(len(markers)), flows.size[kept]]),
             "parent": np.concatenate([no_marker, first_parent[kept]])}
    ids = [np.asarray(a, dtype=np.int64) for a in (np.concatenate([e[0] for e in edges]),
                                                    np.concatenate([e[1] for e in edges]), stream_src, stream_dst)]
    return ExpansionTemplate(simulated, flows.lanes, flows.periods, nodes["kind"].astype(np.uint8),
                             nodes["gpu"].astype(np.int64), nodes["peer"].astype(np.int64),
                             nodes["size"].astype(np.float64), nodes["parent"], *ids)


@dataclass(frozen=True)
class TemplateCounts:
    """What one collective call's expansion template holds, counted without building it: its simulated positions,
    and the positions its kept flows run between in one period of `periods` identical ones (a ring's step)."""

    simulated: int
    flow_src: np.ndarray                # as ExpansionTemplate.flow_src, one period's
    flow_dst: np.ndarray
    periods: int
    lanes: int = 1                      # channels each simulated channel stands for
    grouped: bool = False               # a grouped send/receive (all-to-all, ring shift)
    built: int = 0                      # flows expansion_template makes before it keeps the simulated senders':
    #    every member's, every period's (one period in steady state)

    @property
    def flows(self) -> int:
        return len(self.flow_src) * self.periods


@cache
def template_counts(ctype: CollType, size: float, choice: Choice, shape: GroupShape,
                    fold_pos: tuple[int, ...], steady: bool = False) -> TemplateCounts:
    """The counts of expansion_template(ctype, size, choice, shape, fold_pos), from one period of the
    collective's flows: a ring of n members repeats its first step's senders and receivers n-1 (or 2(n-1))
    times, so a 1,024-member ring is counted from 1/1,023 of its flows (dag/size.py's estimate of a run too
    large to build must not itself need that memory)."""
    flows = flow_set(ctype, tuple(range(shape.n)), size, choice.channels, choice.algorithm, choice.protocol, shape,
                     one_period=True, chunk_bytes=choice.chunk_bytes)
    fold = np.asarray(fold_pos, dtype=np.int64)
    owner, dst = endpoints(flows.src_pos, flows.dst_pos, flows.switch)
    kept = fold[owner] == owner
    periods = 1 if steady else flows.periods  # in steady state the period is all there is
    return TemplateCounts(int((fold == np.arange(shape.n)).sum()), owner[kept], dst[kept], periods, flows.lanes,
                          flows.grouped_sends, len(flows) * periods)


@dataclass(frozen=True)
class LocalNodes:
    """What a program's kernels make on every rank that runs it, worked out once per program: each compute op's
    node, after a launch marker where collectives start with it, in creation order, and the edges into them.

    An edge comes from another of these nodes (`edge_src` < count) or from the node of one of the program's other
    ops (`edge_src` = count + j: `external[j]`, the (op, of its start) whose node a rank's instantiation gives:
    a collective's end or start, a transfer). A rank's nodes are numbered as DAGBuilder made them op by op: the
    nodes of op i follow those of the ops before it, the collectives' and transfers' included."""

    kind: np.ndarray
    kernel: np.ndarray
    layer: np.ndarray
    microbatch: np.ndarray
    others_before: np.ndarray   # per node: how many ops before its own are not kernels
    is_kernel: list[bool]       # per op
    done: list[int]             # per op: the node that completes a kernel op, else NO_NODE
    began: list[int]            # per op: a kernel op's launch marker, else NO_NODE
    before: list[int]           # per op: the nodes made by the kernel ops before it
    previous_other: list[int]   # per op: the last op before it that is not a kernel, -1 if none
    others: list[int]           # the ops that are not kernels, in order
    edge_op: np.ndarray         # the op whose instantiation adds the edge
    edge_src: np.ndarray
    edge_dst: np.ndarray
    external: list[tuple[int, bool]]

    @property
    def count(self) -> int:
        return len(self.kind)


def local_nodes(program: StageProgram, kernels: list[int]) -> LocalNodes:
    """The LocalNodes of `program` (`kernels`: each op's kernel index): each kernel waits for the kernel before it,
    for the ops it waits on and for the start of the collectives it runs alongside, where each has one by then
    (an op later in the program has none yet); its launch marker, if any, takes those edges in its place."""
    ops = program.ops
    launched = {a for op in ops if isinstance(op, CollectiveOp) for a in op.alongside}
    is_kernel = [isinstance(op, ComputeOp) for op in ops]
    done, began = [NO_NODE] * len(ops), [NO_NODE] * len(ops)
    kind: list[int] = []
    kernel: list[int] = []
    layer: list[int] = []
    microbatch: list[int] = []
    others_before: list[int] = []
    edge_op: list[int] = []
    edge_src: list[int] = []
    edge_dst: list[int] = []
    external: dict[tuple[int, bool], int] = {}
    before, previous_other, others = [], [], []
    last_compute, last_other = NO_NODE, -1

    def from_other(w: int, of_start: bool) -> int:  # below NO_NODE: a code, not a node
        return NO_NODE - 1 - external.setdefault((w, of_start), len(external))

    for i, op in enumerate(ops):
        before.append(len(kind))
        previous_other.append(last_other)
        if not is_kernel[i]:
            others.append(i)
            last_other = i
            continue
        deps = [last_compute, *(done[w] if is_kernel[w] else from_other(w, False) for w in op.waits if w < i),
                *(began[a] if is_kernel[a] else from_other(a, True) for a in op.alongside
                  if a < i and (is_kernel[a] or isinstance(ops[a], CollectiveOp)))]
        nodes = [NodeKind.marker, NodeKind.compute] if i in launched else [NodeKind.compute]
        for node_kind in nodes:  # a collective starts with this kernel: its launch marker takes the edges first
            node = len(kind)
            kind.append(node_kind)
            kernel.append(kernels[i] if node_kind == NodeKind.compute else -1)
            layer.append(op.layer)
            microbatch.append(op.microbatch)
            others_before.append(len(others))
            for source in deps:
                if source != NO_NODE:
                    edge_op.append(i)
                    edge_src.append(source)
                    edge_dst.append(node)
            deps = [node]
        began[i] = len(kind) - 2 if i in launched else NO_NODE
        done[i] = last_compute = len(kind) - 1
    count = len(kind)
    src = np.array(edge_src, dtype=np.int64)
    src = np.where(src < 0, count + NO_NODE - 1 - src, src)  # an external source: count + its index

    def array(values: list[int]) -> np.ndarray:
        return np.array(values, dtype=np.int64)

    return LocalNodes(array(kind), array(kernel), array(layer), array(microbatch), array(others_before), is_kernel,
                      done, began, before, previous_other, others, array(edge_op), src, array(edge_dst),
                      sorted(external, key=external.get))


COLUMNS = {"kind": np.uint8, "gpu": np.int32, "peer": np.int32, "stream": np.uint8, "kernel": np.int32,
           "layer": np.int32, "microbatch": np.int32, "stage": np.int16, "coll": np.int32, "size": np.float64,
           "parent": np.int64}
"""The DAG's node columns and their types (dag/nodes.py ExecutionDAG)."""


class DAGBuilder:
    """Nodes and edges are made rank by rank, op by op, and numbered in that order. A rank's kernels come from
    its program's LocalNodes, placed on the rank with numpy; its collectives and transfers, which ranks share (the
    first member to reach one makes it), are made one op at a time."""

    def __init__(self, programs: list[StageProgram], layout: RankLayout, fold: Fold, plan: CollectivePlan):
        self.programs, self.layout, self.fold, self.plan = programs, layout, fold, plan
        self.n = 0                                  # the next node's id
        self.shared: list[tuple[int, int, dict]] = []  # nodes made one by one (markers, transfers) not yet
        #                                               placed: (first id, count, each column's value)
        self.placed = 0                             # nodes below this id are in `parts`
        self.parts: list[dict[str, np.ndarray]] = []
        self.op = -1                                # the program op being instantiated (-1: none)
        self.edge_src: list[int] = []              # edges added one by one, not yet placed
        self.edge_dst: list[int] = []
        self.marks: list[tuple[int, int]] = []      # in a rank: (op, its first in edge_src) per op
        self.blocks: list[tuple[int, np.ndarray, np.ndarray, int]] = []  # in a rank: (op, local src, local dst,
        #                                                                    base) of the edges a collective adds
        self.edges: list[tuple[np.ndarray, np.ndarray]] = []        # placed, in order
        self.streams: list[tuple[np.ndarray, np.ndarray, int]] = []  # (local src, local dst, base)
        self.pending = PendingNodes.empty()        # collectives' nodes not yet placed
        self.sizes: dict[int, float] = {}           # a pipeline send's bytes, set on its flow by the sender
        self.send_run: dict[int, int] = {}          # a pipeline send's flow -> how it runs (index in send_runs)
        self.send_runs: list[CollectiveInstance] = []
        self._send_runs: dict[tuple[int, int, float], int] = {}  # (sender, receiver, bytes) -> index in send_runs
        self.kernel_index: dict[KernelSpec, int] = {}
        self.collectives: list[CollectiveInstance] = []
        self.instances: dict[tuple, dict[int, tuple[int, int]]] = {}
        self.p2p: dict[tuple[int, int, int, int, int], int] = {}
        self.stage_of = layout.coords[:, 3].tolist()
        self._groups: dict[tuple[str, int], tuple[int, ...]] = {}
        self._spread: dict[tuple[str, int], bool] = {}    # (axis, rank) -> Fold.expands of its group
        self._local: dict[int, LocalNodes] = {}           # program index -> its kernels' nodes
        self._templates: dict[tuple, ExpansionTemplate] = {}
        self._expansions: dict[tuple, Expansion] = {}     # (type, bytes, algorithm, group, every) -> its Expansion
        self._folded: dict[tuple[int, ...], tuple[int, ...]] = {}  # group -> fold_positions
        self._simulates: dict[tuple[int, ...], bool] = {}  # group -> whether one of its GPUs is simulated

    # ---- node and edge primitives ----

    def _add(self, kind: NodeKind, gpu: int, peer: int = -1, stream: int = 0, layer: int = -1,
             microbatch: int = -1) -> int:
        node = self.n
        self.shared.append((node, 1, {"kind": kind, "gpu": gpu, "peer": peer, "stream": stream, "kernel": -1,
                                      "layer": layer, "microbatch": microbatch, "stage": self.stage_of[gpu],
                                      "coll": -1, "size": 0.0, "parent": NO_NODE}))
        self.n += 1
        return node

    def _edges(self, sources, target: int) -> None:
        for s in sources:
            if s != NO_NODE:
                self.edge_src.append(s)
                self.edge_dst.append(target)

    def _edge_block(self, src: np.ndarray, dst: np.ndarray, base: int) -> None:
        """Edges as arrays of ids relative to `base`: in a rank, an op's come before those it adds one by one
        (_instantiate orders them)."""
        if self.op >= 0:
            self.blocks.append((self.op, src, dst, base))
        else:
            self._seal()
            self.edges.append((src + base, dst + base))

    def _seal(self) -> None:
        """Place the edges added one by one outside a rank."""
        if self.edge_src:
            self.edges.append((np.array(self.edge_src, dtype=np.int64), np.array(self.edge_dst, dtype=np.int64)))
            self.edge_src, self.edge_dst = [], []

    def _rank_edges(self, local: LocalNodes, src: np.ndarray, dst: np.ndarray) -> None:
        """Place a rank's edges in the order its ops add them: an op's kernel edges (`src`, `dst`), or its
        collectives' blocks and then its edges added one by one."""
        ops = [op for op, _ in self.marks]
        starts = [start for _, start in self.marks] + [len(self.edge_src)]
        one_by_one = np.repeat(2 * np.array(ops, dtype=np.int64) + 1, np.diff(starts))
        blocks = np.repeat(2 * np.array([op for op, _, _, _ in self.blocks], dtype=np.int64),
                           [len(s) for _, s, _, _ in self.blocks])
        keys = np.concatenate([2 * local.edge_op, blocks, one_by_one])
        order = np.argsort(keys, kind="stable")
        block_src, block_dst = _placed_block([(s, d, base) for _, s, d, base in self.blocks])
        self.edges.append((np.concatenate([src, block_src, self.edge_src])[order],
                           np.concatenate([dst, block_dst, self.edge_dst])[order]))
        self.edge_src, self.edge_dst, self.marks, self.blocks = [], [], [], []

    def _place(self, end: int, local: tuple[LocalNodes, int, np.ndarray] | None = None) -> None:
        """Nodes [placed, end) into a part: those made one by one at their ids and, with `local` (a program's
        LocalNodes, the rank, and where in the range each of its nodes goes), a rank's kernels."""
        size = end - self.placed
        part = {name: np.empty(size, dtype=dtype) for name, dtype in COLUMNS.items()}
        if local is not None:
            nodes, rank, at = local
            values = {"kind": nodes.kind, "gpu": rank, "peer": -1, "stream": int(Stream.compute),
                      "kernel": nodes.kernel, "layer": nodes.layer, "microbatch": nodes.microbatch,
                      "stage": self.stage_of[rank], "coll": -1, "size": 0.0, "parent": NO_NODE}
            for name, value in values.items():
                part[name][at] = value
        for first, count, values in self.shared:
            start = first - self.placed
            for name, value in values.items():
                part[name][start:start + count] = value
        self.pending.fill(part, self.placed)
        self.shared, self.pending = [], PendingNodes.empty()
        self.parts.append(part)
        self.placed = end

    # ---- programs ----

    def build(self) -> ExecutionDAG:
        program = program_of_rank(self.programs, self.layout)
        for rank in map(int, np.flatnonzero(self.fold.multiplicity)):
            self._instantiate(rank, int(program[rank]))
        return self.finish()

    def finish(self) -> ExecutionDAG:
        self._seal()
        if self.n > self.placed:
            self._place(self.n)
        columns = {name: (np.concatenate([part[name] for part in self.parts]) if self.parts
                          else np.zeros(0, dtype=dtype)) for name, dtype in COLUMNS.items()}
        if self.sizes:
            columns["size"][np.fromiter(self.sizes, dtype=np.int64)] = np.fromiter(self.sizes.values(), dtype=float)

        def joined(pairs: list[tuple[np.ndarray, np.ndarray]], side: int) -> np.ndarray:
            return np.concatenate([p[side] for p in pairs]).astype(np.int64, copy=False) if pairs else \
                np.zeros(0, np.int64)

        order = sorted(self.kernel_index, key=self.kernel_index.get)
        streams = _placed_block(self.streams)
        return ExecutionDAG(**columns, edge_src=joined(self.edges, 0), edge_dst=joined(self.edges, 1),
                            stream_src=streams[0], stream_dst=streams[1],
                            kernel_specs=order, collectives=self.collectives, num_gpus=self.layout.num_gpus,
                            multiplicity=self.fold.multiplicity, sends=self._pipeline_sends())

    def _pipeline_sends(self) -> PipelineSends:
        nodes = np.fromiter(sorted(self.send_run), dtype=np.int64, count=len(self.send_run))
        run = np.fromiter((self.send_run[n] for n in nodes.tolist()), dtype=np.int64, count=len(nodes))
        return PipelineSends(nodes, run, self.send_runs)

    def _instantiate(self, rank: int, index: int) -> None:
        """One rank's nodes: its collectives and transfers op by op, then its kernels placed among them."""
        prog, local = self.programs[index], self._local_nodes(index)
        base = self.n
        done = [NO_NODE] * len(prog.ops)          # node whose completion completes op i on this rank
        began = [NO_NODE] * len(prog.ops)         # node whose completion marks op i starting (pipelined overlap)
        made = {-1: 0}                            # op -> nodes its collectives and transfers made, up to it

        def node(w: int, of_start: bool, now: int) -> int:
            """What done[w] (began[w], `of_start`) holds when op `now` reads it: nothing for a later op."""
            if w >= now:
                return NO_NODE
            if not local.is_kernel[w]:
                return began[w] if of_start else done[w]
            own = local.began[w] if of_start else local.done[w]
            return NO_NODE if own == NO_NODE else base + own + made[local.previous_other[w]]

        last_on_stream: dict[Stream, int] = {}
        member_ends: dict[int, dict[int, int]] = {}  # a representative's part's end -> its peers' (Fold.expands)
        occurrences: dict[tuple, int] = defaultdict(int)
        per_stage = self.layout.num_gpus // self.layout.pp
        self._seal()  # any made before, outside a program
        if self.n > self.placed:
            self._place(self.n)
        for i in local.others:
            op = prog.ops[i]
            self.op, self.n = i, base + local.before[i] + made[local.previous_other[i]]
            self.marks.append((i, len(self.edge_src)))
            waits = [node(w, False, i) for w in op.waits]
            if isinstance(op, CollectiveOp):
                group = self._group(op.axis, rank)
                key = (op.label, op.layer, op.microbatch, op.phase)
                occurrences[key] += 1
                deps = [*waits, *(node(a, True, i) for a in op.alongside)]
                previous = last_on_stream.get(op.stream, NO_NODE)
                if self._expands(op.axis, rank):
                    start, end, done[i] = self._expanded(rank, (*key, occurrences[key]), op, deps, previous,
                                                         member_ends)
                else:
                    start, end = self.instance((*key, occurrences[key], group), op, group)[rank]
                    done[i] = end
                self._edges([previous, *deps], start)
                began[i] = start
                last_on_stream[op.stream] = end
            elif isinstance(op, SendOp):
                peer = rank + (op.peer_stage - prog.stage) * per_stage
                flow = self._p2p_flow(rank, peer, op.microbatch, op.phase, op.peer_chunk)
                self.sizes[flow] = op.nbytes
                self.send_run[flow] = self._send(rank, peer, op.nbytes)
                self._edges([last_on_stream.get(op.stream, NO_NODE), *waits], flow)
                last_on_stream[op.stream] = done[i] = flow
            elif isinstance(op, RecvOp):
                src = rank + (op.peer_stage - prog.stage) * per_stage
                done[i] = self._p2p_flow(src, rank, op.microbatch, op.phase, op.chunk)
                self._edges(waits, done[i])  # a blocking receive: the transfer waits for it
            made[i] = self.n - base - local.before[i]
        self.op = -1
        self._place_kernels(rank, local, base, [made[i] for i in local.others], done, began)

    def _place_kernels(self, rank: int, local: LocalNodes, base: int, made: list[int], done: list[int],
                       began: list[int]) -> None:
        """A rank's kernels among the nodes its other ops made (`made`: how many up to each, in order), from
        `base`; their edges from the other ops' nodes (`done`, `began`) among theirs, in the order of the ops."""
        self.n = base + local.count + (made[-1] if made else 0)
        at = np.arange(local.count) + np.array([0, *made], dtype=np.int64)[local.others_before]
        values = np.concatenate([base + at, np.array([began[w] if of_start else done[w]
                                                      for w, of_start in local.external], dtype=np.int64)])
        self._rank_edges(local, values[local.edge_src], base + at[local.edge_dst])
        self._place(self.n, (local, rank, at))

    def _expanded(self, rank: int, key: tuple, op: CollectiveOp, deps: list[int], previous: int,
                  member_ends: dict[int, dict[int, int]]) -> tuple[int, int, int]:
        """(start, end, joined) of a representative's part in a collective expanded over every GPU it stands for
        (see Fold.expands). Each of them joins when the representative's program reaches the call (`deps`) and
        its own previous part on the stream has ended (where the representative's, `previous`, was one of such a
        collective, else when that has); `joined` completes when all their parts have ended."""
        parts = {}
        for m in [rank, *(m for m in self.fold.members(rank).tolist() if m != rank)]:
            group = self._group(op.axis, m)
            parts[m] = self.instance((*key, group), op, group, expand=True)[m]
        before = member_ends.get(previous, {})
        for m, (begin, _) in parts.items():
            if m != rank:
                self._edges([*deps, before.get(m, previous)], begin)
        joined = self._add(NodeKind.marker, rank, layer=op.layer, microbatch=op.microbatch)
        self._edges([end for _, end in parts.values()], joined)
        member_ends[parts[rank][1]] = {m: end for m, (_, end) in parts.items()}
        return *parts[rank], joined

    def _local_nodes(self, index: int) -> LocalNodes:
        if index not in self._local:
            self._local[index] = local_nodes(self.programs[index], self._kernel_ids(index))
        return self._local[index]

    def _kernel_ids(self, index: int) -> list[int]:
        """Each op's kernel index in program `index` (-1 for ops that are not kernels), numbered in order of
        first appearance over the build (asked once per program, by _local_nodes)."""
        table = self.kernel_index
        return [table.setdefault(op.kernel, len(table)) if isinstance(op, ComputeOp) else -1
                for op in self.programs[index].ops]

    def _expands(self, axis: str, rank: int) -> bool:
        """Fold.expands of `rank`'s group of `axis`, asked once per rank and axis."""
        key = (axis, rank)
        if key not in self._spread:
            self._spread[key] = self.fold.expands(self._group(axis, rank), self.plan.topology)
        return self._spread[key]

    def _holds_representative(self, group: tuple[int, ...]) -> bool:
        """Whether a GPU of `group` is simulated (stands for itself), asked once per group."""
        if group not in self._simulates:
            self._simulates[group] = bool((self.fold.rep[list(group)] == group).any())
        return self._simulates[group]

    def _fold_positions(self, group: tuple[int, ...]) -> tuple[int, ...]:
        if group not in self._folded:
            self._folded[group] = fold_positions(group, self.fold.rep)
        return self._folded[group]

    def _group(self, axis: str, rank: int) -> tuple[int, ...]:
        key = (axis, rank)
        if key not in self._groups:
            self._groups[key] = self.layout.group(axis, rank)
        return self._groups[key]

    def _p2p_flow(self, src: int, dst: int, microbatch: int, phase: int, dst_chunk: int) -> int:
        """The flow of one pipeline send; created by whichever side is instantiated first."""
        key = (src, dst, microbatch, int(phase), dst_chunk)
        if key not in self.p2p:
            self.p2p[key] = self._add(NodeKind.flow, src, peer=dst, stream=Stream.pp_comm, microbatch=microbatch)
        return self.p2p[key]

    def _send(self, src: int, dst: int, nbytes: float) -> int:
        """How a pipeline send of `nbytes` from `src` to `dst` runs (dag.nodes.PipelineSends): the send/receive
        collective of those bytes over the pair as the plan runs it (its protocol, and its channels: NCCL's for one
        peer's part on the communicator Megatron sends over, the pipeline-parallel group's, whose ranks set them,
        graph/paths.cc ncclTopoComputeP2pChannels; or the scenario's num_channels, which bounds NCCL's
        point-to-point channels as it bounds the rings'), its one flow out of the sender standing for every channel
        (the ring shift's flow set has one a member: collective.ring.ring_shift)."""
        key = (src, dst, nbytes)
        if key not in self._send_runs:
            group = (src, dst)
            choice = self.plan.choose(CollType.SendRecv, group, nbytes, communicator=self._group("pp", src))
            self._send_runs[key] = len(self.send_runs)
            self.send_runs.append(CollectiveInstance(CollType.SendRecv, PIPELINE_SEND, group, nbytes, Stream.pp_comm,
                                                     -1, -1, Phase.fwd, choice.algorithm, choice.protocol,
                                                     choice.channels, choice.channels))
        return self._send_runs[key]

    # ---- collectives ----

    def instance(self, key: tuple, op: CollectiveOp, group: tuple[int, ...],
                 expand: bool = False) -> dict[int, tuple[int, int]]:
        """The (start, end) markers of each simulated member of the collective instance `key`, expanded once
        (every member, with `expand`)."""
        if key not in self.instances:
            self.instances[key] = self._expand(op, group, expand)
        return self.instances[key]

    def _expand(self, op: CollectiveOp, group: tuple[int, ...], every: bool = False) -> dict[int, tuple[int, int]]:
        """Markers for the simulated members and flows for the simulated senders of one collective (for every
        member, with `every`)."""
        if not every and not self._holds_representative(group):
            return {}  # a group of folded GPUs only: its representatives' group stands for it
        e = self._expansion(op, group, every)
        t, choice = e.template, e.choice
        coll = len(self.collectives)
        self.collectives.append(CollectiveInstance(op.ctype, op.label, group, op.nbytes, op.stream, op.layer,
                                                   op.microbatch, op.phase, choice.algorithm, choice.protocol,
                                                   choice.channels, t.lanes, t.steps))
        base = self.n
        self.pending.add(base, e, coll, int(op.stream), op.layer, op.microbatch)
        self.n += len(t.kind)
        self._edge_block(t.edge_src, t.edge_dst, base)
        self.streams.append((t.stream_src, t.stream_dst, base))
        return {member: (base + start, base + start + 1) for member, start in e.members}

    def _expansion(self, op: CollectiveOp, group: tuple[int, ...], every: bool) -> Expansion:
        """The template of this call's type, size and algorithm placed on `group`, made once per group."""
        key = (op.ctype, op.nbytes, op.algorithm, group, every)
        if key not in self._expansions:
            fold_pos = tuple(range(len(group))) if every else self._fold_positions(group)
            choice = self.plan.choose(op.ctype, group, op.nbytes, op.algorithm)
            template_key = (op.ctype, op.nbytes, choice, self.plan.shape(group), fold_pos, self.fold.steady(group))
            if template_key not in self._templates:
                self._templates[template_key] = expansion_template(*template_key)
            t = self._templates[template_key]
            positions = np.asarray(group)
            self._expansions[key] = Expansion(
                choice, t, positions[t.gpu], np.where(t.peer >= 0, positions[np.maximum(t.peer, 0)], t.peer),
                tuple((group[p], 2 * i) for i, p in enumerate(t.simulated)),
                self.stage_of[group[t.simulated[0]]])
        return self._expansions[key]


def collective_dag(ctype: CollType, groups: list[tuple[int, ...]], size: float, num_gpus: int,
                   plan: CollectivePlan, fold: Fold | None = None) -> ExecutionDAG:
    """A DAG of one collective on each of `groups` (disjoint, running at once) on a cluster of `num_gpus`,
    every member starting at 0."""
    layout = RankLayout(tp=1, cp=1, dp=num_gpus, pp=1)
    builder = DAGBuilder([], layout, fold or Fold.identity(num_gpus), plan)
    op = CollectiveOp(ctype, "collective", size, Stream.dp_comm, ctype.name, -1, -1, Phase.fwd)
    for i, group in enumerate(groups):
        group = tuple(group)
        builder.instance((ctype.name, i), op, group, expand=builder.fold.expands(group, plan.topology))
    return builder.finish()
