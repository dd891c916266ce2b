"""A GPU's name is a label: what it is, its spec sheet, picks its calibrations (compute and network), so a renamed
copy of a shipped GPU predicts what the original does, and a name never lends another chip's fit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario, merge
from simulon.compute.calibration import Calibrations
from simulon.config.common import DType
from simulon.config.dc import GPUSpec, shipped_gpu
from simulon.config.scenario import ScenarioConfig
from simulon.config.templates import template_names
from simulon.network.calibration import link_model_for
from simulon.pipeline import simulate

STEMS = template_names("gpu")
LABELS = st.text(st.characters(codec="ascii", categories=("L", "N", "Pd")), min_size=1, max_size=12)


def renamed(stem: str, name: str) -> GPUSpec:
    return GPUSpec.model_validate({"from": stem, "name": name})


@settings(max_examples=60, deadline=None)
@given(stem=st.sampled_from(STEMS), label=LABELS)
def test_a_renamed_shipped_gpu_is_still_that_template_and_borrows_nothing(stem, label):
    gpu, original = renamed(stem, f"my {label}"), shipped_gpu(stem)
    assert gpu.template == original.template == stem
    assert gpu.model_name == original.name
    cal = Calibrations.shipped()
    for dtype in (DType.bf16, DType.fp8):
        if dtype in original.peak_tflops:
            assert cal.gemm(gpu, dtype) == cal.gemm(original, dtype)
    if original.vendor == "nvidia":
        assert cal.attention(gpu, "cudnn") == cal.attention(original, "cudnn")
    donor = cal.gemm(original, DType.bf16)[1]
    assert cal.architecture(gpu, donor) == cal.architecture(original, donor)


@pytest.mark.parametrize("name", ["A100", "B200", "MI300X"])
def test_an_h100_named_after_another_shipped_gpu_keeps_the_h100s_calibration(name):
    gpu, h100 = renamed("h100-sxm", name), shipped_gpu("h100-sxm")
    assert gpu.template == "h100-sxm"
    cal = Calibrations.shipped()
    assert cal.gemm(gpu, DType.bf16) == cal.gemm(h100, DType.bf16)
    assert cal.attention(gpu, "flash") == cal.attention(h100, "flash")


def test_a_variant_of_a_shipped_gpu_under_its_name_is_that_chip_and_a_gpu_of_ones_own_is_none():
    smaller = GPUSpec.model_validate({"from": "a100-sxm-80gb", "memory_capacity_gb": 64})
    assert (smaller.template, smaller.model_name) == ("a100-sxm-80gb", "A100-SXM4-80GB")
    mine = GPUSpec.model_validate({"from": "a100-sxm-80gb", "name": "mine", "tdp_w": 300})
    assert (mine.template, mine.model_name) == (None, "mine")


def test_renaming_the_gpu_changes_no_step_time_nor_the_network_model():
    base = gpt_scenario(tp=2).as_data()
    times, links = set(), set()
    for gpu in ({"from": "h100-sxm"}, {"from": "h100-sxm", "name": "my-h100"}, {"from": "h100-sxm", "name": "A100"}):
        sc = ScenarioConfig.model_validate(merge(base, {"datacenter": {"node": {"gpu": gpu}}}))
        times.add(simulate(sc).result.iteration_time_ms)
        links.add(link_model_for(sc.datacenter))
    assert len(times) == 1
    assert len(links) == 1


NORM_RUN = {"kernel": "attn_norm", "params": {"bytes": 134217728, "dtype": "bf16", "phase": "fwd"},
            "times_ms": [0.0638, 0.0613, 0.0623]}


def test_a_renamed_shipped_gpu_with_a_profile_of_its_own_is_still_that_template():
    """A profile's runs are measurements, not the spec sheet: `{from: h100-sxm, name: my-H100, kernel_runs: [...]}`
    was a GPU of its own (no template), which took the default link family and ran the quick start in half the
    time."""
    profiled = GPUSpec.model_validate({"from": "h100-sxm", "name": "my-H100", "kernel_runs": [NORM_RUN]})
    assert (profiled.template, profiled.model_name) == ("h100-sxm", "H100-SXM5-80GB")
    base = gpt_scenario(tp=2).as_data()
    runs = {}
    for label, gpu in (("template", {"from": "h100-sxm"}),
                       ("profiled", {"from": "h100-sxm", "name": "my-H100", "kernel_runs": [NORM_RUN]})):
        sc = ScenarioConfig.model_validate(merge(base, {"datacenter": {"node": {"gpu": gpu}}}))
        runs[label] = (simulate(sc).result.iteration_time_ms, link_model_for(sc.datacenter))
    assert runs["profiled"][1] == runs["template"][1]
    assert runs["profiled"][0] == pytest.approx(runs["template"][0], rel=0.01)


@pytest.mark.parametrize("named", [{}, {"name": "mine"}])
def test_a_variant_of_a_shipped_gpu_at_a_lower_power_limit_runs_its_gemms_at_the_clock_that_power_allows(named):
    """An H100 capped at 200 W, under its own name or one of the user's, is clock-limited as power_limited_clock
    says: it was ignored under the H100's own name (the chip's own fit applied whatever its power)."""
    cal, h100 = Calibrations.shipped(), shipped_gpu("h100-sxm")
    capped = GPUSpec.model_validate({"from": "h100-sxm", "tdp_w": 200, **named})
    full = cal.gemm(h100, DType.bf16)[0].sustained_clock
    assert cal.gemm(capped, DType.bf16)[0].sustained_clock == pytest.approx(full * (200 / 700) ** 0.5)


@given(peak=st.floats(600.0, 1400.0))
def test_a_gpu_of_ones_own_links_as_a_shipped_gpu_of_its_16_bit_rate_never_as_one_listing_no_bf16(peak):
    """Turing's Titan RTX lists no bf16 peak; compared at no rate, it was nearest every GPU (a GPU of 980 bf16
    TFLOP/s linked as a Titan RTX and its NVLink calibration)."""
    gpu = GPUSpec.model_validate({"from": "h100-sxm", "name": "mine", "peak_tflops": {"bf16": peak}})
    assert gpu.family_name not in ("Titan-RTX", "RTX-2080-Ti")
