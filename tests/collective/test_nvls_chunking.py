"""NVLS and NVLS-tree run on NCCL's NVLS channels and cut each head's part into NCCL's chunks
(src/transport/nvls.cc ncclNvlsTuning, src/enqueue.cc calcCollChunking), so that a mid-sized message still
pipelines through the reduction, the tree and the multicast."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.collective.nccl import NvlsTuning, architecture, nvls_chunk_bytes, nvls_tuning
from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.pipeline import collective_sweep

KiB, MiB = 1024, 1024 * 1024
HOPPER, BLACKWELL = architecture("hopper"), architecture("blackwell")


@pytest.mark.parametrize("arch, nodes, per_node, nic, expected", [
    (HOPPER, 1, 8, 50.0, (16, 128 * KiB, 128 * KiB)),
    (HOPPER, 2, 8, 50.0, (16, 128 * KiB, 128 * KiB)),
    (HOPPER, 4, 8, 50.0, (16, 128 * KiB, 64 * KiB)),       # NCCL_NVLSTREE_MAX_CHUNKSIZE: 64 KiB from 4 nodes
    (BLACKWELL, 1, 72, 50.0, (24, 128 * KiB, 128 * KiB)),  # NVLS_NCHANNELS_SM100_NVL
    (BLACKWELL, 2, 8, 50.0, (32, 128 * KiB, 64 * KiB)),    # ncclNvlsTreeSm100Tuning's cases
    (BLACKWELL, 2, 4, 50.0, (32, 256 * KiB, 256 * KiB)),
    (BLACKWELL, 2, 8, 100.0, (32, 128 * KiB, 128 * KiB)),
    (BLACKWELL, 4, 8, 50.0, (24, 128 * KiB, 64 * KiB)),
    (BLACKWELL, 4, 8, 100.0, (24, 256 * KiB, 256 * KiB)),
    (BLACKWELL, 4, 72, 100.0, (32, 128 * KiB, 64 * KiB)),
    (BLACKWELL, 4, 16, 100.0, (32, 128 * KiB, 128 * KiB)),
    (BLACKWELL, 4, 8, 25.0, (32, 128 * KiB, 64 * KiB)),   # below 48 GB/s: the defaults
])
def test_nvls_channels_and_chunks_are_nccls_defaults_for_the_communicator(arch, nodes, per_node, nic, expected):
    assert nvls_tuning(arch, nodes, per_node, nic) == NvlsTuning(*expected)


@pytest.mark.parametrize("tree, size, nodes, expected", [
    (False, 1024 * MiB, 1, 128 * KiB),   # 16 channels x 8 heads: 1 GiB is not below 64 x 128 x 128 KiB
    (False, 256 * MiB, 1, 64 * KiB),
    (False, 32 * MiB, 1, 32 * KiB),
    (False, 4 * MiB, 1, 16 * KiB),
    (True, 8 * MiB, 4, 64 * KiB),        # not below 1 x 128 x 64 KiB
    (True, 4 * MiB, 4, 32 * KiB),
    (True, 32 * MiB, 2, 64 * KiB),       # below 4 x 128 x 128 KiB = 64 MiB
    (True, 64 * MiB, 2, 128 * KiB),
])
def test_the_chunk_shrinks_for_a_message_of_few_chunks_as_calccollchunking_cuts_it(tree, size, nodes, expected):
    tuning = nvls_tuning(HOPPER, nodes, 8, 50.0)
    assert nvls_chunk_bytes(tree, size, tuning.channels, 8, tuning) == expected


@settings(max_examples=60, deadline=None)
@given(st.booleans(), st.floats(1.0, 2.0**36), st.floats(1.0, 4.0), st.integers(1, 32), st.integers(2, 72))
def test_a_larger_message_never_gets_a_smaller_chunk(tree, size, more, channels, heads):
    tuning = NvlsTuning(channels, 128 * KiB, 64 * KiB)
    assert nvls_chunk_bytes(tree, size * more, channels, heads, tuning) >= nvls_chunk_bytes(tree, size, channels,
                                                                                          heads, tuning)


def test_four_dgx_h100_nodes_nvls_tree_bus_bandwidth_grows_with_the_message():
    """On 16 channels of 64 KiB chunks the tree pipelines from a few MiB on: 32 MiB took 508 us (128 GB/s bus
    bandwidth, below 16 MiB's) when every channel-head part crossed the tree as one 128 KiB chunk."""
    dc = DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": 4}})
    sizes = [2.0**k for k in range(22, 31)]
    rows = collective_sweep(dc, CollType.AllReduce, tuple(range(32)), sizes, "nvls_tree")
    busbw = [r.busbw_GBps for r in rows]
    assert all(b2 >= b1 * 0.99 for b1, b2 in itertools.pairwise(busbw)), busbw
    assert rows[0].channels == 16
