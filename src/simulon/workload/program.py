"""The per-stage program: the ordered operations every rank of one pipeline stage runs.

All ranks of a stage run the same program; only their process groups differ. The DAG builder
instantiates it per rank and turns collectives into flows. Where data-parallel replicas run different
numbers of micro-batches (training.dp_shares), a stage has one program per count, each naming its
replicas (`program_of_rank`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from ..collective.types import CollType
from .kernels import KernelSpec, Phase
from .layout import RankLayout

EMBEDDING_LAYER, HEAD_LAYER, OPTIMIZER_LAYER = -1, -2, -3
"""`layer` of operations outside the transformer layers."""

NO_OP = -1
"""Index of no operation: what a builder method returns when it appends nothing (a collective over a group
of one, a frozen weight gradient), and a wait or `alongside` entry that waits for nothing. StageProgram drops
it from `waits` and `alongside`, so the ops it holds name real operations only."""


def _real(indices: tuple[int, ...]) -> tuple[int, ...]:
    """The indices that name an operation (NO_OP dropped)."""
    return tuple(i for i in indices if i != NO_OP)


class Stream(IntEnum):
    """A GPU's CUDA streams; operations on one stream run in order."""

    compute = 0
    tp_comm = 1
    pp_comm = 2
    dp_comm = 3
    ep_comm = 4
    cp_comm = 5
    param_comm = 6  # FSDP / distributed-optimizer parameter all-gathers


@dataclass(frozen=True, slots=True)
class ComputeOp:
    kernel: KernelSpec
    layer: int          # -1: embedding, -2: LM head and loss, -3: optimizer
    microbatch: int     # -1: once per iteration
    waits: tuple[int, ...] = ()  # earlier ops of this program that must complete first
    alongside: tuple[int, ...] = ()  # collectives it runs together with: it waits for their start only

    stream = Stream.compute


@dataclass(frozen=True, slots=True)
class CollectiveOp:
    """A collective over the process group `axis`; nbytes is the nccl-tests buffer size."""

    ctype: CollType
    axis: str
    nbytes: float
    stream: Stream
    label: str
    layer: int
    microbatch: int
    phase: Phase
    waits: tuple[int, ...] = ()
    alongside: tuple[int, ...] = ()  # kernels it runs together with (pipelined overlap): waits for their start
    algorithm: str = ""  # the collective algorithm the framework runs it with ("": the scenario's; DeepEP's)


@dataclass(frozen=True)
class SendOp:
    """Point-to-point send to the same position in pipeline stage `peer_stage`, for its model chunk
    `peer_chunk`."""

    peer_stage: int
    peer_chunk: int
    nbytes: float
    microbatch: int
    phase: Phase
    waits: tuple[int, ...] = ()

    stream = Stream.pp_comm


@dataclass(frozen=True)
class RecvOp:
    """Receive, for model chunk `chunk`, from stage `peer_stage`; completes when the matching SendOp's
    flow arrives. With `waits`, a blocking receive (a rendezvous): the flow starts only once the receiver's
    ops `waits` have completed too, not as soon as the sender is ready."""

    peer_stage: int
    chunk: int
    microbatch: int
    phase: Phase
    waits: tuple[int, ...] = ()

    stream = Stream.pp_comm


Op = ComputeOp | CollectiveOp | SendOp | RecvOp


@dataclass
class StageProgram:
    """Builder and container: appending an op returns its index, used in later `waits`.

    Collectives and sends wait for the last compute op before them (the data they carry).
    """

    stage: int
    ops: list[Op] = field(default_factory=list)
    _last_compute: int = NO_OP
    replicas: tuple[int, ...] | None = None  # the data-parallel replicas running it (None: every one)

    @property
    def producer(self) -> int:
        """The last compute op, which the next collective or send carries the output of."""
        return self._last_compute

    @producer.setter
    def producer(self, index: int) -> None:
        """Where two chains of ops interleave (a combined forward and backward), each carries its own producer."""
        self._last_compute = index

    def _append(self, op: Op) -> int:
        self.ops.append(op)
        return len(self.ops) - 1

    def compute(self, kernel: KernelSpec, layer: int, microbatch: int, waits: tuple[int, ...] = (),
                alongside: tuple[int, ...] = ()) -> int:
        idx = self._append(ComputeOp(kernel, layer, microbatch, _real(waits), _real(alongside)))
        self._last_compute = idx
        return idx

    def collective(self, ctype: CollType, axis: str, nbytes: float, stream: Stream, label: str,
                   layer: int, microbatch: int, phase: Phase, waits: tuple[int, ...] = (),
                   alongside: tuple[int, ...] = (), algorithm: str = "") -> int:
        """A collective carrying the last kernel's output, or, pipelined `alongside` kernels, starting
        with them."""
        producer = self._last_compute if self._last_compute not in alongside else NO_OP
        return self._append(CollectiveOp(ctype, axis, nbytes, stream, label, layer, microbatch, phase,
                                         _real((producer, *waits)), _real(alongside), algorithm))

    def send(self, peer_stage: int, peer_chunk: int, nbytes: float, microbatch: int, phase: Phase,
             waits: tuple[int, ...] = ()) -> int:
        """A send of the last kernel's output, once `waits` have completed too."""
        return self._append(SendOp(peer_stage, peer_chunk, nbytes, microbatch, phase,
                                   _real((self._last_compute, *waits))))

    def recv(self, peer_stage: int, chunk: int, microbatch: int, phase: Phase, waits: tuple[int, ...] = ()) -> int:
        """A receive; with `waits`, blocking: its flow starts once they (and the last kernel) have completed."""
        return self._append(RecvOp(peer_stage, chunk, microbatch, phase,
                                   _real((self._last_compute, *waits)) if waits else ()))


def program_of_rank(programs: list[StageProgram], layout: RankLayout) -> np.ndarray:
    """For every rank, the index in `programs` of the program it runs: its stage's, or the one of its stage naming
    its data-parallel replica."""
    index = np.full(layout.num_gpus, -1, dtype=np.int64)
    replica, stage = layout.coords[:, 2], layout.coords[:, 3]
    for i, prog in enumerate(programs):
        runs = stage == prog.stage
        if prog.replicas is not None:
            runs &= np.isin(replica, prog.replicas)
        index[runs] = i
    return index
