"""The search's player of a pipeline schedule (search.estimate.schedule_idle over step_graph: the steps' order and
what each waits for computed once per schedule and shape, then one pass over them) gives to the bit what playing the
steps rank by rank, each when the step it waits for is done and its rank's held send (blocking_sends) has gone, gives
(the reference below: the player as it was, with the sender's holds)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.search.estimate import schedule_idle, step_graph
from simulon.workload.schedule import make_scheduler


def reference_idle(schedule: str, vpp: int, microbatches: int, times, send: float) -> float:
    ranks = len(times)
    scheduler = make_scheduler(schedule, vpp)
    placement = scheduler.placement
    orders = [scheduler.steps(rank, ranks, microbatches) for rank in range(ranks)]
    blocking = [scheduler.blocking_sends(rank, ranks, microbatches) for rank in range(ranks)]
    split = [{(step.microbatch, step.chunk) for step in order if step.kind == "W"} for order in orders]
    last = placement.model_stages(ranks, placement.chunks(vpp)) - 1

    def waits_for(rank: int, step) -> tuple[str, int, int, int] | None:
        kind, microbatch, chunk, _ = step
        stage = placement.model_stage(rank, chunk, ranks)
        if kind == "F":
            return None if stage == 0 else ("F", *placement.previous(rank, chunk, ranks), microbatch)
        if kind == "B":
            return (("F", rank, chunk, microbatch) if stage == last
                    else ("B", *placement.next(rank, chunk, ranks), microbatch))
        return ("B", rank, chunk, microbatch)

    def sends_away(rank: int, step) -> bool:
        """Whether a step on another rank waits for this one (its send)."""
        kind, _, chunk, _ = step
        stage = placement.model_stage(rank, chunk, ranks)
        if kind == "F" and stage != last:
            return placement.next(rank, chunk, ranks)[0] != rank
        return kind == "B" and stage != 0 and placement.previous(rank, chunk, ranks)[0] != rank

    done: dict[tuple[str, int, int, int], float] = {}
    free, at, work = [0.0] * ranks, [0] * ranks, [0.0] * ranks
    progressed = True
    while progressed:
        progressed = False
        for rank, order in enumerate(orders):
            while at[rank] < len(order):
                kind, microbatch, chunk, _ = order[at[rank]]
                after = waits_for(rank, order[at[rank]])
                if after is not None and after not in done:
                    break
                forward, backward, weight = times[rank][chunk]
                length = (forward if kind == "F" else weight if kind == "W"
                          else backward - weight if (microbatch, chunk) in split[rank] else backward)
                ready = 0.0 if after is None else done[after] + (send if after[1] != rank else 0.0)
                done[(kind, rank, chunk, microbatch)] = max(free[rank], ready) + length
                # the rank's next step waits for this one's send where the call between them blocks, or receives nothing
                following = waits_for(rank, order[at[rank] + 1]) if at[rank] + 1 < len(order) else None
                holds = (at[rank] + 1 < len(order) and sends_away(rank, order[at[rank]])
                         and (blocking[rank][at[rank]] or following is None or following[1] == rank))
                free[rank] = done[(kind, rank, chunk, microbatch)] + (send if holds else 0.0)
                work[rank] += length
                at[rank] += 1
                progressed = True
    assert all(at[rank] == len(order) for rank, order in enumerate(orders))
    return max(free) - max(work)


SHAPES = [("1f1b", 1, 2), ("1f1b", 1, 4), ("interleaved_1f1b", 2, 2), ("interleaved_1f1b", 3, 4), ("zb_h1", 1, 4),
          ("zb_v", 2, 4), ("dualpipe", 1, 4), ("dualpipev", 2, 4)]
"""(schedule, vpp, ranks)."""

seconds = st.floats(min_value=1e-4, max_value=1e-2, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(shape=st.sampled_from(SHAPES), rounds=st.integers(1, 4), send=st.sampled_from([0.0, 1e-4, 3e-3]),
       data=st.data())
def test_the_player_gives_to_the_bit_what_playing_the_steps_rank_by_rank_gives(shape, rounds, send, data):
    schedule, vpp, ranks = shape
    microbatches = rounds * ranks * (2 if schedule in ("dualpipe", "dualpipev") else 1)
    chunks = make_scheduler(schedule, vpp).placement.chunks(vpp)
    times = tuple(tuple((forward, backward, backward / 3) for forward, backward in
                        ((data.draw(seconds), data.draw(seconds)) for _ in range(chunks))) for _ in range(ranks))
    assert schedule_idle(schedule, vpp, microbatches, times, send) == reference_idle(schedule, vpp, microbatches,
                                                                                      times, send)


def test_every_step_waits_only_for_a_step_played_before_it():
    graph = step_graph("interleaved_1f1b", 2, 8, 4)
    assert len(graph.rank) == 4 * 8 * 2 * 2  # every rank, micro-batch and chunk: a forward and a backward
    assert all(after < i for i, after in enumerate(graph.after))
    assert not any(cross for after, cross in zip(graph.after, graph.cross, strict=True) if after < 0)
