"""The schedule walk on arrays (memory/walk.py) gives, to the last bit, what the plain loop over the schedule's steps
gives, for every schedule simulon builds, and the memory model's figures come from it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_workload
from simulon.config.units import GiB
from simulon.memory import MemoryModel
from simulon.memory.model import walked
from simulon.memory.walk import StagePlan, steady_microbatches
from simulon.workload.schedule import make_scheduler


def plain_walk(schedule: str, chunks: int, stage: int, num_stages: int, microbatches: int,
               kept: list[float], forward: list[float], backward: list[float],
               deferred: list[float], layer: list[float] | None = None, head: list[float] | None = None,
               combined: bool = False, weight: float = 1.0) -> tuple[float, float]:
    """The walk as a loop over the steps: F adds what its chunk keeps, B frees it (a split B trades it for what its W
    reads, which may be more), W frees that; the peak is the first step whose kept plus transient is the largest (a
    W's transient: none). A combined step
    (an F and the combined B after it) peaks once, at what was kept before it plus one layer of the F's chunk less
    the B's head (freed before the F's layers run; never below what was kept before) and the larger of the two
    transients."""
    steps = make_scheduler(schedule, chunks, combined).steps(stage, num_stages, microbatches)
    split = {(step.microbatch, step.chunk) for step in steps if step.kind == "W"}
    live, best = 0.0, (0.0, 0.0)
    for i, (kind, microbatch, chunk, paired) in enumerate(steps):
        candidate = (live + kept[chunk], forward[chunk]) if kind == "F" else (live, backward[chunk])
        if kind == "W":
            candidate = (live, 0.0)
        after = steps[i + 1] if i + 1 < len(steps) else None
        if kind == "F" and after is not None and after.combined:
            freed = 0.0 if head is None else head[after.chunk]
            candidate = (live + max((kept if layer is None else layer)[chunk] - freed, 0.0),
                         max(forward[chunk], backward[after.chunk]))
        if paired:
            candidate = (0.0, 0.0)  # its pair's F has its peak
        if kind == "F":
            live += kept[chunk]
        elif kind == "W":
            live -= deferred[chunk]
        else:
            live -= kept[chunk] - (deferred[chunk] if (microbatch, chunk) in split else 0.0)
        if candidate[0] + weight * candidate[1] > best[0] + weight * best[1]:
            best = candidate
    return best


values = st.floats(0.0, 1e10, allow_nan=False, allow_infinity=False)


def chunk_values(count: int):
    """Per chunk (kept, forward, backward, what a deferred W holds: up to 4x what the chunk keeps, as under
    recomputation)."""
    one = st.tuples(values, values, values, st.floats(0.0, 4.0)).map(lambda v: (v[0], v[1], v[2], v[0] * v[3]))
    return st.lists(one, min_size=count, max_size=count).map(
        lambda rows: [list(column) for column in zip(*rows, strict=True)])


def same_as_the_loop(schedule: str, chunks: int, stage: int, pp: int, microbatches: int, columns,
                     combined: bool = False) -> None:
    arrays = [np.array(column, dtype=float) for column in columns]
    fast = StagePlan.of(schedule, chunks, stage, pp, microbatches, combined).peak(*arrays)
    assert fast == plain_walk(schedule, chunks, stage, pp, microbatches, *columns, combined=combined)
    assert all(type(x) is float for x in fast)


@given(data=st.data(), schedule=st.sampled_from(["1f1b", "zb_h1", "interleaved_1f1b"]), pp=st.integers(1, 16),
       microbatches=st.integers(1, 64), vpp=st.integers(2, 4))
@settings(max_examples=300, deadline=None)
def test_the_array_walk_equals_the_loop_for_1f1b_interleaved_and_zb_h1(data, schedule, pp, microbatches, vpp):
    chunks = vpp if schedule == "interleaved_1f1b" else 1
    stage = data.draw(st.integers(0, pp - 1))
    same_as_the_loop(schedule, chunks, stage, pp, microbatches, data.draw(chunk_values(chunks)))


@given(data=st.data(), schedule=st.sampled_from(["dualpipe", "dualpipev", "zb_v"]), half=st.integers(1, 4),
       factor=st.integers(1, 3))
@settings(max_examples=60, deadline=None)
def test_the_array_walk_equals_the_loop_for_the_v_and_dualpipe_schedules(data, schedule, half, factor):
    pp = 2 * half
    microbatches = factor * 2 * pp  # DualPipe runs at least 2 pp micro-batches, half from each end
    stage = data.draw(st.integers(0, pp - 1))
    chunks = 1 if schedule == "dualpipe" else 2
    same_as_the_loop(schedule, chunks, stage, pp, microbatches, data.draw(chunk_values(2)))


def chunk_values_with_layers(count: int):
    """Per chunk (kept, forward, backward, weight inputs <= kept, one layer's keep <= kept, its head's <= kept)."""
    shares = st.lists(st.floats(0.0, 1.0), min_size=count, max_size=count)
    return chunk_values(count).flatmap(lambda columns: st.tuples(shares, shares).map(
        lambda two: [*columns, *([k * f for k, f in zip(columns[0], share, strict=True)] for share in two)]))


@given(data=st.data(), schedule=st.sampled_from(["1f1b", "interleaved_1f1b", "dualpipe", "dualpipev"]),
       half=st.integers(1, 4), factor=st.integers(1, 3), vpp=st.integers(2, 3))
@settings(max_examples=200, deadline=None)
def test_the_array_walk_equals_the_loop_with_combined_steps(data, schedule, half, factor, vpp):
    pp = 2 * half if schedule.startswith("dualpipe") else data.draw(st.integers(1, 8))
    chunks = {"1f1b": 1, "dualpipe": 1, "dualpipev": 2}.get(schedule, vpp)
    if schedule == "interleaved_1f1b" and pp == 1:
        pp = 2  # Megatron-Core's combined interleaved schedule pipelines
    microbatches = factor * 2 * pp
    stage = data.draw(st.integers(0, pp - 1))
    held = 2 if schedule == "dualpipe" else chunks  # DualPipe's mirrored stage is its second chunk
    same_as_the_loop(schedule, chunks, stage, pp, microbatches, data.draw(chunk_values_with_layers(held)), True)


@given(columns=chunk_values_with_layers(1), microbatches=st.integers(2, 32), pp=st.integers(1, 8),
       data=st.data())
@settings(max_examples=100, deadline=None)
def test_a_combined_1f1b_stage_keeps_what_plain_1f1b_keeps_plus_at_most_one_layer(columns, microbatches, pp, data):
    stage = data.draw(st.integers(0, pp - 1))
    arrays = [np.array(column, dtype=float) for column in columns]
    plain = StagePlan.of("1f1b", 1, stage, pp, microbatches).peak(*arrays[:4])
    combined = StagePlan.of("1f1b", 1, stage, pp, microbatches, True).peak(*arrays)
    kept, layer = columns[0][0], columns[4][0]
    live = min(pp - stage, microbatches) * kept  # plain 1F1B's micro-batches in flight
    # the walk adds and takes back every step's bytes: it is exact to a few ulps of the largest, times the steps
    slack = 4 * np.finfo(float).eps * max(abs(c[0]) for c in columns) * (microbatches + pp)
    assert plain[0] == pytest.approx(live, rel=1e-12, abs=slack)
    assert combined[0] <= live + layer + 1e-6 * (live + layer) + slack
    assert sum(combined) >= sum(plain) - 1e-6 * sum(plain) - slack


def test_a_walk_of_steps_that_hold_nothing_peaks_at_nothing():
    zero = np.zeros(1)
    assert StagePlan.of("zb_h1", 1, 0, 4, 8).peak(zero, zero, zero, zero) == (0.0, 0.0)


@pytest.mark.parametrize("schedule, vpp", [("1f1b", 1), ("zb_h1", 1), ("interleaved_1f1b", 2)])
def test_the_memory_model_keeps_what_the_loop_keeps_on_every_stage(schedule, vpp, monkeypatch):
    walks = []
    peaks = StagePlan.peaks

    def recorded(plan, *columns, weights=(1.0,)):
        found = peaks(plan, *columns, weights=weights)
        columns = [column.tolist() for column in columns]
        walks.extend((columns, weight, each) for weight, each in zip(weights, found, strict=True))
        return found

    monkeypatch.setattr(StagePlan, "peaks", recorded)
    walked.cache_clear()  # a walk another test in this process worked out (memory.model.walked) calls no peaks
    extra = {"pipeline_schedule": schedule, **({"vpp": vpp} if vpp > 1 else {})}
    wl = gpt_workload(gpus=4, pp=4, layers=16, gbs=12, extra_parallelism=extra)
    memory = MemoryModel(wl, 4, 80 * GiB)
    for s in range(4):
        stage = memory.stage(s)
        (columns, _, (kept, transient)), (_, weight, reserved) = walks[-2:]  # the allocated peak, the reserved one
        assert (kept, transient) == plain_walk(schedule, vpp, s, 4, 12, *columns)
        assert weight > 1.0 and reserved == plain_walk(schedule, vpp, s, 4, 12, *columns, weight=weight)
        assert stage.kept_activations == kept > 0
        assert stage.terms.get("layer transient", transient) == transient


@given(data=st.data(), schedule=st.sampled_from(["1f1b", "zb_h1", "interleaved_1f1b", "zb_v", "dualpipev",
                                                 "dualpipe"]),
       half=st.integers(1, 4), vpp=st.integers(2, 3), combined=st.booleans())
@settings(max_examples=150, deadline=None)
def test_a_walk_of_the_steady_prefix_peaks_where_the_whole_schedule_does(data, schedule, half, vpp, combined):
    combined = combined and schedule not in ("zb_h1", "zb_v")
    pp = 2 * half
    chunks = {"interleaved_1f1b": vpp, "zb_v": 2, "dualpipev": 2}.get(schedule, 1)
    microbatches = 2 * pp * data.draw(st.integers(1, 40)) if schedule.startswith("dualpipe") else \
        data.draw(st.integers(1, 400))
    if schedule == "interleaved_1f1b" and combined:
        microbatches = pp * max(1, microbatches // pp)  # Megatron-Core's combined interleaved runs whole groups
    stage = data.draw(st.integers(0, pp - 1))
    columns = [np.array(c, dtype=float) for c in data.draw(chunk_values_with_layers(2 if schedule == "dualpipe"
                                                                                  else chunks))]
    prefix = steady_microbatches(microbatches, pp, chunks)
    assert prefix <= microbatches and (prefix == microbatches or prefix <= 5 * pp * max(chunks, 2))
    whole = StagePlan.of(schedule, chunks, stage, pp, microbatches, combined)
    steady = StagePlan.of(schedule, chunks, stage, pp, prefix, combined)
    weights = (1.0, 1.25)
    # the longer sum rounds differently: equal to a few ulps of the largest value, times the steps
    slack = 8 * np.finfo(float).eps * max(float(np.abs(c).max()) for c in columns) * (len(whole.chunk) + 1)
    for weight, full, short in zip(weights, whole.peaks(*columns, weights=weights),
                                   steady.peaks(*columns, weights=weights), strict=True):
        assert short[0] + weight * short[1] == pytest.approx(full[0] + weight * full[1], abs=slack)
    assert steady.per_microbatch(columns[0]) == pytest.approx(whole.per_microbatch(columns[0]), rel=1e-9,
                                                              abs=slack)
