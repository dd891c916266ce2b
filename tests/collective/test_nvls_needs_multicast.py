"""NVLS reduces through the NVSwitch's multicast memory, which NCCL finds from Hopper on (ncclNvlsSupported)."""

from __future__ import annotations

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
