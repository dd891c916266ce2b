"""DeepEP's NVLink and RDMA buffers (memory/runtime.deepep_buffers): sized by DeepEP's own hints
(csrc/legacy/config.hpp) for the group's recommended configs, held outside PyTorch's allocator on the ranks that
dispatch through them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.config.scenario import ScenarioConfig
from simulon.memory.model import MemoryModel
from simulon.memory.runtime import deepep_buffers


def test_a_node_of_eight_ranks_holds_deepeps_nvlink_hint_and_no_rdma_buffer():
    """DeepSeek-V3's hidden 7168 (16-bit tokens: 14,336 bytes) over 8 ranks: 10 channels (20 SMs) x 8 NVLink peers,
    each 256 tokens of 14,336 + 2,056 bytes (source metadata 8, 128 int64 top-k indices, 128 float weights, 128
    float scales) and (2 x 1 + 3) ints of heads and tails: 335,709,760 bytes, 335,709,824 aligned to 128."""
    assert deepep_buffers(8, 7168) == 335_709_824


def test_a_group_over_nodes_adds_an_rdma_buffer_of_a_send_and_a_receive_copy_per_slot():
    """64 ranks (8 nodes of 8): NVLink 10 x 8 x ((2 x 8 + 3) x 4 + 288 x 16,392) = 377,677,760 bytes, 377,677,824
    aligned; RDMA 10 x 8 x ((2 x 8 + 2) x 2 x 4 + 2 x 128 x (14,336 + 2,056 + 16)) = 336,047,360 (an int4 more per
    slot)."""
    assert deepep_buffers(64, 7168) == 377_677_824 + 336_047_360


def test_one_rank_holds_no_deepep_buffer():
    assert deepep_buffers(1, 7168) == 0.0


@given(st.integers(1, 512), st.integers(1, 512), st.sampled_from([1024, 4096, 7168]))
def test_more_ranks_never_hold_smaller_deepep_buffers(a, b, hidden):
    small, large = sorted((a, b))
    assert deepep_buffers(small, hidden) <= deepep_buffers(large, hidden)


def moe_memory(dispatcher: str, first_dense: int) -> list:
    sc = gpt_scenario(nodes=1, gpus_per_node=8, pp=2, ep=4, layers=4, moe={"num_experts": 8, "top_k": 2,
                      "first_dense_layers": first_dense})
    data = sc.model_dump(mode="json", exclude_none=True)
    data["workload"]["training"]["moe_dispatcher"] = dispatcher
    return MemoryModel.of(ScenarioConfig.model_validate(data)).report().stages


def test_deepep_adds_its_buffers_outside_the_allocator_on_the_stages_that_dispatch_and_nowhere_else():
    """pp 2 of 4 layers, the first two dense: stage 0 holds no expert and allocates no DeepEP buffer (Megatron-Core
    allocates it at a rank's first dispatch); stage 1 holds the 4-rank group's, in device memory, not in what the
    allocator reserves."""
    deepep, alltoall = moe_memory("deepep", 2), moe_memory("alltoall", 2)
    assert "DeepEP buffers" not in deepep[0].runtime and deepep[0].device == alltoall[0].device
    assert deepep[1].runtime["DeepEP buffers"] == deepep_buffers(4, 1024)
    assert deepep[1].reserved == alltoall[1].reserved
    assert deepep[1].device == alltoall[1].device + deepep_buffers(4, 1024)
