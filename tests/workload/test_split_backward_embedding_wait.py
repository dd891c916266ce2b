"""A split backward's W keeps each deferred weight gradient's own waits: the embedding's weight gradient waits for the
sequence-parallel all-gather of its output gradient, which B issues, and no other kernel of W waits for it."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.workload.kernels import Phase
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import CollectiveOp, ComputeOp


@pytest.mark.parametrize("schedule", ["1f1b", "zb_h1"])
def test_the_embeddings_weight_gradient_waits_for_its_gather_and_nothing_else_does(schedule):
    sc = gpt_scenario(nodes=1, gpus_per_node=4, tp=2, pp=2, layers=4, gbs=8,
                      extra_parallelism={"pipeline_schedule": schedule, "sequence_parallel": True})
    ops = MegatronTracer(sc.workload, 4).stage_program(0).ops
    for mb in range(4):
        gather = next(i for i, op in enumerate(ops) if isinstance(op, CollectiveOp) and op.microbatch == mb
                      and op.label == "embedding_gather")
        waiting = [op for op in ops if isinstance(op, ComputeOp) and gather in op.waits]
        assert [(op.kernel.name, op.kernel.phase) for op in waiting] == [("embedding", Phase.bwd_wg)]
