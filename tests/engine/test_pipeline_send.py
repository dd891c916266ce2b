"""A pipeline-parallel send in a training replay runs as NCCL's send/receive between its two GPUs: the same channels,
per-channel copy rate, staging and launch as `simulon collective --op sendrecv` of its bytes over the same pair
(Megatron's p2p_communication goes through torch.distributed's batch_isend_irecv, NCCL's ncclSend/ncclRecv)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import gpt_scenario
from simulon.collective.nccl import p2p_channels_across_domains, p2p_channels_per_peer
from simulon.collective.types import CollType
from simulon.dag.nodes import NodeKind
from simulon.pipeline import simulate, time_collective


def _two_stages(channels: int | None, nodes: int = 1):
    """Two pipeline stages on two GPUs of one NVLink node (or of two nodes, over their NICs), nothing else on the
    links (tp = dp = 1)."""
    sc = gpt_scenario(nodes=nodes, gpus_per_node=2 // nodes, pp=2, layers=2, hidden=2048, seq=2048, gbs=2,
                      nvlink="450GBps", nic="400Gbps")
    return sc.model_copy(update={"collective": sc.collective.model_copy(update={"num_channels": channels})})


def _send_seconds(sc) -> tuple[np.ndarray, float]:
    """(each pipeline send's seconds from its call to its delivery in the replay, its bytes)."""
    sim = simulate(sc, fold_mode="full")
    dag, timeline = sim.dag, sim.timeline
    sends = np.flatnonzero((dag.kind == NodeKind.flow) & (dag.coll < 0))
    props = timeline.flows
    at = np.searchsorted(props.nodes, sends)
    seconds = timeline.finish[sends] - timeline.start[sends] + props.delay[at]
    assert len(set(dag.size[sends].tolist())) == 1
    return seconds, float(dag.size[sends][0])


@pytest.mark.parametrize(("channels", "nodes"), [(None, 1), (1, 1), (None, 2)])
def test_a_pipeline_send_takes_as_long_as_the_send_receive_of_its_bytes_between_its_two_gpus(channels, nodes):
    sc = _two_stages(channels, nodes)
    seconds, size = _send_seconds(sc)
    c = sc.collective
    collective = time_collective(sc.datacenter, CollType.SendRecv, (0, 1), size, None, c.num_channels, c.protocol)
    np.testing.assert_allclose(seconds * 1e6, collective.time_us, rtol=1e-6)


def test_pinning_one_channel_slows_a_pipeline_send_as_it_slows_the_send_receive():
    free, size = _send_seconds(_two_stages(None))
    pinned, _ = _send_seconds(_two_stages(1))
    dc = _two_stages(None).datacenter
    ratio = (time_collective(dc, CollType.SendRecv, (0, 1), size, channels=1).time_us
             / time_collective(dc, CollType.SendRecv, (0, 1), size).time_us)
    assert ratio > 2  # one point-to-point channel's copy rate, far below the NVLink port's
    np.testing.assert_allclose(pinned / free, ratio, rtol=1e-6)


def test_a_pipeline_send_takes_the_channels_nccl_gives_a_peer_on_the_whole_pipeline_group():
    """Megatron sends over the pipeline-parallel group's communicator, and NCCL sets a peer's point-to-point
    channels from that communicator's ranks (graph/paths.cc ncclTopoComputeP2pChannels; enqueue.cc halves a peer's
    channels while they times the ranks exceed p2pnChannels): four stages in one node give each send 8 of the 32
    channels, where a two-GPU communicator would give it 16."""
    sc = gpt_scenario(nodes=1, gpus_per_node=4, pp=4, layers=4, hidden=2048, seq=2048, gbs=4,
                      nvlink="450GBps", nic="400Gbps")
    dag = simulate(sc, fold_mode="full").dag
    size = float(dag.size[dag.sends.nodes][0])
    assert {run.channels for run in dag.sends.runs} == {p2p_channels_per_peer(4, size)}
    assert p2p_channels_per_peer(4, size) < p2p_channels_per_peer(2, size)


def test_a_pipeline_send_inside_a_node_takes_a_network_peers_channels_where_the_pipeline_group_spans_nodes():
    """NCCL gives every peer of a communicator across NVLink domains the channels of its network peers (graph/paths.cc
    ncclTopoComputeP2pChannels takes the least over the communicator's ranks): eight stages over two nodes of four
    GPUs send inside a node on 2 channels (NCCL_NCHANNELS_PER_NET_PEER), not the 16 of a two-GPU communicator."""
    sc = gpt_scenario(nodes=2, gpus_per_node=4, pp=8, layers=8, hidden=2048, seq=2048, gbs=8,
                      nvlink="450GBps", nic="400Gbps")
    dag = simulate(sc, fold_mode="full").dag
    size = float(dag.size[dag.sends.nodes][0])
    inside = {run.channels for run in dag.sends.runs if len({g // 4 for g in run.group}) == 1}
    assert inside == {p2p_channels_across_domains(8, size)} == {2}
