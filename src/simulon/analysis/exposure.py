"""Where each GPU's iteration went, finer than result.py's breakdown: compute split into compute-bound and
memory(HBM)-bound kernels, exposed communication split by kind (TP, CP, EP, DP, PP), and idle time (bubble).

A kernel is memory-bound when its arithmetic intensity (hardware FLOPs per byte moved) is below the GPU's ridge
point, peak FLOP/s over HBM bandwidth (the roofline model: Williams, Waterman and Patterson, CACM 52(4), 2009), at the
peak of the format it runs in: in a narrow-format run (fp8, MXFP8, NVFP4) the GEMMs the recipe keeps in bf16 (LM head,
router, the bf16 layers, the Mamba scan's products) and attention run at the 16-bit peak, whose ridge is the
narrow one's half or less (a GB300's bf16 LM head at 1,353 FLOPs a byte is compute-bound under its bf16 ridge, 312, and
was called memory-bound under its NVFP4 ridge, 1,875). On a cluster of several GPU models each kernel is held to its own
GPU's ridge (an H200's, 206, is lower than an H100's, 295: Llama 3 8B's MLP GEMMs at tp 8 and 256 tokens a
micro-batch lie between the two, memory-bound on the H100 and compute-bound on the H200, and the ranks' mean ridge,
243, called them memory-bound on both).
Communication a GPU takes part in is what result.summarize counts (its part in each collective from when the
last member joined, every pipeline flow it sends or receives), labelled by kinds.py; waiting in a collective for
its last member is idle time. Time is split over the pieces between consecutive interval
ends: a piece with a kernel running is compute (memory-bound if only memory-bound kernels run); a piece with
communication and no kernel is exposed communication, shared equally among the kinds running then; a piece with
neither is bubble. So per GPU compute + exposed + bubble = the step time, as in result.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dag.nodes import ExecutionDAG, NodeKind
from ..engine.replay import Timeline
from ..workload.kernels import KernelClass, KernelSpec
from .intervals import idle_length
from .kinds import COMM_KINDS, KIND_NAMES, node_kinds

Ridge = float | np.ndarray
"""A ridge point in hardware FLOPs per byte: one for every GPU, or one per GPU (an array indexed by GPU) where the GPUs
differ."""

MEMORY_BOUND, COMPUTE_BOUND = 0, 1
"""The channels of kernels in the sweep; communication kind k is channel 2 + k."""


@dataclass(frozen=True)
class GPUExposure:
    """One simulated GPU's step (ms): compute_bound + memory_bound + sum(exposed) + bubble = step."""

    gpu: int
    stage: int
    stands_for: int
    compute_bound_ms: float
    memory_bound_ms: float
    exposed_ms: dict[str, float]   # per kind of COMM_KINDS
    bubble_ms: float

    def to_dict(self) -> dict:
        return {"gpu": self.gpu, "stage": self.stage, "stands_for": self.stands_for,
                "compute_bound_ms": self.compute_bound_ms, "memory_bound_ms": self.memory_bound_ms,
                "exposed_ms": dict(self.exposed_ms), "bubble_ms": self.bubble_ms}


def roofline(dag: ExecutionDAG) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel spec: its hardware FLOPs per byte (infinite for a kernel moving no bytes, compute-bound), and
    whether it is one of a narrow-format run's 16-bit kernels (sixteen_bit), which meet the 16-bit ridge."""
    intensity = np.array([k.hw_flops / k.bytes if k.bytes > 0 else np.inf for k in dag.kernel_specs])
    return intensity, np.array([sixteen_bit(k) for k in dag.kernel_specs], dtype=bool)


def memory_bound(dag: ExecutionDAG, ridge_flops_per_byte: float, wide_ridge: float | None = None) -> np.ndarray:
    """Per kernel spec: whether its hardware FLOPs per byte are under the ridge point (a kernel moving no bytes
    is compute-bound): `wide_ridge` for the 16-bit kernels of a narrow-format run (sixteen_bit), where given."""
    intensity, wide = roofline(dag)
    return intensity < (ridge_flops_per_byte if wide_ridge is None
                        else np.where(wide, wide_ridge, ridge_flops_per_byte))


def memory_bound_nodes(dag: ExecutionDAG, nodes: np.ndarray, ridge_flops_per_byte: Ridge,
                       wide_ridge: Ridge | None = None) -> np.ndarray:
    """Per compute node of `nodes`: whether its kernel is memory-bound on its own GPU (memory_bound, with the ridge
    points one for every GPU or per GPU: Ridge)."""
    gpu = dag.gpu[nodes]
    intensity, wide = (per_spec[dag.kernel[nodes]] for per_spec in roofline(dag))
    ridge = _on(ridge_flops_per_byte, gpu)
    return intensity < (ridge if wide_ridge is None else np.where(wide, _on(wide_ridge, gpu), ridge))


def _on(ridge: Ridge, gpu: np.ndarray) -> float | np.ndarray:
    """The ridge point of each GPU of `gpu`: the one number, or the entries of a per-GPU array."""
    return np.asarray(ridge)[gpu] if np.ndim(ridge) else float(ridge)


def sixteen_bit(spec: KernelSpec) -> bool:
    """Whether a kernel of a narrow-format run runs in 16 bits: attention, and a GEMM the recipe keeps in another
    precision (workload.kernels.in_precision: bf16)."""
    return spec.kclass == KernelClass.attention or "precision" in dict(spec.shape)


def collective_parts(dag: ExecutionDAG, timeline: Timeline) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start marker, end marker, begin) of every rank's part in every collective, `begin` the moment its
    communication begins: when the collective's last member has joined (or the part ends, if that is earlier).
    Until then a rank that joined early waits on its peers (a stage still computing, a straggler), and NCCL's
    kernel spins on its first receive: idle time, not communication. So a 4-byte gradient-norm all-reduce across
    the pipeline, which the first stage reaches 50 ms after the last, is 50 ms idle on the last stage, not 50 ms
    of PP communication. Members folded away stand where their simulated peer stands, so the simulated members'
    last join is the group's."""
    joins, leaves = dag.collective_spans()
    joined = timeline.start[joins]
    last, _ = last_joins(dag, joins, joined)
    return joins, leaves, np.minimum(np.maximum(joined, last), timeline.finish[leaves])


def last_joins(dag: ExecutionDAG, joins: np.ndarray, joined: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per part of a collective (its start marker in `joins`, joined at `joined`): when its collective's last member
    joined, and that member's GPU (the lowest of those joining then), whom the parts that joined before wait on."""
    order = np.lexsort((dag.gpu[joins], -joined, dag.coll[joins]))
    coll = dag.coll[joins][order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = coll[1:] != coll[:-1]
    when = np.full(len(dag.collectives), -np.inf)
    who = np.full(len(dag.collectives), -1, dtype=np.int64)
    when[coll[first]] = joined[order][first]
    who[coll[first]] = dag.gpu[joins][order][first]
    return when[dag.coll[joins]], who[dag.coll[joins]]


def comm_intervals(dag: ExecutionDAG, timeline: Timeline) -> tuple[np.ndarray, ...]:
    """(gpu, start, end, node) of the communication each GPU takes part in: its part in each collective (from when
    the last member joined to its end marker, collective_parts; `node` its start marker) and every pipeline flow,
    on its sender and on its receiver."""
    joins, leaves, begins = collective_parts(dag, timeline)
    p2p = np.flatnonzero((dag.kind == NodeKind.flow) & (dag.coll < 0))
    return (np.concatenate([dag.gpu[joins], dag.gpu[p2p], dag.peer[p2p]]).astype(np.int64),
            np.concatenate([begins, timeline.start[p2p], timeline.start[p2p]]),
            np.concatenate([timeline.finish[leaves], timeline.finish[p2p], timeline.finish[p2p]]),
            np.concatenate([joins, p2p, p2p]))


def exposure(dag: ExecutionDAG, timeline: Timeline, ridge_flops_per_byte: Ridge,
             wide_ridge: Ridge | None = None) -> list[GPUExposure]:
    """Per simulated GPU, its step split as the module says (`wide_ridge`: memory_bound; either ridge one for every
    GPU or per GPU: Ridge)."""
    compute = np.flatnonzero(dag.kind == NodeKind.compute)
    slow = memory_bound_nodes(dag, compute, ridge_flops_per_byte, wide_ridge)
    c_gpu, c_start, c_end, c_node = comm_intervals(dag, timeline)
    channel = np.concatenate([np.where(slow, MEMORY_BOUND, COMPUTE_BOUND),
                              2 + node_kinds(dag)[c_node] - KIND_NAMES.index(COMM_KINDS[0])])
    gpu = np.concatenate([dag.gpu[compute].astype(np.int64), c_gpu])
    start = np.concatenate([timeline.start[compute], c_start])
    end = np.concatenate([timeline.finish[compute], c_end])
    totals = _swept(gpu, start, end, channel, 2 + len(COMM_KINDS), dag.num_gpus)
    step = timeline.makespan
    stage = np.zeros(dag.num_gpus, dtype=np.int64)
    stage[dag.gpu[compute]] = dag.stage[compute]
    rows = []
    for g in dag.simulated_gpus.tolist():
        mem, comp, *kinds = totals[g].tolist()
        busy = mem + comp + sum(kinds)
        rows.append(GPUExposure(g, int(stage[g]), int(dag.multiplicity[g]), comp * 1e3, mem * 1e3,
                                {k: v * 1e3 for k, v in zip(COMM_KINDS, kinds, strict=True)},
                                idle_length(step, busy) * 1e3))
    return rows


def mean_exposed_ms(rows: list[GPUExposure]) -> dict[str, float]:
    """Per kind of COMM_KINDS, the exposed ms averaged over the GPUs (each simulated GPU weighted by those it stands
    for, as result.summarize averages its breakdown): the kinds add up to the breakdown's exposed communication."""
    weight = sum(row.stands_for for row in rows)
    return {kind: sum(row.exposed_ms[kind] * row.stands_for for row in rows) / weight for kind in COMM_KINDS}


def _swept(gpu: np.ndarray, start: np.ndarray, end: np.ndarray, channel: np.ndarray, channels: int,
           num_gpus: int) -> np.ndarray:
    """[gpu, channel] seconds: each piece between consecutive interval ends of a GPU goes to memory-bound if only
    memory-bound kernels run in it, to compute-bound if a compute-bound kernel does, else shared equally among the
    communication channels running in it."""
    times = np.concatenate([start, end])
    owner = np.concatenate([gpu, gpu])
    delta = np.concatenate([np.ones(len(start), np.int64), -np.ones(len(end), np.int64)])
    chan = np.concatenate([channel, channel])
    order = np.lexsort((-delta, times, owner))  # per GPU, by time; at one time openings before closings
    times, owner, delta, chan = times[order], owner[order], delta[order], chan[order]
    active = np.zeros((len(times), channels), dtype=np.int32)
    active[np.arange(len(times)), chan] = delta
    np.cumsum(active, axis=0, out=active)  # every interval closes on its GPU: counts return to 0 between GPUs
    piece = np.zeros(len(times))
    same = owner[1:] == owner[:-1]
    piece[:-1] = np.where(same, times[1:] - times[:-1], 0.0)
    running = active > 0
    kernel = running[:, MEMORY_BOUND] | running[:, COMPUTE_BOUND]
    share = np.zeros((len(times), channels))
    share[:, COMPUTE_BOUND] = running[:, COMPUTE_BOUND]
    share[:, MEMORY_BOUND] = running[:, MEMORY_BOUND] & ~running[:, COMPUTE_BOUND]
    comm = running[:, 2:] & ~kernel[:, None]
    share[:, 2:] = comm / np.maximum(comm.sum(axis=1), 1)[:, None]
    return np.column_stack([np.bincount(owner, weights=share[:, c] * piece, minlength=num_gpus)
                            for c in range(channels)])
