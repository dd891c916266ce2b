"""The search's estimate prices recomputation as the replay runs it: a re-run forward sends again what the forward sent
(its tensor-parallel collectives under full recomputation, core attention's context-parallel exchange under selective
recomputation, the MLP's collectives where selective recomputation names it), and full recomputation under
recompute_num_layers re-runs only each model chunk's first layers."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.pipeline import simulate
from simulon.search.estimate import Estimator
from simulon.search.space import Strategy
from simulon.workload.layer_kernels import LayerKernels
from simulon.workload.parameters import PipelineLayers

ADDED_WITHIN = 0.10
"""How far the estimate's added time of recomputation may lie from the replay's, as a share of the replay's: the
cases below agree within 1% (tp) to 6% (cp); leaving the re-run forward's communication out was 49% off at tp 4."""


def step_ms(tp: int, pp: int, **parallelism) -> tuple[float, float]:
    """(estimated, replayed) step of a small GPT on one node of 8 H100s, in ms."""
    sc = gpt_scenario(nodes=1, gpus_per_node=8, tp=tp, pp=pp, layers=8, hidden=2048, heads=16, seq=2048, gbs=8,
                      nvlink="450GBps", nic="400Gbps",
                      extra_parallelism={"sequence_parallel": tp > 1, **parallelism})
    estimator = Estimator.on(sc.workload, sc.datacenter, sc.collective, sc.workload.training.num_gpus)
    estimate = estimator.estimate(Strategy.of(sc), sc.workload).iteration_s * 1e3
    return estimate, simulate(sc).result.iteration_time_ms


@pytest.mark.parametrize(("tp", "pp", "setting"), [
    (4, 1, {"recompute": "full"}),
    (2, 2, {"recompute": "full"}),
    (1, 1, {"recompute": "selective", "cp": 2, "context_parallel_comm": "a2a"}),
    (4, 1, {"recompute": "selective", "recompute_modules": ["mlp"]}),  # its tp collectives re-run too
])
def test_the_estimate_adds_what_the_replay_adds_for_recomputation_its_re_run_forwards_communication_included(
        tp, pp, setting):
    cp = {key: value for key, value in setting.items() if not key.startswith("recompute")}
    estimated_none, replayed_none = step_ms(tp, pp, **cp)
    estimated, replayed = step_ms(tp, pp, **setting)
    added_estimated, added_replayed = estimated - estimated_none, replayed - replayed_none
    assert added_estimated == pytest.approx(added_replayed, rel=ADDED_WITHIN), (added_estimated, added_replayed)


STEP_WITHIN = 0.05
"""How far the estimated step may lie from the replayed one in the recompute_num_layers cases below (they agree
within 3%, as their runs without recomputation do: 1.1% and 2.8%); every layer counted as recomputed, they were 23%
and 9% long."""


@pytest.mark.parametrize(("pp", "vpp"), [(1, 1), (2, 2)])
def test_the_estimate_re_runs_only_the_first_recompute_num_layers_of_each_model_chunk_as_the_replay_does(pp, vpp):
    estimated, replayed = step_ms(2, pp, recompute="full", recompute_num_layers=1, vpp=vpp)
    assert estimated == pytest.approx(replayed, rel=STEP_WITHIN), (estimated, replayed)


@pytest.mark.parametrize(("pp", "vpp"), [(2, 2), (4, 1)])
def test_the_chunks_the_schedule_is_played_over_hold_the_work_the_step_counts_under_recompute_num_layers(pp, vpp):
    """The bubble is the schedule played over every rank's chunk times (Estimator.chunk_times); they costed the
    layers recompute_num_layers spares as re-run, 32.62 and 38.31 ms on the busiest rank where the step counts
    28.71 and 34.40, and the step was 37.10 and 46.76 ms long where the replay gives 36.15 and 44.14 (now 36.61 and
    45.29)."""
    sc = gpt_scenario(nodes=1, gpus_per_node=8, tp=2, pp=pp, layers=8, hidden=2048, heads=16, seq=2048, gbs=8,
                      nvlink="450GBps", nic="400Gbps",
                      extra_parallelism={"sequence_parallel": True, "recompute": "full", "recompute_num_layers": 1,
                                         "vpp": vpp})
    workload, s = sc.workload, Strategy.of(sc)
    estimator = Estimator.on(workload, sc.datacenter, sc.collective, workload.training.num_gpus)
    estimate = estimator.estimate(s, workload)
    times = estimator.chunk_times(s, workload, LayerKernels.weights_of(workload), PipelineLayers.of(workload))
    microbatches = workload.training.global_batch_size // (s.micro_batch_size * s.dp)
    busiest = microbatches * max(sum(forward + backward for forward, backward, _ in chunks) for chunks in times)
    assert busiest == pytest.approx(estimate.compute_s + estimate.tp_s + estimate.cp_s + estimate.ep_s, rel=1e-9)
