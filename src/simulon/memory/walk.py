"""The activations a pipeline stage keeps along its schedule, and their peak, on arrays.

A stage's schedule (workload/schedule.py) is a list of steps: F (forward), B (backward, or only its input
gradient when the table has a W of the same micro-batch and chunk: a split backward, as ZB-H1, ZB-V and DualPipe
run it) and W (a split backward's weight gradients). Walking it in order, each forward of a model chunk adds what
the chunk keeps per micro-batch, each whole backward frees it, a split one trades it for what its weight gradients
read, every GEMM's input and output gradient (activations.ActivationModel.deferred: more than the chunk keeps under
recomputation), and its W frees those. The peak is taken over every step: what is kept
before it (plus, for an F, what it keeps) plus what the running forward or backward holds on top (a W: nothing on
top, its weight gradients accumulating into the fp32 main_grad the states count; what is kept before it is the level
a split B left, above the one before that B where the B re-created more than the chunk kept).

A combined step (Step.combined: overlap_moe_expert_parallel_comm's forward and backward of two micro-batches run as
one, layer by layer, workload/megatron.py combined_step) frees the backward's layers as the forward keeps its own:
Megatron-Core's TransformerModelChunkSchedulePlan.run pairs forward layer i with backward layer n - 1 - i, and the
forward's attention runs before the backward's experts and attention free theirs; before any layer, the backward's
head and loss run and free theirs (its post_process ScheduleNode releases its state after its backward), and the
forward's head runs after every layer. So the pair peaks at what was kept before it plus one layer of the forward
(the largest the chunk has) less the backward's head where its chunk holds it (never below what was kept before it),
and the larger of the two transients (one compute stream runs their kernels in turn), not at a whole micro-batch
more. Megatron-Core's one extra warm-up forward keeps what plain 1F1B's first steady forward would, so the overlap's
peak is plain 1F1B's plus about one layer (less the head's on the stage of the loss).

The steps depend only on the schedule's shape (schedule, model chunks, stage, stages, micro-batches), so they are
turned into arrays once per shape (`StagePlan.of`, cached) and every strategy of that shape walks them with one
cumulative sum (a strategy search asks thousands of times per shape). The sum runs in step order, one addition
per step, as a loop would, so the figures are the same to the last bit (tests/memory/test_schedule_walk.py
checks this against the plain loop).

Past its warm-up a schedule repeats itself, a period of stages x chunks micro-batches at a time, until its
cool-down, which only frees: more repeats keep no more. So a walk needs only a few of them (`steady_microbatches`:
the warm-up, STEADY_PERIODS periods and the cool-down of a schedule of the same remainder), which bounds its length
whatever the micro-batch count (a search's strategies with few data-parallel ranks run thousands). Its peak is the
whole schedule's but for the rounding of the longer sum (a few units in the 14th digit:
tests/memory/test_schedule_walk.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..workload.schedule import make_scheduler

STEADY_PERIODS = 4
"""Periods of the steady state a walk keeps (steady_microbatches). Not fitted: one period of stages x max(chunks, 2)
micro-batches already gives every schedule's peak in the property test (tests/memory/test_schedule_walk.py, which
fails with none); four leave a margin that costs a walk a few hundred steps at most."""


def steady_microbatches(microbatches: int, group: int, chunks: int) -> int:
    """The micro-batches a walk of a stage's schedule runs (StagePlan.of): all of them, or fewer by whole periods
    (`group` x chunks, at least two chunks for DualPipe's mirrored pair; `group` the micro-batches a chunk runs in a
    row: the stages, or the interleaved schedule's microbatch_group_size) of the steady state, keeping
    STEADY_PERIODS of them and the same remainder, so that warm-up and cool-down are the schedule's own."""
    period = group * max(chunks, 2)
    surplus = microbatches - STEADY_PERIODS * period
    return microbatches - surplus // period * period if surplus > period else microbatches


@dataclass(frozen=True)
class StagePlan:
    """One stage's schedule as arrays, one entry per step: its model chunk, its kind, and for a B whether it is
    split (followed later by its own W)."""

    chunk: np.ndarray     # int: the step's model chunk
    forward: np.ndarray   # bool: an F
    weight: np.ndarray    # bool: a W
    split: np.ndarray     # bool: a B whose W comes later
    paired: np.ndarray    # bool: an F run as one combined step with the B after it (or that B)
    microbatches: int = 0  # distinct micro-batches the stage runs forward

    @staticmethod
    @lru_cache(maxsize=4096)
    def of(schedule: str, chunks: int, stage: int, num_stages: int, microbatches: int,
           combined: bool = False, group_size: int | None = None) -> StagePlan:
        """The plan of a stage of a schedule (cached: strategy searches ask again and again); `combined`: with
        forward and backward combined (overlap_moe_expert_parallel_comm: one more warm-up forward); `group_size`:
        the interleaved schedule's micro-batch groups (make_scheduler)."""
        steps = make_scheduler(schedule, chunks, combined, group_size).steps(stage, num_stages, microbatches)
        weights = {(step.microbatch, step.chunk) for step in steps if step.kind == "W"}
        kinds = np.array([step.kind for step in steps], dtype="U1")
        split = np.array([step.kind == "B" and (step.microbatch, step.chunk) in weights for step in steps], dtype=bool)
        combined = np.array([step.combined for step in steps], dtype=bool)
        paired = combined | np.append(combined[1:], False)  # a combined B and the F before it
        plan = StagePlan(np.array([step.chunk for step in steps], dtype=np.int64), kinds == "F", kinds == "W", split,
                         paired, len({step.microbatch for step in steps if step.kind == "F"}))
        for array in (plan.chunk, plan.forward, plan.weight, plan.split, plan.paired):
            array.flags.writeable = False  # shared by every caller of the cache
        return plan

    def per_microbatch(self, kept: np.ndarray) -> float:
        """What one micro-batch keeps on the stage, given per model chunk what a micro-batch keeps there: the chunks
        its forwards run through on this stage, on average over its micro-batches (every chunk of an interleaved
        or V schedule; one of DualPipe's two mirrored stages, as each direction runs through one)."""
        if not self.microbatches:
            return 0.0
        return float(kept[self.chunk[self.forward]].sum()) / self.microbatches

    def peak(self, kept: np.ndarray, forward: np.ndarray, backward: np.ndarray, deferred: np.ndarray,
             layer: np.ndarray | None = None, head: np.ndarray | None = None, weight: float = 1.0
             ) -> tuple[float, float]:
        """(kept, transient) at the step where their sum peaks (the first such step; (0, 0) when no step holds
        anything), given per model chunk what a micro-batch keeps, what its forward and its backward hold on top,
        what a split backward keeps until its W, and the most one of its layers keeps (`layer`: what a combined
        step holds on top of what was kept before it; the whole chunk where not given), what a combined step's
        backward frees before its forward's layers run (`head`: its head and loss; none where not given); `weight`:
        the steps are ranked by kept + weight x transient (the caching allocator's reserved high-water mark counts
        transients more)."""
        return self.peaks(kept, forward, backward, deferred, layer, head, (weight,))[0]

    def peaks(self, kept: np.ndarray, forward: np.ndarray, backward: np.ndarray, deferred: np.ndarray,
              layer: np.ndarray | None = None, head: np.ndarray | None = None,
              weights: tuple[float, ...] = (1.0,)) -> list[tuple[float, float]]:
        """`peak` for each of `weights`, from one walk of the schedule (the memory model ranks its steps twice: by
        what they allocate and by what they reserve)."""
        if not self.chunk.size:
            return [(0.0, 0.0)] * len(weights)
        first, second = self._levels(kept, forward, backward, deferred, layer, head)
        return [self._at(first, second, self._best(first, second, weight)) for weight in weights]

    def held_at_peak(self, kept: np.ndarray, forward: np.ndarray, backward: np.ndarray, deferred: np.ndarray,
                     layer: np.ndarray | None = None, head: np.ndarray | None = None) -> float:
        """What the micro-batches whose activations the stage holds at its peak (`peak`'s step, weight 1) keep per
        model chunk, a split backward waiting for its W counted as its chunk's micro-batch keeps, not by what the W
        reads (`deferred`: every GEMM's input and output gradient, which under recomputation is several times
        what the chunk kept); so over what one micro-batch keeps (`per_microbatch`) it counts micro-batches, never
        more than the step holds. The same as `peak`'s kept where no backward is split."""
        if not self.chunk.size:
            return 0.0
        first, second = self._levels(kept, forward, backward, deferred, layer, head)
        best = self._best(first, second, 1.0)
        if best is None:
            return 0.0
        if self.split.any():
            first, _ = self._levels(kept, forward, backward, kept, layer, head)  # a pending W holds its micro-batch
        return float(first[best])

    def _levels(self, kept: np.ndarray, forward: np.ndarray, backward: np.ndarray, deferred: np.ndarray,
                layer: np.ndarray | None, head: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Per step what is kept (with an F's own micro-batch) and what the running step holds on top (`peak`)."""
        k, w = kept[self.chunk], deferred[self.chunk]
        freed = k - np.where(self.split, w, 0.0)
        delta = np.where(self.forward, k, -np.where(self.weight, w, freed))
        live = np.empty_like(delta)
        live[0] = 0.0
        np.cumsum(delta[:-1], out=live[1:])  # kept before each step, summed in step order
        first = np.where(self.forward, live + k, live)
        second = np.where(self.forward, forward[self.chunk], np.where(self.weight, 0.0, backward[self.chunk]))
        if self.paired.any():  # a combined step peaks at its F's first layer: one layer more less the B's head
            pair = self.forward & self.paired
            after = np.append(self.chunk[1:], 0)  # the chunk of the B paired with an F
            grown = (kept if layer is None else layer)[self.chunk]
            freed = np.zeros_like(grown) if head is None else head[after]
            first = np.where(pair, live + np.maximum(grown - freed, 0.0), first)
            second = np.where(pair, np.maximum(second, backward[after]), second)
        return first, second

    def _best(self, first: np.ndarray, second: np.ndarray, weight: float) -> int | None:
        """The first step where first + weight x second peaks; None where none is above 0."""
        total = np.where(self.paired & ~self.forward, -np.inf, first + weight * second)
        best = int(np.argmax(total))
        return best if total[best] > 0.0 else None

    @staticmethod
    def _at(first: np.ndarray, second: np.ndarray, best: int | None) -> tuple[float, float]:
        """(first, second) at step `best`; (0, 0) at none."""
        return (0.0, 0.0) if best is None else (float(first[best]), float(second[best]))
