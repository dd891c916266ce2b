"""Link utilisation: bytes carried over capacity x step, in [0, 1]; bytes carried are the flows' wire bytes on
every link of their route (NVLink inside a node, NIC ports, and twice the leaf-spine tier for flows between
leaves)."""

from __future__ import annotations

import numpy as np
import pytest
from analysed import analysed
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario, merge
from simulon.analysis.links import link_classes, load_steps
from simulon.config import ScenarioConfig
from simulon.engine.flows import flow_properties

FABRIC = {"tiers": 2, "nics_per_leaf": 4, "spines": 2, "oversubscription": 2.0}


@pytest.fixture(scope="module")
def leaf_spine_run():
    """Four nodes of two GPUs, two nodes a leaf, two spines: tensor parallelism in a node, data parallelism across
    the leaves; every GPU simulated."""
    base = gpt_scenario(nodes=4, gpus_per_node=2, tp=2, gbs=8, layers=2, nic="50Gbps").model_dump(exclude_none=True)
    data = merge(base, {"datacenter": {"network": {"scale_out": {"topology": FABRIC}}}})
    return analysed(ScenarioConfig.model_validate(data), "full")


def test_every_link_is_used_between_none_and_all_of_its_capacity_over_the_step(leaf_spine_run):
    use = leaf_spine_run.analysis.link_use
    assert (use.utilisation >= 0).all() and (use.utilisation <= 1 + 1e-9).all()
    assert set(use.link_class) == {"NVLink", "NIC", "leaf-spine"}
    by_class = leaf_spine_run.analysis.links["by_class"]
    assert all(0 < c["mean_utilisation"] <= c["max_utilisation"] <= 1 for c in by_class.values())
    busiest = leaf_spine_run.analysis.links["busiest"]
    assert [b["utilisation"] for b in busiest] == sorted((b["utilisation"] for b in busiest), reverse=True)
    assert busiest[0]["utilisation"] == pytest.approx(use.utilisation.max())


def test_bytes_carried_are_the_wire_bytes_of_the_flows_crossing_each_link(leaf_spine_run):
    sim = leaf_spine_run.sim
    dag, topology = sim.dag, sim.topology
    props = flow_properties(dag, topology, sim.fold)
    src, dst = dag.gpu[props.nodes], dag.peer[props.nodes]
    assert (dst >= 0).all()  # point-to-point flows only on this fabric: no in-switch reduction
    node_of = np.arange(dag.num_gpus) // topology.gpus_per_node
    inside = node_of[src] == node_of[dst]
    carried = leaf_spine_run.analysis.link_use.bytes
    g = dag.num_gpus
    sent_inside = np.bincount(src[inside], weights=props.wire[inside], minlength=g)
    assert np.allclose(carried[:g], sent_inside)  # each GPU's NVLink port up: what it sends inside its node
    sent_out = np.bincount(src[~inside], weights=props.wire[~inside], minlength=g)
    nic_up = topology.fabric.up(np.arange(g))  # a NIC per GPU
    assert np.allclose(carried[nic_up], sent_out)  # bytes sent = bytes on the first hop out
    leaf = topology.fabric.leaf_of_port
    between = ~inside & (leaf[src] != leaf[dst])
    classes = np.array(link_classes(topology))
    assert between.any()
    assert carried[classes == "leaf-spine"].sum() == pytest.approx(2 * props.wire[between].sum(), rel=1e-12)
    assert leaf_spine_run.analysis.links["by_class"]["leaf-spine"]["bytes"] == pytest.approx(
        2 * props.wire[between].sum(), rel=1e-12)


def test_the_busiest_links_counters_integrate_to_the_bytes_the_links_carried(leaf_spine_run):
    """The counter tracks hold each flow at its mean rate: integrated over the step they give back the bytes."""
    analysis, sim = leaf_spine_run.analysis, leaf_spine_run.sim
    names = [sim.topology.link_name(i) for i in range(sim.topology.num_links)]
    for series in analysis.busiest:
        link = names.index(series.name)
        spans = np.diff(np.append(series.times, sim.timeline.makespan))
        moved = float((series.load * spans).sum()) * sim.topology.capacity[link]
        assert moved == pytest.approx(analysis.link_use.bytes[link], rel=1e-6)


@pytest.mark.parametrize("gpus_per_nic", [1, 2])
def test_a_folded_step_reports_the_link_classes_the_full_expansion_does(gpus_per_nic):
    """The folded step counted only its representatives' links: NVLink 'used 12 of 192' and 1/16 of the bytes on
    the MoE example, where the full expansion used all 192."""
    sc = gpt_scenario(nodes=4, gpus_per_node=4, tp=2, gbs=16, layers=2, nic="50Gbps", gpus_per_nic=gpus_per_nic)
    folded, full = analysed(sc, "symmetric"), analysed(sc, "full")
    assert folded.sim.dag.multiplicity.max() > 1
    assert folded.step_ms == pytest.approx(full.step_ms, rel=1e-9)
    for name, whole in full.analysis.links["by_class"].items():
        part = folded.analysis.links["by_class"][name]
        assert (part["links"], part["used"]) == (whole["links"], whole["used"])
        assert part["bytes"] == pytest.approx(whole["bytes"], rel=1e-9)
        assert part["mean_utilisation"] == pytest.approx(whole["mean_utilisation"], rel=1e-9)



@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(1, 4), st.floats(0.1, 1.0)), min_size=1, max_size=8))
def test_a_links_load_has_one_level_per_instant_and_a_flow_that_ends_as_another_starts_is_not_counted_twice(flows):
    """A ring's steps on one link end as the next begin: the trace's counter read 2.0 of the link for an
    instant at each such hand-over."""
    starts = np.array([float(s) for s, _, _ in flows])
    ends = starts + np.array([float(d) for _, d, _ in flows])
    rates = np.array([r for _, _, r in flows])
    times, level = load_steps(np.concatenate([starts, ends]), np.concatenate([rates, -rates]))
    assert np.all(np.diff(times) > 0)
    for t, got in zip(times, level, strict=True):
        assert got == pytest.approx(rates[(starts <= t) & (ends > t)].sum(), abs=1e-9)
    back_to_back = load_steps(np.array([0.0, 1.0, 1.0, 2.0]), np.array([1.0, -1.0, 1.0, -1.0]))
    assert back_to_back[1].tolist() == [1.0, 1.0, 0.0]
