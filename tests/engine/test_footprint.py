"""Folding on a fabric of two tiers (engine/footprint.py, dag.fold.Fold.counterparts and Fold.expands): a simulated
flow names the real flows it stands for, one per GPU of its sender's class, each a flow the full expansion has;
the links above the leaves carry, summed over the simulated flows' footprints, the bytes the full expansion puts
on them; the folded step takes the full expansion's time within 1% on spine-leaf and rail-optimized fabrics,
balanced and 2:1, with dense (tp, pp, dp) and MoE (ep) traffic, where different collectives collide on the
spines; and the compiled loop replays it to the same bit as the Python one."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from helpers import gpt_scenario
from simulon.compute.populate import populate
from simulon.config.dc import FabricSpec
from simulon.config.scenario import ScenarioConfig
from simulon.engine.flows import NO_COLLECTIVE, flow_properties
from simulon.engine.footprint import LinkLoads, flow_loads
from simulon.engine.replay import replay
from simulon.pipeline import build_dag, run_populated

TWO_TIER = {"tiers": 2, "rail_optimized": False, "nics_per_leaf": 4, "spines": 4}
CASES = {
    "tp pp dp": dict(nodes=8, gpus_per_node=4, tp=2, pp=2, gbs=16),
    # tp 2: a pipelined step on a spine-leaf under ECMP folds tensor parallelism alone (Topology.fold_axes)
    "moe with ep": dict(nodes=8, gpus_per_node=2, tp=2, pp=2, ep=2, layers=4, moe={"num_experts": 4, "top_k": 2},
                        gbs=16),
    "dp over nodes": dict(nodes=8, gpus_per_node=2, gbs=16),
}


def on_fabric(sc: ScenarioConfig, fabric: dict) -> ScenarioConfig:
    net = sc.datacenter.network
    scale_out = net.scale_out.model_copy(update={"topology": FabricSpec.model_validate(fabric)})
    dc = sc.datacenter.model_copy(update={"network": net.model_copy(update={"scale_out": scale_out})})
    return sc.model_copy(update={"datacenter": dc})


FABRICS = {
    "spine-leaf": TWO_TIER,
    "spine-leaf 2:1": {**TWO_TIER, "oversubscription": 2.0},
    "rails under one leaf each": {"tiers": 2, "rail_optimized": True, "nics_per_leaf": 8, "spines": 4},
    "rails over two leaves 2:1": {"tiers": 2, "rail_optimized": True, "nics_per_leaf": 4, "spines": 4,
                                  "oversubscription": 2.0},
}


@cache
def built(case: str, expand: str, fabric: str = "spine-leaf"):
    """A case's DAG on a two-tier fabric, and its topology and fold."""
    sc = on_fabric(gpt_scenario(**CASES[case]), FABRICS[fabric])
    dag, topology, fold = build_dag(sc, expand)
    return sc, dag, topology, fold


@pytest.mark.parametrize("case", list(CASES))
def test_a_simulated_flow_stands_for_real_flows_one_per_gpu_of_its_class(case):
    _, full, _, _ = built(case, "full")
    _, dag, _, fold = built(case, "symmetric")
    assert fold.axes
    real = set(zip(full.gpu[full.kind == 1].tolist(), full.peer[full.kind == 1].tolist(), strict=True))
    flows = np.flatnonzero(dag.kind == 1)
    folded = (dag.peer[flows] >= 0) & (fold.rep[dag.gpu[flows]] == dag.gpu[flows])
    for node in flows[folded][::7]:
        src, dst, coll = int(dag.gpu[node]), int(dag.peer[node]), int(dag.coll[node])
        group = None if coll == NO_COLLECTIVE else dag.collectives[coll].group
        senders, receivers = fold.counterparts(src, dst, group)
        assert (senders[0], receivers[0]) == (src, dst)
        assert sorted(senders.tolist()) == sorted(np.flatnonzero(fold.rep == src).tolist())
        assert set(zip(senders.tolist(), receivers.tolist(), strict=True)) <= real


def inner_bytes(dag, topology, fold) -> np.ndarray:
    """Bytes every link above the leaves carries over the step, the flows' loads summed."""
    props = flow_properties(dag, topology, fold)
    loads = flow_loads(dag, topology, fold, props)
    flow = np.repeat(np.arange(len(props.nodes)), np.diff(loads.ptr))
    carried = np.bincount(loads.link, weights=props.wire[flow] * loads.weight, minlength=topology.num_links)
    return carried[topology.inner_links_from:]


@pytest.mark.parametrize("case", list(CASES))
def test_the_links_above_the_leaves_carry_what_the_full_expansion_puts_there(case):
    full = inner_bytes(*built(case, "full")[1:])
    folded = inner_bytes(*built(case, "symmetric")[1:])
    assert full.sum() > 0
    assert folded == pytest.approx(full, rel=1e-9)


def test_without_a_fold_a_flow_loads_its_route_and_above_the_leaves_its_connections_shares():
    """Below the leaves a flow's route, whole; above them its connections' cables (Topology.connections: its
    channels, hashed apart by ECMP), each with its share of the flow's bytes, the shares of one tier summing to the
    whole; the first connection's cables those of the flow's route."""
    _, dag, topology, fold = built("tp pp dp", "full")
    props = flow_properties(dag, topology, fold)
    loads = flow_loads(dag, topology, fold, props)
    route = LinkLoads.of_routes(props.links, np.ones(topology.num_links))
    inner_from = topology.inner_links_from
    leaf_up = slice(inner_from, inner_from + topology.fabric.leaves * topology.fabric.spine_paths)
    spread = 0
    for f in range(len(props.nodes)):
        mine = slice(loads.ptr[f], loads.ptr[f + 1])
        links, weight = loads.link[mine], loads.weight[mine]
        own = route.link[route.ptr[f]:route.ptr[f + 1]]
        assert sorted(links[links < inner_from].tolist()) == sorted(own[own < inner_from].tolist())
        assert (weight[links < inner_from] == 1.0).all()
        up = (links >= leaf_up.start) & (links < leaf_up.stop)
        if up.any():
            assert weight[up].sum() == pytest.approx(1.0) and weight[~up & (links >= inner_from)].sum() == \
                pytest.approx(1.0)
            assert set(own[own >= inner_from].tolist()) <= set(links[links >= inner_from].tolist())
            spread += int(up.sum() > 1)
    assert spread > 0  # some flows' connections took several cables


def step_ms(case: str, expand: str, fabric: str) -> float:
    sc, dag, topology, fold = built(case, expand, fabric)
    populate(dag, sc.datacenter.node.gpu, sc.workload.training.dtype)
    return run_populated(sc, dag, topology, fold).result.iteration_time_ms


@pytest.mark.parametrize(("case", "fabric"), [
    ("tp pp dp", "rails under one leaf each"), ("tp pp dp", "spine-leaf"), ("tp pp dp", "spine-leaf 2:1"),
    ("tp pp dp", "rails over two leaves 2:1"), ("moe with ep", "spine-leaf 2:1"),
    ("moe with ep", "rails over two leaves 2:1"),
    ("dp over nodes", "spine-leaf"), ("dp over nodes", "spine-leaf 2:1")])
def test_a_folded_step_takes_the_full_expansions_time_within_one_percent(case, fabric):
    """On the spine-leaf fabrics both pipeline stages' data-parallel all-reduces cross the spines at once and
    collide there."""
    full = step_ms(case, "full", fabric)
    assert step_ms(case, "symmetric", fabric) == pytest.approx(full, rel=0.01)


@pytest.mark.parametrize("case", ["moe with ep", "tp pp dp"])
def test_the_compiled_loop_replays_footprints_and_expanded_collectives_to_the_same_bit(case):
    sc, dag, topology, fold = built(case, "symmetric", "spine-leaf 2:1")
    populate(dag, sc.datacenter.node.gpu, sc.workload.training.dtype)
    props = flow_properties(dag, topology, fold)
    loads = flow_loads(dag, topology, fold, props)
    assert (loads.weight > 1).any() and props.physical.any()   # footprints with collisions, and expanded flows
    python = replay(dag, topology, fold, 132, 1e-6, engine="python")
    fast = replay(dag, topology, fold, 132, 1e-6, engine="compiled")
    assert np.array_equal(python.start, fast.start) and np.array_equal(python.finish, fast.finish)
