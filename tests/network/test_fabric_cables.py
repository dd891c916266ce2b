"""A fabric's uplinks are whole cables of one switch port each: an oversubscription that does not divide a leaf's
ports builds the whole cables it fills and no cable faster than its port (16 NICs at 1.5:1 made 10 cables of 53.3
GB/s on 50 GB/s ports, so 1.5:1 ran 6.7% faster than a non-blocking fabric under ECMP)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.config import DatacenterConfig
from simulon.network.summary import TopologySummary
from simulon.network.topology import Topology
from simulon.pipeline import collective_sweep

PORT = 50e9  # a ConnectX-7's 400 Gb/s


def fabric(oversubscription: float, tiers: int = 2, routing: str = "ecmp") -> DatacenterConfig:
    topology = {"tiers": tiers, "rail_optimized": False, "nics_per_leaf": 16, "spines": 4,
                "oversubscription": oversubscription, "routing": routing}
    if tiers == 3:
        topology.update({"leaves_per_pod": 2, "cores": 4, "pod_oversubscription": oversubscription})
    return DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": 8},
                                            "network": {"scale_out": {"fabrics": [], "topology": topology}}})


@settings(max_examples=30, deadline=None)
@given(oversubscription=st.floats(1.0, 6.0), tiers=st.sampled_from([2, 3]))
def test_no_scale_out_cable_is_faster_than_its_port(oversubscription, tiers):
    topo = Topology.from_datacenter(fabric(oversubscription, tiers))
    above = TopologySummary.of(topo).tiers[1:]
    assert all(tier.link_rate <= PORT * (1 + 1e-12) for tier in above)


@settings(max_examples=20, deadline=None)
@given(less=st.floats(1.0, 4.0), more=st.floats(1.0, 4.0))
def test_more_oversubscription_never_gives_more_bisection(less, more):
    less, more = sorted((less, more))
    bisection = [TopologySummary.of(Topology.from_datacenter(fabric(o))).scale_out_bisection for o in (less, more)]
    assert bisection[1] <= bisection[0] * (1 + 1e-12)


def test_a_ring_all_reduce_is_no_faster_on_a_fractionally_oversubscribed_fabric_than_on_a_non_blocking_one():
    times = [collective_sweep(fabric(o), "allreduce", range(64), [2**30], "ring", protocol="simple")[0].time_us
             for o in (1.0, 1.5)]
    assert times[1] >= times[0]


def test_16_nics_at_3_to_1_build_5_whole_cables_a_leaf():
    topo = Topology.from_datacenter(fabric(3.0))
    assert topo.fabric.leaf_uplinks == 5
    assert TopologySummary.of(topo).scale_out_bisection == 4 * 5 * PORT / 2  # 8 nodes: 4 leaves of 16 NICs
