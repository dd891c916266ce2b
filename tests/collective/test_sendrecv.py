"""Send/receive as a ring shift (nccl-tests' sendrecv_perf, XLA's collective-permute): its flows, its bus bandwidth
convention, the algorithm that runs it, and `simulon collective --op sendrecv|permute`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import cli
from simulon.collective import bus_bandwidth_factor, decompose_collective, flow_set
from simulon.collective.algorithms import algorithm_for
from simulon.collective.types import POINT_TO_POINT, CollType


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 16), channels=st.integers(1, 8), size=st.floats(1.0, 1e9))
def test_a_ring_shift_sends_the_whole_message_to_the_next_member_once(n, channels, size):
    flows = flow_set("SendRecv", tuple(range(100, 100 + n)), size, channels, "p2p")
    assert len(flows) == n and flows.lanes == channels  # identical channels simulated once, each lane its share
    np.testing.assert_array_equal(flows.dst_pos, (flows.src_pos + 1) % n)
    for pos in range(n):  # every member sends and receives exactly the message
        assert flows.bytes_sent_by(pos) == pytest.approx(size)
        assert flows.bytes_received_by(pos) == pytest.approx(size)
    assert len(flows.parent_idx) == 0 and flows.grouped_sends  # nothing waits; NCCL's point-to-point path


def test_the_seed_api_decomposes_a_send_receive_too():
    result, next_id = decompose_collective("SendRecv", [0, 1, 2, 3], 1e6, num_channels=1, algorithm="p2p")
    assert next_id == 4 and {(f.src, f.dst) for f in result.flows} == {(0, 1), (1, 2), (2, 3), (3, 0)}
    assert sum(f.bytes for f in result.flows) == pytest.approx(4e6)


def test_busbw_of_a_send_receive_is_its_algbw_and_any_collective_algorithm_leaves_it_to_p2p():
    assert bus_bandwidth_factor(CollType.SendRecv, 8) == 1.0
    assert CollType.SendRecv in POINT_TO_POINT and CollType.AllReduce not in POINT_TO_POINT
    assert {algorithm_for(CollType.SendRecv, a) for a in ("ring", "tree", "nvls")} == {"p2p"}
    assert algorithm_for(CollType.SendRecv, "pxn") == "pxn"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    path = tmp_path_factory.mktemp("sr") / "dgx.yaml"
    path.write_text("datacenter: {from: dgx-h100, cluster: {num_nodes: 1}}\n")
    return path


def test_the_collective_command_runs_sendrecv_and_permute_alike_within_the_link(node):
    runs = {op: cli("collective", str(node), "--op", op, "--sizes", "64KiB,1GiB", "--json") for op in
            ("sendrecv", "permute")}
    assert all(r.returncode == 0 for r in runs.values()), {op: r.stderr for op, r in runs.items()}
    rows = {op: json.loads(r.stdout) for op, r in runs.items()}
    assert rows["sendrecv"] == rows["permute"]
    small, large = rows["sendrecv"]
    assert large["busbw_GBps"] == pytest.approx(large["algbw_GBps"])
    assert large["algorithm"] == "p2p" and large["protocol"] == "simple"
    # one message per GPU each way: never faster than an NVLink 4 port (450 GB/s a direction)
    assert small["busbw_GBps"] < large["busbw_GBps"] < 450.0
    assert large["time_us"] >= 2**30 / 450e9 * 1e6


def test_an_unknown_op_is_bad_input(node):
    run = cli("collective", str(node), "--op", "shift")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "sendrecv" in run.stderr and "permute" in run.stderr and len(run.stderr.strip().splitlines()) == 1
