"""Instantiate per-stage programs on every simulated rank and expand collectives into flows.

Each collective instance (one group, one call) is decomposed once, not once per member: every member
gets a start marker (it has reached the call on its stream) and an end marker (its part is done), and
the flows between them carry the algorithm's step-by-step dependencies.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cache

import numpy as np

from ..collective.common import FlowSet
from ..collective.decompose import flow_set
from ..workload.kernels import KernelSpec, Phase
from ..workload.layout import RankLayout
from ..workload.program import CollectiveOp, CollType, ComputeOp, RecvOp, SendOp, StageProgram, Stream
from .fold import Fold
from .nodes import CollectiveInstance, ExecutionDAG, NodeKind


@cache
def _position_flows(ctype, n: int, size: float, channels: int, algorithm: str) -> FlowSet:
    """Flows over positions 0..n-1; shared by every group of the same shape."""
    return flow_set(ctype, tuple(range(n)), size, channels, algorithm)


class DAGBuilder:
    def __init__(self, programs: list[StageProgram], layout: RankLayout, fold: Fold,
                 algorithm: str = "ring", channels: int = 1):
        self.programs, self.layout, self.fold = programs, layout, fold
        self.algorithm, self.channels = algorithm, channels
        self.cols: dict[str, list] = {name: [] for name in (
            "kind", "gpu", "peer", "stream", "kernel", "layer", "microbatch", "stage", "coll", "size", "parent")}
        self.edge_src: list[int] = []
        self.edge_dst: list[int] = []
        self.kernel_index: dict[KernelSpec, int] = {}
        self.collectives: list[CollectiveInstance] = []
        self.instances: dict[tuple, dict[int, tuple[int, int]]] = {}
        self.p2p: dict[tuple[int, int, int, int], int] = {}

    # ---- node and edge primitives ----

    def _add(self, kind: NodeKind, gpu: int, peer: int = -1, stream: int = 0, kernel: int = -1, layer: int = -1,
             microbatch: int = -1, coll: int = -1, size: float = 0.0, parent: int = -1) -> int:
        c = self.cols
        node = len(c["kind"])
        for name, value in (("kind", kind), ("gpu", gpu), ("peer", peer), ("stream", stream), ("kernel", kernel),
                            ("layer", layer), ("microbatch", microbatch), ("coll", coll), ("size", size),
                            ("parent", parent), ("stage", self.layout.stage_of(gpu))):
            c[name].append(value)
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
            kernel_specs=order, collectives=self.collectives, num_gpus=self.layout.num_gpus,
            multiplicity=self.fold.multiplicity,
        )

    def _instantiate(self, rank: int, prog: StageProgram) -> None:
        done = [-1] * len(prog.ops)          # node whose completion completes op i on this rank
        last_compute = -1
        last_on_stream: dict[Stream, int] = {}
        occurrences: dict[tuple, int] = defaultdict(int)
        per_stage = self.layout.num_gpus // self.layout.pp
        for i, op in enumerate(prog.ops):
            if isinstance(op, ComputeOp):
                kernel = self.kernel_index.setdefault(op.kernel, len(self.kernel_index))
                node = self._add(NodeKind.compute, rank, kernel=kernel, layer=op.layer, microbatch=op.microbatch)
                self._edges([last_compute, *(done[w] for w in op.waits)], node)
                last_compute = done[i] = node
            elif isinstance(op, CollectiveOp):
                group = self.layout.group(op.axis, rank)
                key = (op.label, op.layer, op.microbatch, op.phase)
                occurrences[key] += 1
                members = self._instance((*key, occurrences[key], group), op, group)
                start, end = members[rank]
                self._edges([last_on_stream.get(op.stream, -1), *(done[w] for w in op.waits)], start)
                last_on_stream[op.stream] = done[i] = end
            elif isinstance(op, SendOp):
                peer = rank + op.offset * per_stage
                node = self._p2p_flow(rank, peer, op.microbatch, op.phase)
                self.cols["size"][node] = op.nbytes
                self._edges([last_on_stream.get(op.stream, -1), *(done[w] for w in op.waits)], node)
                last_on_stream[op.stream] = done[i] = node
            elif isinstance(op, RecvOp):
                done[i] = self._p2p_flow(rank + op.offset * per_stage, rank, op.microbatch, op.phase)

    def _p2p_flow(self, src: int, dst: int, microbatch: int, phase: int) -> int:
        """The flow of one pipeline send; created by whichever side is instantiated first."""
        key = (src, dst, microbatch, int(phase))
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
        n = len(group)
        coll = len(self.collectives)
        self.collectives.append(CollectiveInstance(op.ctype, op.label, group, op.nbytes, op.stream, op.layer,
                                                   op.microbatch, op.phase))
        rep = self.fold.rep
        fold_pos = np.array([group.index(int(rep[g])) for g in group])
        simulated = [p for p in range(n) if fold_pos[p] == p]
        members = {}
        for p in simulated:
            start = self._add(NodeKind.marker, group[p], stream=op.stream, layer=op.layer,
                              microbatch=op.microbatch, coll=coll)
            end = self._add(NodeKind.marker, group[p], stream=op.stream, layer=op.layer,
                            microbatch=op.microbatch, coll=coll)
            members[group[p]] = (start, end)
        flows = _position_flows(op.ctype, n, op.nbytes, self.channels, self.algorithm)
        if len(flows) == 0:
            for start, end in members.values():
                self._edges([start], end)
            return members

        # flows sent by simulated members stand for their class; any flow maps to the kept flow with the same
        # step, channel and ring offset sent by its sender's representative
        offset = (flows.dst_pos - flows.src_pos) % n
        code = ((flows.step * self.channels + flows.channel) * n + offset) * n
        kept = np.flatnonzero(fold_pos[flows.src_pos] == flows.src_pos)
        kept_code = code[kept] + flows.src_pos[kept]
        order = np.argsort(kept_code, kind="stable")
        first = len(self.cols["kind"])
        equivalent = lambda f: first + order[np.searchsorted(kept_code[order], code[f] + fold_pos[flows.src_pos[f]])]  # noqa: E731

        parent_node = np.where(flows.parent[kept] >= 0, equivalent(np.maximum(flows.parent[kept], 0)), -1)
        src, dst = np.asarray(group)[flows.src_pos[kept]], np.asarray(group)[flows.dst_pos[kept]]
        c = self.cols
        count = len(kept)
        stage = self.layout.stage_of(int(src[0]))
        for name, values in (("kind", [NodeKind.flow] * count), ("gpu", src.tolist()), ("peer", dst.tolist()),
                             ("stream", [op.stream] * count), ("kernel", [-1] * count),
                             ("layer", [op.layer] * count), ("microbatch", [op.microbatch] * count),
                             ("stage", [stage] * count), ("coll", [coll] * count),
                             ("size", flows.size[kept].tolist()), ("parent", parent_node.tolist())):
            c[name].extend(values)
        nodes = np.arange(first, first + count)
        has_parent = parent_node >= 0
        self.edge_src.extend(parent_node[has_parent].tolist())
        self.edge_dst.extend(nodes[has_parent].tolist())
        # a chain starts when both its sender and its receiver have joined the collective
        for p_col in (flows.src_pos[kept], fold_pos[flows.dst_pos[kept]]):
            starts = np.array([members[group[p]][0] for p in p_col])
            self.edge_src.extend(starts[~has_parent].tolist())
            self.edge_dst.extend(nodes[~has_parent].tolist())
        # a member is done when the last flows it sends and receives have arrived
        terminal = np.ones(len(flows), dtype=bool)
        terminal[flows.parent[flows.parent >= 0]] = False
        sent = kept[terminal[kept]]
        self.edge_src.extend(equivalent(sent).tolist())
        self.edge_dst.extend(members[group[p]][1] for p in flows.src_pos[sent])
        received = np.flatnonzero(terminal & (fold_pos[flows.dst_pos] == flows.dst_pos))
        self.edge_src.extend(equivalent(received).tolist())
        self.edge_dst.extend(members[group[p]][1] for p in flows.dst_pos[received])
        return members


def collective_dag(ctype: CollType, group: tuple[int, ...], size: float, num_gpus: int, algorithm: str = "ring",
                   channels: int = 1) -> ExecutionDAG:
    """A DAG holding one collective over `group` on a cluster of `num_gpus`, every member starting at 0."""
    layout = RankLayout(tp=1, cp=1, dp=num_gpus, pp=1)
    builder = DAGBuilder([], layout, Fold.identity(num_gpus), algorithm, channels)
    op = CollectiveOp(ctype, "collective", size, Stream.dp_comm, ctype.name, -1, -1, Phase.fwd)
    builder._instance((ctype.name,), op, tuple(group))
    return builder.finish()
