"""The compiled event loop (engine/compiled.py) against the Python reference (replay.event_loop): every node's
start and finish time the same to the bit, on training steps (dense, MoE, interleaved, folded and fully
expanded, SM sharing on and off, reshare window 0 and 1 us), on rate-limited collectives, and on random
networks of flows and kernels; progress reported alike; the engine picked as asked, and Python where numba
cannot be imported."""

from __future__ import annotations

import importlib
import sys
from dataclasses import replace as with_
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simulon.engine as engine_package
from helpers import gpt_scenario
from simulon.collective.tuner import CollectivePlan
from simulon.collective.types import CollType
from simulon.compute.calibration import Calibrations
from simulon.compute.populate import populate
from simulon.config import DatacenterConfig
from simulon.config.errors import ConfigError
from simulon.dag.builder import collective_dag
from simulon.dag.fold import Fold
from simulon.engine import compiled
from simulon.engine.flows import FlowProperties, flow_properties
from simulon.engine.footprint import LinkLoads
from simulon.engine.replay import NOT_FINISHED, event_loop, replay
from simulon.engine.replay_input import NO_FLOW, NodeArrays, csr
from simulon.network import Topology
from simulon.network.calibration import LinkModel
from simulon.network.fabric import NO_LINK
from simulon.pipeline import build_dag

replay_module = importlib.import_module("simulon.engine.replay")  # the package exports a function of that name

SCENARIOS = {
    "dense tp pp dp": dict(nodes=2, gpus_per_node=4, tp=2, pp=2),
    "moe with ep": dict(nodes=4, gpus_per_node=2, tp=1, pp=2, ep=2, layers=4, moe={"num_experts": 4, "top_k": 2},
                        gbs=16),
    "interleaved vpp": dict(nodes=2, gpus_per_node=4, tp=2, pp=2, layers=8, extra_parallelism={"vpp": 2}),
    "nodes sharing nics": dict(nodes=4, gpus_per_node=4, tp=2, pp=1, gpus_per_nic=2, gbs=16, nic="25Gbps"),
    "distributed optimizer": dict(nodes=4, gpus_per_node=2, tp=2, pp=2,
                                  extra_parallelism={"distributed_optimizer": True}),
    "tp overlapped with gemms": dict(nodes=2, gpus_per_node=4, tp=4, pp=2, hidden=2048, heads=16,
                                     extra_parallelism={"sequence_parallel": True, "tp_comm_overlap": True}),
    "fsdp prefetching": dict(nodes=2, gpus_per_node=4, extra_parallelism={"fsdp": "full_shard"}),
}
OVERLAPPED = ("tp overlapped with gemms", "fsdp prefetching")
"""Cases whose GEMMs run beside collectives: SM sharing changes their times."""


@cache
def populated(case: str, expand: str):
    """A scenario's DAG with its kernels timed, its topology and fold, and its GPU's SMs (built once: the
    replays read it and never change it)."""
    sc = gpt_scenario(**SCENARIOS[case])
    dag, topology, fold = build_dag(sc, expand)
    populate(dag, sc.datacenter.node.gpu, sc.workload.training.dtype)
    return dag, topology, fold, Calibrations.shipped().sm_count(sc.datacenter.node.gpu)


def assert_same_times(dag, topology, fold, sm_count, window_s):
    python = replay(dag, topology, fold, sm_count, window_s, engine="python")
    fast = replay(dag, topology, fold, sm_count, window_s, engine="compiled")
    assert np.array_equal(fast.start, python.start)
    assert np.array_equal(fast.finish, python.finish)
    assert np.array_equal(fast.rates.links, python.rates.links) and len(python.rates.links) > 0
    for field in ("time", "flow", "rate"):
        assert np.array_equal(getattr(fast.rates, field), getattr(python.rates, field))
    return python


@pytest.mark.parametrize("expand", ["symmetric", "full"])
@pytest.mark.parametrize("case", list(SCENARIOS))
def test_a_training_step_replays_to_the_same_bit_compiled(case, expand):
    dag, topology, fold, sm_count = populated(case, expand)
    assert len(flow_properties(dag, topology, fold).nodes) > 0
    times = {}
    for sms in (0, sm_count):
        for window_s in (0.0, 1e-6):
            times[sms, window_s] = assert_same_times(dag, topology, fold, sms, window_s).finish
    if case in OVERLAPPED:   # SM sharing is exercised
        assert not np.array_equal(times[0, 0.0], times[sm_count, 0.0])


def test_the_cases_cover_rate_limits_and_folded_flows():
    """Some flows above stop at their own rate limit, and a folded flow stands for several on a NIC link."""
    dag, topology, fold, _ = populated("dense tp pp dp", "auto")
    assert np.isfinite(flow_properties(dag, topology, fold).cap).any()
    _, topology, fold, _ = populated("nodes sharing nics", "symmetric")
    assert fold.axes and topology.fold_weights(fold.rep).max() > 1


def datacenter(nodes: int, gpus: int, nic: str = "200Gbps") -> DatacenterConfig:
    return DatacenterConfig.model_validate({
        "cluster": {"num_nodes": nodes}, "node": {"gpus_per_node": gpus, "gpus_per_nic": 1, "gpu": "H100"},
        "network": {"scale_up": {"switch": {"port_speed": "100GBps", "latency": "1us"}},
                    "scale_out": {"nic": {"speed": nic, "latency": "2us"}}}})


LIMITED = LinkModel("test", "test", 1.0, 1.0, 1.0, 0.0, (2e-6,) * 3, (0.0,) * 3, (1e-6,) * 3, (10e9,) * 3)
"""Every channel moves at most 10 GB/s: flows stop at their own limit before their links fill."""


@pytest.mark.parametrize(("ctype", "algorithm", "channels"), [
    (CollType.AllReduce, "ring", 2), (CollType.AllReduce, "tree", 4), (CollType.AllToAll, "ring", 2),
    (CollType.AllGather, "ring", 8)])
def test_rate_limited_collectives_replay_to_the_same_bit_compiled(ctype, algorithm, channels):
    dc = datacenter(nodes=4, gpus=2)
    topology = Topology.from_datacenter(dc, model=LIMITED)
    plan = CollectivePlan(topology, algorithm, "simple", channels)
    groups = [(0, 2, 4, 6), (1, 3, 5, 7)]   # two groups crossing the same NICs' fabric at once
    dag = collective_dag(ctype, groups, 2.0**26, dc.num_gpus, plan, Fold.identity(dc.num_gpus))
    dag.duration = np.zeros(dag.num_nodes)
    fold = Fold.identity(dc.num_gpus)
    assert np.isfinite(flow_properties(dag, topology, fold).cap).all()
    assert_same_times(dag, topology, fold, 0, 0.0)


def reported(engine: str, report_every: int, monkeypatch) -> list[int]:
    dag, topology, fold, sm_count = populated("dense tp pp dp", "auto")
    monkeypatch.setattr(replay_module, "REPORT_EVERY", report_every)
    done: list[int] = []
    replay(dag, topology, fold, sm_count, 1e-6, done.append, engine=engine)
    return done


def test_the_compiled_loop_reports_progress_as_the_python_one_does(monkeypatch):
    compiled_done = reported("compiled", 100, monkeypatch)
    assert len(compiled_done) > 10
    assert compiled_done == reported("python", 100, monkeypatch)


def test_an_engine_is_picked_by_argument_then_environment(monkeypatch):
    dag, topology, fold, _ = populated("dense tp pp dp", "auto")
    with pytest.raises(ValueError, match="engine 'numba'"):
        replay(dag, topology, fold, engine="numba")
    monkeypatch.setenv("SIMULON_REPLAY", "fortran")
    with pytest.raises(ConfigError, match="environment variable SIMULON_REPLAY: expected one of auto, compiled, "
                                          "python, got 'fortran'"):
        replay(dag, topology, fold)
    ran = []
    monkeypatch.setattr(compiled, "event_loop", lambda *args: ran.append("compiled") or event_loop(*args))
    monkeypatch.setenv("SIMULON_REPLAY", "python")
    replay(dag, topology, fold)
    monkeypatch.setenv("SIMULON_REPLAY", "compiled")
    replay(dag, topology, fold)
    assert ran == ["compiled"]
    monkeypatch.delenv("SIMULON_REPLAY")
    replay(dag, topology, fold)   # auto: this DAG is too small to pay for numba
    monkeypatch.setattr(replay_module, "COMPILED_FROM_NODES", dag.num_nodes)
    replay(dag, topology, fold)
    assert ran == ["compiled", "compiled"]


def test_auto_runs_the_compiled_loop_on_a_small_dag_of_an_all_to_all_too_wide_for_the_python_one(monkeypatch):
    dc = gpt_scenario(nodes=8, gpus_per_node=8, gbs=64).datacenter
    topology = Topology.from_datacenter(dc)
    plan = CollectivePlan(topology, "ring", "simple", channels=32)
    monkeypatch.delenv("SIMULON_REPLAY", raising=False)
    ran = []
    monkeypatch.setattr(compiled, "event_loop", lambda *args: ran.append("compiled") or event_loop(*args))
    # at 16 ranks every pair's flow starts at once (16 x 15), at 48 each rank's first 16 sends (48 x 16)
    for ranks, at_once in ((16, 240), (48, 768)):
        dag = collective_dag(CollType.AllToAll, [tuple(range(ranks))], 2**24, dc.num_gpus, plan)
        dag.duration = np.zeros(dag.num_nodes)
        assert dag.num_nodes < replay_module.COMPILED_FROM_NODES
        assert replay_module.flows_at_once(dag) == at_once
        replay(dag, topology, Fold.identity(dc.num_gpus))
    assert ran == ["compiled"]  # the 16 ranks' in Python, the 48's compiled


def test_without_numba_the_compiled_engine_runs_the_python_loop(monkeypatch):
    dag, topology, fold, sm_count = populated("dense tp pp dp", "auto")
    expected = replay(dag, topology, fold, sm_count, engine="python")
    monkeypatch.setitem(sys.modules, "numba", None)   # import numba raises ImportError
    monkeypatch.delitem(sys.modules, "simulon.engine.compiled")
    monkeypatch.delattr(engine_package, "compiled")
    timeline = replay(dag, topology, fold, sm_count, engine="compiled")
    assert "simulon.engine.compiled" not in sys.modules
    assert np.array_equal(timeline.finish, expected.finish)


@st.composite
def networks(draw, sm_count: int):
    """A random DAG of flows, kernels and markers on random links: flows over random routes of links with
    random capacities, fold weights and rate limits, sizes and capacities from small sets so that flows often
    finish at the same time; dependencies and a sender's next flows only from lower to higher node ids. With
    an `sm_count`, markers take and free SMs and some kernels are SM-bound (as node_arrays makes them), some of
    those pipelined with a collective (re-timed or not as SMs are taken and freed while they run)."""
    n = draw(st.integers(1, 24))
    num_gpus = draw(st.integers(1, 3))
    num_links = draw(st.integers(1, 5))
    kind = draw(st.lists(st.sampled_from(["flow", "flow", "kernel", "marker"]), min_size=n, max_size=n))
    flow_nodes = np.array([i for i in range(n) if kind[i] == "flow"], dtype=np.int64)
    f = len(flow_nodes)
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    edges = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=2 * n)) if pairs else []
    flow_pairs = [(a, b) for a, b in pairs if kind[a] == "flow"]
    streams = draw(st.lists(st.sampled_from(flow_pairs), unique=True, max_size=n)) if flow_pairs else []
    routes = [draw(st.lists(st.integers(0, num_links - 1), min_size=1, max_size=3)) for _ in range(f)]
    links = np.full((f, 3), NO_LINK, dtype=np.int64)
    for i, route in enumerate(routes):
        links[i, :len(route)] = route
    small = st.sampled_from([0.5, 1.0, 2.0])
    props = FlowProperties(flow_nodes, links, np.array(draw(st.lists(small, min_size=f, max_size=f))),
                           np.array(draw(st.lists(st.sampled_from([np.inf, np.inf, 0.7, 1.0, 3.0]), min_size=f,
                                                  max_size=f))),
                           np.array(draw(st.lists(st.sampled_from([0.0, 0.25, 1e-7]), min_size=f, max_size=f))),
                           np.array(draw(st.lists(st.sampled_from([0.0, 0.0, 0.5, 1e-7]), min_size=f, max_size=f))))
    capacity = np.array(draw(st.lists(st.sampled_from([1.0, 2.0, 3.0]), min_size=num_links, max_size=num_links)))
    weight = np.array(draw(st.lists(st.sampled_from([1.0, 1.0, 2.0, 4.5]), min_size=num_links, max_size=num_links)))
    duration = [draw(small) if k == "kernel" else 0.0 for k in kind]
    span = [draw(st.integers(-8, 16)) if k == "marker" and sm_count else 0 for k in kind]
    sm_bound = [k == "kernel" and sm_count > 0 and draw(st.booleans()) for k in kind]
    pipelined = [bound and draw(st.booleans()) for bound in sm_bound]  # keeping the stretch it starts with
    gpu = draw(st.lists(st.integers(0, num_gpus - 1), min_size=n, max_size=n))
    src, dst = np.array([e[0] for e in edges], dtype=np.int64), np.array([e[1] for e in edges], dtype=np.int64)
    stream_src = np.array([e[0] for e in streams], dtype=np.int64)
    stream_dst = np.array([e[1] for e in streams], dtype=np.int64)
    flow_of = np.full(n, NO_FLOW, dtype=np.int64)
    flow_of[flow_nodes] = np.arange(f)
    pending = np.bincount(dst, minlength=n) + np.bincount(stream_dst, minlength=n)
    nodes = NodeArrays(*csr(src, dst, n), *csr(stream_src, stream_dst, n), pending.astype(np.int64), flow_of,
                       np.array(duration), np.array(span, dtype=np.int64), np.array(sm_bound), np.array(gpu),
                       np.array(pipelined, dtype=bool))
    return nodes, props, capacity, weight, num_gpus


@settings(max_examples=300)
@given(st.sampled_from([0, 32]).flatmap(lambda sms: st.tuples(st.just(sms), networks(sms))),
       st.sampled_from([0.0, 1e-6, 0.3]), st.integers(1, 5), st.randoms(use_true_random=False))
def test_random_networks_replay_to_the_same_bit_compiled(network, window_s, report_every, chance):
    """... and log the same rates of the flows watched."""
    sm_count, (nodes, props, capacity, weight, num_gpus) = network
    watched = np.array([chance.random() < 0.5 for _ in props.nodes], dtype=bool)
    runs = []
    for loop in (event_loop, compiled.event_loop):
        done: list[int] = []
        start, finish, log = loop(nodes, props, capacity, LinkLoads.of_routes(props.links, weight), num_gpus,
                                  sm_count, window_s, done.append, report_every, watched)
        runs.append((start, finish, done, log))
    (start, finish, done, log), (fast_start, fast_finish, fast_done, fast_log) = runs
    assert np.array_equal(fast_start, start) and np.array_equal(fast_finish, finish)
    assert all(np.array_equal(a, b) for a, b in zip(fast_log, log, strict=True))
    assert set(log[1].tolist()) <= set(np.flatnonzero(watched).tolist())
    assert fast_done == done
    assert not (finish == NOT_FINISHED).any()   # an acyclic DAG always finishes


def test_the_event_heap_grows_and_the_times_stay_the_same(monkeypatch):
    monkeypatch.setattr(compiled, "HEAP_ROOM", 1)   # a heap of 1 + 2 entries per flow doubles as it fills
    dag, topology, fold, sm_count = populated("moe with ep", "auto")
    assert_same_times(dag, topology, fold, sm_count, 1e-6)


def test_the_same_input_gives_the_same_bytes():
    dag, topology, fold, sm_count = populated("interleaved vpp", "full")
    first = replay(dag, topology, fold, sm_count, 1e-6, engine="compiled")
    again = replay(dag, topology, fold, sm_count, 1e-6, engine="compiled")
    assert first.start.tobytes() == again.start.tobytes() and first.finish.tobytes() == again.finish.tobytes()


def test_a_dependency_cycle_stalls_both_loops_alike():
    dag, topology, fold, sm_count = populated("dense tp pp dp", "auto")
    a, b = dag.edge_src[0], dag.edge_dst[0]
    cyclic = with_(dag, edge_src=np.append(dag.edge_src, b), edge_dst=np.append(dag.edge_dst, a))  # b waits on a
    messages = []
    for engine in ("python", "compiled"):
        with pytest.raises(RuntimeError, match="replay stalled") as error:
            replay(cyclic, topology, fold, sm_count, engine=engine)
        messages.append(str(error.value))
    assert messages[0] == messages[1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 4), max_size=6), max_size=20))
def test_a_slot_is_first_unless_its_flow_loaded_its_link_at_an_earlier_slot(routes):
    """A route crossing a link twice joins the link's list once, at its first crossing."""
    ptr = np.concatenate([[0], np.cumsum([len(route) for route in routes])]).astype(np.int64)
    link = np.array([hop for route in routes for hop in route], dtype=np.int64)
    first = compiled.first_slots(LinkLoads(ptr, link, np.ones(len(link))))
    assert first.tolist() == [hop not in route[:at] for route in routes for at, hop in enumerate(route)]


@pytest.mark.parametrize("loop", [event_loop, compiled.event_loop], ids=["python", "compiled"])
@pytest.mark.parametrize("kernels", [1, 10, 100])
def test_a_flow_gets_its_rate_within_the_reshare_window_of_its_start_however_dense_the_events_after_it(loop, kernels):
    """A flow of 1 byte on a link of 1 byte/s starts at 0 beside a chain of kernels 0.4 s each, in a window of 0.5 s:
    its rate is computed at the first event past 0.5 s after it started (0.4 s, the next one coming at 0.8), so it
    is delivered at 1.4 s. Measured from each event instead, the chain put its rate off to the chain's end (a
    flow of 128 H800 sending nothing for up to 300 us in a 1 us window), at 1 + 0.4 x kernels s."""
    n = 1 + kernels
    flow_of = np.full(n, NO_FLOW, dtype=np.int64)
    flow_of[0] = 0
    src, dst = np.arange(1, n - 1, dtype=np.int64), np.arange(2, n, dtype=np.int64)  # kernel i waits for i - 1
    none = np.zeros(0, dtype=np.int64)
    pending = np.bincount(dst, minlength=n).astype(np.int64)
    nodes = NodeArrays(*csr(src, dst, n), *csr(none, none, n), pending, flow_of, np.array([0.0] + [0.4] * kernels),
                       np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64))
    props = FlowProperties(np.array([0]), np.array([[0]]), np.array([1.0]), np.array([np.inf]), np.array([0.0]),
                           np.array([0.0]))
    start, finish, _ = loop(nodes, props, np.array([1.0]), LinkLoads.of_routes(props.links, np.ones(1)), 1, 0, 0.5,
                            lambda done: None, 1000, np.zeros(1, dtype=bool))
    assert start[0] == 0.0 and finish[0] == pytest.approx(1.4)
    assert finish[-1] == pytest.approx(0.4 * kernels)
