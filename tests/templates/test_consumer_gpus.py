"""The GeForce/TITAN GPU templates of Sailor's MIT cluster (RTX 3090, RTX 2080 Ti, TITAN RTX) and its node
templates: peaks follow from the chips' units and clocks, Sailor's names resolve, kernels are timed on them
through a fitted stand-in, and the PCIe nodes carry no more than their links."""

from __future__ import annotations

import pytest

from simulon.collective.types import CollType
from simulon.compute.analytical import AnalyticalModel
from simulon.compute.calibration import Calibrations
from simulon.config.common import DType
from simulon.config.dc import DatacenterConfig, GPUSpec
from simulon.config.resolve import resolve_gpu, resolve_hardware
from simulon.pipeline import collective_sweep
from simulon.workload.kernels import KernelSpec, Phase
from simulon.workload.kernels import gemm as gemm_kernel

# (template, SMs, tensor cores per SM, dense fp16 FLOP per tensor core per clock with FP16 accumulate, boost GHz,
#  FP32 lanes, whether FP32 accumulate runs at half rate (GeForce), GDDR Gbps, bus bits): the whitepapers' units.
CHIPS = [
    ("rtx-3090", 82, 4, 256, 1.695, 10496, True, 19.5, 384),
    ("rtx-2080-ti", 68, 8, 128, 1.545, 4352, True, 14.0, 352),
    ("titan-rtx", 72, 8, 128, 1.770, 4608, False, 14.0, 384),
]


def gpu(stem: str) -> GPUSpec:
    return GPUSpec.model_validate({"from": stem})


@pytest.mark.parametrize(("stem", "sms", "tc_per_sm", "flop_clk", "ghz", "lanes", "geforce", "gbps", "bus"), CHIPS)
def test_peaks_and_bandwidth_are_the_chips_units_times_their_clocks(stem, sms, tc_per_sm, flop_clk, ghz, lanes,
                                                                   geforce, gbps, bus):
    spec = gpu(stem)
    fp16_accumulate = sms * tc_per_sm * flop_clk * ghz / 1e3
    fp32_accumulate = fp16_accumulate / 2 if geforce else fp16_accumulate
    assert spec.peak_tflops[DType.fp16] == pytest.approx(fp32_accumulate, rel=0.01)
    assert spec.peak_tflops[DType.fp32] == pytest.approx(lanes * 2 * ghz / 1e3, rel=0.01)
    assert spec.memory_bandwidth == pytest.approx(gbps * bus / 8 * 1e9)
    assert Calibrations.shipped().sm_count(spec) == sms


def test_only_ampere_has_bf16_and_tf32_and_no_card_claims_nvlink():
    assert DType.bf16 in gpu("rtx-3090").peak_tflops and DType.tf32 in gpu("rtx-3090").peak_tflops
    for stem in ("rtx-2080-ti", "titan-rtx"):
        assert set(gpu(stem).peak_tflops) == {DType.fp32, DType.fp16}
    assert all(gpu(stem).nvlink_bandwidth is None for stem, *_ in CHIPS)


@pytest.mark.parametrize(("text", "stem"), [
    ("RTX-3090", "rtx-3090"), ("RTX-2080", "rtx-2080-ti"), ("Titan-RTX", "titan-rtx"),   # Sailor's names
    ("GeForce RTX 3090 24GB", "rtx-3090"), ("RTX 2080 Ti", "rtx-2080-ti"), ("NVIDIA TITAN RTX", "titan-rtx"),
])
def test_sailors_gpu_names_and_the_usual_spellings_resolve(text, stem):
    assert resolve_gpu(text)[0] == stem


def test_sailors_rtx_2080_is_the_11_gb_2080_ti():
    # Sailor's cluster config gives its "RTX-2080" 11811160064 bytes; the plain RTX 2080 has 8 GB
    assert gpu(resolve_gpu("RTX-2080")[0]).memory_capacity_gb == pytest.approx(11811160064 / 2**30, rel=0.03)


def test_each_gpu_resolves_to_its_mit_node_and_the_geforce_cards_to_their_own_model_words():
    assert {resolve_hardware(t).system for t in ("RTX-3090", "RTX-2080", "Titan-RTX")} == {
        "sailor-mit-rtx3090", "sailor-mit-rtx2080ti", "sailor-mit-titan-rtx"}
    assert resolve_gpu("RTX-3090")[1] != resolve_gpu("RTX-2080")[1]
    with pytest.raises(ValueError, match="names no shipped GPU"):
        resolve_gpu("RTX 3080")


def gemm(m: int, n: int, k: int, dtype: DType = DType.fp16) -> KernelSpec:
    return gemm_kernel("gemm", Phase.fwd, m, n, k, dtype.bytes)


@pytest.mark.parametrize("stem", [c[0] for c in CHIPS])
@pytest.mark.parametrize("dtype", [DType.fp16, DType.fp32])
def test_kernels_are_timed_through_a_fitted_nvidia_stand_in_and_never_beat_the_peak(stem, dtype):
    spec = gpu(stem)
    model = AnalyticalModel(spec, dtype)
    assert model.gemm_from != stem and Calibrations.shipped().gpus[model.gemm_from]
    big = gemm(8192, 8192, 8192, dtype)
    seconds = model.seconds([big])[0]
    assert big.flops / spec.peak_flops(dtype) < seconds < 3 * big.flops / spec.peak_flops(dtype)


def test_a_big_fp16_gemm_ranks_the_cards_by_their_tensor_peaks():
    times = {stem: AnalyticalModel(gpu(stem), DType.fp16).seconds([gemm(8192, 8192, 8192)])[0]
             for stem, *_ in CHIPS}
    assert times["titan-rtx"] < times["rtx-3090"] < times["rtx-2080-ti"]


NODES = {"sailor-mit-rtx3090": (31.5e9, 1e9 / 8), "sailor-mit-titan-rtx": (15.75e9, 25e9 / 8),
         "sailor-mit-rtx2080ti": (15.75e9, 25e9 / 8)}


@pytest.mark.parametrize(("stem", "links"), NODES.items())
def test_mit_nodes_are_eight_pcie_gpus_behind_one_shared_nic(stem, links):
    dc = DatacenterConfig.model_validate({"from": stem, "cluster": {"num_nodes": 2}})
    pcie, nic = links
    assert dc.node.gpus_per_node == dc.node.gpus_per_nic == 8
    assert dc.network.scale_up.kind == "pcie" and dc.scale_up_bandwidth == pytest.approx(pcie)
    assert dc.network.scale_out.nic.speed == pytest.approx(nic)
    # all 8 GPUs of each node all-reduce across the two nodes through the one NIC each: whether ring or tree,
    # the buffer crosses it at most once each way per pass, so algbw <= NIC rate and busbw <= 2(n-1)/n of it
    across = collective_sweep(dc, CollType.AllReduce, tuple(range(16)), [256 * 2**20])[0]
    assert 0.3 * nic < across.busbw_GBps * 1e9 <= nic * 2 * 15 / 16 * 1.0001
