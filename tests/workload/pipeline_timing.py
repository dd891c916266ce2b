"""Timing of pipeline schedule tables with free communication, the way the zero-bubble and DualPipe papers count
bubbles: each rank runs its steps in order; a forward waits for the forward of the same micro-batch on the model
stage before (the schedule's placement says which rank and chunk runs it), a backward for the backward on the
stage after, a W for its own B. A backward costs B, or B + W when the table has no W of its own for it.

`pairs` (optional, per rank: step index -> pair id) marks forward/backward pairs that run as one overlapped unit
(DualPipe's `_forward_backward_chunk`): the pair starts when both may start and both end together after `fb`.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulon.workload.schedule import Placement, Step


@dataclass(frozen=True)
class Timing:
    makespan: float  # the last step's end: one iteration with a synchronised start and end
    span_bubble: float  # the most idle time between a rank's first forward and its last step (the papers' bubble)


def time_schedule(orders: list[list[Step]], placement: Placement, f: float = 1.0, b: float = 1.0, w: float = 1.0,
                  pairs: list[dict[int, int]] | None = None, fb: float | None = None) -> Timing:
    ranks = len(orders)
    chunks = 1 + max(step.chunk for order in orders for step in order)
    last_stage = placement.model_stages(ranks, chunks) - 1
    split = [{(s.microbatch, s.chunk) for s in order if s.kind == "W"} for order in orders]
    pairs = pairs or [{} for _ in orders]
    done: dict[tuple, float] = {}
    clocks, positions, busy = [0.0] * ranks, [0] * ranks, [0.0] * ranks
    first: list[float | None] = [None] * ranks

    def cost(rank: int, step: Step) -> float:
        return {"F": f, "W": w, "B": b if (step.microbatch, step.chunk) in split[rank] else b + w}[step.kind]

    def needs(rank: int, step: Step) -> tuple | None:
        stage = placement.model_stage(rank, step.chunk, ranks)
        if step.kind == "F":
            return ("F", step.microbatch, *placement.previous(rank, step.chunk, ranks)) if stage > 0 else None
        if step.kind == "B":
            return ("B", step.microbatch, *placement.next(rank, step.chunk, ranks)) if stage < last_stage else None
        return ("B", step.microbatch, rank, step.chunk)

    while any(positions[r] < len(orders[r]) for r in range(ranks)):
        progressed = False
        for r in range(ranks):
            i = positions[r]
            if i == len(orders[r]):
                continue
            unit = [i, i + 1] if i in pairs[r] else [i]
            deps = [needs(r, orders[r][k]) for k in unit]
            if any(d is not None and d not in done for d in deps):
                continue
            start = max([clocks[r], *(done[d] for d in deps if d is not None)])
            length = fb if len(unit) == 2 and fb is not None else sum(cost(r, orders[r][k]) for k in unit)
            for k in unit:
                step = orders[r][k]
                done[(step.kind, step.microbatch, r, step.chunk)] = start + length
                if first[r] is None and step.kind == "F":
                    first[r] = start
            clocks[r] = start + length
            busy[r] += length
            positions[r] += len(unit)
            progressed = True
        assert progressed, "the schedule deadlocks"
    return Timing(max(clocks), max(clocks[r] - (first[r] or 0.0) - busy[r] for r in range(ranks)))
