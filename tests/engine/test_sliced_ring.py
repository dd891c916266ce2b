"""A Simple ring hands each step on slice by slice (NCCL's ProtoSimple<CHUNKSTEPS/SLICESTEPS, SLICESTEPS>): the next
rank forwards a slice as soon as it arrived, so a step's latency overlaps the transfer of its later slices; LL and
LL128 steps, and the last step of a ring, pay their latency whole."""

from __future__ import annotations

from dataclasses import replace as with_

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.collective import flow_set
from simulon.collective.algorithms import find_algorithm
from simulon.collective.nccl import PROTOCOLS, ring_overlap_fraction, ring_slices
from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.engine.flows import FlowProperties, sliced_handoffs
from simulon.engine.steady_state import SteadyState
from simulon.network import Topology
from simulon.network.calibration import LinkModel
from simulon.pipeline import collective_sweep, time_collective

GB, KIB, MIB = 1e9, 2.0**10, 2.0**20
BW = 100 * GB


def datacenter(gpus: int = 8) -> DatacenterConfig:
    return DatacenterConfig.model_validate({
        "cluster": {"num_nodes": 1},
        "node": {"gpus_per_node": gpus, "gpu": "H100"},
        "network": {"scale_up": {"switch": {"port_speed": "100GBps", "latency": "0us"}}}})


def hop_model(hop_us: float) -> LinkModel:
    """Line rate and no launch, every protocol's scale-up hop `hop_us`."""
    return with_(LinkModel.ideal(), hop_up=(hop_us * 1e-6,) * len(PROTOCOLS))


def ring_seconds(ctype: CollType, n: int, size: float, hop_us: float, protocol: str = "simple") -> float:
    """One channel of a ring over n GPUs of one switch, replayed under hop_model."""
    timing = time_collective(datacenter(), ctype, tuple(range(n)), size, "ring", 1, protocol, model=hop_model(hop_us))
    return timing.time_us * 1e-6


def sliced_seconds(steps: int, chunk: float, latency: float) -> float:
    """`steps` steps of `chunk` bytes at BW: each but the last hands over once what follows its first slice
    covered its latency."""
    tau, after_first = chunk / BW, float(ring_overlap_fraction(chunk))
    return steps * tau + (steps - 1) * max(0.0, latency - after_first * tau) + latency


@pytest.mark.parametrize(("chunk", "slices"), [(1.0, 1), (32 * KIB, 1), (32 * KIB + 16, 2), (64 * KIB, 2),
                                               (MIB, 2), (2 * MIB, 2), (2 * MIB + 16, 4), (3 * MIB, 4),
                                               (16 * MIB, 16)])
def test_a_simple_ring_step_moves_its_chunks_in_two_slices_of_at_least_32_kib(chunk, slices):
    """prims_simple.h: a chunk of at most CHUNKSTEPS = 4 slots of 512 KiB, cut in SlicePerChunk = 2 slices of at
    least a 32nd of SLICESTEPS = 2 slots (32 KiB)."""
    assert ring_slices(chunk) == slices


@pytest.mark.parametrize(("chunk", "after_first"), [(32 * KIB, 0.0), (32 * KIB + 16, 16 / (32 * KIB + 16)),
                                                     (48 * KIB, 1 / 3), (MIB, 0.5), (3 * MIB, 0.75)])
def test_a_simple_ring_step_overlaps_what_follows_its_first_slice_however_unequal_the_slices(chunk, after_first):
    """prims_simple.h: sliceSize = max(nelem / SlicePerChunk, 32 KiB) and the last slice takes the rest, so 32 KiB
    and 16 bytes are a slice of 32 KiB and one of 16 bytes: 16 bytes overlap the hop, not half the step."""
    assert float(ring_overlap_fraction(chunk)) == pytest.approx(after_first, rel=1e-12, abs=1e-15)
    slices = float(ring_slices(chunk))
    if chunk % (slices * 32 * KIB) == 0:
        assert float(ring_overlap_fraction(chunk)) == pytest.approx(1 - 1 / slices)


@given(st.floats(16 * KIB, 96 * KIB), st.floats(16 * KIB, 96 * KIB))
@settings(max_examples=25, deadline=None)
def test_a_bigger_simple_ring_step_is_never_faster_across_the_smallest_slice(chunk_a, chunk_b):
    """dgx-h100's Simple ring all-reduce over 8 GPUs took 99.5 us at 8.25 MB and 80.7 us at 8.5 MB while every
    step's overlap jumped from none to half its transfer as its 32 KiB slice became two."""
    small, big = sorted((chunk_a, chunk_b))
    assert ring_seconds(CollType.AllReduce, 8, small * 8, 5.0) <= ring_seconds(CollType.AllReduce, 8, big * 8, 5.0) \
        * (1 + 1e-12)


@pytest.mark.parametrize("ctype", [CollType.ReduceScatter, CollType.AllGather, CollType.AllReduce])
@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize(("chunk", "hop_us"), [(16 * KIB, 5.0), (MIB, 5.0), (MIB, 30.0), (8 * MIB, 30.0)])
def test_a_simple_ring_step_hands_over_once_its_first_slice_arrived(ctype, n, chunk, hop_us):
    """One channel, chunks of `chunk` bytes a step: a step of one slice (16 KiB) hands over after its last byte
    and its hop; one of two (1 MiB at 10.5 us) hides half its transfer's worth of the hop (all of 5 us, part of
    30 us); 8 MiB in 8 slices hides all of 30 us."""
    steps = 2 * (n - 1) if ctype == CollType.AllReduce else n - 1
    assert ring_seconds(ctype, n, chunk * n, hop_us) == pytest.approx(
        sliced_seconds(steps, chunk, hop_us * 1e-6), rel=1e-9)


@pytest.mark.parametrize("protocol", ["ll", "ll128"])
def test_ll_and_ll128_ring_steps_pay_their_whole_hop(protocol):
    """LL and LL128 move a step as one slice (chunkSteps = sliceSteps = 1): every step waits for the last byte of
    the one before and its hop, on the wire its protocol's flags."""
    n, chunk, hop = 4, MIB, 10e-6
    wire = {"ll": 2.0, "ll128": 128 / 120}[protocol]
    assert ring_seconds(CollType.AllGather, n, chunk * n, 10.0, protocol) == pytest.approx(
        (n - 1) * (chunk * wire / BW + hop), rel=1e-9)


def test_only_ring_steps_are_sliced():
    """NCCL's ring (and simulon's ring variants) chain runRing's steps; trees, NVLS, PAT and grouped sends do
    not, nor does any ring under LL or LL128."""
    sliced = {name: find_algorithm(name).sliced(CollType.AllReduce, "simple") for name in
              ("ring", "hierarchical", "pxn", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain")}
    assert sliced == {"ring": True, "hierarchical": True, "pxn": True, "tree": False, "nvls": False,
                      "nvls_tree": False, "collnet_direct": False, "collnet_chain": False}
    assert not find_algorithm("ring").sliced(CollType.AllReduce, "ll128")
    assert not find_algorithm("pxn").sliced(CollType.AllToAll, "simple")
    assert not find_algorithm("p2p").sliced(CollType.SendRecv, "simple")


@given(st.integers(2, 8), st.sampled_from([16 * KIB, 256 * KIB, MIB, 4 * MIB]), st.floats(0.0, 40.0),
       st.floats(0.0, 40.0))
@settings(max_examples=30, deadline=None)
def test_a_longer_hop_is_never_faster_and_slicing_never_beats_the_links_or_trails_store_and_forward(
        n, chunk, hop_a, hop_b):
    low, high = sorted((hop_a, hop_b))
    fast, slow = (ring_seconds(CollType.ReduceScatter, n, chunk * n, h) for h in (low, high))
    assert fast <= slow * (1 + 1e-12)
    steps, tau = n - 1, chunk / BW
    assert steps * tau + high * 1e-6 - 1e-15 <= slow <= steps * (tau + high * 1e-6) * (1 + 1e-12)


@pytest.mark.parametrize("size", [64 * KIB, 4 * MIB, 64 * MIB])
def test_the_python_and_compiled_loops_hand_sliced_steps_over_at_the_same_time(size, monkeypatch):
    dc = DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": 2}})
    times = []
    for engine in ("python", "compiled"):
        monkeypatch.setenv("SIMULON_REPLAY", engine)
        times.append([t.time_us for t in collective_sweep(dc, CollType.AllReduce, tuple(range(16)), [size], "ring",
                                                          None, "simple")])
    assert times[0] == times[1]


@pytest.mark.parametrize("ctype", [CollType.ReduceScatter, CollType.AllReduce])
@pytest.mark.parametrize(("chunk", "hop_us"), [(16 * KIB, 5.0), (MIB, 30.0), (8 * MIB, 30.0)])
def test_the_steady_state_estimate_of_a_sliced_ring_on_identical_links_is_the_replays(ctype, chunk, hop_us):
    n = 8
    flows = flow_set(ctype, range(n), chunk * n, 1, "ring", "simple", one_period=True)
    topology = Topology.from_datacenter(datacenter(), model=hop_model(hop_us))
    assert SteadyState(topology).estimate([flows], ctype, "ring", "simple") == pytest.approx(
        ring_seconds(ctype, n, chunk * n, hop_us), rel=1e-9)


@given(st.floats(0.0, 1.0), st.floats(1e-9, 1e-3), st.floats(0.0, 1e-4), st.floats(0.0, 1e-4),
       st.floats(0.0, 0.99))
@settings(max_examples=200, deadline=None)
def test_the_latency_a_flow_was_delivered_after_is_read_back_from_its_start_and_finish(
        start, transfer, latency, lead, overlap):
    """What the analysis reads (critical path, link loads): the replay delivers at last + latency - min(lead,
    overlap x transfer); delivered_latency gives back finish - last."""
    lead = min(lead, latency)
    last = start + transfer
    finish = last + (latency - min(lead, overlap * transfer))
    props = FlowProperties(np.zeros(1, dtype=np.int64), np.zeros((1, 1), dtype=np.int64), np.ones(1), np.ones(1),
                           np.array([latency]), np.zeros(1), None, np.array([lead]), np.array([overlap]))
    assert props.delivered_latency(np.array([start]), np.array([finish]))[0] == pytest.approx(
        finish - last, rel=1e-6, abs=1e-15)


def test_a_flow_standing_for_several_steps_hands_over_between_them_and_the_last_step_to_nobody():
    """sliced_handoffs: a steady-state flow of s steps has s - 1 hand-overs inside it, one more where it feeds
    the next flow; flows that are no Simple ring steps none."""
    lead, overlap = sliced_handoffs(np.array([4 * MIB, 4 * MIB, 4 * MIB, 4 * MIB]), np.ones(4),
                                    np.array([1.0, 1.0, 4.0, 4.0]), np.array([True, True, True, False]),
                                    np.array([True, False, False, True]), np.full(4, 2e-6))
    assert lead.tolist() == pytest.approx([2e-6, 0.0, 6e-6, 0.0])
    assert overlap.tolist() == pytest.approx([1 - 1 / 4, 0.0, (1 - 1 / 2) * 3 / 4, 0.0])
