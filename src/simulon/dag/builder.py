"""Instantiate per-stage programs on every simulated rank and expand collectives into flows.

Each collective instance (one group, one call) is decomposed once, not once per member: every member
gets a start marker (it has reached the call on its stream) and an end marker (its part is done), and
the flows between them carry the algorithm's step-by-step dependencies.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cache

import numpy as np

from ..collective.decompose import flow_set
from ..workload.kernels import KernelSpec, Phase
from ..workload.layout import RankLayout
from ..workload.program import CollectiveOp, CollType, ComputeOp, RecvOp, SendOp, StageProgram, Stream
from .fold import Fold
from .nodes import CollectiveInstance, ExecutionDAG, NodeKind


@dataclass(frozen=True)
class _ExpansionTemplate:
    """One collective's markers, flows and edges relative to a base node id and group positions.

    Local node ids: members' (start, end) markers first, two per simulated position, then the kept flows.
    Every group of the same shape, size and fold pattern reuses it.
    """

    simulated: tuple[int, ...]          # positions that get markers
    flow_src: list[int]                 # positions
    flow_dst: list[int]
    flow_size: list[float]
    flow_parent: list[int]              # local node id, or -1
    edge_src: list[int]                 # local node ids
    edge_dst: list[int]


@cache
def _template(ctype: CollType, n: int, size: float, channels: int, algorithm: str,
              fold_pos: tuple[int, ...]) -> _ExpansionTemplate:
    flows = flow_set(ctype, tuple(range(n)), size, channels, algorithm)
    fold = np.asarray(fold_pos)
    simulated = tuple(p for p in range(n) if fold[p] == p)
    marker = {p: 2 * i for i, p in enumerate(simulated)}  # start; end is +1
    first = 2 * len(simulated)
    if len(flows) == 0:
        ends = [marker[p] + 1 for p in simulated]
        return _ExpansionTemplate(simulated, [], [], [], [], [marker[p] for p in simulated], ends)
    # a flow stands for every flow with the same step, channel and ring offset sent by a member of its
    # sender's class: map any flow to the kept one sent by its sender's representative
    offset = (flows.dst_pos - flows.src_pos) % n
    code = ((flows.step * channels + flows.channel) * n + offset) * n
    kept = np.flatnonzero(fold[flows.src_pos] == flows.src_pos)
    kept_code = code[kept] + flows.src_pos[kept]
    order = np.argsort(kept_code, kind="stable")
    sorted_code = kept_code[order]

    def equivalent(f: np.ndarray) -> np.ndarray:
        return first + order[np.searchsorted(sorted_code, code[f] + fold[flows.src_pos[f]])]

    nodes = first + np.arange(len(kept))
    parent = np.where(flows.parent[kept] >= 0, equivalent(np.maximum(flows.parent[kept], 0)), -1)
    has_parent = parent >= 0
    edge_src = [parent[has_parent]]
    edge_dst = [nodes[has_parent]]
    # a chain starts when its sender and its receiver have both joined the collective
    for positions in (flows.src_pos[kept], fold[flows.dst_pos[kept]]):
        edge_src.append(np.array([marker[p] for p in positions[~has_parent]], dtype=np.int64))
        edge_dst.append(nodes[~has_parent])
    # a member is done when the last flows it sends and receives have arrived
    terminal = np.ones(len(flows), dtype=bool)
    terminal[flows.parent[flows.parent >= 0]] = False
    sent = kept[terminal[kept]]
    edge_src.append(equivalent(sent))
    edge_dst.append(np.array([marker[p] + 1 for p in flows.src_pos[sent]], dtype=np.int64))
    received = np.flatnonzero(terminal & (fold[flows.dst_pos] == flows.dst_pos))
    edge_src.append(equivalent(received))
    edge_dst.append(np.array([marker[p] + 1 for p in flows.dst_pos[received]], dtype=np.int64))
    return _ExpansionTemplate(simulated, flows.src_pos[kept].tolist(), flows.dst_pos[kept].tolist(),
                              flows.size[kept].tolist(), parent.tolist(),
                              np.concatenate(edge_src).tolist(), np.concatenate(edge_dst).tolist())


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
        self.stage_of = layout.coords[:, 3].tolist()

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
        coll = len(self.collectives)
        self.collectives.append(CollectiveInstance(op.ctype, op.label, group, op.nbytes, op.stream, op.layer,
                                                   op.microbatch, op.phase))
        rep = self.fold.rep
        fold_pos = tuple(group.index(int(rep[g])) for g in group)
        t = _template(op.ctype, len(group), op.nbytes, self.channels, self.algorithm, fold_pos)
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
        c["peer"].extend([-1] * len(marker_gpus) + [group[p] for p in t.flow_dst])
        c["size"].extend([0.0] * len(marker_gpus) + t.flow_size)
        c["parent"].extend([-1] * len(marker_gpus) + [base + x if x >= 0 else -1 for x in t.flow_parent])
        for name, value in (("stream", op.stream), ("kernel", -1), ("layer", op.layer),
                            ("microbatch", op.microbatch), ("stage", stage), ("coll", coll)):
            c[name].extend([value] * count)
        self.edge_src.extend([base + x for x in t.edge_src])
        self.edge_dst.extend([base + x for x in t.edge_dst])
        return members

def collective_dag(ctype: CollType, group: tuple[int, ...], size: float, num_gpus: int, algorithm: str = "ring",
                   channels: int = 1) -> ExecutionDAG:
    """A DAG holding one collective over `group` on a cluster of `num_gpus`, every member starting at 0."""
    layout = RankLayout(tp=1, cp=1, dp=num_gpus, pp=1)
    builder = DAGBuilder([], layout, Fold.identity(num_gpus), algorithm, channels)
    op = CollectiveOp(ctype, "collective", size, Stream.dp_comm, ctype.name, -1, -1, Phase.fwd)
    builder._instance((ctype.name,), op, tuple(group))
    return builder.finish()
