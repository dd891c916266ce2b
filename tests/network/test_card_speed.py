"""A NIC's `card_speed` caps what the card moves over all its ports together in a scenario, as its description
says (it was read by the hardware resolver only, and a scenario's NIC ran at its line rate whatever it said); the
fabric's cables keep the ports' line rate."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.network.calibration import LinkModel
from simulon.network.topology import Topology
from simulon.pipeline import collective_sweep

SIZE = 2**26


def datacenter(card_gbps: float | None, speed_gbps: float = 400.0, topology: str = "single-switch"):
    nic = {"name": "cx", "speed": f"{speed_gbps}Gbps", **({"card_speed": f"{card_gbps}Gbps"} if card_gbps else {})}
    return DatacenterConfig.model_validate({
        "cluster": {"num_nodes": 2},
        "node": {"gpus_per_node": 1, "gpu": {"from": "h100-sxm"}},
        "network": {"scale_up": {"switch": {"from": "nvswitch-gen4"}}, "scale_out": {"nic": nic,
                                                                                      "topology": topology}}})


def send_us(dc: DatacenterConfig) -> float:
    return collective_sweep(dc, CollType.SendRecv, (0, 1), [SIZE], "p2p", 1, "simple",
                            model=LinkModel.ideal())[0].time_us


def test_a_card_slower_than_its_port_moves_at_the_cards_rate():
    line, card = send_us(datacenter(None)), send_us(datacenter(100.0))
    assert line == pytest.approx(SIZE / 50e9 * 1e6, rel=0.01)
    assert card == pytest.approx(SIZE / 12.5e9 * 1e6, rel=0.01)


@settings(max_examples=12, deadline=None, derandomize=True, database=None)
@given(card=st.floats(50.0, 800.0), faster=st.floats(1.05, 3.0))
def test_a_faster_card_is_never_slower_and_a_card_at_or_above_the_line_rate_changes_nothing(card, faster):
    assert send_us(datacenter(card * faster)) <= send_us(datacenter(card)) * (1 + 1e-9)
    if card >= 400.0:
        assert send_us(datacenter(card)) == send_us(datacenter(None))


def test_the_fabric_cables_keep_the_ports_line_rate_under_a_card_cap():
    capped, free = (Topology.from_datacenter(datacenter(card, topology="spine-leaf")) for card in (100.0, None))
    differs = capped.capacity != free.capacity
    assert differs.sum() == 4  # the two NICs' up and down links, and nothing above them
    assert capped.capacity[differs] == pytest.approx(free.capacity[differs] / 4)  # 100 of 400 Gb/s


def test_a_nic_given_another_line_rate_than_its_template_is_not_held_to_the_templates_card():
    """`{from: connectx-7-400g, speed: 800Gbps}` is an 800 Gb/s NIC: the ConnectX-7's card limit of 400 Gb/s is
    that card's, and no longer holds once the speed is replaced (unless card_speed is given again)."""
    def nic(**given):
        return DatacenterConfig.model_validate({
            "from": "dgx-h100", "cluster": {"num_nodes": 2},
            "network": {"scale_out": {"topology": "single-switch", "nic": {"from": "connectx-7-400g", **given}}}}
        ).network.scale_out.nic

    assert nic().rate == 50e9 and nic().card_speed == 50e9
    assert nic(speed="800Gbps").rate == 100e9 and nic(speed="800Gbps").card_speed is None
    assert nic(speed="800Gbps", card_speed="600Gbps").rate == 75e9
