"""A step's size counted from its two sampled counts (pipeline.size_from_samples) is the size of the whole step,
exactly, under every schedule; and `auto` decides to sample from it as it would from the whole step's trace,
without tracing the whole step."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simulon.pipeline as pipeline
from helpers import gpt_scenario
from simulon.config.loading import parse_scenario
from simulon.pipeline import plan_dag, plan_step, size_from_samples
from simulon.sampling import microbatch_count, steady_counts, with_microbatches

SCHEDULES = {"1f1b": {}, "interleaved_1f1b": {"vpp": 2}, "zb_h1": {}, "zb_v": {"vpp": 2}, "dualpipe": {},
             "dualpipev": {"vpp": 2}}
KNOBS = {"plain": {}, "recompute": {"recompute": "full"}, "distributed optimizer": {"distributed_optimizer": True},
         "fsdp": {"fsdp": "full_shard"}}


def _spread():
    """tp4 cp2 on 8 DGX H100 nodes, two a leaf, pp 2: the gradient reduction over dp x cp spans leaves, so the fold
    expands it over every GPU (under `symmetric`: `auto` simulates 64 GPUs whole), and folding it throughout makes the
    DAG smaller."""
    return parse_scenario({
        "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 8},
                       "network": {"scale_out": {"topology": {"from": "rail-optimized-fat-tree", "nics_per_leaf": 2}}}},
        "workload": {"framework": "megatron", "model": "gpt3-1.3b",
                     "parallelism": {"tp": 4, "pp": 2, "cp": 2, "sequence_parallel": True,
                                     "distributed_optimizer": True},
                     "training": {"global_batch_size": 4 * 40, "micro_batch_size": 1, "sequence_length": 2048}}},
        "inline")


def _sizes(sc, counts, throughout=False, fold_mode="auto"):
    planned = [plan_dag(with_microbatches(sc, count), fold_mode) for count in counts]
    if throughout:
        planned = [replace(p, fold=p.fold.folded_throughout()) for p in planned]
    return [p.size() for p in planned]


@settings(max_examples=12, deadline=None)
@given(schedule=st.sampled_from(sorted(SCHEDULES)), knob=st.sampled_from(sorted(KNOBS)), pp=st.sampled_from([2, 4]),
       moe=st.booleans(), periods=st.integers(1, 5))
def test_a_steps_size_is_the_line_through_its_sampled_counts_sizes_under_every_schedule(schedule, knob, pp, moe,
                                                                                       periods):
    sc = gpt_scenario(nodes=2, gpus_per_node=4, pp=pp, layers=8, gbs=8 // pp * 64, ep=2 if moe and pp == 2 else 1,
                      moe={"num_experts": 4, "top_k": 2} if moe and pp == 2 else None,
                      extra_parallelism={"pipeline_schedule": schedule, **SCHEDULES[schedule], **KNOBS[knob]})
    m1, m2 = steady_counts(sc.workload.parallelism)
    real = m2 + periods * (m2 - m1)
    counted = size_from_samples(_sizes(sc, (m1, m2)), (m1, m2), real)
    assert counted == plan_dag(with_microbatches(sc, real)).size()


def test_the_line_holds_for_collectives_expanded_over_every_gpu_and_folded_throughout():
    sc = _spread()
    m1, m2 = steady_counts(sc.workload.parallelism)
    real = microbatch_count(sc)
    whole = plan_dag(sc, "symmetric")
    assert whole.fold.expand_spread and whole.fold.axes
    for throughout in (False, True):
        counted = size_from_samples(_sizes(sc, (m1, m2), throughout, "symmetric"), (m1, m2), real)
        folded = replace(whole, fold=whole.fold.folded_throughout()) if throughout else whole
        assert counted == folded.size()


@pytest.mark.parametrize("asked", ["by its count", "by the caller"])  # SIZE_FROM_SAMPLES_ABOVE, samples_first_above
@pytest.mark.parametrize(("budget", "sampled", "expanded"), [(1, True, False), (340_000, False, False),
                                                            (10**9, False, True)])
def test_auto_samples_from_the_counted_size_as_from_the_whole_steps_without_tracing_it(monkeypatch, budget, sampled,
                                                                                      expanded, asked):
    sc = _spread()
    monkeypatch.setattr(pipeline, "SAMPLE_ABOVE_NODES", budget)
    monkeypatch.setattr(pipeline, "SIZE_FROM_SAMPLES_ABOVE", 10**9)  # the whole step traced first
    reference = plan_step(sc, "symmetric", micro_batches="auto")  # the whole step: 344,328 nodes, 337,096 throughout
    if sampled:
        assert reference.counts is not None and reference.throughout is not expanded
    else:
        assert reference.counts is None and reference.planned.fold.expand_spread is expanded
    if asked == "by its count":
        monkeypatch.setattr(pipeline, "SIZE_FROM_SAMPLES_ABOVE", 1)
    traced = []
    real_plan_dag = pipeline.plan_dag
    monkeypatch.setattr(pipeline, "plan_dag", lambda s, *a: traced.append(microbatch_count(s)) or real_plan_dag(s, *a))
    first_above = 1 if asked == "by the caller" else None
    counted = plan_step(sc, "symmetric", micro_batches="auto", samples_first_above=first_above)
    assert (counted.counts, counted.throughout) == (reference.counts, reference.throughout)
    if reference.counts is not None:  # sampled: the whole step was never traced
        assert microbatch_count(sc) not in traced
    else:
        assert counted.size == reference.size
