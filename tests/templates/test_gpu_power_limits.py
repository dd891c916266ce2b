"""Every shipped GPU template states its board power (tdp_w): compute.calibration.power_limited_clock bounds the
clock of a GPU held to less power than the chip it borrows from only where both state one. The B300 stated none,
so a B300 capped at 700 W (`{from: b300, tdp_w: 700}`) ran a Llama 3.1 8B step on DGX B300 in 1,189.1 ms, as fast
as the 1,100 W part (gpu/b300.yaml)."""

from __future__ import annotations

from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.compute.analytical import AnalyticalModel
from simulon.compute.calibration import Calibrations, shipped_gpu
from simulon.config import parse_scenario
from simulon.config.common import DType
from simulon.config.dc import GPUSpec
from simulon.workload.layer_kernels import LayerKernels

STEMS = sorted(p.name.removesuffix(".yaml") for p in (resources.files("simulon.templates") / "gpu").iterdir()
               if p.name.endswith(".yaml"))


@pytest.mark.parametrize("stem", STEMS)
def test_every_gpu_template_states_a_tdp(stem):
    assert shipped_gpu(stem).tdp_w, f"gpu/{stem}.yaml states no tdp_w"


def test_the_b300_is_a_1100_w_part_below_the_rack_scale_gb300():
    assert shipped_gpu("b300").tdp_w == 1100 < shipped_gpu("gb300").tdp_w


def test_a_b300_held_to_less_power_sustains_a_lower_gemm_clock_by_the_power_balance():
    cal = Calibrations.shipped()
    full = cal.gemm(shipped_gpu("b300"), DType.bf16)[0].sustained_clock
    capped = GPUSpec.model_validate({"from": "b300", "tdp_w": 700})
    assert cal.gemm(capped, DType.bf16)[0].sustained_clock == pytest.approx(full * (700 / 1100) ** 0.5)


def llama_layer_specs() -> list:
    data = {"datacenter": {"from": "dgx-b300", "cluster": {"num_nodes": 1}},
            "workload": {"model": {"from": "llama-3.1-8b", "num_layers": 2}, "parallelism": {"tp": 2, "pp": 1},
                         "training": {"global_batch_size": 4, "micro_batch_size": 1, "sequence_length": 4096}}}
    kernels = LayerKernels.of(parse_scenario(data).workload)
    return [spec for name in kernels.table for spec in kernels[name].values()]


@settings(max_examples=10, deadline=None)
@given(st.floats(1.01, 2.0))
def test_a_b300_of_ones_own_with_more_hbm_bandwidth_keeps_the_b300s_gemm_fit_and_runs_no_slower(more):
    """The same chip at the same power (compute.calibration.same_chip needs a TDP on both) keeps its own chip's fit:
    without the B300's TDP a B300 given 10 TB/s fell to the B200's GEMM fit (equal bf16 peak, the name breaking the
    tie)."""
    b300 = shipped_gpu("b300")
    mine = GPUSpec.model_validate({"from": "b300", "name": "my-b300", "memory_bandwidth": b300.memory_bandwidth * more})
    assert Calibrations.shipped().gemm(mine, DType.bf16)[1] == "b300"
    specs = llama_layer_specs()
    faster, base = (sum(AnalyticalModel(gpu, DType.bf16, sustained_load=True).seconds(specs)) for gpu in (mine, b300))
    assert faster <= base
