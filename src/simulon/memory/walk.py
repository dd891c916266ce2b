"""The activations a pipeline stage keeps along its schedule, and their peak, on arrays.

A stage's schedule (workload/schedule.py) is a list of steps: F (forward), B (backward, or only its input
gradient when the table has a W of the same micro-batch and chunk: a split backward, as ZB-H1, ZB-V and DualPipe
run it) and W (a split backward's weight gradients). Walking it in order, each forward of a model chunk adds what
the chunk keeps per micro-batch, each whole backward frees it, a split one frees all but the inputs its weight
gradients read (activations.WEIGHT_GRADIENT_INPUTS), and its W frees those. The peak is taken over every F and B:
what is kept before it (plus, for an F, what it keeps) plus what the running forward or backward holds on top.

The steps depend only on the schedule's shape (schedule, model chunks, stage, stages, micro-batches), so they are
turned into arrays once per shape (`StagePlan.of`, cached) and every strategy of that shape walks them with one
cumulative sum (a strategy search asks thousands of times per shape). The sum runs in step order, one addition
per step, as a loop would, so the figures are the same to the last bit (tests/memory/test_schedule_walk.py
checks this against the plain loop).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..workload.schedule import make_scheduler


@dataclass(frozen=True)
class StagePlan:
    """One stage's schedule as arrays, one entry per step: its model chunk, its kind, and for a B whether it is
    split (followed later by its own W)."""

    chunk: np.ndarray     # int: the step's model chunk
    forward: np.ndarray   # bool: an F
    weight: np.ndarray    # bool: a W
    split: np.ndarray     # bool: a B whose W comes later

    @staticmethod
    @lru_cache(maxsize=4096)
    def of(schedule: str, chunks: int, stage: int, num_stages: int, microbatches: int,
           combined: bool = False) -> StagePlan:
        """The plan of a stage of a schedule (cached: strategy searches ask again and again); `combined`: with
        forward and backward combined (overlap_moe_expert_parallel_comm: one more warm-up forward)."""
        steps = make_scheduler(schedule, chunks, combined).steps(stage, num_stages, microbatches)
        weights = {(step.microbatch, step.chunk) for step in steps if step.kind == "W"}
        kinds = np.array([step.kind for step in steps], dtype="U1")
        split = np.array([step.kind == "B" and (step.microbatch, step.chunk) in weights for step in steps], dtype=bool)
        plan = StagePlan(np.array([step.chunk for step in steps], dtype=np.int64), kinds == "F", kinds == "W", split)
        for array in (plan.chunk, plan.forward, plan.weight, plan.split):
            array.flags.writeable = False  # shared by every caller of the cache
        return plan

    def peak(self, kept: np.ndarray, forward: np.ndarray, backward: np.ndarray,
             weight_inputs: np.ndarray) -> tuple[float, float]:
        """(kept, transient) at the step where their sum peaks (the first such step; (0, 0) when no step holds
        anything), given per model chunk what a micro-batch keeps, what its forward and its backward hold on top,
        and what a split backward keeps until its W."""
        if not self.chunk.size:
            return 0.0, 0.0
        k, w = kept[self.chunk], weight_inputs[self.chunk]
        freed = k - np.where(self.split, w, 0.0)
        delta = np.where(self.forward, k, -np.where(self.weight, w, freed))
        live = np.empty_like(delta)
        live[0] = 0.0
        np.cumsum(delta[:-1], out=live[1:])  # kept before each step, summed in step order
        first = np.where(self.forward, live + k, live)
        second = np.where(self.forward, forward[self.chunk], backward[self.chunk])
        total = np.where(self.weight, -np.inf, first + second)
        best = int(np.argmax(total))
        if not total[best] > 0.0:
            return 0.0, 0.0
        return float(first[best]), float(second[best])
