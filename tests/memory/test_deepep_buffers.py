"""DeepEP's buffer, allocated outside PyTorch's allocator for the tensor-and-expert-parallel group, counts in what
nvidia-smi shows: its NVLink part is channels x NVLink ranks x receive tokens x bytes a token (DeepEP's
Config.get_nvl_buffer_size_hint), with an RDMA part once the group spans NVLink domains."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.config.loading import parse_scenario
from simulon.memory.model import MemoryModel
from simulon.memory.runtime import deepep_buffers

MOE = {"num_experts": 8, "top_k": 2}


def test_deepep_buffer_within_one_nvlink_domain_is_its_nvl_size_hint():
    """8 ranks, hidden 7168 in bf16: 10 channels x 8 ranks x (5 ints of counters + 256 tokens x (14,336 bytes of
    hidden + 8 of source meta + 128 x 12 of top-k indices and weights + 128 x 4 of scales)), rounded to 128 bytes."""
    expected = 10 * 8 * (5 * 4 + 256 * (7168 * 2 + 8 + 128 * 12 + 128 * 4))
    assert deepep_buffers(8, 7168 * 2) == pytest.approx(-(-expected // 128) * 128)
    assert deepep_buffers(1, 7168 * 2) == 0.0
    assert deepep_buffers(16, 7168 * 2) > deepep_buffers(8, 7168 * 2)  # an RDMA buffer across two domains


def test_memory_counts_deepeps_buffer_on_the_device_of_a_deepep_run():
    """The memory model left DeepEP's buffer out: a deepep run's device figure was the all-to-all one's."""
    sc = gpt_scenario(nodes=1, gpus_per_node=4, ep=4, moe=MOE, layers=2, hidden=512, heads=8, gbs=8)
    data = sc.model_dump(mode="json", exclude_none=True)
    plain = MemoryModel.of(parse_scenario(data, "test")).stage(0)
    data["workload"]["training"]["moe_dispatcher"] = "deepep"
    deepep = MemoryModel.of(parse_scenario(data, "test")).stage(0)
    assert deepep.runtime["DeepEP buffers"] == deepep_buffers(4, 512 * 2)
    assert deepep.device - plain.device == pytest.approx(deepep_buffers(4, 512 * 2))
    assert "DeepEP buffers" not in plain.runtime
