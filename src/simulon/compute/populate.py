"""Inject kernel durations into a GPU-agnostic DAG: each kernel timed on the GPU its node runs on.

On a heterogeneous datacenter (config.dc node groups) the DAG's nodes are grouped by the GPU type of their
rank and each type's distinct kernels are timed once, on that GPU (profile or calibrated model)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..config.common import DType
from ..config.dc import GPUSpec
from ..dag.nodes import ExecutionDAG
from ..workload.kernels import KernelSpec
from .analytical import AnalyticalModel
from .profile import PROFILE_REPEATS, KernelProfile


def spec_seconds(specs: Sequence[KernelSpec], gpu: GPUSpec, dtype: DType) -> tuple[np.ndarray, int]:
    """Seconds of each kernel spec on `gpu`, and how many came from the measured profile."""
    model = AnalyticalModel(gpu, dtype, sustained_load=True)  # a training step keeps the GPU busy
    profile = KernelProfile(gpu, dtype, model, AnalyticalModel(gpu, dtype, repeats=PROFILE_REPEATS))
    times = model.seconds(list(specs))
    measured = 0
    for i, spec in enumerate(specs):
        found = profile.seconds(spec)
        if found is not None:
            times[i] = found
            measured += 1
    return times, measured


def kernel_seconds(dag: ExecutionDAG, gpu: GPUSpec, dtype: DType) -> tuple[np.ndarray, int]:
    """Seconds of every distinct kernel of the DAG, and how many came from the measured profile."""
    return spec_seconds(dag.kernel_specs, gpu, dtype)


def populate(dag: ExecutionDAG, gpu: GPUSpec | Sequence[GPUSpec], dtype: DType,
             gpu_type: np.ndarray | None = None) -> ExecutionDAG:
    """Fill dag.duration: kernels from the profile or the calibrated model; flows and markers take 0 here
    (their time comes from the network model during replay).

    `gpu`: one GPU for every rank, or several GPU types with `gpu_type[rank]` the index of each rank's."""
    if isinstance(gpu, GPUSpec):
        gpus, gpu_type = [gpu], None
    else:
        gpus = list(gpu)
    if gpu_type is None or len(gpus) == 1 or len(np.unique(gpu_type)) == 1:
        one = gpus[0] if gpu_type is None else gpus[int(gpu_type[0])]
        times, _ = kernel_seconds(dag, one, dtype)
        table = np.append(times, 0.0)  # kernel index -1 (flows, markers) picks the trailing 0
        dag.duration = table[dag.kernel]
        return dag
    duration = np.zeros(dag.num_nodes)
    node_type = np.asarray(gpu_type)[dag.gpu]
    for t in np.unique(node_type).tolist():
        nodes = np.flatnonzero((node_type == t) & (dag.kernel >= 0))
        used = np.unique(dag.kernel[nodes])
        times, _ = spec_seconds([dag.kernel_specs[k] for k in used.tolist()], gpus[t], dtype)
        table = np.zeros(len(dag.kernel_specs))
        table[used] = times
        duration[nodes] = table[dag.kernel[nodes]]
    dag.duration = duration
    return dag
