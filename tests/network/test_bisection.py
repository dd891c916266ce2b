"""Scale-out bisection: the least bandwidth between two halves of the NIC ports over the splits along switch
boundaries (network/fabric.py), against closed forms and a brute force over every split of small fabrics."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.config.dc import FabricSpec
from simulon.network.fabric import Fabric, least_half, split_cost

GB = 1e9
PORT = 50 * GB  # a 400 Gb/s NIC port


def fabric(nodes: int, **topology) -> Fabric:
    spec = FabricSpec(**topology)
    return Fabric.build(spec, nodes * 8, 8, PORT, 1e-6, 1e-6, 0)


def test_full_leaves_holding_half_the_ports_on_a_few_uplinks_bound_an_unevenly_filled_fabric():
    # 40 DGX nodes, rails of 32 NICs a leaf: 8 leaves of 32 ports and 8 of 8, each with 32 * 50 / 4 = 400 GB/s up
    f = fabric(40, tiers=2, rail_optimized=True, nics_per_leaf=32, spines=4, oversubscription=4.0)
    assert sorted(np.bincount(f.leaf_of_port).tolist()) == [8] * 8 + [32] * 8
    assert f.bisection(PORT) == pytest.approx(5 * 400 * GB)  # five full leaves: 160 of the 320 ports


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.sampled_from([8, 16, 32]), st.sampled_from([1.0, 2.0, 4.0]), st.booleans())
def test_leaves_filled_alike_in_even_number_keep_half_their_uplinks(pairs, per_leaf, oversubscription, rails):
    leaves = 2 * pairs * (8 if rails else 1)
    nodes = leaves * per_leaf // 8
    f = fabric(nodes, tiers=2, rail_optimized=rails, nics_per_leaf=per_leaf, spines=4,
               oversubscription=oversubscription)
    uplink = per_leaf * PORT / oversubscription  # a leaf's downlinks over the oversubscription
    assert f.bisection(PORT) == pytest.approx(min(nodes * 8 * PORT, leaves * uplink) / 2)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 8)), min_size=2, max_size=4))
def test_the_least_half_is_the_least_cut_over_every_split_of_the_switches_ports(switches):
    ports = np.array([p for p, _ in switches], dtype=float)
    uplink = np.array([u * GB for _, u in switches], dtype=float)
    half = int(ports.sum()) // 2
    brute = min(sum(float(split_cost(p, u, GB, q)) for p, u, q in zip(ports, uplink, split, strict=True))
                for split in itertools.product(*(range(int(p) + 1) for p in ports)) if sum(split) == half)
    assert least_half(ports, uplink, GB) == pytest.approx(brute)
