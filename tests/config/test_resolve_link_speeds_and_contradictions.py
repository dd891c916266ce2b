"""config.resolve: NIC line rates written as people write them ("400 Gb/s", "100GbE") read as the NIC's, and a
description that contradicts itself (two form factors, two memory sizes of one GPU) refused naming the
contradiction, not one of its halves taken silently."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulon.config import DatacenterConfig
from simulon.config.dc import GPUSpec
from simulon.config.resolve import Unresolved, resolve_hardware

UNITS = st.sampled_from(["Gbps", "Gb/s", "Gbit/s", "Gbits/s", "Gb/sec", "GbE", "Gbe", "Gb", "G"])
GAPS = st.sampled_from(["", " "])


@given(speed=st.sampled_from([100, 200, 400, 800]), gap=GAPS, unit=UNITS,
       text=st.sampled_from(["DGX H100 {}", "8x A100-SXM4-80GB, {} RoCE", "H200 (AWS p5en), EFA {}",
                             "A100-40GB ({} InfiniBand)", "DGX H100 8x{}"]))
def test_a_line_rate_reads_the_same_whatever_its_unit_is_written_as(speed, gap, unit, text):
    """"400 Gb/s" left the words 'gb' and 's' unaccounted for, and "100GbE" the word '100gbe': a description naming
    its NICs' speed was refused as naming something unknown, with a confusing message."""
    written = resolve_hardware(text.format(f"{speed}{gap}{unit}"))
    plain = resolve_hardware(text.format(f"{speed}Gbps"))
    assert written.stray == () and (written.gpu, written.system, written.datacenter) == (
        plain.gpu, plain.system, plain.datacenter)


@pytest.mark.parametrize(("text", "speed"), [
    ("A100 100GbE", "100Gbps"), ("H100 200 GbE", "200Gbps"), ("DGX H100 100 Gb/s", "100Gbps"),
    ("A100-SXM4-40GB-100GbE", "100Gbps"), ("DGX-H100-200Gb/s", "200Gbps"),
])
def test_a_stated_line_rate_sets_the_nic_speed_as_400g_does(text, speed):
    assert resolve_hardware(text).datacenter["network"]["scale_out"]["nic"]["speed"] == speed


@pytest.mark.parametrize("text", ["H100 SXM 400Gb/s", "H100 SXM 400 Gb/s InfiniBand", "A100 100GbE",
                                  "8x H100 80GB SXM DGX, 400 Gbit/s"])
def test_a_gpu_from_a_description_with_its_links_speed_is_built(text):
    assert GPUSpec.model_validate({"from": text}).template is not None


def test_a_slash_of_a_rate_is_no_path_separator():
    """"DGX-H100-200Gb/s" was read as a template file's path (its '/'), and refused as a missing file."""
    dc = DatacenterConfig.model_validate({"from": "DGX-H100-200Gb/s", "cluster": {"num_nodes": 1}})
    assert dc.network.scale_out.nic.speed == pytest.approx(200e9 / 8)


@pytest.mark.parametrize("text", ["a3-megagpu-8G H100", "A100 80G"])
def test_a_bare_g_joined_to_a_name_or_after_a_gpu_stays_what_it_was(text):
    assert "network" not in resolve_hardware(text).datacenter


FORMS = {"SXM": ["SXM", "SXM5", "sxm"], "PCIe": ["PCIe", "PCIE5", "pcie"]}


@given(first=st.sampled_from(sorted(FORMS)), model=st.sampled_from(["H100", "A100"]), data=st.data())
def test_two_form_factors_of_one_gpu_are_refused_naming_both(first, model, data):
    """"H100 SXM PCIe" took the first form factor named, silently."""
    second = next(form for form in FORMS if form != first)
    text = f"{model} {data.draw(st.sampled_from(FORMS[first]))} {data.draw(st.sampled_from(FORMS[second]))}"
    with pytest.raises(Unresolved, match=rf"states two form factors of the {model}, {first} and {second}: a GPU "
                                         "is one of them"):
        resolve_hardware(text)


def test_oam_and_pcie_are_two_form_factors_too():
    with pytest.raises(Unresolved, match="two form factors of the MI300X, OAM and PCIe"):
        resolve_hardware("MI300X OAM PCIe")


@pytest.mark.parametrize("text", ["8x H100 SXM5, ConnectX-7 on PCIe Gen5", "H100 SXM (PCIe 5.0 x16 to the NICs)",
                                  "PCIe Gen5 switches, 8x H100 SXM"])
def test_pcie_named_as_a_bus_beside_sxm_is_no_second_form_factor(text):
    assert resolve_hardware(text).gpu == "h100-sxm"


@pytest.mark.parametrize(("text", "sizes"), [("H100 80GB 94GB", "80 GB and 94 GB"),
                                             ("A100 40GB 80GB", "40 GB and 80 GB"),
                                             ("A100-SXM4-40GB (80 GB)", "40 GB and 80 GB")])
def test_two_memory_sizes_of_one_gpu_are_refused_naming_both(text, sizes):
    """"H100 80GB 94GB" resolved to the 80 GB H100, the 94 GB ignored."""
    with pytest.raises(Unresolved, match=rf"states {sizes} of GPU memory: a GPU has one size"):
        resolve_hardware(text)


@pytest.mark.parametrize(("text", "gpu"), [
    ("H200 141GB (144GB HBM3e)", "h200-sxm"),    # one template's size, two roundings
    ("H100 80GB 80GiB", "h100-sxm"),
    ("4x H100 80GB (320GB total)", "h100-sxm"),  # several GPUs' memory together
    ("DGX A100 320GB", "a100-sxm-40gb"),          # a system's
    ("A100 40GB, 320GB node", "a100-sxm-40gb"),
])
def test_sizes_that_agree_are_no_contradiction(text, gpu):
    assert resolve_hardware(text).gpu == gpu


def test_two_gpus_named_are_still_refused():
    with pytest.raises(Unresolved, match="names several GPUs: a100, h100"):
        resolve_hardware("H100 A100")


@pytest.mark.parametrize(("text", "system"), [
    ("a100-sxm4-40gb", "dgx-a100-320gb"),   # nvidia-smi's name lower-cased: was a 40 Gb/s NIC on each GPU
    ("h100 80gb", "dgx-h100"),              # was 80 Gb/s
    ("H200 141gb", "hgx-h200"),             # was 141 Gb/s
])
def test_a_gpus_memory_written_in_lower_case_is_its_memory_not_a_nic_line_rate(text, system):
    hardware = resolve_hardware(text)
    assert (hardware.system, hardware.datacenter) == (system, {"from": system})
