"""Inject kernel durations into a GPU-agnostic DAG: each kernel timed on the GPU its node runs on.

On a heterogeneous datacenter (config.dc node groups) the DAG's nodes are grouped by the GPU type of their
rank and each type's distinct kernels are timed once, on that GPU (profile or calibrated model)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..config.common import DType
from ..config.dc import GPUSpec
from ..dag.nodes import ExecutionDAG
from ..workload.kernels import KernelSpec
from .analytical import AnalyticalModel
from .profile import PROFILE_REPEATS, KernelProfile


def spec_seconds(specs: Sequence[KernelSpec], gpu: GPUSpec, dtype: DType) -> tuple[np.ndarray, int]:
    """Seconds of each kernel spec on `gpu`, and how many came from the measured profile."""
    times, profiled = timed_specs(specs, gpu, dtype)
    return times, int(profiled.sum())


def timed_specs(specs: Sequence[KernelSpec], gpu: GPUSpec, dtype: DType) -> tuple[np.ndarray, np.ndarray]:
    """Seconds of each kernel spec on `gpu`, and which came from the measured profile (a boolean per spec)."""
    model = AnalyticalModel(gpu, dtype, sustained_load=True)  # a training step keeps the GPU busy
    profile = KernelProfile(gpu, dtype, model, AnalyticalModel(gpu, dtype, repeats=PROFILE_REPEATS))
    times = model.seconds(list(specs))
    profiled = np.zeros(len(specs), dtype=bool)
    for i, spec in enumerate(specs):
        found = profile.seconds(spec)
        if found is not None:
            times[i], profiled[i] = found, True
    return times, profiled


def kernel_seconds(dag: ExecutionDAG, gpu: GPUSpec, dtype: DType) -> tuple[np.ndarray, int]:
    """Seconds of every distinct kernel of the DAG, and how many came from the measured profile."""
    return spec_seconds(dag.kernel_specs, gpu, dtype)


class ProfileUse(NamedTuple):
    """How a GPU's measured profile (GPUSpec.kernel_runs) served a step in `dtype`: `timed` of the `kernels`
    distinct kernels its ranks run were timed from its `runs` profiled runs (at or between their shapes), the rest
    by the calibrated model. populate reports it for each GPU type that has a profile; `simulate` prints line(),
    its `--json` and report carry it (cli.report, report.page)."""

    timed: int
    kernels: int
    runs: int
    dtype: str

    def line(self, gpu: str) -> str:
        """What `simulate` says of it; a profile that times none of the step's kernels (another kernel name, phase
        or dtype) would otherwise be left unused without a word."""
        if self.timed:
            return (f"Profile: {self.timed:,} of the {self.kernels:,} distinct kernels {gpu} runs timed from its "
                    "profile, the rest by the calibrated model")
        return (f"Profile: none of {gpu}'s {self.runs:,} profiled runs is of a kernel this step runs in {self.dtype} "
                "(same kernel name, phase, dtype and shape parameters): every kernel is timed by the calibrated "
                "model")


def populate(dag: ExecutionDAG, gpu: GPUSpec | Sequence[GPUSpec], dtype: DType,
             gpu_type: np.ndarray | None = None) -> dict[str, ProfileUse]:
    """Fill dag.duration: kernels from the profile or the calibrated model; flows and markers take 0 here
    (their time comes from the network model during replay). Returns how the profile of each GPU that has one
    (by name) served the step (ProfileUse).

    `gpu`: one GPU for every rank, or several GPU types with `gpu_type[rank]` the index of each rank's."""
    if isinstance(gpu, GPUSpec):
        gpus, gpu_type = [gpu], None
    else:
        gpus = list(gpu)
    if gpu_type is None or len(gpus) == 1 or len(np.unique(gpu_type)) == 1:
        one = gpus[0] if gpu_type is None else gpus[int(gpu_type[0])]
        times, measured = kernel_seconds(dag, one, dtype)
        table = np.append(times, 0.0)  # kernel index -1 (flows, markers) picks the trailing 0
        dag.duration = table[dag.kernel]
        return _profiled({one.name: (measured, len(dag.kernel_specs))}, gpus, dtype)
    duration = np.zeros(dag.num_nodes)
    node_type = np.asarray(gpu_type)[dag.gpu]
    runs: dict[str, np.ndarray] = {}  # GPU name -> which kernels its ranks run; profiled: which its profile timed
    profiled: dict[str, np.ndarray] = {}
    for t in np.unique(node_type).tolist():
        nodes = np.flatnonzero((node_type == t) & (dag.kernel >= 0))
        used = np.unique(dag.kernel[nodes])
        times, measured = timed_specs([dag.kernel_specs[k] for k in used.tolist()], gpus[t], dtype)
        table = np.zeros(len(dag.kernel_specs))
        table[used] = times
        duration[nodes] = table[dag.kernel[nodes]]
        name = gpus[t].name
        runs.setdefault(name, np.zeros(len(dag.kernel_specs), dtype=bool))[used] = True
        profiled.setdefault(name, np.zeros(len(dag.kernel_specs), dtype=bool))[used[measured]] = True
    dag.duration = duration
    return _profiled({name: (int(profiled[name].sum()), int(ran.sum())) for name, ran in runs.items()}, gpus, dtype)


def _profiled(counts: dict[str, tuple[int, int]], gpus: Sequence[GPUSpec], dtype: DType) -> dict[str, ProfileUse]:
    """(timed, kernels) of each GPU by name -> ProfileUse of those with a measured profile."""
    runs = {g.name: len(g.kernel_runs) for g in gpus if g.kernel_runs}
    return {name: ProfileUse(timed, kernels, runs[name], dtype.value) for name, (timed, kernels) in counts.items()
            if name in runs}
