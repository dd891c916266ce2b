"""On GPUs of several types each pipeline stage is held to its own GPU's memory, and the stage that decides whether
the run fits is the one with the least headroom (the largest share of its own capacity in use)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_workload
from simulon.cli.memory import summary_line, warnings
from simulon.config.units import GiB
from simulon.memory import MemoryModel

GPUS = {80: "H100-SXM5-80GB", 40: "A100-SXM4-40GB", 3: "small-3GB", 2: "tiny-2GB"}
"""Capacities (GiB) and names; the small ones hold the test model's stages (about 2.5 GiB) or do not."""


def report(capacities_gib: list[int]):
    pp = len(capacities_gib)
    workload = gpt_workload(gpus=pp, pp=pp, layers=8, gbs=8)
    model = MemoryModel(workload, pp, [c * GiB for c in capacities_gib], " + ".join(dict.fromkeys(
        GPUS[c] for c in capacities_gib)), stage_gpus=[GPUS[c] for c in capacities_gib])
    return model.report()


def test_each_stage_is_compared_with_its_own_gpus_memory_in_the_summary_and_warnings():
    memory = report([80, 2])
    first, second = memory.stages
    assert (first.capacity, second.capacity) == (80 * GiB, 2 * GiB)
    assert (first.gpu, second.gpu) == ("H100-SXM5-80GB", "tiny-2GB")
    assert first.fits and not second.fits and not memory.fits
    peak = memory.peak
    assert peak is second
    assert f"on stage {peak.stage} of {peak.capacity / GiB:.2f} GiB ({peak.gpu})" in summary_line(memory)
    assert warnings(memory) == [line for line in warnings(memory) if "stage 1 needs" in line]
    assert "of the tiny-2GB's 2.00 GiB" in warnings(memory)[0]


@settings(max_examples=20, deadline=None)
@given(st.lists(st.sampled_from(sorted(GPUS)), min_size=2, max_size=4))
def test_the_peak_is_the_stage_using_the_largest_share_of_its_own_capacity(capacities):
    memory = report(capacities)
    fills = [s.device / s.capacity for s in memory.stages]
    assert memory.peak.device / memory.peak.capacity == max(fills)
    assert memory.capacity == memory.peak.capacity
    assert memory.fits == (max(fills) <= 1) == memory.peak.fits


@settings(max_examples=10, deadline=None)
@given(st.integers(2, 4), st.sampled_from(sorted(GPUS)))
def test_on_one_capacity_the_peak_is_the_stage_with_the_most_memory_in_use(pp, capacity):
    memory = report([capacity] * pp)
    assert memory.uniform
    assert memory.peak.device == max(s.device for s in memory.stages)
