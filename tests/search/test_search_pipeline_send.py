"""The search's estimate times a pipeline send as the replay sends it: NCCL's send/receive between the two GPUs on the
channels of the pipeline-parallel group's communicator (dag.builder.DAGBuilder._send), not of a two-GPU one."""

from __future__ import annotations

import numpy as np

from helpers import gpt_scenario
from simulon.dag.nodes import NodeKind
from simulon.pipeline import simulate
from simulon.search.estimate import Estimator
from simulon.search.space import Strategy


def test_the_estimate_times_a_pipeline_send_as_the_replay_sends_it_on_the_pipeline_groups_channels():
    sc = gpt_scenario(nodes=1, gpus_per_node=4, pp=4, layers=4, hidden=2048, seq=2048, gbs=4,
                      nvlink="450GBps", nic="400Gbps")
    sim = simulate(sc, fold_mode="full")
    dag, timeline = sim.dag, sim.timeline
    sends = dag.sends.nodes
    at = np.searchsorted(timeline.flows.nodes, sends)
    replayed = timeline.finish[sends] - timeline.start[sends] + timeline.flows.delay[at]
    assert (dag.kind[sends] == NodeKind.flow).all()

    estimate = Estimator.on(sc.workload, sc.datacenter, sc.collective).estimate(Strategy.of(sc), sc.workload)
    microbatches = sc.workload.training.global_batch_size // sc.workload.training.micro_batch_size
    np.testing.assert_allclose(estimate.pp_s / (2 * microbatches), replayed.max(), rtol=1e-6)
