"""NVLS reduces through the NVSwitch's multicast memory, which NCCL finds from Hopper on (ncclNvlsSupported)."""

from __future__ import annotations

import pytest

from simulon.collective.algorithms import Unrunnable
from simulon.collective.tuner import CollectivePlan
from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.network.topology import Topology


def plan(gpu: str) -> CollectivePlan:
    dc = DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": 1}, "node": {"gpu": gpu}})
    return CollectivePlan(Topology.from_datacenter(dc), "auto", "auto", None)


def test_an_a100_on_a_reducing_nvswitch_gets_no_nvls():
    """An A100 on a DGX H100's NVSwitch was offered NVLS by auto."""
    ampere, hopper = plan("a100-sxm-80gb"), plan("h100-sxm")
    assert ampere.topology.reduces_in_switch[0] is False and hopper.topology.reduces_in_switch[0] is True
    assert {ampere.choose(CollType.AllReduce, tuple(range(8)), 2.0**k).algorithm for k in range(10, 31)} <= {
        "ring", "tree"}
    assert "nvls" in {hopper.choose(CollType.AllReduce, tuple(range(8)), 2.0**k).algorithm for k in range(10, 31)}


def mixed(first: str = "dgx-h100") -> CollectivePlan:
    """Two nodes of `first` (GPUs 0-15) beside two DGX A100 (GPUs 16-31)."""
    dc = DatacenterConfig.model_validate({"node_groups": [{"from": first, "num_nodes": 2},
                                                          {"from": "dgx-a100", "num_nodes": 2}]})
    return CollectivePlan(Topology.from_datacenter(dc), "auto", "auto", None)


def test_nvls_is_decided_per_communicator_so_hopper_nodes_beside_ampere_ones_keep_it():
    """NCCL decides NVLS for each communicator's own GPUs and NVSwitch (ncclNvlsSupported): one cluster-wide flag
    took it from an all-reduce over a DGX H100 node's GPUs as soon as DGX A100 nodes stood beside them (5,812 us at
    1 GiB on the ring, 4,059 us with NVLS as on an all-H100 cluster)."""
    h100, ampere, alone = tuple(range(8)), tuple(range(16, 24)), mixed("dgx-h100").choose
    everywhere = CollectivePlan(Topology.from_datacenter(DatacenterConfig.model_validate(
        {"from": "dgx-h100", "cluster": {"num_nodes": 4}})), "auto", "auto", None)
    for size in (2.0**26, 2.0**30):
        assert alone(CollType.AllReduce, h100, size) == everywhere.choose(CollType.AllReduce, h100, size)
        assert alone(CollType.AllReduce, ampere, size).algorithm != "nvls"
    assert alone(CollType.AllReduce, h100, 2.0**30).algorithm == "nvls"
    forced = CollectivePlan(mixed().topology, "nvls", "auto", None)
    assert forced.choose(CollType.AllReduce, h100, 2.0**30).algorithm == "nvls"
    with pytest.raises(Unrunnable, match="GPUs that multicast"):
        forced.choose(CollType.AllReduce, ampere, 2.0**30)
    with pytest.raises(Unrunnable):  # a communicator over both kinds has no NVLS either
        forced.choose(CollType.AllReduce, tuple(range(0, 32, 4)), 2.0**30)
