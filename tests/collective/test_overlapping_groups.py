"""Concurrent groups of a lone collective (collective_sweep's `others`) that share a GPU meet on it whatever order
their members are listed in: only disjoint groups are folded onto one member (dag.fold.fold_group)."""

from __future__ import annotations

import pytest

from helpers import SEED_SCENARIO
from simulon.config import load_scenario
from simulon.dag.fold import fold_group
from simulon.pipeline import collective_sweep

SOLO_US = 871.85
"""A 2-rank ring all-reduce of 16 MiB on one channel over the seed scenario's GPUs 0 and 1, alone."""

SHARED_US = 933.25
"""The same beside a second such all-reduce that shares one of its GPUs, every GPU simulated."""


@pytest.fixture(scope="module")
def dc():
    return load_scenario(SEED_SCENARIO).datacenter


def all_reduce_us(dc, group, others):
    return collective_sweep(dc, "allreduce", list(group), [1 << 24], channels=1, others=others)[0].time_us


@pytest.mark.parametrize("group", [(0, 1), (1, 0)])
@pytest.mark.parametrize("other", [(0, 2), (1, 2)])
def test_a_group_sharing_a_gpu_slows_the_collective_whichever_member_it_shares_and_however_listed(dc, group, other):
    """Folded, (0, 1) beside (1, 2) took its solo 871.85 us and beside (0, 2) 933.25; listed (1, 0), the reverse."""
    assert all_reduce_us(dc, group, []) == pytest.approx(SOLO_US, abs=0.005)
    assert all_reduce_us(dc, group, [other]) == pytest.approx(SHARED_US, abs=0.005)


def test_a_disjoint_group_beside_it_is_still_folded_and_leaves_the_pair_alone(dc):
    assert fold_group(4, [(0, 1), (2, 3)]).rep.tolist() == [0, 0, 0, 0]
    assert all_reduce_us(dc, (0, 1), [(2, 3)]) == pytest.approx(SOLO_US, abs=0.005)


def test_groups_that_share_a_gpu_are_not_folded():
    assert fold_group(4, [(0, 1), (1, 2)]).trivial
    assert fold_group(4, [(1, 0), (0, 2)]).rep.tolist() == [0, 1, 2, 3]
