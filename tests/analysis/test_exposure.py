"""Per GPU: compute-bound + memory-bound + exposed communication by kind + bubble = the step, agreeing with the
result's breakdown; kernels are memory-bound below the GPU's ridge point."""

from __future__ import annotations

import numpy as np
import pytest
from analysed import analysed

from helpers import gpt_scenario
from simulon.analysis.exposure import collective_parts, exposure, memory_bound
from simulon.analysis.kinds import COMM_KINDS, KIND_NAMES, node_kinds
from simulon.dag.nodes import NodeKind
from simulon.workload.program import Stream


@pytest.fixture(scope="module")
def moe_run():
    """Every kind at once: tp, pp, ep and dp over two nodes."""
    moe = {"num_experts": 4, "top_k": 2}
    return analysed(gpt_scenario(nodes=2, gpus_per_node=4, tp=2, pp=2, ep=2, gbs=8, moe=moe, layers=2,
                                 nic="25Gbps"))


def test_each_gpus_terms_add_up_to_the_step_and_match_the_breakdown(moe_run):
    step = moe_run.step_ms
    for row, b in zip(moe_run.analysis.per_gpu, moe_run.sim.result.per_gpu, strict=True):
        assert (row.gpu, row.stage, row.stands_for) == (b.gpu, b.stage, b.stands_for)
        exposed = sum(row.exposed_ms.values())
        assert row.compute_bound_ms + row.memory_bound_ms == pytest.approx(b.compute_ms, rel=1e-9)
        assert exposed == pytest.approx(b.exposed_comm_ms, rel=1e-9, abs=1e-9)
        assert row.bubble_ms == pytest.approx(b.bubble_ms, rel=1e-9, abs=1e-9)
        assert row.compute_bound_ms + row.memory_bound_ms + exposed + row.bubble_ms == pytest.approx(step, rel=1e-9)
        assert min(row.compute_bound_ms, row.memory_bound_ms, row.bubble_ms, *row.exposed_ms.values()) >= 0


def test_communication_is_told_apart_by_the_parallelism_that_issued_it(moe_run):
    dag = moe_run.sim.dag
    kinds = np.array(KIND_NAMES)[node_kinds(dag)]
    assert set(kinds[dag.kind == NodeKind.compute]) == {"compute"}
    assert set(kinds[(dag.kind == NodeKind.flow) & (dag.coll < 0)]) == {"PP"}
    on = {kind: {Stream(s) for s in dag.stream[(kinds == kind) & (dag.coll >= 0)].tolist()} for kind in COMM_KINDS}
    assert on["TP"] == {Stream.tp_comm} and on["EP"] == {Stream.ep_comm}
    assert on["DP"] <= {Stream.dp_comm, Stream.param_comm} and on["DP"]
    exposed = {k: max(r.exposed_ms[k] for r in moe_run.analysis.per_gpu) for k in COMM_KINDS}
    assert exposed["CP"] == 0 and all(exposed[k] > 0 for k in ("TP", "EP", "DP", "PP"))


def test_a_kernel_is_memory_bound_below_the_ridge_point_and_compute_bound_above_it(moe_run):
    dag = moe_run.sim.dag
    intensity = np.array([k.hw_flops / k.bytes if k.bytes else np.inf for k in dag.kernel_specs])
    ridge = float(np.median(intensity[np.isfinite(intensity)]))
    assert np.array_equal(memory_bound(dag, ridge), intensity < ridge)
    assert not memory_bound(dag, 0.0).any()
    every = exposure(dag, moe_run.sim.timeline, np.inf)  # everything that moves bytes is memory-bound
    none = exposure(dag, moe_run.sim.timeline, 0.0)
    for a, b in zip(every, none, strict=True):
        assert a.compute_bound_ms <= 1e-9 < a.memory_bound_ms
        assert b.memory_bound_ms == 0 and b.compute_bound_ms == pytest.approx(a.memory_bound_ms, rel=1e-9)


@pytest.fixture(scope="module")
def pipeline_run():
    """Two stages of two tensor-parallel GPUs, 1F1B over four micro-batches."""
    return analysed(gpt_scenario(tp=2, pp=2, gbs=4))


def test_a_rank_waiting_in_a_collective_for_its_last_member_is_idle_not_communicating(pipeline_run):
    """The gradient-norm all-reduce across the pipeline: the last stage joins it while the first still runs its
    cool-down backward; that wait is idle time, and only the time from the last join on is communication."""
    dag, timeline = pipeline_run.sim.dag, pipeline_run.sim.timeline
    joins, leaves, begins = collective_parts(dag, timeline)
    for c in np.unique(dag.coll[joins]).tolist():
        mine = dag.coll[joins] == c
        last = timeline.start[joins[mine]].max()
        assert np.array_equal(begins[mine], np.minimum(np.maximum(timeline.start[joins[mine]], last),
                                                       timeline.finish[leaves[mine]]))
    pipeline = np.array([dag.collectives[c].stream == Stream.pp_comm for c in dag.coll[joins].tolist()])
    waited = (begins - timeline.start[joins])[pipeline]
    assert waited.max() > 0.05 * timeline.makespan  # this run has such a wait
    flows = (dag.kind == NodeKind.flow) & (dag.coll < 0)
    for row in pipeline_run.analysis.per_gpu:
        sends = flows & ((dag.gpu == row.gpu) | (dag.peer == row.gpu))
        part = pipeline & (dag.gpu[joins] == row.gpu)
        bound = (timeline.finish[sends] - timeline.start[sends]).sum() + (timeline.finish[leaves] - begins)[part].sum()
        assert row.exposed_ms["PP"] <= bound * 1e3 * (1 + 1e-9)
