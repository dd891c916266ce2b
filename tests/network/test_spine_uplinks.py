"""A three-tier pod's spines are sized as network/fabric.py builds them: every spine has the uplinks to the cores that
the fullest spine's downlinks need over the pod's oversubscription (config.dc.fabric_cables), and the spine port
check (config.dc.fabric_ports) counts that spine's cables. A leaf's uplinks go round robin over the spines, so where
the spines do not divide them the first spines take one cable more of every leaf (config.dc.spine_cables); the
uplinks were sized from the pod's average, and a non-blocking pod of 20 uplinks a leaf over 8 spines gave spines 0-3
24 cables down and 20 up.
A dual-ToR fabric of one plane puts both ToRs of every NIC under the pod's spines (network/fabric.py: a pod's NICs,
leaves_per_pod leaves of each ToR set), and the spines' uplinks and the check counted one set: the spines of
rail-optimized-3-tier with dual_tor took 32 cables down and had 16 up, a pod 2:1 oversubscribed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from simulon.config.dc import FabricSpec, cable_share, core_cables, core_reach, fabric_cables, fabric_ports
from simulon.config.templates import template_names
from simulon.network.fabric import Fabric

PORT = 50e9


def built_spines(built: Fabric) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(cables down, cables up, bytes/s down, bytes/s up) of every spine of an ECMP fabric as its links are laid
    out and routed (Fabric.routes): link leaf * spine_paths + k of the leaf_up block is the leaf's cable k, to spine
    k mod spine_reach of the leaf's plane and pod; link spine * core_paths + m of the spine_up block is the spine's
    cable m."""
    block = built.links_of("leaf_up")
    leaf, cable = np.divmod(np.arange(block.stop - block.start), built.spine_paths)
    spine = (built.plane_of_leaf[leaf] * built.pods + built.pod_of_leaf[leaf]) * built.spine_reach \
        + cable % built.spine_reach
    count = built.spec.planes * built.pods * built.spine_reach
    down = np.bincount(spine, minlength=count)
    down_rate = np.bincount(spine, built.capacity[block], minlength=count)
    up_rate = built.capacity[built.links_of("spine_up")].reshape(count, built.core_paths).sum(axis=1)
    return down, np.full(count, built.core_paths), down_rate, up_rate


def fabrics(dual: bool = False) -> st.SearchStrategy[tuple[FabricSpec, int]]:
    """Three-tier ECMP fabrics (one link a cable), dual-ToR ones too where `dual`, and a count of nodes of 8 NICs."""
    @st.composite
    def draw(data: st.DrawFn) -> tuple[FabricSpec, int]:
        per_leaf, spines, per_pod = data(st.integers(1, 24)), data(st.integers(1, 9)), data(st.integers(1, 5))
        dual_tor = dual and data(st.booleans())
        fabric = FabricSpec(tiers=3, nics_per_leaf=per_leaf, spines=spines, leaves_per_pod=per_pod,
                            cores=data(st.integers(1, 60)), rail_optimized=data(st.booleans()), dual_tor=dual_tor,
                            planes=2 if dual_tor and data(st.booleans()) else 1,
                            oversubscription=data(st.sampled_from([1.0, 1.5, 2.0])),
                            pod_oversubscription=data(st.sampled_from([1.0, 1.5, 3.0])))
        return fabric, data(st.integers(1, 30))
    return draw()


@settings(max_examples=120, deadline=None)
@given(drawn=fabrics(dual=True), ports=st.integers(1, 300))
def test_the_spine_check_refuses_exactly_when_a_built_spine_has_more_cables_than_ports(drawn, ports):
    """The check counts a full pod's fullest spine (a template does not know the cluster's size): on a fabric with a
    full pod it refuses exactly the port counts some built spine's cables exceed, and no built spine has more."""
    fabric, nodes = drawn
    built = Fabric.build(fabric, nodes * 8, 8, PORT, 1e-6, 1e-6, 0)
    down, up, _, _ = built_spines(built)
    (_, _, counted, _), = [row for row in fabric_ports(fabric) if row[3] == "spine"]
    counted /= cable_share(fabric, 1.0)
    cables = down + up
    assert counted >= cables.max()
    if np.bincount(built.pod_of_leaf).max() == fabric.leaves_per_pod * built.ports_per_nic:  # a full pod
        assert counted == cables.max()
        assert (counted > ports) == bool((cables > ports).any())


@settings(max_examples=120, deadline=None)
@given(drawn=fabrics(dual=True))
def test_no_spine_of_a_non_blocking_pod_has_fewer_uplinks_than_downlinks(drawn):
    fabric, nodes = drawn
    fabric = fabric.model_copy(update={"pod_oversubscription": 1.0})
    assume(fabric.nics_per_leaf >= fabric.oversubscription)  # a leaf of less than one port's uplink fills no cable
    down, up, down_rate, up_rate = built_spines(Fabric.build(fabric, nodes * 8, 8, PORT, 1e-6, 1e-6, 0))
    assert (up >= down).all()
    assert (up_rate >= down_rate * (1 - 1e-12)).all()


@settings(max_examples=120, deadline=None)
@given(drawn=fabrics(dual=True))
def test_a_spine_carries_at_most_its_pods_oversubscription_of_its_own_downlinks(drawn):
    """Up to whole cables: a spine's uplinks are the whole ports its downlinks over the oversubscription fill."""
    fabric, nodes = drawn
    assume(fabric.nics_per_leaf >= fabric.oversubscription)
    _, _, down_rate, up_rate = built_spines(Fabric.build(fabric, nodes * 8, 8, PORT, 1e-6, 1e-6, 0))
    assert (up_rate >= np.floor(down_rate / fabric.pod_oversubscription / PORT + 1e-9) * PORT * (1 - 1e-12)).all()


def test_the_hdr_superpod_pod_on_8_spines_gives_its_fullest_spines_24_uplinks():
    """20 uplinks a leaf over 8 spines: spines 0-3 take 3 cables of each of 8 leaves, 24, and now 24 up (20 before,
    the pod's average), 48 ports on a 40-port QM8790."""
    fabric = FabricSpec(tiers=3, rail_optimized=True, nics_per_leaf=20, spines=8, leaves_per_pod=8, cores=160)
    down, up, _, _ = built_spines(Fabric.build(fabric, 2 * 160, 8, PORT, 1e-6, 1e-6, 0))
    assert sorted(set(down.tolist())) == [16, 24] and set(up.tolist()) == {24}
    (_, what, counted, _), = [row for row in fabric_ports(fabric) if row[3] == "spine"]
    assert counted == 48 and "24 cables down" in what


def test_a_dual_tor_pods_spines_count_both_tors_of_every_nic():
    """rail-optimized-3-tier with dual_tor: a pod's 8 leaves of each ToR set, 16, each with 32 uplinks over the
    pod's 16 spines, 2 to each: 32 cables down to a spine and now 32 up (16 before), 64 half-rate cables, 32 ports
    of the NIC's speed."""
    fabric = FabricSpec(tiers=3, rail_optimized=True, nics_per_leaf=32, spines=16, leaves_per_pod=8, cores=256,
                        dual_tor=True)
    built = Fabric.build(fabric, 2 * 256 * 8, 8, PORT / 2, 1e-6, 1e-6, 0)
    down, up, down_rate, up_rate = built_spines(built)
    assert set(down.tolist()) == {32} and set(up.tolist()) == {32}
    assert np.allclose(up_rate, down_rate)
    (_, what, counted, _), = [row for row in fabric_ports(fabric) if row[3] == "spine"]
    assert counted == 32 and "32 cables down to its pod's 16 leaves and 32 up" in what


def test_meta_llama3_roce_with_dual_tor_keeps_its_pods_1_to_7_over_both_tors():
    """The template's pod of 192 racks under 16 cluster switches, each rack's NICs on two ToRs: 384 cables down to a
    cluster switch and 54 up (27 before, 1:14 where the template says 1:7)."""
    fabric = FabricSpec.model_validate({"from": "meta-llama3-roce", "dual_tor": True})
    down, up, down_rate, up_rate = built_spines(Fabric.build(fabric, 2 * 3072, 8, PORT / 2, 1e-6, 1e-6, 0))
    assert set(down.tolist()) == {384} and set(up.tolist()) == {54}
    assert np.allclose(down_rate, 384 * PORT / 2) and np.allclose(up_rate, 54 * PORT / 2)  # 384 / 7 = 54.9


def test_meta_llama3_roce_is_cabled_as_its_template_says():
    """The template's comment: a cluster switch's 27 uplinks (192 / 7) reach the 16 aggregation switches of its
    group, two cables to 11 and one to the other 5; an aggregation switch takes 2 cables of each pod's, 16 for 8
    pods; 16 aggregation switches in all would take 27 of every pod's."""
    fabric = FabricSpec.model_validate({"from": "meta-llama3-roce"})
    up, reach, uplinks = fabric_cables(fabric, fabric.nics_per_leaf)
    assert (up, reach, uplinks) == (16, 16, 27)
    groups, cores = core_reach(fabric, reach, uplinks)
    assert (groups, cores) == (16, 16)
    assert sorted(np.bincount(np.arange(uplinks) % cores).tolist()) == [1] * 5 + [2] * 11
    assert core_cables(fabric, 8) == 16
    assert core_cables(fabric.model_copy(update={"cores": 16}), 1) == 27


THREE_TIER = [stem for stem in template_names("topology")
              if FabricSpec.model_validate({"from": stem}).tiers == 3]


@pytest.mark.parametrize("dual_tor", [False, True])
@pytest.mark.parametrize("stem", THREE_TIER)
def test_every_switch_of_a_shipped_non_blocking_three_tier_template_has_as_many_uplinks_as_downlinks(stem, dual_tor):
    """Two full pods of each shipped three-tier template, as shipped and with dual_tor: a leaf and every spine of a
    template whose oversubscriptions are 1 have at least their downlinks' bandwidth up; meta-llama3-roce's spines
    (1:7) have the whole ports a seventh of theirs fills."""
    fabric = FabricSpec.model_validate({"from": stem, "dual_tor": dual_tor, "routing": "ecmp"})
    port = PORT / 2 if dual_tor else PORT
    nics = 2 * fabric.leaves_per_pod * fabric.nics_per_leaf
    built = Fabric.build(fabric, nics, 8 if nics % 8 == 0 else 1, port, 1e-6, 1e-6, 0)
    leaf_up = built.capacity[built.links_of("leaf_up")].reshape(built.leaves, -1).sum(axis=1)
    assert built.pods == 2
    assert (leaf_up >= fabric.nics_per_leaf * port / fabric.oversubscription * (1 - 1e-12)).all()
    _, _, down_rate, up_rate = built_spines(built)
    wanted = np.floor(down_rate / fabric.pod_oversubscription / port + 1e-9) * port
    assert (up_rate >= wanted * (1 - 1e-12)).all()
