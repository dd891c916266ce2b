"""A three-tier pod's spines are sized as network/fabric.py builds them: every spine has the uplinks to the cores that
the fullest spine's downlinks need over the pod's oversubscription (config.dc.fabric_cables), and the spine port
check (config.dc.fabric_ports) counts that spine's cables. A leaf's uplinks go round robin over the spines, so where
the spines do not divide them the first spines take one cable more of every leaf (config.dc.spine_cables); the
uplinks were sized from the pod's average, and a non-blocking pod of 20 uplinks a leaf over 8 spines gave spines 0-3
24 cables down and 20 up."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from simulon.config.dc import FabricSpec, cable_share, fabric_ports
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
@given(drawn=fabrics(), ports=st.integers(1, 300))
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
@given(drawn=fabrics())
def test_no_spine_of_a_non_blocking_pod_has_fewer_uplinks_than_downlinks(drawn):
    fabric, nodes = drawn
    fabric = fabric.model_copy(update={"pod_oversubscription": 1.0})
    assume(fabric.nics_per_leaf >= fabric.oversubscription)  # a leaf of less than one port's uplink fills no cable
    down, up, down_rate, up_rate = built_spines(Fabric.build(fabric, nodes * 8, 8, PORT, 1e-6, 1e-6, 0))
    assert (up >= down).all()
    assert (up_rate >= down_rate * (1 - 1e-12)).all()


@settings(max_examples=120, deadline=None)
@given(drawn=fabrics())
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
