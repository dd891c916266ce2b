"""Replay and network model: fair sharing, closed forms for rings, monotonicity, folding exactness."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.config import DatacenterConfig
from simulon.dag.fold import Fold
from simulon.dag.nodes import ExecutionDAG, NodeKind
from simulon.engine import replay
from simulon.network import Topology
from simulon.pipeline import simulate, time_collective
from simulon.workload.program import CollType

GB = 1e9


def datacenter(nodes: int = 1, gpus: int = 4, nvlink: str = "100GBps", nic: str = "400Gbps",
               nvlink_latency: str = "0us", nic_latency: str = "0us", gpus_per_nic: int = 1) -> DatacenterConfig:
    return DatacenterConfig.model_validate({
        "cluster": {"num_nodes": nodes},
        "node": {"gpus_per_node": gpus, "gpus_per_nic": gpus_per_nic, "gpu": "H100"},
        "network": {"scale_up": {"switch": {"port_speed": nvlink, "latency": nvlink_latency}},
                    "scale_out": {"nic": {"speed": nic, "latency": nic_latency}}},
    })


def hand_dag(flows: list[tuple[int, int, float]], num_gpus: int, edges: list[tuple[int, int]] = ()) -> ExecutionDAG:
    """A DAG of bare flows (src, dst, bytes) with optional dependency edges between them."""
    n = len(flows)
    col = lambda values, dtype: np.array(values, dtype=dtype)  # noqa: E731
    src = [e[0] for e in edges]
    dst = [e[1] for e in edges]
    return ExecutionDAG(
        kind=col([NodeKind.flow] * n, np.uint8), gpu=col([f[0] for f in flows], np.int32),
        peer=col([f[1] for f in flows], np.int32), stream=col([0] * n, np.uint8), kernel=col([-1] * n, np.int32),
        layer=col([-1] * n, np.int32), microbatch=col([-1] * n, np.int32), stage=col([0] * n, np.int16),
        coll=col([0] * n, np.int32), size=col([f[2] for f in flows], np.float64), parent=col([-1] * n, np.int64),
        edge_src=col(src, np.int64), edge_dst=col(dst, np.int64), kernel_specs=[], collectives=[],
        num_gpus=num_gpus, multiplicity=np.ones(num_gpus, dtype=np.int64), duration=np.zeros(n))


def run_flows(dc: DatacenterConfig, flows, edges=()):
    dag = hand_dag(flows, dc.num_gpus, edges)
    return replay(dag, Topology.from_datacenter(dc), Fold.identity(dc.num_gpus))


def test_two_flows_on_one_link_each_get_half():
    dc = datacenter(nvlink="100GBps")
    size = 1e9
    timeline = run_flows(dc, [(0, 1, size), (0, 2, size)])  # share GPU 0's NVLink up link
    assert timeline.finish == pytest.approx([2 * size / (100 * GB)] * 2)


def test_flow_alone_runs_at_link_speed_and_adds_latency():
    dc = datacenter(nvlink="100GBps", nvlink_latency="3us")
    timeline = run_flows(dc, [(0, 1, 1e9)])
    assert timeline.finish[0] == pytest.approx(1e9 / (100 * GB) + 3e-6)


def test_max_min_fair_shares_leftover_bandwidth():
    # flows a: 0->1 and b: 0->2 share GPU 0's up link; c: 3->2 shares GPU 2's down link with b.
    # Max-min: every flow is limited to 50 GB/s by one of the two shared links.
    dc = datacenter(nvlink="100GBps")
    timeline = run_flows(dc, [(0, 1, 1e9), (0, 2, 1e9), (3, 2, 1e9)])
    assert timeline.finish == pytest.approx([0.02, 0.02, 0.02])
    # now make c tiny: once it is gone b speeds up to what a leaves
    timeline = run_flows(dc, [(0, 1, 1e9), (0, 2, 1e9), (3, 2, 1e8)])
    assert timeline.finish[2] == pytest.approx(1e8 / 50e9)
    assert timeline.finish[0] == pytest.approx(0.02) and timeline.finish[1] == pytest.approx(0.02)


def test_dependent_flow_waits_for_its_parent():
    dc = datacenter(nvlink="100GBps", nvlink_latency="1us")
    timeline = run_flows(dc, [(0, 1, 1e9), (1, 2, 1e9)], edges=[(0, 1)])
    assert timeline.start[1] == pytest.approx(timeline.finish[0])
    assert timeline.finish[1] == pytest.approx(2 * (0.01 + 1e-6))


@pytest.mark.parametrize("n", [2, 4, 8])
def test_ring_all_reduce_matches_closed_form(n):
    bw, lat, size = 100 * GB, 2e-6, 256 * 2**20
    dc = datacenter(gpus=8, nvlink="100GBps", nvlink_latency="2us")
    timing = time_collective(dc, CollType.AllReduce, tuple(range(n)), size)
    expected = 2 * (n - 1) / n * size / bw + 2 * (n - 1) * lat
    assert timing.time_us * 1e-6 == pytest.approx(expected, rel=1e-9)
    assert timing.busbw_GBps == pytest.approx(size / expected / GB * 2 * (n - 1) / n)


@pytest.mark.parametrize("ctype", [CollType.AllGather, CollType.ReduceScatter])
def test_ring_gather_scatter_match_closed_form(ctype):
    n, bw, size = 8, 100 * GB, 2**30
    dc = datacenter(gpus=8, nvlink="100GBps")
    timing = time_collective(dc, ctype, tuple(range(n)), size)
    assert timing.time_us * 1e-6 == pytest.approx((n - 1) / n * size / bw, rel=1e-9)


def test_more_channels_share_the_same_links():
    dc = datacenter(gpus=8, nvlink="100GBps")
    one = time_collective(dc, CollType.AllReduce, tuple(range(8)), 2**30, channels=1)
    eight = time_collective(dc, CollType.AllReduce, tuple(range(8)), 2**30, channels=8)
    assert eight.time_us == pytest.approx(one.time_us, rel=1e-6)
    assert eight.busbw_GBps <= 100 * (1 + 1e-9)


def test_all_to_all_cannot_beat_the_nic():
    dc = datacenter(nodes=8, gpus=1, nic="400Gbps")
    size = 2**30
    timing = time_collective(dc, CollType.AllToAll, tuple(range(8)), size, channels=4)
    assert timing.time_us * 1e-6 == pytest.approx(7 / 8 * size / 50e9, rel=1e-9)


def test_shared_nic_halves_inter_node_bandwidth():
    alone = datacenter(nodes=2, gpus=2, gpus_per_nic=1)
    shared = datacenter(nodes=2, gpus=2, gpus_per_nic=2)
    flows = [(0, 2, 1e9), (1, 3, 1e9)]
    assert run_flows(shared, flows).makespan == pytest.approx(2 * run_flows(alone, flows).makespan)


@settings(max_examples=25, deadline=None)
@given(slow=st.integers(10, 400), extra=st.integers(1, 400), n=st.sampled_from([2, 4, 8]),
       op=st.sampled_from(list(CollType)[:4]), size=st.sampled_from([2**16, 2**22, 2**28]))
def test_more_bandwidth_is_never_slower_for_a_collective(slow, extra, n, op, size):
    group = tuple(range(n))
    t_slow = time_collective(datacenter(nodes=n, gpus=1, nic=f"{slow}Gbps", nic_latency="1us"), op, group, size)
    t_fast = time_collective(datacenter(nodes=n, gpus=1, nic=f"{slow + extra}Gbps", nic_latency="1us"), op, group, size)
    assert t_fast.time_us <= t_slow.time_us * (1 + 1e-9)


@pytest.mark.parametrize("nic", ["25Gbps", "100Gbps", "400Gbps"])
def test_more_nic_bandwidth_is_never_slower_for_training(nic):
    slow = simulate(gpt_scenario(nodes=4, gpus_per_node=2, tp=2, pp=2, nic="25Gbps")).result
    fast = simulate(gpt_scenario(nodes=4, gpus_per_node=2, tp=2, pp=2, nic=nic)).result
    assert fast.iteration_time_ms <= slow.iteration_time_ms * (1 + 1e-9)


FOLD_CASES = {
    "dp across nodes": dict(nodes=4, gpus_per_node=2, tp=2, pp=1),
    "dp and tp inside nodes": dict(nodes=2, gpus_per_node=8, tp=2, pp=2),
    "moe with ep": dict(nodes=8, gpus_per_node=2, tp=2, pp=2, ep=2, layers=4,
                        moe={"num_experts": 4, "top_k": 2}, gbs=16),
    "shared nics": dict(nodes=2, gpus_per_node=4, tp=1, pp=2, gpus_per_nic=2),
    "distributed optimizer": dict(nodes=4, gpus_per_node=2, tp=2, pp=2,
                                  extra_parallelism={"distributed_optimizer": True}),
}


@pytest.mark.parametrize("case", list(FOLD_CASES))
def test_symmetric_folding_agrees_with_full_expansion(case):
    sc = gpt_scenario(**FOLD_CASES[case])
    full = simulate(sc, "full")
    folded = simulate(sc, "symmetric")
    assert folded.result.simulated_gpus < full.result.simulated_gpus
    assert folded.result.iteration_time_ms == pytest.approx(full.result.iteration_time_ms, rel=1e-9)
    for name, value in full.result.breakdown.items():
        assert folded.result.breakdown[name] == pytest.approx(value, rel=1e-6, abs=1e-9)
    assert folded.result.tflops_per_gpu == pytest.approx(full.result.tflops_per_gpu, rel=1e-9)
