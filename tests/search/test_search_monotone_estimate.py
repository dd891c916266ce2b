"""More work on a pipeline stage never makes the search's estimate shorter: the step's bubble and what its sends add
(search.estimate.played_pipeline) are its schedule played out, at free sends and with them, so that with the busiest
rank's work they sum to the time by which every rank is done, which no longer step shortens. The bubble was Narayanan
et al.'s formula (each other stage's micro-batch time over vpp) beside a played sends' term, and the word embedding's
dense weight gradient (0.61 ms more backward in stage 0's first chunk) moved the seed's search winner (tp 1 pp 4 vpp 4
fp8) 192.18 -> 190.52 ms where its replay slows 205.48 -> 206.08 ms."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import SEED_SCENARIO
from simulon.config import load_scenario
from simulon.search.estimate import Estimator, played_pipeline
from simulon.search.run import apply
from simulon.search.space import Strategy
from simulon.workload import layer_kernels
from simulon.workload.schedule import make_scheduler

SHAPES = [("1f1b", 1, 2), ("1f1b", 1, 4), ("interleaved_1f1b", 2, 2), ("interleaved_1f1b", 4, 4), ("zb_h1", 1, 3),
          ("zb_v", 2, 3)]
"""(schedule, vpp, ranks): the schedules Estimator.estimate plays (DualPipe aside)."""

seconds = st.floats(min_value=1e-4, max_value=1e-2, allow_nan=False)
more = st.floats(min_value=0.0, max_value=5e-3, allow_nan=False)
DENSE_TABLE_BYTES = layer_kernels.EMBEDDING_GRAD_TABLE_BYTES


def pipeline_step(schedule: str, vpp: int, microbatches: int, times, send: float) -> float:
    """The estimate's pipeline part of a step: the busiest rank's micro-batches, the bubble, what the sends add."""
    bubble, sends = played_pipeline(schedule, vpp, microbatches, times, send)
    return microbatches * max(sum(forward + backward for forward, backward, _ in chunks) for chunks in times) + (
        bubble + sends)


@settings(max_examples=60, deadline=None)
@given(shape=st.sampled_from(SHAPES), rounds=st.integers(1, 3), send=st.sampled_from([0.0, 2e-4, 3e-3]),
       data=st.data())
def test_a_longer_forward_or_backward_on_one_stage_never_shortens_the_estimated_pipeline(shape, rounds, send, data):
    schedule, vpp, ranks = shape
    microbatches = rounds * ranks
    chunks = make_scheduler(schedule, vpp).placement.chunks(vpp)
    times = tuple(tuple((forward, backward, backward * share) for forward, backward, share in
                        ((data.draw(seconds), data.draw(seconds), data.draw(st.floats(0.0, 0.6)))
                         for _ in range(chunks))) for _ in range(ranks))
    rank, chunk = data.draw(st.integers(0, ranks - 1)), data.draw(st.integers(0, chunks - 1))
    forward, backward, weight = times[rank][chunk]
    extra_forward, extra_backward = data.draw(more), data.draw(more)
    extra_weight = extra_backward * data.draw(st.floats(0.0, 1.0))  # the rest of the backward grows no shorter
    grown = (forward + extra_forward, backward + extra_backward, weight + extra_weight)
    longer = tuple(tuple(grown if (r, c) == (rank, chunk) else each for c, each in enumerate(row))
                   for r, row in enumerate(times))
    before = pipeline_step(schedule, vpp, microbatches, times, send)
    after = pipeline_step(schedule, vpp, microbatches, longer, send)
    assert after >= before - 1e-12
    assert after <= before + microbatches * (extra_forward + extra_backward) + 1e-12  # at most all of it waited for


def seed_winner_estimate(table_bytes: tuple[int, int], monkeypatch) -> float:
    """The seed's search winner estimated with the embedding's weight gradient moving `table_bytes` per element of
    its dense table (layer_kernels.EMBEDDING_GRAD_TABLE_BYTES; (0, 0): its rows alone). The model is renamed per
    figure, so that each is timed on a table of its own (LayerKernels.shared keeps one per model)."""
    monkeypatch.setattr(layer_kernels, "EMBEDDING_GRAD_TABLE_BYTES", table_bytes)
    sc = load_scenario(SEED_SCENARIO)
    model = sc.workload.model.model_copy(update={"name": f"seed-table-{table_bytes[0]}-{table_bytes[1]}"})
    base = sc.workload.model_copy(update={"model": model})
    strategy = Strategy(1, 4, 4, 1, 1, 1, 1, 1, False, "none", "distributed_optimizer", "fp8", False)
    workload = apply(base, strategy)
    return Estimator.on(base, sc.datacenter, sc.collective, 4).estimate(strategy, workload).iteration_s


def test_the_seed_winners_estimate_grows_with_the_embeddings_dense_weight_gradient_as_its_replay_does(monkeypatch):
    """Stage 0's first chunk runs 0.61 ms more backward a micro-batch (4 of them): the estimate rises 192.33 ->
    192.92 ms as the replay does 205.48 -> 206.08 (the last micro-batch's backward, which the drain ends on, waits for
    it; the sends hide the rest), where it fell 192.18 -> 190.52. With the sender's next step waiting for its send
    where Megatron's p2p call blocks (workload.schedule blocking_sends) the estimate rises 0.72 ms, the replay 0.59
    (205.49 -> 206.08)."""
    rows_only = seed_winner_estimate((0, 0), monkeypatch)
    dense = seed_winner_estimate(DENSE_TABLE_BYTES, monkeypatch)
    assert dense > rows_only
    assert 1e3 * (dense - rows_only) == pytest.approx(0.59, abs=0.15)
