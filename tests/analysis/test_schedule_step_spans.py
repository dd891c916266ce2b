"""The step's kernels in the per-stage timeline (analysis/schedule.py): the optimizer's spans hold the optimizer
alone; Megatron's gradient-buffer kernels (zeroing the buffers, checking and scaling each bucket) are spans of
their own kind."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import gpt_scenario
from simulon.analysis.schedule import COMPUTE_KINDS, schedule
from simulon.dag.nodes import NodeKind
from simulon.pipeline import simulate


@pytest.fixture(scope="module")
def replicated():
    sim = simulate(gpt_scenario(nodes=1, gpus_per_node=4, tp=1, pp=2, gbs=8, layers=4))
    return sim, schedule(sim.dag, sim.timeline)


def kernels_named(sim, gpu: int, names: set[str]) -> np.ndarray:
    nodes = np.flatnonzero((sim.dag.kind == NodeKind.compute) & (sim.dag.gpu == gpu))
    return np.array([n for n in nodes if sim.dag.kernel_specs[sim.dag.kernel[n]].name in names], dtype=np.int64)


def within(sim, nodes: np.ndarray, spans: list) -> bool:
    starts, ends = np.array([s[0] for s in spans]), np.array([s[1] for s in spans])
    return all(np.any((starts <= sim.timeline.start[n] * 1e3 + 1e-3) & (sim.timeline.finish[n] * 1e3 <= ends + 1e-3))
               for n in nodes)


def test_gradient_buffer_kernels_are_not_labelled_optimizer(replicated):
    sim, sched = replicated
    assert COMPUTE_KINDS[None] == "gradient-buffer"
    for stage in sched["stages"]:
        gpu = stage["gpu"]
        buffers = kernels_named(sim, gpu, {"grad_zero", "grad_check", "grad_check_scale"})
        optimizer = kernels_named(sim, gpu, {"optimizer"})
        assert len(buffers) and len(optimizer)
        step = [s for s in stage["spans"] if s[2] in ("optimizer", "gradient-buffer")]
        assert within(sim, buffers, [s for s in step if s[2] == "gradient-buffer"])
        assert within(sim, optimizer, [s for s in step if s[2] == "optimizer"])
        assert not within(sim, buffers, [s for s in step if s[2] == "optimizer"])
        assert all(s[3] == -1 for s in step)
