"""Instantiate per-stage programs on every simulated rank and expand collectives into flows.

Each collective instance (one group, one call) is decomposed once, not once per member: every member
gets a start marker (it has reached the call on its stream) and an end marker (its part is done), and
the flows between them carry the algorithm's step-by-step dependencies.
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
from .nodes import NO_NODE, CollectiveInstance, ExecutionDAG, NodeKind

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
    flow_src: list[int]                 # position of the flow's GPU (its sender, or the receiver of a switch leg)
    flow_dst: list[int]                 # position of its receiver, or a switch endpoint code
    flow_size: list[float]              # (these three as lists: a DAG's columns then share their values' objects)
    flow_parent: np.ndarray             # local node id of its first parent, or NO_NODE
    edge_src: np.ndarray                # local node ids
    edge_dst: np.ndarray
    stream_src: np.ndarray              # from a flow to its sender's next one (released at its last byte)
    stream_dst: np.ndarray


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
    known = set(zip(flows.parent_of.tolist(), flows.parent_idx.tolist(), strict=True))
    new = np.array([(c, p) not in known for c, p in zip(child.tolist(), parent.tolist(), strict=True)], dtype=bool)
    if not new.any():
        return flows
    children = np.concatenate([flows.parent_of, child[new]])
    parents = np.concatenate([flows.parent_idx, parent[new]])
    by_child = np.argsort(children, kind="stable")   # each flow's parents as before, the connection's last
    ptr = np.concatenate([[0], np.cumsum(np.bincount(children, minlength=len(flows)))]).astype(np.int64)
    return replace(flows, parent_ptr=ptr, parent_idx=parents[by_child].astype(np.int64))


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
                     steady=steady)
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
    ids = [np.asarray(a, dtype=np.int64) for a in (first_parent[kept], np.concatenate([e[0] for e in edges]),
                                                    np.concatenate([e[1] for e in edges]), stream_src, stream_dst)]
    return ExpansionTemplate(simulated, flows.lanes, flows.periods, owner[kept].tolist(), dst[kept].tolist(),
                             flows.size[kept].tolist(), *ids)


@dataclass(frozen=True)
class TemplateCounts:
    """What one collective call's expansion template holds, counted without building it: its simulated positions,
    and the positions its kept flows run between in one period of `periods` identical ones (a ring's step)."""

    simulated: int
    flow_src: np.ndarray                # as ExpansionTemplate.flow_src, one period's
    flow_dst: np.ndarray
    periods: int

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
                     one_period=True)
    fold = np.asarray(fold_pos, dtype=np.int64)
    owner, dst = endpoints(flows.src_pos, flows.dst_pos, flows.switch)
    kept = fold[owner] == owner
    periods = 1 if steady else flows.periods  # in steady state the period is all there is
    return TemplateCounts(int((fold == np.arange(shape.n)).sum()), owner[kept], dst[kept], periods)


class DAGBuilder:
    def __init__(self, programs: list[StageProgram], layout: RankLayout, fold: Fold, plan: CollectivePlan):
        self.programs, self.layout, self.fold, self.plan = programs, layout, fold, plan
        self.cols: dict[str, list] = {name: [] for name in (
            "kind", "gpu", "peer", "stream", "kernel", "layer", "microbatch", "stage", "coll", "size", "parent")}
        self.edge_src: list[int] = []
        self.edge_dst: list[int] = []
        self.stream_src: list[int] = []
        self.stream_dst: list[int] = []
        self.kernel_index: dict[KernelSpec, int] = {}
        self.collectives: list[CollectiveInstance] = []
        self.instances: dict[tuple, dict[int, tuple[int, int]]] = {}
        self.p2p: dict[tuple[int, int, int, int, int], int] = {}
        self.stage_of = layout.coords[:, 3].tolist()
        self._groups: dict[tuple[str, int], tuple[int, ...]] = {}
        self._spread: dict[tuple[str, int], bool] = {}    # (axis, rank) -> Fold.expands of its group
        self._kernels: dict[int, list[int]] = {}           # program index -> each op's kernel index (-1: none)
        self._templates: dict[tuple, ExpansionTemplate] = {}

    # ---- node and edge primitives ----

    def _add(self, kind: NodeKind, gpu: int, peer: int = -1, stream: int = 0, kernel: int = -1, layer: int = -1,
             microbatch: int = -1, coll: int = -1, size: float = 0.0, parent: int = NO_NODE) -> int:
        c = self.cols
        node = len(c["kind"])
        c["kind"].append(kind)
        c["gpu"].append(gpu)
        c["peer"].append(peer)
        c["stream"].append(stream)
        c["kernel"].append(kernel)
        c["layer"].append(layer)
        c["microbatch"].append(microbatch)
        c["stage"].append(self.stage_of[gpu])
        c["coll"].append(coll)
        c["size"].append(size)
        c["parent"].append(parent)
        return node

    def _edges(self, sources, target: int) -> None:
        for s in sources:
            if s != NO_NODE:
                self.edge_src.append(s)
                self.edge_dst.append(target)

    # ---- programs ----

    def build(self) -> ExecutionDAG:
        program = program_of_rank(self.programs, self.layout)
        for rank in map(int, np.flatnonzero(self.fold.multiplicity)):
            self._instantiate(rank, int(program[rank]))
        return self.finish()

    def finish(self) -> ExecutionDAG:
        c = self.cols
        order = sorted(self.kernel_index, key=self.kernel_index.get)
        return ExecutionDAG(
            kind=np.array(c["kind"], dtype=np.uint8), gpu=np.array(c["gpu"], dtype=np.int32),
            peer=np.array(c["peer"], dtype=np.int32), stream=np.array(c["stream"], dtype=np.uint8),
            kernel=np.array(c["kernel"], dtype=np.int32), layer=np.array(c["layer"], dtype=np.int32),
            microbatch=np.array(c["microbatch"], dtype=np.int32), stage=np.array(c["stage"], dtype=np.int16),
            coll=np.array(c["coll"], dtype=np.int32), size=np.array(c["size"], dtype=np.float64),
            parent=np.array(c["parent"], dtype=np.int64),
            edge_src=np.array(self.edge_src, dtype=np.int64), edge_dst=np.array(self.edge_dst, dtype=np.int64),
            stream_src=np.array(self.stream_src, dtype=np.int64), stream_dst=np.array(self.stream_dst, dtype=np.int64),
            kernel_specs=order, collectives=self.collectives, num_gpus=self.layout.num_gpus,
            multiplicity=self.fold.multiplicity,
        )

    def _instantiate(self, rank: int, index: int) -> None:
        prog = self.programs[index]
        kernels = self._kernel_ids(index)
        done = [NO_NODE] * len(prog.ops)          # node whose completion completes op i on this rank
        began = [NO_NODE] * len(prog.ops)         # node whose completion marks op i starting (pipelined overlap)
        launched = {a for op in prog.ops if isinstance(op, CollectiveOp) for a in op.alongside}
        last_compute = NO_NODE
        last_on_stream: dict[Stream, int] = {}
        member_ends: dict[int, dict[int, int]] = {}  # a representative's part's end -> its peers' (Fold.expands)
        occurrences: dict[tuple, int] = defaultdict(int)
        per_stage = self.layout.num_gpus // self.layout.pp
        for i, op in enumerate(prog.ops):
            if isinstance(op, ComputeOp):
                kernel = kernels[i]
                deps = [last_compute, *(done[w] for w in op.waits), *(began[a] for a in op.alongside)]
                if i in launched:  # a collective starts with this kernel: mark its launch
                    began[i] = self._add(NodeKind.marker, rank, layer=op.layer, microbatch=op.microbatch)
                    self._edges(deps, began[i])
                    deps = [began[i]]
                node = self._add(NodeKind.compute, rank, kernel=kernel, layer=op.layer, microbatch=op.microbatch)
                self._edges(deps, node)
                last_compute = done[i] = node
            elif isinstance(op, CollectiveOp):
                group = self._group(op.axis, rank)
                key = (op.label, op.layer, op.microbatch, op.phase)
                occurrences[key] += 1
                deps = [*(done[w] for w in op.waits), *(began[a] for a in op.alongside)]
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
                node = self._p2p_flow(rank, peer, op.microbatch, op.phase, op.peer_chunk)
                self.cols["size"][node] = op.nbytes
                self._edges([last_on_stream.get(op.stream, NO_NODE), *(done[w] for w in op.waits)], node)
                last_on_stream[op.stream] = done[i] = node
            elif isinstance(op, RecvOp):
                src = rank + (op.peer_stage - prog.stage) * per_stage
                done[i] = self._p2p_flow(src, rank, op.microbatch, op.phase, op.chunk)
                self._edges([done[w] for w in op.waits], done[i])  # a blocking receive: the transfer waits for it

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

    def _kernel_ids(self, index: int) -> list[int]:
        """Each op's kernel index in program `index` (-1 for ops that are not kernels), numbered in order of
        first appearance over the build: a program's ops are hashed once, not once per rank that runs it."""
        if index not in self._kernels:
            table = self.kernel_index
            self._kernels[index] = [table.setdefault(op.kernel, len(table)) if isinstance(op, ComputeOp) else -1
                                    for op in self.programs[index].ops]
        return self._kernels[index]

    def _expands(self, axis: str, rank: int) -> bool:
        """Fold.expands of `rank`'s group of `axis`, asked once per rank and axis."""
        key = (axis, rank)
        if key not in self._spread:
            self._spread[key] = self.fold.expands(self._group(axis, rank), self.plan.topology)
        return self._spread[key]

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
        rep = self.fold.rep
        if not every and not any(int(rep[g]) == g for g in group):
            return {}  # a group of folded GPUs only: its representatives' group stands for it
        fold_pos = tuple(range(len(group))) if every else fold_positions(group, rep)
        choice = self.plan.choose(op.ctype, group, op.nbytes, op.algorithm)
        key = (op.ctype, op.nbytes, choice, self.plan.shape(group), fold_pos, self.fold.steady(group))
        if key not in self._templates:
            self._templates[key] = expansion_template(*key)
        t = self._templates[key]
        coll = len(self.collectives)
        self.collectives.append(CollectiveInstance(op.ctype, op.label, group, op.nbytes, op.stream, op.layer,
                                                   op.microbatch, op.phase, choice.algorithm, choice.protocol,
                                                   choice.channels, t.lanes, t.steps))
        base = len(self.cols["kind"])
        members = {}
        for i, p in enumerate(t.simulated):
            members[group[p]] = (base + 2 * i, base + 2 * i + 1)
        marker_gpus = [group[p] for p in t.simulated for _ in (0, 1)]
        flows = len(t.flow_src)
        count = len(marker_gpus) + flows
        stage = self.stage_of[group[t.simulated[0]]]
        c = self.cols
        c["kind"].extend([NodeKind.marker] * len(marker_gpus) + [NodeKind.flow] * flows)
        c["gpu"].extend(marker_gpus + [group[p] for p in t.flow_src])
        c["peer"].extend([-1] * len(marker_gpus) + [group[p] if p >= 0 else p for p in t.flow_dst])
        c["size"].extend([0.0] * len(marker_gpus) + t.flow_size)
        c["parent"].extend([NO_NODE] * len(marker_gpus)
                           + np.where(t.flow_parent != NO_NODE, t.flow_parent + base, NO_NODE).tolist())
        for name, value in (("stream", op.stream), ("kernel", -1), ("layer", op.layer),
                            ("microbatch", op.microbatch), ("stage", stage), ("coll", coll)):
            c[name].extend([value] * count)
        self.edge_src.extend((t.edge_src + base).tolist())
        self.edge_dst.extend((t.edge_dst + base).tolist())
        self.stream_src.extend((t.stream_src + base).tolist())
        self.stream_dst.extend((t.stream_dst + base).tolist())
        return members


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
