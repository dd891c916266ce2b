"""PCIe nodes without peer-to-peer (traffic staged through a shared host path) and with NVLink-bridged pairs:
routes, the config's checks, and what they do to collectives and training steps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulon.collective.types import CollType
from simulon.config import DatacenterConfig, ScenarioConfig
from simulon.config.loading import ConfigError, parse_scenario
from simulon.engine.fair_share import max_min_rates
from simulon.network.calibration import LinkModel
from simulon.network.summary import TopologySummary
from simulon.network.topology import Topology
from simulon.pipeline import collective_sweep, simulate, time_collective

GB = 1e9
PORT = 16.0  # GB/s per direction of a GPU's PCIe link in these tests


def scale_up(host: float | None = None, host_gpus: int | None = None, bridge: float | None = None) -> dict:
    block: dict = {"kind": "pcie", "switch": {"port_speed": f"{PORT}GBps", "latency": "1us"}}
    if host is not None:
        block["host_path"] = {"bandwidth": f"{host}GBps", **({"gpus": host_gpus} if host_gpus else {})}
    if bridge is not None:
        block["bridges"] = {"bandwidth": f"{bridge}GBps"}
    return block


def datacenter(nodes: int = 2, gpus: int = 8, **kwargs) -> dict:
    return {"cluster": {"num_nodes": nodes}, "node": {"gpus_per_node": gpus, "gpus_per_nic": gpus, "gpu": "A100"},
            "network": {"scale_up": scale_up(**kwargs),
                        "scale_out": {"nic": {"speed": "100Gbps", "latency": "2us"}}}}


def topology(**kwargs) -> Topology:
    return Topology.from_datacenter(DatacenterConfig.model_validate(datacenter(**kwargs)), model=LinkModel.ideal())


def kinds(topo: Topology, src: int, dst: int) -> list[str]:
    links, _, _ = topo.routes(np.array([src]), np.array([dst]))
    return [topo.link_name(int(x)).split("[")[0] for x in links[0] if x >= 0]


def aggregate_GBps(topo: Topology, pairs: list[tuple[int, int]]) -> float:
    """What the pairs move together, all sending at once (max-min fair shares of the links)."""
    src, dst = (np.array(side) for side in zip(*pairs, strict=True))
    links, _, _ = topo.routes(src, dst)
    return float(max_min_rates(links, topo.capacity, np.full(len(pairs), np.inf)).sum()) / GB


# --- routes --------------------------------------------------------------------------------------------

def test_without_peer_to_peer_a_transfer_crosses_both_host_paths_and_nic_traffic_is_staged_too():
    topo = topology(host=24.0, host_gpus=4)
    assert kinds(topo, 0, 1) == ["pcie_up", "host_up", "host_down", "pcie_down"]
    assert kinds(topo, 0, 9) == ["pcie_up", "host_up", "nic_up", "nic_down", "host_down", "pcie_down"]
    same, other = topo.routes(np.array([0, 0]), np.array([1, 5]))[0]
    assert same[1] == other[1] and same[2] != other[2]   # GPUs 0-3 share a path, 4-7 the next
    assert topo.line_rate[same[1]] == 24 * GB


def test_a_bridged_pair_talks_over_its_bridge_alone_and_other_gpus_over_the_ports():
    topo = topology(bridge=50.0)
    assert kinds(topo, 2, 3) == kinds(topo, 3, 2) == ["bridge"]
    assert kinds(topo, 1, 2) == ["pcie_up", "pcie_down"]
    assert topo.link_name(int(topo.routes(np.array([9]), np.array([8]))[0][0, 0])) == "bridge[gpu 9 -> gpu 8]"


def test_a_node_without_host_path_or_bridges_has_exactly_the_links_of_before():
    plain = topology()
    assert plain.staging is None and plain.fabric.base == plain.port_links == 2 * 16
    assert plain.num_links == 2 * 16 + 2 * 2   # two NICs, up and down


def test_the_topology_summary_shows_the_ports_not_the_host_path():
    tiers = TopologySummary.of(topology(host=5.0, bridge=50.0)).tiers
    assert tiers[0].name == "pcie" and tiers[0].link_rates == (PORT * GB,)


# --- the send/recv pattern of a characterisation run ---------------------------------------------------

def test_pairs_through_one_host_path_share_it_and_pairs_through_several_add_up():
    node_wide = topology(nodes=1, host=24.0)
    assert aggregate_GBps(node_wide, [(0, 1)]) == pytest.approx(PORT)
    assert aggregate_GBps(node_wide, [(0, 2), (1, 3)]) == pytest.approx(24.0)
    assert aggregate_GBps(node_wide, [(i, i + 4) for i in range(4)]) == pytest.approx(24.0)
    switches = topology(nodes=1, host=12.0, host_gpus=2)   # two cards behind each PCIe switch uplink
    assert aggregate_GBps(switches, [(0, 1)]) == pytest.approx(12.0)
    assert aggregate_GBps(switches, [(0, 2), (1, 3)]) == pytest.approx(12.0)
    assert aggregate_GBps(switches, [(i, i + 4) for i in range(4)]) == pytest.approx(24.0)


def test_bridged_pairs_run_at_the_bridge_rate():
    topo = topology(nodes=1, host=6.0, bridge=50.0)
    assert aggregate_GBps(topo, [(0, 1)]) == pytest.approx(50.0)
    assert aggregate_GBps(topo, [(0, 1), (2, 3), (4, 5), (6, 7)]) == pytest.approx(200.0)
    assert aggregate_GBps(topo, [(0, 2), (1, 3)]) == pytest.approx(6.0)
    dc = DatacenterConfig.model_validate(datacenter(nodes=1, host=6.0, bridge=50.0))
    timing = collective_sweep(dc, CollType.SendRecv, (4, 5), [256 * 2**20], model=LinkModel.ideal())[0]
    assert timing.algbw_GBps == pytest.approx(50.0, rel=1e-3)


# --- the config ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("block", "message"), [
    ({"kind": "nvswitch", "host_path": {"bandwidth": "5GBps"}},
     r"scale_up\.host_path: only a kind: pcie node has one \(this scale-up block is kind: nvswitch\)"),
    ({"kind": "mesh", "bridges": {"bandwidth": "50GBps"}}, r"scale_up\.bridges: only a kind: pcie node"),
    ({"kind": "pcie", "host_path": {"bandwidth": "5GBps", "gpus": 3}},
     r"scale_up\.host_path\.gpus: 3 must divide gpus_per_node \(8\)"),
    ({"kind": "pcie", "host_path": {"gpus": 2}}, r"host_path\.bandwidth"),
    ({"kind": "pcie", "host_path": {"bandwidth": "-5GBps"}}, r"host_path\.bandwidth"),
])
def test_a_wrong_host_path_or_bridge_is_refused_naming_the_field(block, message):
    data = {"datacenter": {"from": "dgx-a100", "cluster": {"num_nodes": 1},
                           "network": {"scale_up": {"switch": {"port_speed": "16GBps"}, **block}}}}
    with pytest.raises(ConfigError, match=message):
        parse_scenario(data, "s.yaml")


def test_bridges_on_an_odd_node_are_refused():
    data = {"datacenter": {**datacenter(nodes=1, bridge=50.0), "node": {"gpus_per_node": 3, "gpu": "A100"}}}
    with pytest.raises(ConfigError, match=r"scale_up\.bridges: bridges join GPUs in pairs; gpus_per_node \(3\)"):
        parse_scenario(data, "s.yaml")


def test_a_node_smaller_than_a_host_path_has_one_of_its_own():
    topo = topology(nodes=2, gpus=2, host=12.0, host_gpus=8)
    assert aggregate_GBps(topo, [(0, 1), (2, 3)]) == pytest.approx(24.0)


# --- what it does to collectives and steps -------------------------------------------------------------

OPS = [CollType.AllReduce, CollType.AllGather, CollType.ReduceScatter, CollType.AllToAll, CollType.SendRecv]
GROUPS = [tuple(range(8)), (0, 1, 2, 3), tuple(range(16)), (0, 8), (1, 2, 9, 10)]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(op=st.sampled_from(OPS), group=st.sampled_from(GROUPS), size=st.sampled_from([2**16, 2**22, 2**27]),
       spare=st.floats(1.0, 4.0))
def test_a_host_path_as_wide_as_its_ports_together_changes_nothing(op, group, size, spare):
    """The same choice and the same time but for the last bits of the max-min rates, the host path's links joining
    the flows' paths (a 4 MiB all-gather of 16 ranks on 22 channels: 514.8122059610 against 514.8122059604 us)."""
    plain = DatacenterConfig.model_validate(datacenter())
    wide = DatacenterConfig.model_validate(datacenter(host=8 * PORT * spare))
    (widened,), (alone,) = (collective_sweep(dc, op, group, [size]) for dc in (wide, plain))
    assert (widened.algorithm, widened.protocol, widened.channels) == (alone.algorithm, alone.protocol, alone.channels)
    assert widened.time_us == pytest.approx(alone.time_us, rel=1e-9)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(op=st.sampled_from(OPS), group=st.sampled_from(GROUPS), size=st.sampled_from([2**16, 2**22, 2**27]),
       host=st.floats(2.0, 200.0), host_gpus=st.sampled_from([None, 2, 4]), bridge=st.sampled_from([None, 50.0]))
def test_halving_the_host_path_never_speeds_a_collective(op, group, size, host, host_gpus, bridge):
    """Beyond the reordering of flows sharing a link (0.4% on a 4 MiB all-gather of 16 A100s over one 100G NIC a
    node, 452.1 us with a host path of 84.8 GB/s per 4 GPUs and 450.2 us with half of it: slowed flows on the host
    path leave the NIC to the ring's cross-node flows in a better order)."""
    def time_us(bandwidth: float) -> float:
        dc = DatacenterConfig.model_validate(datacenter(host=bandwidth, host_gpus=host_gpus, bridge=bridge))
        return collective_sweep(dc, op, group, [size])[0].time_us

    assert time_us(host / 2) >= time_us(host) * 0.995


def training(**kwargs) -> ScenarioConfig:
    return ScenarioConfig.model_validate({
        "datacenter": datacenter(**kwargs),
        "workload": {"framework": "megatron",
                     "model": {"name": "t", "num_layers": 4, "hidden_size": 1024, "num_heads": 16,
                               "ffn_hidden_size": 4096, "vocab_size": 32768},
                     "parallelism": {"tp": 4, "pp": 2},
                     "training": {"global_batch_size": 8, "micro_batch_size": 1, "sequence_length": 1024}}})


def test_a_training_step_is_the_same_with_a_wide_host_path_and_slower_with_a_narrow_one():
    plain = simulate(training()).result.iteration_time_ms
    assert simulate(training(host=8 * PORT)).result.iteration_time_ms == plain
    narrow = simulate(training(host=PORT / 2)).result.iteration_time_ms
    assert narrow > plain
    assert simulate(training(host=PORT / 4)).result.iteration_time_ms > narrow


def pcie_card_node(gpu: str, **up) -> DatacenterConfig:
    return DatacenterConfig.model_validate({"cluster": {"num_nodes": 1}, "node": {"gpus_per_node": 4, "gpu": gpu},
                                            "network": {"scale_up": {"kind": "pcie", **up}}})


@pytest.mark.parametrize(("gpu", "link"), [("h100-pcie", 63.0), ("a100-pcie-80gb", 31.5), ("rtx-3090", 31.5),
                                           ("rtx-2080-ti", 15.75)])
def test_a_pcie_node_without_a_port_speed_runs_on_its_cards_pcie_link_not_their_nvlink_bridge(gpu, link):
    """An H100 PCIe node's ring all-reduce ran at 194 GB/s bus bandwidth: the card's 300 GB/s NVLink bridge was
    read as its PCIe Gen5 x16 link (63 GB/s a direction)."""
    dc = pcie_card_node(gpu)
    assert dc.groups[0].scale_up_bandwidth == pytest.approx(link * GB)
    timing = time_collective(dc, CollType.AllReduce, range(4), 64 << 20, channels=8)
    assert 0.5 * link < timing.busbw_GBps <= link
    assert pcie_card_node(gpu, switch={"port_speed": f"{link / 2}GBps"}).groups[0].scale_up_bandwidth == \
        pytest.approx(link / 2 * GB)  # the slower of the card and the stated port


def test_a_pcie_node_of_a_card_that_states_no_pcie_link_asks_for_the_port_speed():
    with pytest.raises(ConfigError, match=r"scale_up\.switch\.port_speed: GPU H100-SXM5-80GB states no PCIe link "
                                          r"\(pcie_bandwidth\).*Gen5 x16: 63GBps"):
        parse_scenario({"datacenter": {"cluster": {"num_nodes": 1}, "node": {"gpus_per_node": 4, "gpu": "H100"},
                                       "network": {"scale_up": {"kind": "pcie"}}},
                        "workload": {"model": {"from": "llama-7b"}, "training": {"global_batch_size": 4,
                                                                               "sequence_length": 2048}}}, "s.yaml")
