"""Megatron-Core's expert-parallel all-to-all overlap (overlap_moe_expert_parallel_comm, combined_1f1b.py): one more
warm-up forward, then each steady forward runs with the backward after it as one step, layer by layer, each one's
token dispatch and combine beside the other's computation, in the order TransformerLayerSchedulePlan.run issues
them, the backward freeing its layers as the forward keeps its own."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import pytest
import yaml
from dualpipe_reference import reference_pairs
from hypothesis import given
from hypothesis import strategies as st

from helpers import cli, estimate_over_replay, gpt_scenario
from simulon.pipeline import simulate
from simulon.search.estimate import combined_share
from simulon.search.export import megatron_arguments, scenario_yaml
from simulon.search.run import Search, apply
from simulon.search.space import Strategy
from simulon.workload.kernels import Phase
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import CollectiveOp, ComputeOp, Stream
from simulon.workload.schedule import Step, make_scheduler

LAYERS = 2


def scenario(overlap: bool, *, pp: int = 1, vpp: int = 1, ep: int = 4, nodes: int = 2, gbs: int = 32, **extra):
    parallelism = {"overlap_moe_expert_parallel_comm": overlap, "vpp": vpp, **extra}
    return gpt_scenario(nodes=nodes, gpus_per_node=4, pp=pp, ep=ep, layers=LAYERS * pp * vpp, hidden=1024, seq=1024,
                        gbs=gbs, moe={"num_experts": 8, "top_k": 2}, nic="50Gbps", extra_parallelism=parallelism)


def programs(sc):
    return MegatronTracer(sc.workload, sc.datacenter.num_gpus).stage_programs()


# ---- the schedule: Megatron-Core's warm-up plus one ----

def megatron_warmup(stage: int, stages: int, chunks: int, microbatches: int, combined: bool) -> int:
    """get_pp_rank_microbatches (megatron/core/pipeline_parallel/schedules.py), written out."""
    total = microbatches * chunks
    if stages == 1:
        warmup = 1 if combined else 0  # combined_1f1b_schedule_for_no_pipelining: F0, then F(i) with B(i - 1)
    elif chunks == 1:
        warmup = stages - stage - 1
    else:
        warmup = (stages - stage - 1) * 2 + (chunks - 1) * stages + (1 if combined else 0)
    return min(warmup, total)


one_stage = st.tuples(st.just(1), st.just(0), st.just(1), st.integers(1, 30))
interleaved = st.integers(2, 6).flatmap(lambda p: st.tuples(st.integers(2, 4), st.integers(0, p - 1), st.just(p),
                                                            st.integers(1, 5).map(lambda groups: groups * p)))
combinable = st.one_of(one_stage, interleaved)


@given(combinable)
def test_combined_schedules_warm_up_one_more_forward_as_megatron_core_does(case):
    chunks, stage, stages, microbatches = case
    steps = make_scheduler("1f1b", chunks, combined=True).steps(stage, stages, microbatches)
    first_backward = next(i for i, step in enumerate(steps) if step.kind == "B")
    assert first_backward - 1 == megatron_warmup(stage, stages, chunks, microbatches, True) or (
        first_backward == len(steps) - microbatches * chunks)  # every forward is warm-up: the backwards follow


@given(combinable)
def test_every_forward_a_combined_step_pairs_with_a_backward_is_another_micro_batchs(case):
    chunks, stage, stages, microbatches = case
    steps = make_scheduler("1f1b", chunks, combined=True).steps(stage, stages, microbatches)
    pairs = [(f, b) for f, b in pairwise(steps) if b.combined]
    assert all(f.kind == "F" and b.kind == "B" and (f.microbatch, f.chunk) != (b.microbatch, b.chunk) for f, b in pairs)
    steady = max(microbatches * chunks - megatron_warmup(stage, stages, chunks, microbatches, True), 0)
    assert len(pairs) == steady  # every steady-state forward, and no warm-up or cool-down step
    assert Counter(s.kind for s in steps) == {"F": microbatches * chunks, "B": microbatches * chunks}


def test_one_stage_runs_the_first_forward_alone_then_each_forward_with_the_previous_backward():
    steps = make_scheduler("1f1b", 1, combined=True).steps(0, 1, 4)
    assert steps == [Step("F", 0), Step("F", 1), Step("B", 0, combined=True), Step("F", 2), Step("B", 1, combined=True),
                     Step("F", 3), Step("B", 2, combined=True), Step("B", 3)]


def test_schedules_without_combined_steps_refuse_them():
    with pytest.raises(ValueError, match="zb_h1 has no combined"):
        make_scheduler("zb_h1", 1, combined=True)


# ---- the programs: the same kernels, the all-to-alls in TransformerLayerSchedulePlan.run's order ----

def kernels(sc) -> Counter:
    return Counter((op.kernel.name, op.kernel.phase, op.layer, op.microbatch) for p in programs(sc) for op in p.ops
                   if isinstance(op, ComputeOp))


@pytest.mark.parametrize("pipeline", [{}, {"pp": 2, "vpp": 2}])
def test_the_combined_steps_run_exactly_the_kernels_of_the_plain_schedule(pipeline):
    assert kernels(scenario(True, **pipeline)) == kernels(scenario(False, **pipeline))


def test_a_combined_layer_pair_issues_combine_bwd_dispatch_fwd_dispatch_bwd_combine_fwd():
    (program,) = programs(scenario(True))
    a2a = [(op.label, op.phase, op.layer, op.microbatch) for op in program.ops
           if isinstance(op, CollectiveOp) and op.stream == Stream.ep_comm and op.label.startswith("moe_")]
    first_combined = a2a.index(("moe_combine", Phase.bwd_ig, 1, 0))  # the first backward runs with forward 1
    assert a2a[first_combined:first_combined + 8] == [
        ("moe_combine", Phase.bwd_ig, 1, 0), ("moe_dispatch", Phase.fwd, 0, 1),
        ("moe_dispatch", Phase.bwd_ig, 1, 0), ("moe_combine", Phase.fwd, 0, 1),
        ("moe_combine", Phase.bwd_ig, 0, 0), ("moe_dispatch", Phase.fwd, 1, 1),
        ("moe_dispatch", Phase.bwd_ig, 0, 0), ("moe_combine", Phase.fwd, 1, 1)]


def test_in_a_combined_step_neither_chain_waits_for_the_others_kernels_or_all_to_alls():
    (program,) = programs(scenario(True))
    for op in program.ops:
        if not isinstance(op, ComputeOp | CollectiveOp) or op.microbatch < 0:
            continue
        for wait in op.waits:
            other = program.ops[wait]
            if isinstance(other, ComputeOp | CollectiveOp) and other.microbatch >= 0:
                assert other.microbatch == op.microbatch, (op, other)


def one_node(overlap: bool):
    """Eight GPUs, ep 8 over an NVSwitch slow enough that the all-to-alls take about what the kernels do."""
    return gpt_scenario(nodes=1, gpus_per_node=8, ep=8, layers=LAYERS, hidden=1024, seq=1024, gbs=64,
                        moe={"num_experts": 8, "top_k": 2}, nvlink="100GBps",
                        extra_parallelism={"overlap_moe_expert_parallel_comm": overlap})


def test_overlapping_the_all_to_alls_shortens_the_step_and_never_beats_the_compute_alone():
    plain, overlapped = simulate(one_node(False)).result, simulate(one_node(True)).result
    assert overlapped.iteration_time_ms < 0.9 * plain.iteration_time_ms
    assert overlapped.breakdown["exposed_comm_ms"] < 0.75 * plain.breakdown["exposed_comm_ms"]
    assert overlapped.iteration_time_ms >= plain.breakdown["compute_ms"]


def test_the_overlap_keeps_plain_1f1bs_activations_plus_at_most_one_layer_not_a_micro_batch_more():
    # the combined step frees the backward's layers as the forward keeps its own (memory/walk.py)
    plain, overlapped = simulate(one_node(False)).memory, simulate(one_node(True)).memory
    assert plain.stages[0].microbatches_in_flight == 1
    layer = 1 / (LAYERS + 2)  # of a micro-batch: no layer keeps more than the head and embedding together
    assert 1 <= overlapped.stages[0].microbatches_in_flight < 1 + 2 * layer
    # the one stage holds the loss: the backward's head and loss (196 MiB) run and free theirs before the forward's
    # layers (56 MiB each), Megatron-Core's TransformerModelChunkSchedulePlan.run: no more than plain 1F1B's
    assert overlapped.stages[0].microbatches_in_flight == pytest.approx(1.0)


# ---- what Megatron-Core refuses ----

@pytest.mark.parametrize(("change", "says"), [
    ({"ep": 1}, "it needs an MoE model and ep > 1"),
    ({"pp": 2}, "(here pp 2, vpp 1, pipeline_schedule 1f1b)"),
    ({"pp": 2, "pipeline_schedule": "zb_h1"}, "pipeline_schedule zb_h1"),
    ({"recompute": "full"}, "full recomputation"),
    ({"recompute": "selective", "recompute_modules": ["moe"]}, "the moe module recomputed"),
    ({"training": {"dtype": "fp32"}}, "a bf16 or fp16 model only, not dtype fp32"),  # TransformerConfig asserts
    ({"training": {"dtype": "tf32"}}, "a bf16 or fp16 model only, not dtype tf32"),  # bf16 or fp16
    ({"training": {"autocast": True}}, "not torch.autocast over fp32 parameters"),
])
def test_what_megatron_core_refuses_is_exit_2_naming_the_field(tmp_path, change, says):
    data = scenario(False).model_dump(mode="json", exclude_none=True)
    parallelism = {key: value for key, value in change.items() if key != "training"}
    data["workload"]["training"].update(change.get("training", {}))
    data["workload"]["parallelism"].update({"overlap_moe_expert_parallel_comm": True, **parallelism})
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    run = cli("simulate", str(path))
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert "workload.parallelism.overlap_moe_expert_parallel_comm" in run.stderr and says in run.stderr, run.stderr


def test_the_search_estimate_follows_the_replay_with_the_overlap_and_drops_it_where_megatron_core_would_refuse_it():
    sc = one_node(True)
    search = Search(sc)
    ep8 = Strategy(1, 1, 1, 8, 1, 8, 1, 1, False, "none", "distributed_optimizer", "bf16", False)
    plain = Search(one_node(False)).estimator.estimate(ep8, apply(one_node(False).workload, ep8))
    overlapped = search.estimator.estimate(ep8, apply(sc.workload, ep8))
    assert overlapped.ep_s < 0.75 * plain.ep_s and overlapped.compute_s == plain.compute_s
    assert 0.8 < estimate_over_replay(search, sc, ep8, 8) < 1.2
    no_experts = Strategy(1, 1, 1, 8, 1, 1, 1, 1, False, "none", "distributed_optimizer", "bf16", False)
    assert not apply(sc.workload, no_experts).parallelism.overlap_moe_expert_parallel_comm  # ep 1: nothing to overlap
    assert 0.8 < estimate_over_replay(search, sc, no_experts, 8) < 1.2


# ---- DualPipe's overlapped pairs ----

@pytest.mark.parametrize(("schedule", "stages", "microbatches"), [("dualpipe", 4, 16), ("dualpipe", 8, 20),
                                                                ("dualpipev", 4, 12)])
def test_dualpipe_combines_exactly_its_references_overlapped_pairs_and_keeps_its_order(schedule, stages, microbatches):
    for stage in range(stages):
        plain = make_scheduler(schedule, 2 if schedule == "dualpipev" else 1).steps(stage, stages, microbatches)
        combined = make_scheduler(schedule, 2 if schedule == "dualpipev" else 1, combined=True).steps(
            stage, stages, microbatches)
        assert [s._replace(combined=False) for s in combined] == plain
        ranks = stages // 2 if schedule == "dualpipe" else stages
        rank = min(stage, stages - 1 - stage) if schedule == "dualpipe" else stage
        per_chunk = microbatches // 2 if schedule == "dualpipe" else microbatches
        later = ranks - rank - 1
        # DualPipe.step: phase 4 overlaps two pairs a round but the middle rank's first (DualPipeV: the last
        # rank's), phase 5 one (its first backward runs alone)
        rounds = per_chunk - 2 * ranks + rank + 1
        assert sum(s.combined for s in combined) == 2 * rounds + later - (later == 0 and rounds > 0)
        assert all(f.kind == "F" for f, b in pairwise(combined) if b.combined)


@pytest.mark.parametrize(("schedule", "stages", "microbatches"), [("dualpipe", 4, 16), ("dualpipe", 8, 20),
                                                                ("dualpipe", 2, 8), ("dualpipev", 4, 12),
                                                                ("dualpipev", 3, 9)])
def test_dualpipe_combines_the_backwards_its_reference_overlaps_and_no_other(schedule, stages, microbatches):
    """The reference (tests/workload/dualpipe_reference.py, DualPipe.step's own branches) runs the first step-4 pair
    of its middle rank (DualPipeV: its last) as a forward and a backward apart, "to further reduce bubble size"; it
    was combined."""
    v = schedule == "dualpipev"
    pairs = reference_pairs(stages, microbatches, v)
    for stage in range(stages):
        steps = make_scheduler(schedule, 2 if v else 1, combined=True).steps(stage, stages, microbatches)
        assert {i for i, s in enumerate(steps) if s.combined} == {i + 1 for i in pairs[stage]}


def dualpipe_moe(overlap: bool):
    return gpt_scenario(nodes=2, gpus_per_node=4, pp=4, ep=2, layers=8, hidden=1024, seq=1024, gbs=32,
                        moe={"num_experts": 8, "top_k": 2}, nvlink="100GBps",
                        extra_parallelism={"pipeline_schedule": "dualpipe",
                                           "overlap_moe_expert_parallel_comm": overlap})


def test_dualpipe_with_overlapped_pairs_runs_the_same_kernels_in_less_time_and_folds_exactly():
    assert kernels(dualpipe_moe(True)) == kernels(dualpipe_moe(False))
    overlapped = simulate(dualpipe_moe(True), "full").result
    assert overlapped.iteration_time_ms < simulate(dualpipe_moe(False), "full").result.iteration_time_ms
    assert simulate(dualpipe_moe(True), "symmetric").result.iteration_time_ms == pytest.approx(
        overlapped.iteration_time_ms, rel=1e-9)


def test_combined_1f1b_folds_exactly():
    sc = scenario(True)
    assert simulate(sc, "symmetric").result.iteration_time_ms == pytest.approx(
        simulate(sc, "full").result.iteration_time_ms, rel=1e-9)


def test_the_searched_strategy_is_exported_with_the_overlap_where_it_runs_it():
    sc = one_node(True)
    ep8 = Strategy(1, 1, 1, 8, 1, 8, 1, 1, False, "none", "distributed_optimizer", "bf16", False)
    no_experts = Strategy(1, 1, 1, 8, 1, 1, 1, 1, False, "none", "distributed_optimizer", "bf16", False)
    assert "--overlap-moe-expert-parallel-comm" in megatron_arguments(ep8, sc)
    assert "--overlap-moe-expert-parallel-comm" not in megatron_arguments(no_experts, sc)
    written = yaml.safe_load(scenario_yaml(sc, ep8, 8, "best"))["workload"]["parallelism"]
    assert written["overlap_moe_expert_parallel_comm"] is True
    assert "overlap_moe_expert_parallel_comm" not in yaml.safe_load(scenario_yaml(sc, no_experts, 8, "best"))[
        "workload"]["parallelism"]


def test_the_searched_arguments_name_the_dispatcher_simulated_which_megatrons_default_allgather_is_not():
    ep8 = Strategy(1, 1, 1, 8, 1, 8, 1, 1, False, "none", "distributed_optimizer", "bf16", False)
    overlapped = " ".join(megatron_arguments(ep8, one_node(True)))  # Megatron asserts alltoall or flex with it
    assert "--moe-token-dispatcher-type alltoall --overlap-moe-expert-parallel-comm" in overlapped
    assert "--moe-token-dispatcher-type alltoall" in megatron_arguments(ep8, one_node(False))
    plain = one_node(False)
    deepep = plain.model_copy(update={"workload": plain.workload.model_copy(update={
        "training": plain.workload.training.model_copy(update={"moe_dispatcher": "deepep"})})})
    flex = " ".join(megatron_arguments(ep8, deepep))
    assert "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep" in flex and "alltoall" not in flex
    dense = gpt_scenario(nodes=1, gpus_per_node=8, layers=LAYERS)
    assert "dispatcher" not in " ".join(megatron_arguments(Strategy(1, 1, 1, 8, 1, 1, 1, 1, False, "none",
                                                                    "distributed_optimizer", "bf16", False), dense))


def test_the_search_estimate_hides_dualpipes_overlapped_pairs_as_the_schedule_marks_them():
    strategy = Strategy(1, 4, 1, 2, 1, 2, 1, 1, False, "none", "distributed_optimizer", "bf16", False)
    plain, overlapped = (Search(sc).estimator.estimate(strategy, apply(sc.workload, strategy))
                         for sc in (dualpipe_moe(False), dualpipe_moe(True)))
    assert overlapped.ep_s < plain.ep_s and overlapped.compute_s == plain.compute_s
    steps = make_scheduler("dualpipe", 1, combined=True).steps(0, 4, 8)
    assert combined_share("dualpipe", 1, 0, 4, 8) == sum(s.combined for s in steps) / sum(s.kind == "B" for s in steps)


# ---- the search keeps how the framework runs ----

def test_a_searched_file_keeps_its_framework_settings_and_overlap_and_sets_its_layout_aside(tmp_path):
    from simulon.search.run import load_search_scenario

    data = one_node(True).model_dump(mode="json", exclude_none=True)
    data["workload"]["parallelism"].update(tp=3, overlap_grad_reduce=False, pipeline_send="partitioned")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    sc, _ = load_search_scenario(path)
    par = sc.workload.parallelism
    assert (par.tp, par.ep) == (1, 1)  # the layout is the search's (tp 3 divides nothing here)
    assert par.overlap_moe_expert_parallel_comm and not par.overlap_grad_reduce and par.pipeline_send == "partitioned"
    ep8 = Strategy(1, 1, 1, 8, 1, 8, 1, 1, False, "none", "distributed_optimizer", "bf16", False)
    assert apply(sc.workload, ep8).parallelism.overlap_moe_expert_parallel_comm


@pytest.mark.parametrize("value", ["maybe", 3, [True]])
def test_a_searched_files_bad_overlap_flag_is_exit_2_naming_it(tmp_path, value):
    data = one_node(True).model_dump(mode="json", exclude_none=True)
    data["workload"]["parallelism"]["overlap_moe_expert_parallel_comm"] = value
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    run = cli("search", str(path), "--replay", "0", "--no-cache")
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert "workload.parallelism.overlap_moe_expert_parallel_comm" in run.stderr


def test_without_a_pipeline_the_overlaps_estimate_has_no_bubble():
    search = Search(one_node(True))
    ep8 = Strategy(1, 1, 1, 8, 1, 8, 1, 1, False, "none", "distributed_optimizer", "bf16", False)
    assert search.estimator.estimate(ep8, apply(one_node(True).workload, ep8)).bubble_s == 0.0


def test_a_searched_files_hierarchical_context_parallelism_is_set_aside_with_the_layout_its_sizes_belong_to(tmp_path):
    from simulon.search.run import load_search_scenario

    data = one_node(False).model_dump(mode="json", exclude_none=True)
    data["workload"]["parallelism"].update(cp=4, context_parallel_comm="a2a+p2p",
                                           hierarchical_context_parallel_sizes=[2, 2])
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    sc, _ = load_search_scenario(path)
    assert sc.workload.parallelism.context_parallel_comm == "p2p" and sc.workload.parallelism.cp == 1
