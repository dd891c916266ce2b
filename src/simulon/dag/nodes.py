"""ExecutionDAG: compute kernels, P2P flows and markers of one iteration, stored column-wise.

One numpy array per field instead of one Python object per node, so that tens of millions of nodes
fit in a few GB. `compute_nodes`, `comm_nodes` and `edges` give the seed's record views on demand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Generic, TypeVar

import numpy as np

from ..collective.types import CollType
from ..workload.kernels import KernelSpec, Phase
from ..workload.program import Stream


class NodeKind(IntEnum):
    compute = 0
    flow = 1
    marker = 2  # zero-time: a rank joins (start) or leaves (end) a collective


NO_NODE = -1
"""An empty node id: a flow without a parent flow, an operation without a node that completes it yet."""
PIPELINE_SEND = "PP_Send"
"""What a flow outside every collective (a pipeline-parallel send) is called in records and traces."""


def ranges(begin: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The concatenation of arange(b, e) over pairs, vectorised (the node ids of consecutive blocks, a CSR's
    entries of several rows)."""
    lengths = end - begin
    offsets = np.repeat(begin - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return offsets + np.arange(int(lengths.sum()))


@dataclass(frozen=True)
class ComputeNode:
    node_id: int
    gpu_rank: int
    kernel: str
    layer_id: int
    microbatch_id: int
    pipeline_stage: int
    phase: str
    flops: float
    duration_ms: float


@dataclass(frozen=True)
class CommNode:
    node_id: int
    src_gpu: int
    dst_gpu: int
    bytes: float
    collective_type: str
    flow_id: int
    parent_flow_ids: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class DAGEdge:
    src_node_id: int
    dst_node_id: int


@dataclass(frozen=True)
class CollectiveInstance:
    """One collective over one group, for labels and per-rank spans, and how it runs (the protocol sets
    how its flows use the links)."""

    ctype: CollType
    label: str
    group: tuple[int, ...]
    nbytes: float
    stream: Stream
    layer: int
    microbatch: int
    phase: Phase
    algorithm: str = "ring"
    protocol: str = "simple"
    channels: int = 1
    lanes: int = 1  # channels each simulated channel stands for
    steps: int = 1  # ring steps each of its flows carries in a row (in steady state, dag.fold.Fold.steady_rings)


@dataclass(frozen=True)
class PipelineSends:
    """How each pipeline-parallel send (a flow outside every collective) runs: as NCCL's send/receive between its
    two GPUs (Megatron's p2p_communication calls torch.distributed's batch_isend_irecv, NCCL's ncclSend and
    ncclRecv), its protocol, channels and launch those of the send/receive collective (CollType.SendRecv, a ring
    shift) of its bytes over the pair, whose one flow out of the sender it is, its channels as NCCL sets them on the
    pipeline-parallel group's communicator (collective.tuner.CollectivePlan.choose's `communicator`)."""

    nodes: np.ndarray                # int64 flow node ids, ascending
    run: np.ndarray                  # int64 index into `runs`, per node
    runs: list[CollectiveInstance]   # a SendRecv over (sender, receiver) of the send's bytes

    @classmethod
    def empty(cls) -> PipelineSends:
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), [])


T = TypeVar("T")


class _RecordView(Sequence[T], Generic[T]):
    """A lazy list of records over selected node ids."""

    def __init__(self, ids: np.ndarray, make):
        self._ids, self._make = ids, make

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self._make(int(n)) for n in self._ids[i]]
        return self._make(int(self._ids[i]))


@dataclass
class ExecutionDAG:
    """Columns of equal length N (nodes) and E (edges); flows' `coll` indexes `collectives`.

    `multiplicity[g]` is how many GPUs simulated GPU g stands for (1 in a full expansion; the size of
    its equivalence class when symmetric data- or tensor-parallel peers are folded onto one).
    """

    kind: np.ndarray        # uint8 NodeKind
    gpu: np.ndarray         # int32: the rank running a kernel or marker, or a flow's source
    peer: np.ndarray        # int32: a flow's destination, else -1
    stream: np.ndarray      # uint8 Stream
    kernel: np.ndarray      # int32 index into kernel_specs, else -1
    layer: np.ndarray       # int32
    microbatch: np.ndarray  # int32
    stage: np.ndarray       # int16
    coll: np.ndarray        # int32 index into collectives (flows and markers), else -1
    size: np.ndarray        # float64 bytes of a flow
    parent: np.ndarray      # int64 node id of a flow's parent flow, else -1
    edge_src: np.ndarray    # int64
    edge_dst: np.ndarray    # int64
    kernel_specs: list[KernelSpec]
    collectives: list[CollectiveInstance]
    num_gpus: int
    multiplicity: np.ndarray
    duration: np.ndarray | None = None  # seconds, filled by compute.populate
    stream_src: np.ndarray | None = None  # edges from a flow to its sender's next flow: released once the
    stream_dst: np.ndarray | None = None  # first flow's last byte has left (a pipeline's next chunk)
    sends: PipelineSends = field(default_factory=PipelineSends.empty)  # how the pipeline sends run

    @property
    def num_nodes(self) -> int:
        return len(self.kind)

    @property
    def simulated_gpus(self) -> np.ndarray:
        return np.flatnonzero(self.multiplicity)

    @property
    def compute_nodes(self) -> _RecordView[ComputeNode]:
        return _RecordView(np.flatnonzero(self.kind == NodeKind.compute), self._compute_record)

    @property
    def comm_nodes(self) -> _RecordView[CommNode]:
        return _RecordView(np.flatnonzero(self.kind == NodeKind.flow), self._comm_record)

    @property
    def edges(self) -> _RecordView[DAGEdge]:
        return _RecordView(np.arange(len(self.edge_src)),
                           lambda e: DAGEdge(int(self.edge_src[e]), int(self.edge_dst[e])))

    def _compute_record(self, n: int) -> ComputeNode:
        spec = self.kernel_specs[self.kernel[n]]
        duration = float(self.duration[n]) * 1e3 if self.duration is not None else float("nan")
        return ComputeNode(n, int(self.gpu[n]), spec.name, int(self.layer[n]), int(self.microbatch[n]),
                           int(self.stage[n]), spec.phase.name, spec.flops, duration)

    def _comm_record(self, n: int) -> CommNode:
        coll = int(self.coll[n])
        ctype = self.collectives[coll].ctype.name if coll >= 0 else PIPELINE_SEND
        parent = int(self.parent[n])
        return CommNode(n, int(self.gpu[n]), int(self.peer[n]), float(self.size[n]), ctype, n,
                        [parent] if parent >= 0 else [])

    def collective_spans(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) marker node ids of every rank's part in every collective: they come in pairs."""
        markers = np.flatnonzero((self.kind == NodeKind.marker) & (self.coll >= 0))
        return markers[0::2], markers[1::2]

    def kernel_flops(self, hardware: bool = False) -> np.ndarray:
        """FLOPs of every node (0 for flows and markers): model FLOPs, or hardware FLOPs that also count
        the forward kernels re-run by activation recomputation and what kernels execute beside their model FLOPs
        (KernelSpec.hardware_only_flops: the rows a capacity factor pads, a backward scan's recomputation)."""
        table = np.array([k.flops + k.hardware_only_flops if hardware
                          else 0.0 if k.phase == Phase.recompute else k.flops for k in self.kernel_specs] + [0.0])
        return table[self.kernel]  # index -1 picks the trailing 0

    def total_flops(self, hardware: bool = False) -> float:
        """FLOPs of one iteration over every GPU (model FLOPs, or with `hardware` kernel_flops' hardware FLOPs),
        counting each simulated GPU for those it stands for."""
        return float((self.kernel_flops(hardware) * self.multiplicity[self.gpu]).sum())
