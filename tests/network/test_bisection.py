"""Scale-out bisection: the least bandwidth between two halves of the NIC ports over the splits along switch
boundaries (network/fabric.py), against closed forms and a brute force over every split of small fabrics."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.config.dc import FabricSpec
from simulon.network.fabric import Fabric, least_half, min_plus

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


def test_a_partly_filled_leaf_keeps_a_full_leafs_uplinks_so_a_cut_through_the_full_leaf_binds():
    # 6 DGX nodes under spine-leaf leaves of 32 ports at 2:1: leaf A 32 NICs, leaf B 16, each cabled with 16 uplinks
    # (a SuperPOD short of whole units keeps its leaves' full leaf-spine cabling, config.dc.two_tier_spine_cables).
    # Leaf B whole and 8 of A's ports against A's other 24: B sends min(16, 16) ports' worth, A's 8 their own 8;
    # 24 of A's against the rest: min(24, 8 + 16) = 24. Half the 48 ports move at full rate.
    f = fabric(6, tiers=2, nics_per_leaf=32, spines=4, oversubscription=2.0)
    assert np.bincount(f.leaf_of_port).tolist() == [32, 16]
    assert f.capacity[f.links_of("leaf_up")].reshape(2, -1).sum(axis=1).tolist() == [16 * PORT] * 2
    assert f.bisection(PORT) == pytest.approx(24 * PORT)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.sampled_from([8, 16, 32]), st.sampled_from([1.0, 2.0, 4.0]), st.booleans())
def test_leaves_filled_alike_in_even_number_keep_half_their_uplinks(pairs, per_leaf, oversubscription, rails):
    leaves = 2 * pairs * (8 if rails else 1)
    nodes = leaves * per_leaf // 8
    f = fabric(nodes, tiers=2, rail_optimized=rails, nics_per_leaf=per_leaf, spines=4,
               oversubscription=oversubscription)
    uplink = per_leaf * PORT / oversubscription  # a leaf's downlinks over the oversubscription
    assert f.bisection(PORT) == pytest.approx(min(nodes * 8 * PORT, leaves * uplink) / 2)


def brute_least_half(switch_of_port: np.ndarray, rate: np.ndarray, uplink: np.ndarray) -> float:
    """Every choice of floor(ports / 2) ports for the side without the tier above, each switch then on whichever
    side cuts less: its far-side ports' links, or its near-side ports' links and its uplink."""
    ports, best = len(rate), math.inf
    for far in itertools.combinations(range(ports), ports // 2):
        side = np.zeros(ports, dtype=bool)
        side[list(far)] = True
        cut = sum(min(rate[(switch_of_port == s) & side].sum(), rate[(switch_of_port == s) & ~side].sum() + u)
                  for s, u in enumerate(uplink))
        best = min(best, cut)
    return best


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=4), st.integers(0, 8)),
                min_size=2, max_size=4))
def test_the_least_half_is_the_least_cut_over_every_split_of_the_switches_ports(switches):
    """Switches of ports of one or several rates (node groups' NICs differ under one leaf)."""
    switch_of_port = np.concatenate([np.full(len(r), s) for s, (r, _) in enumerate(switches)])
    rate = np.concatenate([np.array(r, dtype=float) * GB for r, _ in switches])
    uplink = np.array([u * GB for _, u in switches], dtype=float)
    assert least_half(switch_of_port, rate, uplink) == pytest.approx(brute_least_half(switch_of_port, rate, uplink))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 10), min_size=1, max_size=6), st.lists(st.floats(0, 10), min_size=1, max_size=6),
       st.integers(0, 12))
def test_min_plus_is_the_least_sum_over_every_pair_of_indices(a, b, limit):
    got = min_plus(np.array(a), np.array(b), limit)
    for t in range(min(len(a) + len(b) - 2, limit) + 1):
        assert got[t] == pytest.approx(min(a[i] + b[t - i] for i in range(len(a)) if 0 <= t - i < len(b)))


def test_a_cluster_of_two_nic_speeds_is_bounded_by_its_slowest_half_of_ports():
    """3 DGX H100 (ConnectX-7, 50 GB/s ports) and 1 DGX A100 (ConnectX-6, 25 GB/s) under one rail-optimized
    leaf a rail: the 16 slowest of the 32 ports, 8 x 25 + 8 x 50 = 600 GB/s (it printed 400, every port at the
    slowest rate)."""
    f = fabric(4, tiers=2, rail_optimized=True, nics_per_leaf=16, spines=8)
    rate = np.where(np.arange(32) < 24, PORT, PORT / 2)
    assert f.bisection(rate) == pytest.approx(600 * GB)
    assert f.bisection(PORT / 2) == pytest.approx(400 * GB) and f.bisection(PORT) == pytest.approx(800 * GB)
