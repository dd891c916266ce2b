"""What a simulation reports: iteration time, throughput, utilisation and a per-GPU breakdown."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from ..dag.nodes import ExecutionDAG, NodeKind
from ..engine.replay import Timeline
from .exposure import comm_intervals
from .intervals import idle_length, overlap_length, union_length


@dataclass(frozen=True)
class GPUBreakdown:
    """Where one GPU's iteration went (ms). compute + exposed_comm + bubble = iteration time."""

    gpu: int
    stage: int
    stands_for: int          # GPUs this one represents (1 unless symmetric peers were folded)
    compute_ms: float
    exposed_comm_ms: float   # communication with the compute stream idle
    overlapped_comm_ms: float
    bubble_ms: float         # neither computing nor communicating: pipeline bubble, waiting (on other stages,
    # on a collective's last member: exposure.collective_parts)
    device: str = ""         # the GPU it is (its type's name: which one, on a cluster of several)


@dataclass(frozen=True)
class MicroBatchSampling:
    """A result extrapolated from replays of fewer micro-batches (sampling.py): the step's real count per
    data-parallel replica, and the two counts replayed. The figures are the extrapolated step's; the trace,
    analysis and schedule are those of the larger replayed count."""

    micro_batches: int
    simulated: tuple[int, int]

    def to_dict(self) -> dict:
        return {"micro_batches": self.micro_batches, "simulated": list(self.simulated), "extrapolated": True,
                "trace_and_analysis_of": self.simulated[1]}


@dataclass(frozen=True)
class SimulationResult:
    iteration_time_ms: float
    num_gpus: int
    simulated_gpus: int
    tokens_per_s: float
    tflops_per_gpu: float    # model FLOPs (Narayanan et al. convention, no recompute)
    mfu: float
    hardware_tflops_per_gpu: float  # also counting recomputed forward kernels and capacity padding
    hfu: float
    breakdown: dict[str, float]
    per_gpu: list[GPUBreakdown] = field(default_factory=list)
    sampling: MicroBatchSampling | None = None  # set where the figures are extrapolated (sampling.py)

    @property
    def total_time_ms(self) -> float:
        """The seed API's name for the iteration time."""
        return self.iteration_time_ms

    def step_flops(self, hardware: bool = False) -> float:
        """The step's FLOPs over every GPU (model FLOPs, or with `hardware` the recomputed forward kernels too), from
        its rate and time: the real step's where the figures are extrapolated, whose DAG holds fewer micro-batches."""
        rate = self.hardware_tflops_per_gpu if hardware else self.tflops_per_gpu
        return rate * 1e12 * self.iteration_time_ms / 1e3 * self.num_gpus

    def to_dict(self) -> dict:
        """The fields as JSON-ready values; `micro_batch_sampling` only where the figures are extrapolated."""
        data = asdict(self)
        del data["sampling"]
        if self.sampling is not None:
            data["micro_batch_sampling"] = self.sampling.to_dict()
        return data


def _by_gpu(gpus: np.ndarray, starts: np.ndarray, ends: np.ndarray, simulated: np.ndarray) -> list:
    """Split intervals by GPU: one (starts, ends) pair per simulated GPU."""
    order = np.argsort(gpus, kind="stable")
    gpus, starts, ends = gpus[order], starts[order], ends[order]
    lo = np.searchsorted(gpus, simulated, side="left")
    hi = np.searchsorted(gpus, simulated, side="right")
    return [(starts[a:b], ends[a:b]) for a, b in zip(lo, hi, strict=True)]


def summarize(dag: ExecutionDAG, timeline: Timeline, tokens_per_iteration: float,
              peak_flops: float, devices: Sequence[str] = ()) -> SimulationResult:
    """The step's figures and each simulated GPU's breakdown; `devices`: each rank's GPU name, where known."""
    iteration = timeline.makespan
    simulated = dag.simulated_gpus
    compute = np.flatnonzero(dag.kind == NodeKind.compute)
    compute_by_gpu = _by_gpu(dag.gpu[compute], timeline.start[compute], timeline.finish[compute], simulated)
    comm_gpu, comm_start, comm_end, _ = comm_intervals(dag, timeline)
    comm_by_gpu = _by_gpu(comm_gpu, comm_start, comm_end, simulated)
    stage_of = dict(zip(dag.gpu[compute].tolist(), dag.stage[compute].tolist(), strict=False))
    per_gpu = []
    for g, comp, comm in zip(simulated.tolist(), compute_by_gpu, comm_by_gpu, strict=True):
        busy = union_length(*comp)
        overlapped = overlap_length(comp, comm)
        exposed = union_length(*comm) - overlapped
        per_gpu.append(GPUBreakdown(g, stage_of.get(g, 0), int(dag.multiplicity[g]), busy * 1e3, exposed * 1e3,
                                    overlapped * 1e3, idle_length(iteration, busy + exposed) * 1e3,
                                    devices[g] if devices else ""))
    weights = np.array([b.stands_for for b in per_gpu], dtype=float)

    def mean(attr: str) -> float:
        return float(np.average([getattr(b, attr) for b in per_gpu], weights=weights))

    per_gpu_second = 1 / iteration / dag.num_gpus if iteration > 0 else 0.0
    flops_per_gpu = dag.total_flops() * per_gpu_second
    hardware_flops_per_gpu = dag.total_flops(hardware=True) * per_gpu_second
    return SimulationResult(
        iteration_time_ms=iteration * 1e3,
        num_gpus=dag.num_gpus,
        simulated_gpus=len(per_gpu),
        tokens_per_s=tokens_per_iteration / iteration if iteration > 0 else 0.0,
        tflops_per_gpu=flops_per_gpu / 1e12,
        mfu=flops_per_gpu / peak_flops,
        hardware_tflops_per_gpu=hardware_flops_per_gpu / 1e12,
        hfu=hardware_flops_per_gpu / peak_flops,
        breakdown={name: mean(name) for name in ("compute_ms", "exposed_comm_ms", "overlapped_comm_ms", "bubble_ms")},
        per_gpu=per_gpu,
    )
