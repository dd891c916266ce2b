"""Inject kernel durations for one GPU into a GPU-agnostic DAG."""

from __future__ import annotations

import numpy as np

from ..config.common import DType
from ..config.dc import GPUSpec
from ..dag.nodes import ExecutionDAG
from .profile import KernelProfile
from .roofline import Roofline


def kernel_seconds(dag: ExecutionDAG, gpu: GPUSpec, dtype: DType) -> tuple[np.ndarray, int]:
    """Seconds of every distinct kernel of the DAG, and how many came from the measured profile."""
    profile = KernelProfile(gpu)
    roofline = Roofline.for_gpu(gpu, dtype)
    times = np.empty(len(dag.kernel_specs))
    measured = 0
    for i, spec in enumerate(dag.kernel_specs):
        found = profile.seconds(spec)
        measured += found is not None
        times[i] = found if found is not None else roofline.seconds(spec)
    return times, measured


def populate(dag: ExecutionDAG, gpu: GPUSpec, dtype: DType) -> ExecutionDAG:
    """Fill dag.duration: kernels from the profile or the roofline; flows and markers take 0 here
    (their time comes from the network model during replay)."""
    times, _ = kernel_seconds(dag, gpu, dtype)
    table = np.append(times, 0.0)  # kernel index -1 (flows, markers) picks the trailing 0
    dag.duration = table[dag.kernel]
    return dag
