"""A run that does not fit its GPUs' memory is never advised to grow the memory each GPU holds: no larger
micro-batch or longer sequence, no lower tp, cp or ep, no fewer pipeline stages, and a schedule or more micro-batches
only where the memory model keeps its peak (findings.Settings.of); a run that fits is still offered them all."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.analysis.analyze import analyze
from simulon.analysis.findings import ADVICE, Settings, advice, keeps_memory
from simulon.config import ScenarioConfig
from simulon.memory import estimate_memory
from simulon.pipeline import simulate

GROWING = ("larger micro_batch_size", "longer sequence", "lower tp", "lower cp", "lower ep", "fewer pipeline stages")
"""What each GPU would hold more of: parameters (a lower tp, cp or ep, fewer stages) or activations."""
TERMS = ("TP", "CP", "EP", "DP", "PP", "bubble", *ADVICE)
SCHEDULES = [("interleaved_1f1b", v) for v in range(2, 9)] + [("zb_h1", 1), ("zb_v", 2)]

maybe = st.sampled_from([None, True, False])
settings = st.builds(
    Settings, tp_within_scale_up=maybe, tp_comm_overlap=maybe, pinned_channels=st.sampled_from([None, 1, 4]),
    interleaved=maybe, zero_bubble=maybe, overlap_grad_reduce=maybe, overlap_param_gather=maybe,
    pipeline_stages=st.sampled_from([None, 1, 2, 8]), mixed_gpus=maybe, vpp=st.sampled_from([None, 1, 2, 3]),
    schedules=st.one_of(st.none(), st.frozensets(st.sampled_from(SCHEDULES))), ep_within_scale_up=maybe,
    cp_within_scale_up=maybe, cp_exchange=st.sampled_from([None, "ring", "unhidden"]), fits=st.just(False),
    more_microbatches_fit=maybe)


@given(settings, st.sampled_from(TERMS), st.sampled_from(["", "CP cp_ring (SendRecv)", "CP cp_a2a (AllToAll)"]))
def test_no_advice_to_a_run_that_does_not_fit_grows_its_memory(chosen, term, collective):
    text = advice(term, chosen, collective)
    assert text and not any(remedy in text for remedy in GROWING), (term, text)
    if chosen.more_microbatches_fit is not True:
        assert "more micro-batches" not in text
    if chosen.schedules is None:  # not checked against the memory model: none offered
        assert "interleav" not in text and "pipeline_schedule" not in text


@pytest.mark.parametrize("term", ["memory_bound", "TP", "CP", "EP", "bubble"])
def test_a_run_that_fits_or_is_not_known_to_overflow_is_still_offered_what_grows_its_memory(term):
    for fits in (True, None):
        chosen = Settings(fits=fits, cp_exchange="ring", pipeline_stages=2)
        assert any(remedy in advice(term, chosen) for remedy in GROWING), term


def overflowing(**knobs) -> ScenarioConfig:
    """A 26B GPT on four H100s (tp2 pp2): some 116 GB of model state a GPU, against 80."""
    return gpt_scenario(nodes=1, gpus_per_node=4, tp=2, pp=2, hidden=8192, heads=64, layers=32, seq=4096, **knobs)


def test_the_simulated_findings_of_a_run_that_does_not_fit_grow_nothing():
    sc = overflowing(gbs=8)
    chosen = Settings.of(sc)
    assert chosen.fits is False and not estimate_memory(sc).fits
    sim = simulate(sc)
    gpu = sc.datacenter.node.gpu
    found = analyze(sim.dag, sim.timeline, sim.topology, gpu.peak_flops(sc.workload.training.dtype),
                    gpu.memory_bandwidth, chosen).findings
    assert {"memory_bound", "TP", "bubble"} <= {f.term for f in found}
    for finding in found:
        assert not any(remedy in finding.advice for remedy in GROWING), finding.line()
    roomy = dataclasses.replace(chosen, fits=True)  # the same run on GPUs it fits: told to grow the micro-batch
    assert "a larger micro_batch_size" in advice("memory_bound", roomy)


def test_schedules_and_micro_batches_are_offered_to_a_run_that_does_not_fit_only_where_its_peak_holds():
    sc = overflowing(gbs=8)
    fill = estimate_memory(sc).peak.fill
    chosen = Settings.of(sc)
    assert chosen.schedules is not None
    for name, vpp in chosen.schedules:
        assert keeps_memory(sc, fill, {"pipeline_schedule": name, "vpp": vpp})
    assert chosen.more_microbatches_fit is True  # 4 micro-batches fill 2 stages: 8 keep no more in flight
    short = gpt_scenario(nodes=1, gpus_per_node=4, pp=4, hidden=8192, heads=64, layers=32, seq=4096, gbs=2)
    starved = Settings.of(short)  # 2 micro-batches on 4 stages: each one more is one more in flight
    assert starved.fits is False and starved.more_microbatches_fit is False
    assert "more micro-batches" not in advice("bubble", starved) and "more micro-batches" not in advice("PP", starved)


def test_a_run_that_does_not_fit_is_not_offered_the_expert_all_to_all_overlap_which_holds_a_layer_more():
    """An 8-expert MoE on four H100s at ep 4: at 12,288 tokens it fits and is offered the overlap (which holds one
    layer more); at 14,336 it does not, and the overlap would grow its peak."""
    def run(seq: int) -> ScenarioConfig:
        return gpt_scenario(nodes=1, gpus_per_node=4, ep=4, hidden=4096, heads=32, layers=8, seq=seq, gbs=8,
                            moe={"num_experts": 8, "top_k": 2})

    fitting, overflowing_run = Settings.of(run(12288)), Settings.of(run(14336))
    assert fitting.fits and "overlap_moe_expert_parallel_comm" in advice("EP", fitting)
    assert overflowing_run.fits is False and not keeps_memory(
        run(14336), estimate_memory(run(14336)).peak.fill, {"overlap_moe_expert_parallel_comm": True})
    assert "overlap_moe_expert_parallel_comm" not in advice("EP", overflowing_run)
