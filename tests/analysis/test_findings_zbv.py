"""The bubble's advice offers ZB-V (pipeline_schedule: zb_v) only where the strategy search's estimate
(search.estimate.step_timer, which now times ZB-V by its own step order) times it faster than the run's own schedule, as
it does ZB-H1: its split backward leaves the tensor-parallel reduction no weight gradients to hide behind, so at tp 4
pp 2 (vpp 2) it is slower than interleaved 1F1B (replayed 58.7 -> 61.9 ms, estimated 56.9 -> 57.4) and was advised all
the same, untimed; at tp 1 pp 4 it is faster (replayed 31.3 -> 29.9 ms, estimated 31.5 -> 30.1) and still advised."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.analysis.findings import Settings, advice
from simulon.pipeline import simulate
from simulon.search.estimate import step_timer


def interleaved(tp: int, pp: int, schedule: str = "interleaved_1f1b"):
    return gpt_scenario(nodes=1, gpus_per_node=8, tp=tp, pp=pp, layers=8, gbs=16, seq=2048,
                        extra_parallelism={"pipeline_schedule": schedule, "vpp": 2, "sequence_parallel": tp > 1})


@pytest.mark.parametrize(("tp", "pp", "offered"), [(4, 2, False), (1, 4, True)])
def test_zb_v_is_advised_only_where_the_estimate_times_it_faster_as_the_replay_does(tp, pp, offered):
    sc = interleaved(tp, pp)
    assert "zb_v" in advice("bubble", Settings.of(sc))  # untimed: every schedule the config accepts
    assert ("zb_v" in advice("bubble", Settings.of(sc, step_timer(sc)))) is offered
    steps = [simulate(s).result.iteration_time_ms for s in (sc, interleaved(tp, pp, "zb_v"))]
    assert (steps[1] < steps[0]) is offered, steps
