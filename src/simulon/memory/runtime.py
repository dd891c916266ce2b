"""What a training process holds on the GPU besides its tensors, and what the caching allocator adds to them.

* The CUDA context (driver state and the kernels PyTorch, cuBLAS and NCCL load) lives outside PyTorch's
  allocator: nvidia-smi counts it, torch.cuda.max_memory_reserved does not.
* NCCL allocates each communicator's buffers with cudaMalloc, also outside the allocator: per channel and per
  peer it receives from, one buffer per protocol (NCCL_BUFFSIZE 4 MiB for Simple; LL128 and LL as sized in
  NCCL's src/include/device.h: 120 elements x 640 threads x 8 steps x 8 bytes, and 8 lines x 512 threads x 8
  steps x 16 bytes).
* DeepEP (training.moe_dispatcher deepep) allocates one buffer for the tensor-and-expert-parallel group at its first
  dispatch, outside the allocator too (cudaMalloc shared over NVLink, NVSHMEM across nodes), as large as the larger
  of its dispatch and combine configurations ask for the group (deepep_buffers).
* PyTorch's caching allocator rounds blocks up and keeps freed blocks cached, so what it reserves exceeds the
  peak it hands out. The excess is taken to grow with the large short-lived blocks at the peak (a layer's
  transient, or the optimizer step's), which split cached segments that later requests cannot fill, rather
  than with the weights and optimizer states allocated once. The ratio is fitted on the measured
  reserved-over-allocated excess (memory/data/allocator.yaml, scripts/fit_memory_allocator.py): against the
  table's 19 runs with both figures, leave-one-out, this form errs 1.4% on reserved, a constant ratio of
  allocated 1.9% and one of activations 3.5%.
* With expandable segments (training.expandable_segments, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) the
  allocator maps physical pages into one growing segment per stream and unmaps what it frees at its end, so a
  request of any size reuses freed memory: that excess is taken as gone and reserved as allocated (PyTorch's CUDA
  semantics notes; Megatron-Bridge's memory-tuning guide, skills/nemo-mbridge-perf-memory-tuning: "the single most
  effective fix" for fragmentation OOMs). What remains (pages of blocks freed in the middle of a segment, rounding
  to 2 MiB pages) is not modelled: no table here measures reserved memory under expandable segments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

MiB = 2**20

CUDA_CONTEXT_BYTES = 512 * MiB
"""The CUDA context of a PyTorch training process with lazy module loading (CUDA 11.7+ default), as nvidia-smi
shows it for a process that has allocated nothing: 300-600 MiB on A100/H100 with PyTorch 2.x (PyTorch's
"CUDA semantics" notes; NVIDIA's lazy-loading documentation); the middle is taken."""

NCCL_SIMPLE_BUFFER = 4 * MiB
NCCL_LL128_BUFFER = 120 * 640 * 8 * 8
NCCL_LL_BUFFER = 8 * 512 * 8 * 16
NCCL_BUFFER_PER_PEER = NCCL_SIMPLE_BUFFER + NCCL_LL128_BUFFER + NCCL_LL_BUFFER
"""Receive buffers of one channel's connection to one peer, all three protocols (NCCL 2.18+ defaults)."""

NCCL_DEFAULT_CHANNELS = 16
"""Channels NCCL opens per communicator when the scenario does not fix them: its ring channel count on 8-GPU
NVSwitch nodes (NCCL_DEBUG=INFO prints 16 "Channel xx/16" lines on DGX A100 and H100; PCIe systems open fewer,
so this overstates them)."""

RING_PEERS = 2
"""A ring channel receives from its predecessor; a tree channel from its parent and up to two children. NCCL
connects both for all-reduce, so a channel is taken to hold two peers' buffers."""


DEEPEP_NUM_SMS = 20
"""SMs DeepEP's high-throughput kernels run on (deep_ep Buffer.num_sms default), two per channel."""
DEEPEP_NVL_PEERS = 8
"""GPUs of one NVLink domain DeepEP's buffers address (LEGACY_NUM_MAX_NVL_PEERS, csrc/kernels/legacy/compiled.cuh)."""
DEEPEP_MAX_TOPK = DEEPEP_MAX_SCALES = 128
"""The top-k indices and weights and the scales a buffered token carries room for (kNumMaxTopK, kNumMaxScales)."""
DEEPEP_SOURCE_META_BYTES = 8
"""internode::SourceMeta: the source RDMA rank and a bit per NVLink peer, two ints."""
DEEPEP_TOPK_INDEX_BYTES = 8
"""topk_idx_t: 64-bit unless DeepEP is built with EP_NUM_TOPK_IDX_BITS set."""
DEEPEP_CONFIGS: dict[int, tuple[tuple[int, int, int], ...]] = {
    2: ((256, 6, 128), (256, 6, 128)), 4: ((256, 6, 128), (256, 6, 128)), 8: ((256, 6, 128), (256, 6, 128)),
    16: ((288, 20, 128), (288, 12, 128)), 24: ((288, 8, 128), (288, 8, 128)), 32: ((288, 8, 128), (288, 8, 128)),
    48: ((288, 8, 128), (288, 8, 128)), 64: ((288, 8, 128), (288, 8, 128)), 96: ((480, 12, 128), (480, 8, 128)),
    128: ((560, 12, 128), (560, 8, 128)), 144: ((720, 12, 128), (720, 8, 128)), 160: ((720, 12, 128), (720, 8, 128)),
}
"""(NVLink receive tokens, RDMA send tokens, RDMA receive tokens) per channel of the dispatch and of the combine
configuration DeepEP recommends for each group size (deep_ep/buffers/legacy.py Buffer.get_dispatch_config and
get_combine_config; Config rounds the RDMA receive tokens up to a multiple of the send ones). It supports no other
group size; a group of another is sized as the next one listed (the largest beyond them)."""


def deepep_buffers(group: int, hidden_bytes: float) -> float:
    """Bytes of DeepEP's buffer for a group of `group` ranks moving tokens of `hidden_bytes` (Megatron-Core's
    fused_a2a.get_buffer: the hidden size x max(element bytes, 2)): the larger of the dispatch and combine
    configurations' NVLink and RDMA size hints (csrc/legacy/config.hpp Config.get_nvl_buffer_size_hint and
    get_rdma_buffer_size_hint, each rounded up to 128 bytes); none for a group of one rank."""
    if group <= 1:
        return 0.0
    group = min((n for n in DEEPEP_CONFIGS if n >= group), default=max(DEEPEP_CONFIGS))
    channels = DEEPEP_NUM_SMS // 2
    rdma_ranks, nvl_ranks = max(group // DEEPEP_NVL_PEERS, 1), min(group, DEEPEP_NVL_PEERS)
    token = (hidden_bytes + DEEPEP_SOURCE_META_BYTES + DEEPEP_MAX_TOPK * (DEEPEP_TOPK_INDEX_BYTES + 4)  # fp32 weights
             + DEEPEP_MAX_SCALES * 4)  # fp32 scales
    nvl = rdma = 0.0
    for nvl_tokens, rdma_send, rdma_receive in DEEPEP_CONFIGS[group]:
        rdma_tokens = math.ceil(rdma_receive / rdma_send) * rdma_send
        nvl = max(nvl, _rounded(channels * nvl_ranks * ((2 * rdma_ranks + 3) * 4 + nvl_tokens * token)))
        if group > DEEPEP_NVL_PEERS:  # an RDMA buffer only across NVLink domains, send and receive halves
            rdma = max(rdma, _rounded(channels * rdma_ranks * 2 * ((DEEPEP_NVL_PEERS * 2 + 2) * 4
                                                                   + rdma_tokens * (token + 16))))  # an int4 per token
    return nvl + rdma


def _rounded(num_bytes: float) -> float:
    return math.ceil(num_bytes / 128) * 128


@dataclass(frozen=True)
class AllocatorModel:
    """Reserved = allocated + `overhead` x the short-lived blocks at the peak."""

    overhead: float
    source: str

    @classmethod
    @cache
    def shipped(cls) -> AllocatorModel:
        text = resources.files("simulon.memory").joinpath("data/allocator.yaml").read_text()
        data = yaml.safe_load(text)
        return cls(float(data["overhead"]), str(data["source"]))


def nccl_buffers(communicators: int, channels: int | None) -> float:
    """Bytes of NCCL buffers for a rank in `communicators` groups of more than one rank."""
    return communicators * (channels or NCCL_DEFAULT_CHANNELS) * RING_PEERS * NCCL_BUFFER_PER_PEER
