"""NCCL enables LL128 on a communicator by its GPUs' compute capabilities (src/graph/tuning.cc ncclTopoTuneModel,
NCCL 2.30: `minCompCap == maxCompCap || minCompCap >= 90`), which simulon reads from each GPU
(config.dc.GPUSpec.capability), not from the link calibration's family: a B200 (10.0) beside a B300 (10.3) is
one family but two capabilities, and an H100 (9.0) beside a B200 two families of Hopper and later."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulon.collective.nccl import ll128_among, multicasts
from simulon.collective.tuner import CollectivePlan
from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.network.topology import Topology


def two_kinds(first: str, second: str) -> CollectivePlan:
    """One node of each system (GPUs 0-7 and 8-15) on one fabric."""
    dc = DatacenterConfig.model_validate({"node_groups": [{"from": first, "num_nodes": 1},
                                                          {"from": second, "num_nodes": 1}]})
    return CollectivePlan(Topology.from_datacenter(dc), "auto", "auto", None)


def protocols(plan: CollectivePlan, group: tuple[int, ...]) -> set[str]:
    return {p for _, p in plan.candidates(CollType.AllReduce, group)}


@pytest.mark.parametrize(("first", "second", "across"), [
    ("dgx-a100", "dgx-h100", False),   # Ampere's 8.0 beside Hopper: NCCL runs LL and Simple
    ("dgx-h100", "dgx-b200", True),    # from Hopper on NCCL 2.30 keeps LL128 across capabilities
    ("dgx-b200", "dgx-b300", True),    # one link family, 10.0 and 10.3
])
def test_ll128_across_two_gpu_kinds_follows_the_least_compute_capability(first, second, across):
    plan = two_kinds(first, second)
    assert "ll128" in protocols(plan, tuple(range(8)))  # each kind alone runs LL128 over its NVSwitch
    assert ("ll128" in protocols(plan, tuple(range(16)))) is across


def test_a_gpu_of_the_users_own_has_the_compute_capability_of_the_shipped_gpu_nearest_it():
    """The capability has one home: a GPU that states none is of the family of the shipped one nearest it, as its
    link calibration is (GPUSpec.family_name): an H100 with more memory multicasts as an H100 does."""
    dc = DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": 1},
                                          "node": {"gpu": {"from": "h100-sxm", "name": "my-h100",
                                                           "memory_capacity_gb": 96}}})
    gpu = dc.node.gpu
    assert gpu.template is None and gpu.capability == 9.0 and not gpu.fp8_any_layout
    assert Topology.from_datacenter(dc).reduces_in_switch[0] is True
    amd = DatacenterConfig.model_validate({"from": "mi300x-platform", "cluster": {"num_nodes": 1}}).node.gpu
    assert amd.capability is None and not multicasts(amd.capability)


capability = st.sampled_from([6.0, 7.0, 7.5, 8.0, 8.6, 8.9, 9.0, 10.0, 10.3, 12.0])


@given(st.sets(capability, min_size=1, max_size=4))
def test_ll128_among_capabilities_is_nccls_rule(capabilities):
    least = min(capabilities)
    assert ll128_among(capabilities) == (least >= 7.0 and (len(capabilities) == 1 or least >= 9.0))


@given(st.sets(capability, min_size=1, max_size=3))
def test_an_amd_gpu_beside_an_nvidia_one_runs_no_ll128_and_amd_ones_alone_do(capabilities):
    assert ll128_among({None}) and not ll128_among(capabilities | {None})
