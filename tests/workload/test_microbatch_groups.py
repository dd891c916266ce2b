"""The interleaved schedule's micro-batch groups (Megatron-Core's --microbatch-group-size-per-virtual-pipeline-stage,
the Llama 3 paper's N): Megatron's own examples, its warm-up formula, its preconditions, and what a larger group costs
and saves."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import cli
from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario
from simulon.memory import estimate_memory
from simulon.pipeline import simulate, simulate_sampled
from simulon.sampling import steady_counts
from simulon.workload.schedule import InterleavedOneFOneBScheduler, make_scheduler


def forward_order(group: int, num_microbatches: int) -> list[int]:
    """The micro-batches of rank 0's forwards as Megatron-Core's docstring draws them (pp 2, vpp 2)."""
    table = InterleavedOneFOneBScheduler(2, group_size=group).table(0, 2, num_microbatches)
    return [microbatch for microbatch, _ in table.forwards]


def test_groups_of_two_and_three_run_as_megatron_cores_docstring_draws_them():
    # megatron/core/model_parallel_config.py, microbatch_group_size_per_vp_stage: "for PP=2 VP=2, when
    # microbatch_group_size_per_vp_stage=2, num_microbatches = 4, we have rank 0 | 0 1 0 1 2 3 2 3"; "=3,
    # num_microbatches = 5: rank 0 | 0 1 2 0 1 2 3 4 3 4"
    assert forward_order(2, 4) == [0, 1, 0, 1, 2, 3, 2, 3]
    assert forward_order(3, 5) == [0, 1, 2, 0, 1, 2, 3, 4, 3, 4]


@given(st.integers(2, 8).flatmap(lambda pp: st.tuples(
    st.just(pp), st.integers(2, 4), st.integers(0, pp - 1), st.integers(pp, 3 * pp))))
def test_warmup_is_megatron_cores_formula_with_the_group_in_place_of_pp(case):
    pp, chunks, stage, group = case
    # schedules.py, get_pp_rank_microbatches: (pp - rank - 1) * 2 + (num_model_chunks - 1) * group
    assert InterleavedOneFOneBScheduler(chunks, group_size=group).warmup(stage, pp) == (
        (pp - stage - 1) * 2 + (chunks - 1) * group)


@given(st.integers(2, 6).flatmap(lambda pp: st.tuples(
    st.just(pp), st.integers(2, 3), st.integers(0, pp - 1), st.integers(1, 4).map(lambda k: k * pp))))
def test_a_group_of_pp_is_the_default_schedule(case):
    pp, chunks, stage, microbatches = case
    assert (make_scheduler("interleaved_1f1b", chunks, group_size=pp).steps(stage, pp, microbatches)
            == make_scheduler("interleaved_1f1b", chunks).steps(stage, pp, microbatches))


@settings(max_examples=40)
@given(st.integers(2, 5).flatmap(lambda pp: st.tuples(
    st.just(pp), st.integers(2, 3), st.integers(0, pp - 1), st.integers(pp, 4 * pp), st.integers(0, 3))))
def test_every_group_runs_each_microbatch_through_every_chunk_once_forward_and_once_backward(case):
    pp, chunks, stage, group, extra = case
    microbatches = group * 2 + (pp + extra if extra else 0)  # a remainder of 0 or at least pp, as Megatron allows
    steps = make_scheduler("interleaved_1f1b", chunks, group_size=group).steps(stage, pp, microbatches)
    for kind in "FB":
        done = sorted((s.microbatch, s.chunk) for s in steps if s.kind == kind)
        assert done == [(mb, c) for mb in range(microbatches) for c in range(chunks)]


def scenario(group: int | None, gbs: int = 48, pp: int = 4):
    parallelism = {"tp": 2, "pp": pp, "vpp": 2, **({"microbatch_group_size": group} if group else {})}
    return {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 4}},
            "workload": {"framework": "megatron", "model": "llama-3-8b", "parallelism": parallelism,
                         "training": {"global_batch_size": gbs, "micro_batch_size": 1, "sequence_length": 4096,
                                      "dtype": "bf16"}}}


def test_a_larger_group_keeps_more_activations_in_flight_on_the_first_stage():
    # 12 micro-batches a rank: groups of 4 warm up with 2*3 + 4 forwards, groups of 6 with 2*3 + 6 and of 12 with 18
    peaks = [estimate_memory(parse_scenario(scenario(group), "s")).stages[0].kept_activations
             for group in (4, 6, 12)]
    assert peaks[0] < peaks[1] < peaks[2]


@pytest.mark.parametrize(("group", "gbs", "problem"), [
    (3, 48, "must range from pp = 4 to the 12 micro-batches"),
    (13, 48, "must range from pp = 4 to the 12 micro-batches"),
    (5, 48, "leave a last group of 2, fewer than pp = 4"),
])
def test_groups_megatron_refuses_are_refused_naming_the_field(tmp_path, group, gbs, problem):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario(group, gbs)))
    result = cli("simulate", str(path))
    assert result.returncode == 2
    assert "workload.parallelism.microbatch_group_size" in result.stderr and problem in result.stderr
    assert "Traceback" not in result.stderr


def test_a_group_without_the_interleaved_schedule_is_refused(tmp_path):
    data = scenario(4)
    data["workload"]["parallelism"]["vpp"] = 1
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    result = cli("simulate", str(path))
    assert result.returncode == 2 and "only the interleaved schedule" in result.stderr


@pytest.mark.parametrize("schedule", ["zb_v", "dualpipev"])
def test_a_group_under_a_v_schedule_of_two_chunks_is_refused_naming_the_schedule_not_vpp(schedule):
    """At vpp 2 the refusal said 'only the interleaved schedule (vpp > 1) groups micro-batches', as if vpp were the
    fault; it is the schedule, whose V places the chunks its own way."""
    data = scenario(4)
    data["workload"]["parallelism"]["pipeline_schedule"] = schedule
    with pytest.raises(ConfigError) as refused:
        parse_scenario(data, "s.yaml")
    assert str(refused.value) == (
        "s.yaml: workload.parallelism.microbatch_group_size: only the interleaved schedule (interleaved_1f1b, vpp > 1) "
        f"groups micro-batches by model chunk, not pipeline_schedule {schedule} (vpp 2)")


def test_a_remainder_of_pp_or_more_runs_as_a_last_shorter_group():
    # 14 micro-batches in groups of 5: 0-4 and 5-9 through both chunks, then the 4 left (get_schedule_table's last
    # group; 4 >= pp, so Megatron accepts it)
    parse_scenario(scenario(5, gbs=56), "s")  # accepted
    table = make_scheduler("interleaved_1f1b", 2, group_size=5).table(0, 4, 14)
    groups = [range(0, 5), range(5, 10), range(10, 14)]
    assert list(table.forwards) == [(mb, chunk) for group in groups for chunk in (0, 1) for mb in group]


def test_a_sampled_step_replays_whole_groups_and_matches_the_full_replay():
    # 48 micro-batches in groups of 6: sampling replays 12 and 18 (whole groups; 8 and 12, the default group's counts,
    # would leave a last group of 2 < pp) and extrapolates the step
    sc = parse_scenario(scenario(6, gbs=192), "s")
    assert steady_counts(sc.workload.parallelism) == (12, 18)
    full = simulate(sc).result.iteration_time_ms
    sampled = simulate_sampled(sc, steady_counts(sc.workload.parallelism)).result.iteration_time_ms
    assert sampled == pytest.approx(full, rel=0.01)


def test_a_group_past_pp_leaves_the_sends_between_chunks_time_and_the_bubble_shrinks():
    # with groups of pp, stage 0 finishes chunk 0's group just as the group's first micro-batch comes round for chunk
    # 1, every stage's forward and send on the way; a larger group gives it more forwards to run meanwhile
    bubble = {group: simulate(parse_scenario(scenario(group), "s")).result.breakdown["bubble_ms"]
              for group in (4, 6, 12)}
    assert bubble[6] < bubble[4] and bubble[12] < bubble[4]
