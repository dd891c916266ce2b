"""Shipped datacenter (system) and GPU templates: every system simulates, its links are the spec sheet's, and
the GPUs' dense peaks keep the vendors' ratios."""

from __future__ import annotations

import math

import pytest

from simulon.collective.types import CollType
from simulon.config.dc import DatacenterConfig, GPUSpec
from simulon.config.loading import parse_scenario
from simulon.config.templates import find_template, template_names, template_text
from simulon.pipeline import collective_sweep, simulate

SYSTEMS = template_names("datacenter")
BIG = 256 * 2**20  # bytes: large enough that bandwidth, not latency, sets the time


def two_nodes(stem: str) -> DatacenterConfig:
    return DatacenterConfig.model_validate({"from": stem, "cluster": {"num_nodes": 2}})


@pytest.mark.parametrize("stem", SYSTEMS)
def test_every_system_template_simulates_a_small_run_across_two_nodes(stem):
    dc = two_nodes(stem)
    per_node = dc.node.gpus_per_node
    dtype = "bf16" if "bf16" in dc.node.gpu.peak_tflops else "fp16"  # Turing cards have no bf16
    sc = parse_scenario({
        "datacenter": {"from": stem, "cluster": {"num_nodes": 2}},
        "workload": {"model": {"name": "tiny", "num_layers": 2, "hidden_size": 1024, "num_heads": 16,
                               "ffn_hidden_size": 4096, "vocab_size": 32768},
                     "parallelism": {"tp": per_node, "pp": 1},
                     "training": {"num_gpus": 2 * per_node, "global_batch_size": 4, "micro_batch_size": 1,
                                  "sequence_length": 512, "dtype": dtype}}}, stem)
    result = simulate(sc).result
    assert result.num_gpus == 2 * per_node
    assert math.isfinite(result.iteration_time_ms) and result.iteration_time_ms > 0
    # the data-parallel gradient all-reduce crosses the NICs: some communication is on the timeline
    assert 0 < result.mfu < 1


@pytest.mark.parametrize("stem", SYSTEMS)
def test_a_system_moves_no_more_than_its_links_carry(stem):
    """One GPU per node: an all-reduce's bus bandwidth is bounded by the NIC's line rate; inside one node (or
    NVLink domain), by the GPU's scale-up port."""
    dc = two_nodes(stem)
    per_node = dc.node.gpus_per_node
    across = collective_sweep(dc, CollType.AllReduce, (0, per_node), [BIG])[0]
    nic_bytes = dc.network.scale_out.nic.speed  # one GPU per node talks: it has the (maybe shared) NIC alone
    if dc.domain_gpus == per_node:
        assert 0.3 * nic_bytes < across.busbw_GBps * 1e9 <= nic_bytes * 1.0001
    inside = collective_sweep(dc, CollType.AllReduce, tuple(range(per_node)), [BIG])[0]
    assert inside.busbw_GBps * 1e9 <= dc.scale_up_bandwidth * 1.0001


@pytest.mark.parametrize("stem", SYSTEMS)
def test_every_system_template_cites_its_source_and_names_its_nics(stem):
    text = template_text("datacenter", stem)
    assert text.startswith("#") and "Source" in text
    assert two_nodes(stem).network.scale_out.nic is not None


@pytest.mark.parametrize("stem", template_names("gpu"))
def test_dense_fp8_is_twice_bf16_and_bf16_equals_fp16_on_every_gpu(stem):
    gpu = GPUSpec.model_validate(find_template("gpu", stem))
    peaks = {d.value: v for d, v in gpu.peak_tflops.items()}
    assert peaks.get("bf16", peaks["fp16"]) == peaks["fp16"]  # Turing (RTX 2080 Ti, TITAN RTX) has no bf16
    if "fp8" in peaks:
        assert peaks["fp8"] == pytest.approx(2 * peaks["bf16"], rel=0.002)


def test_each_shipped_gpu_has_a_reference_system_built_on_it():
    referenced = {(find_template("datacenter", s) or {})["node"]["gpu"]["from"] for s in SYSTEMS
                  if "\nreference: true" in template_text("datacenter", s)}
    shipped = set(template_names("gpu")) - {"a100-pcie-80gb", "h100-pcie",  # PCIe cards: no vendor system
                                            "rtx-3090", "rtx-2080-ti", "titan-rtx",
                                            "gh200"}  # the 96 GB HBM3 GH200: its DGX GH200 is not shipped
    assert shipped <= referenced, shipped - referenced


@pytest.mark.parametrize(("stem", "gpus", "nic_gbps", "domain"), [
    ("gb300-nvl72", 4, 800, 72), ("gb200-nvl36", 4, 400, 36), ("gb200-nvl36x2", 4, 400, 72), ("dgx-b300", 8, 800, 8),
    ("hgx-h800", 8, 400, 8), ("gh200-nvl32", 2, 400, 32), ("mi355x-platform", 8, 400, 8)])
def test_systems_are_built_as_their_spec_sheets_say(stem, gpus, nic_gbps, domain):
    dc = two_nodes(stem)
    assert dc.node.gpus_per_node == gpus and dc.domain_gpus == domain
    assert dc.network.scale_out.nic.speed == pytest.approx(nic_gbps * 1e9 / 8)


def test_a_gh200_nvl32_rack_holds_the_144_gb_hbm3e_gh200():
    """NVIDIA's GH200 NVL32 is built on the HBM3e GH200: "a 32-GPU NVIDIA NVLink domain and a massive 19.5 TB of
    unified memory", "4.5 TB of HBM3e memory" (NVIDIA technical blog, "One Giant Superchip for LLMs, Recommenders,
    and GNNs: Introducing NVIDIA GH200 NVL32", developer.nvidia.com, 2023): 4.5 TB / 32 = 144 GB of HBM3e per GPU,
    and 32 x (144 + 480 GB LPDDR5X) = 19.5 TB. It was built on the 96 GB HBM3 GH200 at 4 TB/s."""
    gpu = two_nodes("gh200-nvl32").node.gpu
    assert gpu.memory_capacity_gb == 144 and gpu.memory_bandwidth == pytest.approx(4.9e12)
    assert 32 * gpu.memory_capacity_gb / 1024 == pytest.approx(4.5)  # the blog's TB are 1,024 GB
    assert 32 * (gpu.memory_capacity_gb + 480) / 1024 == pytest.approx(19.5)


def test_the_h800_and_mi355x_scale_up_ports_are_their_vendors_figures():
    assert two_nodes("hgx-h800").scale_up_bandwidth == pytest.approx(200e9)   # 400 GB/s bidirectional
    assert two_nodes("mi355x-platform").scale_up_bandwidth == pytest.approx(7 * 76.8e9)  # 7 links x 153.6/2


@pytest.mark.parametrize(("text", "domain"), [("GB200 NVL36x2", 72), ("NVL36x2", 72), ("GB200 NVL36", 36),
                                              ("GB200 NVL72", 72)])
def test_an_nvl36x2_is_one_nvlink_domain_across_its_two_racks(text, domain):
    """NVIDIA's NVL36x2 cables two 36-GPU racks' NVLink Switch trays together into one 72-GPU NVLink domain (its
    Multi-Node NVLink tuning guide; Infra Controller: a domain "can be a single NVL72 rack or two NVL36 racks
    cabled together"); it was built as two domains of 36."""
    dc = DatacenterConfig.model_validate({"from": text, "cluster": {"num_nodes": 18}})
    assert (dc.domain_gpus, dc.node.gpus_per_node) == (domain, 4)
