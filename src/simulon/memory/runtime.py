"""What a training process holds on the GPU besides its tensors, and what the caching allocator adds to them.

* The CUDA context (driver state and the kernels PyTorch, cuBLAS and NCCL load) lives outside PyTorch's
  allocator: nvidia-smi counts it, torch.cuda.max_memory_reserved does not.
* NCCL allocates each communicator's buffers with cudaMalloc, also outside the allocator: per channel and per
  peer it receives from, one buffer per protocol (NCCL_BUFFSIZE 4 MiB for Simple; LL128 and LL as sized in
  NCCL's src/include/device.h: 120 elements x 640 threads x 8 steps x 8 bytes, and 8 lines x 512 threads x 8
  steps x 16 bytes).
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
