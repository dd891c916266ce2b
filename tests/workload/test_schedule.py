"""Pipeline schedules as tables: the same step order as the loops they replaced, and the invariants of 1F1B."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulon.workload.schedule import (
    InterleavedOneFOneBScheduler,
    OneFOneBScheduler,
    PipelineScheduler,
    ScheduleTable,
    Step,
    make_scheduler,
    megatron_schedule_table,
)

# ---- the loops the tables replaced (simulon 1a522eb), kept as the reference ----


def reference_one_f_one_b(stage: int, num_stages: int, num_microbatches: int) -> list[Step]:
    warmup = min(num_stages - stage - 1, num_microbatches)
    order = [Step("F", mb) for mb in range(warmup)]
    for i in range(num_microbatches - warmup):
        order += [Step("F", warmup + i), Step("B", i)]
    order += [Step("B", mb) for mb in range(num_microbatches - warmup, num_microbatches)]
    return order


def reference_interleaved(chunks: int, stage: int, num_stages: int, num_microbatches: int) -> list[Step]:
    def chunk_and_microbatch(k: int, forward: bool) -> tuple[int, int]:
        group, in_group = divmod(k, num_stages * chunks)
        chunk = in_group // num_stages
        microbatch = group * num_stages + in_group % num_stages
        return (chunk if forward else chunks - 1 - chunk), microbatch

    total = num_microbatches * chunks
    warmup = min((num_stages - stage - 1) * 2 + (chunks - 1) * num_stages, total)

    def step(kind, k: int) -> Step:
        chunk, mb = chunk_and_microbatch(k, kind == "F")
        return Step(kind, mb, chunk)

    order = [step("F", k) for k in range(warmup)]
    for i in range(total - warmup):
        order += [step("F", warmup + i), step("B", i)]
    order += [step("B", k) for k in range(total - warmup, total)]
    return order


# ---- what the configuration allows: 1F1B on any pipeline, interleaved with pp > 1 and pp | micro-batches ----

one_f_one_b = st.integers(1, 8).flatmap(lambda p: st.tuples(
    st.integers(0, p - 1), st.just(p), st.integers(1, 40)))
interleaved = st.integers(2, 8).flatmap(lambda p: st.tuples(
    st.integers(2, 5), st.integers(0, p - 1), st.just(p), st.integers(1, 6).map(lambda groups: groups * p)))


@given(one_f_one_b)
def test_one_f_one_b_runs_the_steps_of_the_loop_it_replaced(case):
    assert OneFOneBScheduler().steps(*case) == reference_one_f_one_b(*case)


@given(interleaved)
def test_interleaved_one_f_one_b_runs_the_steps_of_the_loop_it_replaced(case):
    chunks, *position = case
    assert InterleavedOneFOneBScheduler(chunks).steps(*position) == reference_interleaved(chunks, *position)


@given(st.one_of(one_f_one_b.map(lambda c: (1, *c)), interleaved))
def test_every_microbatch_chunk_runs_forward_once_and_backward_once_after_its_forward(case):
    chunks, stage, num_stages, num_microbatches = case
    steps = make_scheduler("1f1b", chunks).steps(stage, num_stages, num_microbatches)
    pairs = [(mb, chunk) for mb in range(num_microbatches) for chunk in range(chunks)]
    assert Counter(steps) == Counter([Step(kind, *pair) for kind in "FB" for pair in pairs])
    position = {step: i for i, step in enumerate(steps)}
    assert all(position[Step("F", *pair)] < position[Step("B", *pair)] for pair in pairs)


@given(st.one_of(one_f_one_b.map(lambda c: (1, *c)), interleaved))
def test_after_the_warm_up_forwards_and_backwards_alternate_until_the_forwards_run_out(case):
    chunks, stage, num_stages, num_microbatches = case
    scheduler = make_scheduler("1f1b", chunks)
    table = scheduler.table(stage, num_stages, num_microbatches)
    kinds = "".join(step.kind for step in scheduler.steps(stage, num_stages, num_microbatches))
    warmup, total = min(table.warmup, len(table.forwards)), num_microbatches * chunks
    assert kinds == "F" * warmup + "FB" * (total - warmup) + "B" * warmup


def test_megatron_table_runs_groups_of_microbatches_through_each_chunk_in_turn():
    assert megatron_schedule_table(4, 2, 2) == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (3, 0), (2, 1), (3, 1)]
    assert megatron_schedule_table(3, 2, 2) == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (2, 1)]  # last group short
    assert megatron_schedule_table(3, 1, 2) == [(0, 0), (1, 0), (2, 0)]


def test_interleaved_backwards_run_the_forward_table_with_its_chunks_reversed():
    table = InterleavedOneFOneBScheduler(2).table(stage=1, num_stages=2, num_microbatches=2)
    assert table.forwards == ((0, 0), (1, 0), (0, 1), (1, 1))
    assert table.backwards == ((0, 1), (1, 1), (0, 0), (1, 0))
    assert table.warmup == 2  # 2 * (2 - 1 - 1) + (2 - 1) * 2


def test_two_stage_one_f_one_b_by_hand():
    first = OneFOneBScheduler().steps(0, 2, 3)
    assert first == [Step("F", 0), Step("F", 1), Step("B", 0), Step("F", 2), Step("B", 1), Step("B", 2)]
    last = OneFOneBScheduler().steps(1, 2, 3)
    assert last == [Step("F", 0), Step("B", 0), Step("F", 1), Step("B", 1), Step("F", 2), Step("B", 2)]


def test_a_new_schedule_is_a_table_run_by_the_same_loop():
    class AllForwardsFirst(PipelineScheduler):  # GPipe
        def table(self, stage, num_stages, num_microbatches):
            order = tuple((mb, 0) for mb in range(num_microbatches))
            return ScheduleTable(order, order, warmup=num_microbatches)

    assert AllForwardsFirst().steps(0, 2, 2) == [Step("F", 0), Step("F", 1), Step("B", 0), Step("B", 1)]


def test_an_unknown_schedule_name_is_refused():
    with pytest.raises(ValueError, match="not built"):
        make_scheduler("gpipe")
