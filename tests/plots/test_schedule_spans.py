"""The per-stage timeline the gantt plot draws (analysis/schedule.py), checked against the replay it comes from."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.analysis.exposure import exposure, mean_exposed_ms
from simulon.analysis.schedule import (
    COMPUTE_KINDS,
    RESOLUTION,
    compute_spans,
    schedule,
    stage_representatives,
)
from simulon.config import ScenarioConfig
from simulon.dag.nodes import NodeKind
from simulon.pipeline import simulate


@pytest.fixture(scope="module")
def pipelined():
    sim = simulate(gpt_scenario(nodes=1, gpus_per_node=8, tp=2, pp=4, gbs=8, layers=4))
    return sim, schedule(sim.dag, sim.timeline)


def test_each_stage_is_drawn_by_its_lowest_simulated_gpu(pipelined):
    sim, sched = pipelined
    assert [s["stage"] for s in sched["stages"]] == [0, 1, 2, 3]
    compute = sim.dag.kind == NodeKind.compute
    for s in sched["stages"]:
        assert s["gpu"] == int(sim.dag.gpu[compute & (sim.dag.stage == s["stage"])].min())


def test_spans_lie_within_the_iteration_and_the_last_one_ends_it(pipelined):
    sim, sched = pipelined
    ends = [span[1] for s in sched["stages"] for span in s["spans"]]
    assert all(0 <= span[0] <= span[1] <= sched["iteration_time_ms"] + 1e-4
               for s in sched["stages"] for span in s["spans"])
    assert max(ends) == pytest.approx(sim.result.iteration_time_ms, abs=1e-3)


def test_compute_spans_of_a_stage_follow_one_another_as_its_stream_runs_them(pipelined):
    _, sched = pipelined
    for s in sched["stages"]:
        compute = [span for span in s["spans"] if span[2] in COMPUTE_KINDS.values()]
        assert all(a[1] <= b[0] + 1e-4 for a, b in itertools.pairwise(compute))


def test_every_stage_runs_the_forward_and_backward_of_every_micro_batch_once_in_1f1b_order(pipelined):
    _, sched = pipelined
    microbatches = 8  # global batch 8, micro-batch 1, dp 1
    for s in sched["stages"]:
        forward = [span[3] for span in s["spans"] if span[2] == "forward"]
        backward = [span[3] for span in s["spans"] if span[2] == "backward"]
        assert sorted(set(forward)) == sorted(set(backward)) == list(range(microbatches))
        assert forward[:1] == [0] and all(a <= b for a, b in itertools.pairwise(forward))
    warmup = [len({span[3] for span in s["spans"] if span[2] == "forward" and span[0] < first_backward(s)})
              for s in sched["stages"]]
    assert warmup == [4, 3, 2, 1]  # 1F1B: pp - stage micro-batches in flight before the first backward


def first_backward(stage: dict) -> float:
    return min(span[0] for span in stage["spans"] if span[2] == "backward")


def test_pipeline_sends_appear_on_every_stage_and_only_on_the_pp_stream(pipelined):
    _, sched = pipelined
    for s in sched["stages"]:
        assert any(span[2] == "pp-comm" for span in s["spans"])
        assert {span[2] for span in s["spans"]} <= set(COMPUTE_KINDS.values()) | {"tp-comm", "pp-comm", "dp-comm"}


def test_with_tensor_parallelism_alone_the_exposed_tp_time_is_the_gpus_exposed_communication():
    sim = simulate(gpt_scenario(nodes=1, gpus_per_node=2, tp=2, pp=1, gbs=2, layers=2))
    exposed = mean_exposed_ms(exposure(sim.dag, sim.timeline, ridge_flops_per_byte=300.0))
    assert {kind for kind, ms in exposed.items() if ms} == {"TP"}
    assert exposed["TP"] == pytest.approx(sim.result.breakdown["exposed_comm_ms"], rel=1e-6)
    assert np.isfinite(exposed["TP"]) and exposed["TP"] > 0


def test_every_kernel_of_a_stage_lies_in_a_compute_span_and_short_weight_gradient_runs_join_their_backward(
        pipelined):
    sim, sched = pipelined
    compute = sim.dag.kind == NodeKind.compute
    for s in sched["stages"]:
        spans = [span for span in s["spans"] if span[2] in COMPUTE_KINDS.values()]
        starts, ends = np.array([x[0] for x in spans]), np.array([x[1] for x in spans])
        kernels = np.flatnonzero(compute & (sim.dag.gpu == s["gpu"]))
        for start, finish in zip(sim.timeline.start[kernels] * 1e3, sim.timeline.finish[kernels] * 1e3,
                                 strict=True):
            assert np.any((starts <= start + 1e-3) & (finish <= ends + 1e-3))
        shortest = RESOLUTION * sched["iteration_time_ms"]
        assert all(x[1] - x[0] >= shortest - 1e-3 for x in spans if x[2] == "weight-gradient")


def idle_stretches(sim, gpu: int) -> list[tuple[float, float]]:
    """(from, to) ms where `gpu` runs no compute kernel, for stretches longer than RESOLUTION of the iteration."""
    kernels = np.flatnonzero((sim.dag.kind == NodeKind.compute) & (sim.dag.gpu == gpu))
    order = np.argsort(sim.timeline.start[kernels], kind="stable")
    starts, finishes = sim.timeline.start[kernels][order] * 1e3, sim.timeline.finish[kernels][order] * 1e3
    busy_until = np.maximum.accumulate(finishes)
    longer = np.flatnonzero(starts[1:] - busy_until[:-1] > RESOLUTION * sim.timeline.makespan * 1e3)
    return [(float(busy_until[i]), float(starts[i + 1])) for i in longer]


def assert_compute_spans_skip_idle_stretches(sim) -> None:
    for gpu in stage_representatives(sim.dag).values():
        for start, end, kind, _ in compute_spans(sim.dag, sim.timeline, gpu):
            for idle_from, idle_to in idle_stretches(sim, gpu):
                assert min(end, idle_to) - max(start, idle_from) <= 1e-3, (gpu, kind, start, end, idle_from, idle_to)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pp=st.sampled_from([1, 2, 4]), vpp=st.sampled_from([1, 2]), microbatches=st.integers(1, 4),
       nic=st.sampled_from(["25Gbps", "400Gbps"]))
def test_no_compute_span_covers_a_stretch_longer_than_the_resolution_where_its_gpu_runs_no_kernel(
        pp, vpp, microbatches, nic):
    dp = 8 // (2 * pp)
    layers = max(4, pp * vpp)  # a layer a model chunk at least, as Megatron needs
    sim = simulate(gpt_scenario(nodes=2, gpus_per_node=4, tp=2, pp=pp, gbs=dp * pp * microbatches, layers=layers,
                                nic=nic, extra_parallelism={"vpp": vpp} if pp > 1 else None))
    assert_compute_spans_skip_idle_stretches(sim)


def test_the_optimizer_span_starts_with_the_optimizer_kernel_not_while_the_step_waits_for_its_dp_all_reduce():
    sim = simulate(ScenarioConfig.model_validate({
        "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}},
        "workload": {"framework": "megatron", "model": "llama-3.2-1b", "parallelism": {"tp": 2, "pp": 2, "vpp": 2},
                     "training": {"global_batch_size": 16, "micro_batch_size": 1, "sequence_length": 2048}}}))
    gpu = stage_representatives(sim.dag)[0]
    mine = np.flatnonzero((sim.dag.kind == NodeKind.compute) & (sim.dag.gpu == gpu))
    optimizer = [n for n in mine.tolist() if sim.dag.kernel_specs[sim.dag.kernel[n]].name == "optimizer"]
    last_span = max(s for s in compute_spans(sim.dag, sim.timeline, gpu) if s[2] == "optimizer")
    assert last_span[0] == pytest.approx(sim.timeline.start[optimizer].min() * 1e3, abs=1e-3)
    assert_compute_spans_skip_idle_stretches(sim)
