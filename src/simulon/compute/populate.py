"""Inject kernel durations for one GPU into a GPU-agnostic DAG."""

from __future__ import annotations

import numpy as np

from ..config.common import DType
from ..config.dc import GPUSpec
from ..dag.nodes import ExecutionDAG
from .analytical import AnalyticalModel
from .profile import KernelProfile


def kernel_seconds(dag: ExecutionDAG, gpu: GPUSpec, dtype: DType) -> tuple[np.ndarray, int]:
    """Seconds of every distinct kernel of the DAG, and how many came from the measured profile."""
    model = AnalyticalModel(gpu, dtype, sustained_load=True)  # a training step keeps the GPU busy
    profile = KernelProfile(gpu, dtype, model)
    times = model.seconds(dag.kernel_specs)
    measured = 0
    for i, spec in enumerate(dag.kernel_specs):
        found = profile.seconds(spec)
        if found is not None:
            times[i] = found
            measured += 1
    return times, measured


def populate(dag: ExecutionDAG, gpu: GPUSpec, dtype: DType) -> ExecutionDAG:
    """Fill dag.duration: kernels from the profile or the calibrated model; flows and markers take 0 here
    (their time comes from the network model during replay)."""
    times, _ = kernel_seconds(dag, gpu, dtype)
    table = np.append(times, 0.0)  # kernel index -1 (flows, markers) picks the trailing 0
    dag.duration = table[dag.kernel]
    return dag
