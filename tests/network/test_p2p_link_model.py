"""Grouped send/receive (all-to-all, send/receive) under the link model: its own launch and its own share of a
scale-up port, apart from the collectives' (network.calibration.LinkModel)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.engine.flows import staged_parts, staging_delay
from simulon.network.calibration import LinkModel
from simulon.pipeline import collective_sweep

IDEAL = LinkModel.ideal()
NODE = DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": 1}})
PORT_GBPS = 450.0  # an H100's NVLink 4 port, one direction


def test_a_send_receive_launches_as_fitted_and_without_a_fit_as_simple_collectives_and_all_to_alls_do():
    model = replace(IDEAL, launch=(5e-6, 2e-6, 3e-6))
    proto, send_receive = np.array([0, 1, 2, 1]), np.array([False, False, False, True])
    np.testing.assert_allclose(model.launch_delay(proto, send_receive), [5e-6, 2e-6, 3e-6, 5e-6])
    fitted = replace(model, sendrecv_launch=7e-6)
    np.testing.assert_allclose(fitted.launch_delay(proto, send_receive), [5e-6, 2e-6, 3e-6, 7e-6])


@given(collective=st.floats(0.6, 1.0), p2p=st.floats(0.4, 1.0), switch=st.floats(0.6, 1.0))
def test_a_grouped_sends_share_of_its_links_is_its_efficiency_over_the_collectives(collective, p2p, switch):
    model = replace(IDEAL, scale_up_efficiency=collective, in_switch_efficiency=switch, p2p_efficiency=p2p)
    in_switch, grouped_inside = np.array([True, False, False]), np.array([False, True, False])
    np.testing.assert_allclose(model.share(in_switch, grouped_inside), [switch, p2p / collective, 1.0])
    unfitted = replace(model, p2p_efficiency=None)  # a family without point-to-point rows: as its collectives
    np.testing.assert_allclose(unfitted.share(in_switch, grouped_inside), [switch, 1.0, 1.0])


@pytest.mark.parametrize("efficiency", [0.5, 0.75])
def test_a_large_ring_shift_inside_a_node_reaches_its_point_to_point_share_of_the_port(efficiency):
    model = replace(IDEAL, p2p_efficiency=efficiency)
    timing, = collective_sweep(NODE, CollType.SendRecv, tuple(range(8)), [2.0**30], "auto", model=model)
    # 32 channels a send at 1 GiB, none limited: the port, at the point-to-point share, sets the pace
    assert timing.busbw_GBps == pytest.approx(efficiency * PORT_GBPS, rel=0.02)
    collectives, = collective_sweep(NODE, CollType.AllGather, tuple(range(8)), [2.0**30], "ring", model=model)
    assert collectives.busbw_GBps == pytest.approx(PORT_GBPS, rel=0.02)  # collectives keep the whole port


def test_an_ll_part_of_a_send_inside_a_domain_moves_at_the_ll_channel_rate_and_simple_parts_at_the_copy_rate():
    model = replace(IDEAL, p2p_channel_bandwidth=20e9, p2p_ll_channel_bandwidth=6e9,
                    channel_bandwidth=(np.inf, 9e9, np.inf))
    proto, scale_out = np.array([0, 1, 1, 1]), np.array([False, False, False, True])
    grouped = np.array([True, True, False, True])
    # a grouped part inside the domain: Simple at the copy rate, LL at the LL one; a collective's LL channel and a
    # send across domains keep the protocol's own per-channel bandwidth
    np.testing.assert_allclose(model.flow_cap(proto, 2, scale_out, grouped), [40e9, 12e9, 18e9, 18e9])
    unfitted = replace(model, p2p_ll_channel_bandwidth=None)  # a family without LL send rows: LL's own rate
    np.testing.assert_allclose(unfitted.flow_cap(proto, 2, scale_out, grouped)[1], 18e9)


def test_only_simple_parts_of_a_send_inside_a_domain_are_staged_through_a_fifo_step():
    grouped, scale_out = np.array([True, True, True, False]), np.array([False, False, True, False])
    np.testing.assert_array_equal(staged_parts(grouped, scale_out, np.array([0, 1, 0, 0])), [True, False, False, False])


def test_the_last_fifo_step_of_a_simple_part_is_copied_out_at_the_local_copy_rate_where_it_is_fitted():
    # NCCL's P2P transport writes into the receiver's FIFO (p2p.cc; read only between two sm_80 GPUs), so the
    # receiver's copy of the last step to its buffer is local: a ring's final copy rate, not the NVLink copy rate
    model = replace(IDEAL, p2p_channel_bandwidth=20e9, local_pass_bandwidth=(np.inf, 80e9, np.inf))
    size, lanes, staged = np.array([2.0**22, 2.0**16, 2.0**22]), np.array([1, 1, 4]), np.array([True, True, False])
    np.testing.assert_allclose(staging_delay(model, size, lanes, staged), [2**19 / 80e9, 2**16 / 80e9, 0.0])
    unfitted = replace(model, local_pass_bandwidth=(np.inf,) * 3)  # no ring copy fitted (Ampere, AMD): the p2p rate
    np.testing.assert_allclose(staging_delay(unfitted, size, lanes, staged), [2**19 / 20e9, 2**16 / 20e9, 0.0])
    part = 2.0**22  # two ranks, one channel: the part at the NVLink copy rate, then one step copied out locally
    timing, = collective_sweep(NODE, CollType.AllToAll, (0, 1), [2 * part], "auto", channels=1, model=model)
    assert timing.time_us * 1e-6 == pytest.approx(part / 20e9 + 2**19 / 80e9, rel=1e-6)


def test_a_small_ring_shift_inside_a_node_is_paced_by_the_ll_channel_rate():
    model = replace(IDEAL, p2p_channel_bandwidth=100e9, p2p_ll_channel_bandwidth=5e9)
    size = 2.0**19  # LL (at most 32 x 16 KiB), over the 4 channels a peer of 8 ranks starts from
    timing, = collective_sweep(NODE, CollType.SendRecv, tuple(range(8)), [size], "auto", model=model)
    assert timing.protocol == "ll" and timing.channels == 4
    assert timing.time_us == pytest.approx(size / (4 * 5e9) * 1e6, rel=0.02)
