"""Instantiate per-stage programs on every simulated rank and expand collectives into flows.

Each collective instance (one group, one call) is decomposed once, not once per member: every member
gets a start marker (it has reached the call on its stream) and an end marker (its part is done), and
the flows between them carry the algorithm's step-by-step dependencies.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
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
from ..workload.program import CollectiveOp, ComputeOp, RecvOp, SendOp, StageProgram, Stream
from .fold import Fold
from .nodes import CollectiveInstance, ExecutionDAG, NodeKind

if TYPE_CHECKING:
    from ..collective.tuner import Choice, CollectivePlan


@dataclass(frozen=True)
class _ExpansionTemplate:
    """One collective's markers, flows and edges relative to a base node id and group positions.

    Local node ids: members' (start, end) markers first, two per simulated position, then the kept flows.
    Every group of the same shape, size, algorithm and fold pattern reuses it.
    """

    simulated: tuple[int, ...]          # positions that get markers
    lanes: int                          # channels each simulated channel stands for
    flow_src: list[int]                 # position of the flow's GPU (its sender, or the receiver of a switch leg)
    flow_dst: list[int]                 # position of its receiver, or a switch endpoint code
    flow_size: list[float]
    flow_parent: list[int]              # local node id of its first parent, or -1
    edge_src: list[int]                 # local node ids
    edge_dst: list[int]
    stream_src: list[int]               # from a flow to its sender's next one (released at its last byte)
    stream_dst: list[int]


def _last_steps(pos: np.ndarray, flows: FlowSet, n: int) -> np.ndarray:
    """Flows with the latest step among those of the same member (pos) and channel: when they arrive, the
    member's part of that channel is done."""
    valid = pos >= 0
    key = np.where(valid, flows.channel * n + pos, -1)
    latest = np.full(int(flows.channel.max(initial=0) + 1) * n, -1, dtype=np.int64)
    np.maximum.at(latest, key[valid], flows.step[valid])
    return valid & (flows.step == latest[np.maximum(key, 0)])


@cache
def _template(ctype: CollType, size: float, choice: Choice, shape: GroupShape,
              fold_pos: tuple[int, ...]) -> _ExpansionTemplate:
    n = shape.n
    flows = flow_set(ctype, tuple(range(n)), size, choice.channels, choice.algorithm, choice.protocol, shape)
    fold = np.asarray(fold_pos)
    folded = bool((fold != np.arange(n)).any())
    shift = (np.arange(n) - fold) % max(n, 1)
    if folded and (flows.symmetry is None or (shift % flows.symmetry).any()):
        raise RuntimeError(f"{choice.algorithm} does not repeat as the fold needs: its members cannot be folded")
    simulated = tuple(p for p in range(n) if fold[p] == p)
    marker = np.full(n, -1, dtype=np.int64)
    marker[list(simulated)] = 2 * np.arange(len(simulated))  # start; end is +1
    first = 2 * len(simulated)
    starts = marker[list(simulated)]
    edge_src, edge_dst = [starts], [starts + 1]   # a member's part ends no earlier than it starts
    owner, _ = endpoints(flows.src_pos, flows.dst_pos, flows.switch)
    kept = np.flatnonzero(fold[owner] == owner) if len(flows) else np.zeros(0, dtype=np.int64)
    if folded:
        # a flow stands for every flow with the same step, channel and tag owned by a member of its owner's
        # class: map any flow to the kept one owned by its owner's representative
        tags = int(flows.tag.max(initial=0)) + 1
        channels = int(flows.channel.max(initial=0)) + 1
        code = ((flows.step * channels + flows.channel) * tags + flows.tag) * n
        kept_code = code[kept] + owner[kept]
        order = np.argsort(kept_code, kind="stable")
        sorted_code = kept_code[order]

        def equivalent(f: np.ndarray) -> np.ndarray:
            return first + order[np.searchsorted(sorted_code, code[f] + fold[owner[f]])]
    else:
        def equivalent(f: np.ndarray) -> np.ndarray:
            return first + f

    nodes = first + np.arange(len(kept))
    parent_of, parent_idx = flows.parent_of, flows.parent_idx
    has_parent = np.diff(flows.parent_ptr)[kept] > 0
    link_kept = np.isin(parent_of, kept) if folded else np.ones(len(parent_of), dtype=bool)
    child_node = (first + np.searchsorted(kept, parent_of[link_kept])) if folded else first + parent_of
    streamed = flows.streamed[link_kept]
    stream_src, stream_dst = equivalent(parent_idx[link_kept][streamed]), child_node[streamed]
    edge_src.append(equivalent(parent_idx[link_kept][~streamed]))
    edge_dst.append(child_node[~streamed])
    # a chain starts when its members have joined the collective: its sender, and its receiver for a
    # point-to-point flow (a switch leg waits for its GPU only)
    heads = kept[~has_parent]
    edge_src.append(marker[owner[heads]])
    edge_dst.append(nodes[~has_parent])
    p2p_heads = heads[(flows.src_pos[heads] >= 0) & (flows.dst_pos[heads] >= 0)]
    edge_src.append(marker[fold[flows.dst_pos[p2p_heads]]])
    edge_dst.append(first + np.searchsorted(kept, p2p_heads))
    # a member is done when the last flows it sends and receives (per channel) have arrived
    sent = kept[_last_steps(flows.src_pos, flows, n)[kept]]
    edge_src.append(equivalent(sent))
    edge_dst.append(marker[flows.src_pos[sent]] + 1)
    received = np.flatnonzero(_last_steps(flows.dst_pos, flows, n) & (fold[np.maximum(flows.dst_pos, 0)]
                                                                      == flows.dst_pos))
    edge_src.append(equivalent(received))
    edge_dst.append(marker[flows.dst_pos[received]] + 1)
    first_parent = np.full(len(flows), -1, dtype=np.int64)
    with_parent = np.flatnonzero(np.diff(flows.parent_ptr) > 0)
    first_parent[with_parent] = equivalent(parent_idx[flows.parent_ptr[with_parent]])
    _, dst = endpoints(flows.src_pos, flows.dst_pos, flows.switch)
    return _ExpansionTemplate(simulated, flows.lanes, owner[kept].tolist(), dst[kept].tolist(),
                              flows.size[kept].tolist(), first_parent[kept].tolist(),
                              np.concatenate(edge_src).tolist(), np.concatenate(edge_dst).tolist(),
                              stream_src.tolist(), stream_dst.tolist())


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

    # ---- node and edge primitives ----

    def _add(self, kind: NodeKind, gpu: int, peer: int = -1, stream: int = 0, kernel: int = -1, layer: int = -1,
             microbatch: int = -1, coll: int = -1, size: float = 0.0, parent: int = -1) -> int:
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
            if s >= 0:
                self.edge_src.append(s)
                self.edge_dst.append(target)

    # ---- programs ----

    def build(self) -> ExecutionDAG:
        for rank in map(int, np.flatnonzero(self.fold.multiplicity)):
            self._instantiate(rank, self.programs[self.layout.stage_of(rank)])
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

    def _instantiate(self, rank: int, prog: StageProgram) -> None:
        done = [-1] * len(prog.ops)          # node whose completion completes op i on this rank
        began = [-1] * len(prog.ops)         # node whose completion marks op i starting (pipelined overlap)
        launched = {a for op in prog.ops if isinstance(op, CollectiveOp) for a in op.alongside}
        last_compute = -1
        last_on_stream: dict[Stream, int] = {}
        occurrences: dict[tuple, int] = defaultdict(int)
        per_stage = self.layout.num_gpus // self.layout.pp
        for i, op in enumerate(prog.ops):
            if isinstance(op, ComputeOp):
                kernel = self.kernel_index.setdefault(op.kernel, len(self.kernel_index))
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
                members = self._instance((*key, occurrences[key], group), op, group)
                start, end = members[rank]
                self._edges([last_on_stream.get(op.stream, -1), *(done[w] for w in op.waits),
                             *(began[a] for a in op.alongside)], start)
                began[i] = start
                last_on_stream[op.stream] = done[i] = end
            elif isinstance(op, SendOp):
                peer = rank + (op.peer_stage - prog.stage) * per_stage
                node = self._p2p_flow(rank, peer, op.microbatch, op.phase, op.peer_chunk)
                self.cols["size"][node] = op.nbytes
                self._edges([last_on_stream.get(op.stream, -1), *(done[w] for w in op.waits)], node)
                last_on_stream[op.stream] = done[i] = node
            elif isinstance(op, RecvOp):
                src = rank + (op.peer_stage - prog.stage) * per_stage
                done[i] = self._p2p_flow(src, rank, op.microbatch, op.phase, op.chunk)

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

    def _instance(self, key: tuple, op: CollectiveOp, group: tuple[int, ...]) -> dict[int, tuple[int, int]]:
        if key not in self.instances:
            self.instances[key] = self._expand(op, group)
        return self.instances[key]

    def _expand(self, op: CollectiveOp, group: tuple[int, ...]) -> dict[int, tuple[int, int]]:
        """Markers for the simulated members and flows for the simulated senders of one collective."""
        rep = self.fold.rep
        position = {g: p for p, g in enumerate(group)}
        if not any(int(rep[g]) == g for g in group):
            return {}  # a group of folded GPUs only: its representatives' group stands for it
        fold_pos = tuple(position[int(rep[g])] for g in group)
        choice = self.plan.choose(op.ctype, group, op.nbytes)
        t = _template(op.ctype, op.nbytes, choice, self.plan.shape(group), fold_pos)
        coll = len(self.collectives)
        self.collectives.append(CollectiveInstance(op.ctype, op.label, group, op.nbytes, op.stream, op.layer,
                                                   op.microbatch, op.phase, choice.algorithm, choice.protocol,
                                                   choice.channels, t.lanes))
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
        c["parent"].extend([-1] * len(marker_gpus) + [base + x if x >= 0 else -1 for x in t.flow_parent])
        for name, value in (("stream", op.stream), ("kernel", -1), ("layer", op.layer),
                            ("microbatch", op.microbatch), ("stage", stage), ("coll", coll)):
            c[name].extend([value] * count)
        self.edge_src.extend([base + x for x in t.edge_src])
        self.edge_dst.extend([base + x for x in t.edge_dst])
        self.stream_src.extend([base + x for x in t.stream_src])
        self.stream_dst.extend([base + x for x in t.stream_dst])
        return members


def collective_dag(ctype: CollType, groups: list[tuple[int, ...]], size: float, num_gpus: int,
                   plan: CollectivePlan, fold: Fold | None = None) -> ExecutionDAG:
    """A DAG of one collective on each of `groups` (disjoint, running at once) on a cluster of `num_gpus`,
    every member starting at 0."""
    layout = RankLayout(tp=1, cp=1, dp=num_gpus, pp=1)
    builder = DAGBuilder([], layout, fold or Fold.identity(num_gpus), plan)
    op = CollectiveOp(ctype, "collective", size, Stream.dp_comm, ctype.name, -1, -1, Phase.fwd)
    for i, group in enumerate(groups):
        builder._instance((ctype.name, i), op, tuple(group))
    return builder.finish()
