"""The critical path walks back from the last node through the predecessor that released each node last: on the
replay's times it runs from 0 to the step time without a gap, and each step's terms add up to it."""

from __future__ import annotations

import numpy as np
import pytest
from analysed import analysed
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import SEED_SCENARIO, gpt_scenario
from simulon.analysis.critical_path import TERMS, critical_path
from simulon.config.loading import load_scenario
from simulon.dag.nodes import NodeKind
from simulon.engine.flows import flow_properties


def check_exact(run) -> None:
    """The path's length is the step time; its steps follow each other without a gap; each step starts the moment
    its predecessor releases it (no unexplained wait); its terms add up to it."""
    path, timeline = run.analysis.path, run.sim.timeline
    assert path.length == pytest.approx(timeline.makespan, rel=1e-12)
    assert path.released[0] == 0.0
    assert path.ends[-1] == timeline.makespan
    assert np.array_equal(path.released[1:], path.ends[:-1])
    assert np.abs(path.wait).max() <= 1e-12 * timeline.makespan
    total = sum(path.terms[t] for t in TERMS) + path.wait
    assert np.allclose(total, path.ends - path.released, rtol=0, atol=1e-12 * timeline.makespan)
    assert all((path.terms[t] >= -1e-15).all() for t in TERMS)


def test_the_critical_path_of_the_quick_start_is_exactly_its_step_time():
    run = analysed(load_scenario(SEED_SCENARIO))
    check_exact(run)
    summary = run.analysis.path_summary
    assert summary["length_ms"] == pytest.approx(run.step_ms, rel=1e-12)
    for key in ("by_kind_ms", "by_stage_ms", "by_stream_ms", "by_term_ms"):
        assert sum(summary[key].values()) == pytest.approx(run.step_ms, rel=1e-9)
    # one node of four GPUs at tp2 x pp2 on one channel: its path runs through both stages, TP all-reduces, kernels
    assert set(summary["by_stage_ms"]) == {"stage 0", "stage 1"}
    assert {"compute", "TP"} <= set(summary["by_kind_ms"])


def test_a_term_the_path_spends_no_time_on_reads_zero_not_the_rounding_of_its_steps():
    """The quick start's kernels are never slowed by SMs held by collectives: compute_slowdown read 8.5e-12 ms of
    a 494.9 ms path, and the report listed it as 0.00000000000852 ms."""
    summary = analysed(load_scenario(SEED_SCENARIO)).analysis.path_summary
    assert summary["by_term_ms"]["compute_slowdown"] == 0.0
    # a pipeline send (NCCL send/receive on the one channel the scenario pins) beside a TP all-reduce on a port.
    # It read 0.046 ms before stage 0 ran the embedding's dense weight gradient, 1F1B's next kernel waited for the
    # send posted with its receive and a running GEMM was retimed as collectives came and went, which moved the path;
    # 0.0188128238 before the layers rotated their queries and keys (17d7806), 0.0187403172 before the rotation's
    # copies (497193d, d98b003: the backward's concatenation of the QKV gradients, Transformer Engine's contiguous v).
    assert summary["by_term_ms"]["link_contention"] == pytest.approx(0.0188629377, rel=1e-6)
    assert sum(summary["by_term_ms"].values()) == pytest.approx(summary["length_ms"], rel=1e-12)


def test_the_critical_path_of_a_folded_run_is_exactly_its_step_time():
    run = analysed(gpt_scenario(nodes=4, gpus_per_node=4, tp=2, pp=2, gbs=16, nic="25Gbps"), "symmetric")
    assert run.sim.result.simulated_gpus < run.sim.result.num_gpus  # data-parallel peers folded
    check_exact(run)
    assert "DP" in run.analysis.path_summary["by_kind_ms"]


def test_every_step_but_the_first_is_released_by_the_step_before_it():
    run = analysed(gpt_scenario(nodes=2, gpus_per_node=2, pp=2, gbs=8))
    dag, path = run.sim.dag, run.analysis.path
    edges = set(zip(dag.edge_src.tolist(), dag.edge_dst.tolist(), strict=True))
    if dag.stream_src is not None:
        edges |= set(zip(dag.stream_src.tolist(), dag.stream_dst.tolist(), strict=True))
    assert all((a, b) in edges for a, b in zip(path.nodes[:-1].tolist(), path.nodes[1:].tolist(), strict=True))
    first = path.nodes[0]
    assert not (dag.edge_dst == first).any()
    assert path.nodes[-1] == int(np.argmax(run.sim.timeline.finish))


def test_a_kernel_on_the_path_is_its_populated_time_and_a_flow_its_bytes_at_its_route_rate_when_alone():
    run = analysed(gpt_scenario(nodes=1, gpus_per_node=2, tp=2, gbs=2))
    dag, path = run.sim.dag, run.analysis.path
    kernels = dag.kind[path.nodes] == NodeKind.compute
    assert np.allclose(path.terms["compute"][kernels], dag.duration[path.nodes[kernels]], rtol=1e-12)
    props = flow_properties(dag, run.sim.topology, run.sim.fold)
    again = critical_path(dag, run.sim.timeline, props, run.sim.topology.capacity)
    assert np.array_equal(again.nodes, path.nodes)  # the same chain from the same replay
    flows = dag.kind[path.nodes] == NodeKind.flow
    assert (path.terms["transfer"][flows] > 0).all()
    assert (path.terms["transfer"][~flows] == 0).all() and (path.terms["compute"][flows] == 0).all()


@settings(max_examples=25)
@given(tp=st.sampled_from([1, 2]), pp=st.sampled_from([1, 2]), microbatches=st.integers(1, 4),
       nic=st.sampled_from(["10Gbps", "100Gbps"]))
def test_on_small_scenarios_the_critical_path_is_the_step_time(tp, pp, microbatches, nic):
    dp = 4 // (tp * pp)
    run = analysed(gpt_scenario(nodes=2, gpus_per_node=2, tp=tp, pp=pp, gbs=dp * microbatches, layers=2,
                                hidden=512, heads=8, nic=nic))
    check_exact(run)
