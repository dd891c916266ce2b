"""How a kernel's CTAs share the SMs, in the two ways attention kernels are written:

- **A launch grid** (`Order.light_first`, `Order.heavy_first`): the hardware block scheduler hands the next CTA in
  grid order to the first SM that frees up (greedy list scheduling, Graham 1966), and the kernel ends when the last
  SM does. The grid puts the block index fastest and the (batch, head) pairs one after the other, so a causal
  kernel's CTAs come lightest or heaviest first within each head. FlashAttention-2's forward launches
  grid(num_m_block, b, h) with m_block = blockIdx.x (csrc/flash_attn/src/flash_fwd_launch_template.h,
  flash_fwd_kernel.h): a causal head's lightest query block first; its backward grid_n(num_n_block, b, h) with
  n_block = blockIdx.x (flash_bwd_launch_template.h): first the key block that every query block reads.
- **A persistent kernel with a static schedule** (`Order.static_heaviest_first`): one CTA per SM walks the tiles,
  heaviest first, SM s taking tiles s, s + SMs, s + 2 SMs, ... (CUTLASS's StaticPersistentTileScheduler's
  round-robin), so the first SM, which takes the heaviest tile of every round, finishes last: the sum of each
  round's heaviest tile. Taken for cuDNN's fused attention, whose kernels are not public: against the H100 and
  H200 profiles' attention kernels it fits at 6.4% and 3.5% where greedy dispatch heaviest first (FlashAttention-3's
  DynamicPersistentTileScheduler) fits at 10.2% and 8.0% (benchmarks/leave_one_out.py kernels --by gpu, in
  sample), though SimuMax's B200 rows prefer the latter (8.4% against 10.1%).
- **A launch grid longest first** (`Order.longest_first`): one CTA per tile, the grid's index decoded so that the
  heaviest tile of every head in a section of heads comes before the next heaviest of any, each section after the
  other; the hardware hands each to the first SM that frees up, so within a section this is longest-processing-time
  first list scheduling (Graham 1969), each CTA to the least-loaded SM. cuDNN's SM100 forward (cudnn-frontend,
  include/cudnn_frontend/experimental/sm100_sdpa_prefill_engine.h: grid(total_blocks), sections of the heads whose
  K and V fit in 50 MiB of L2; generated/sdpa/sm100/prefill/full_seqlens/d128_fprop_kernel.h:
  block = num_block - 1 - block), as FlashAttention's SingleTileLPTScheduler and FlashAttention-3's causal
  backward (hopper/flash_bwd_launch_template.h, SingleTileBwdLPTScheduler, heaviest key block first unless
  deterministic) do.

An SM runs one CTA at a time. `makespan` of a grid has two implementations that give the same float to the bit: a
Python heap (the reference) and a numba loop, used from COMPILED_FROM_CTAS CTAs on, or when told (a fit times
thousands of kernels thousands of times); numba is imported only then.
"""

from __future__ import annotations

import heapq
from enum import IntEnum

import numpy as np


class Order(IntEnum):
    static_heaviest_first = 0
    light_first = 1
    heavy_first = 2
    longest_first = 3


COMPILED_FROM_CTAS = 50_000
"""CTAs from which `makespan` runs the numba loop unless told: the Python heap hands out about five million CTAs a
second (10 ms for 48 x 1,024 on 132 SMs on a 2-core machine), so below this a kernel takes a few milliseconds, less
than importing numba (1 to 2 s)."""


MAX_CTAS = 2**22
"""CTAs of one kernel dispatched one by one (32 MB of work; the numba loop takes 0.19-0.32 s over them for a grid,
a persistent kernel's round-robin 5 ms: medians of three on the 2-core machine with a test run beside it); past
them `makespan` extrapolates. Either way of dispatch ends within the heaviest CTA of the total work over the SMs
(a greedy list schedule by Graham's bound; a static round-robin of tiles heaviest first, because each round's
heaviest is no heavier than the last round's mean), and so does the extrapolation, whose first part is such a
dispatch: its error is at most one CTA's work, under slots x heaviest / mean / MAX_CTAS ~ 1e-4 of the kernel (148
SMs, a causal kernel's heaviest CTA twice its mean). No kernel of the shipped tables, profiles or examples comes
near (65,536 CTAs at most); an attention over 2^24 tokens of a 4,096-sample micro-batch (2^31 CTAs, 17 GB of
work) did."""


def issue_sequence(work: np.ndarray, copies: int, order: Order, section: int = 0) -> np.ndarray:
    """The work of each CTA (or tile) in the order they are issued, for `copies` (batch x heads) of the blocks
    `work`, given heaviest first. `section`: for `Order.longest_first`, the copies each of its sections holds (all of
    them where 0)."""
    if order == Order.static_heaviest_first:
        return np.repeat(work, copies)
    if order == Order.longest_first:
        size = min(section or copies, copies)
        full, rest = divmod(copies, size)
        return np.concatenate([np.tile(np.repeat(work, size), full), np.repeat(work, rest)])
    per_copy = work[::-1] if order == Order.light_first else work
    return np.tile(per_copy, copies)


def makespan(work: np.ndarray, copies: int, order: Order, slots: int, compiled: bool | None = None,
             section: int = 0) -> float:
    """When the last of `slots` SMs finishes `copies` of the blocks `work` (given heaviest first) issued in
    `order` (`section`: issue_sequence's). `compiled`: for a grid, the numba loop (True), the Python heap (False), or
    by size (None). Past MAX_CTAS CTAs, as many copies as fit in MAX_CTAS are dispatched and the rest added at their
    mean work per SM (extrapolated)."""
    work = np.asarray(work, dtype=float)
    if work.size * copies <= MAX_CTAS:
        return dispatched_makespan(work, copies, order, slots, compiled, section)
    dispatched = max(1, MAX_CTAS // work.size)
    extra = (copies - dispatched) * float(np.sum(work)) / slots
    return dispatched_makespan(work, dispatched, order, slots, compiled, section) + extra


def dispatched_makespan(work: np.ndarray, copies: int, order: Order, slots: int, compiled: bool | None,
                        section: int = 0) -> float:
    """`makespan` of every CTA dispatched one by one."""
    sequence = issue_sequence(work, copies, order, section)
    if sequence.size <= slots:
        return float(sequence.max(initial=0.0))
    if order == Order.static_heaviest_first:  # the first SM's tiles: every round's heaviest
        return float(np.sum(sequence[::slots]))
    if compiled is None:
        compiled = sequence.size >= COMPILED_FROM_CTAS
    if compiled:
        from .dispatch_compiled import greedy_makespan
        return float(greedy_makespan(sequence, slots))
    return greedy_makespan_python(sequence, slots)


def greedy_makespan_python(sequence: np.ndarray, slots: int) -> float:
    """The reference for a grid: a heap of the SMs' free times; each CTA goes to the earliest."""
    free = [0.0] * slots
    take = heapq.heapreplace
    for work in sequence.tolist():
        take(free, free[0] + work)
    return max(free)
