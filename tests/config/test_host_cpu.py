"""A node's host CPU, read as NCCL reads it (config.host_cpu): an architecture and, on x86, a vendor."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulon.config import DatacenterConfig
from simulon.config.errors import ConfigError
from simulon.config.host_cpu import AMD, ARM, INTEL, MIXED, POWER, X86, HostCPU, communicator_host, host_cpu
from simulon.config.loading import parse_scenario
from simulon.config.templates import find_template, template_names


@pytest.mark.parametrize(("name", "arch", "vendor"), [
    ("AMD EPYC 7742", X86, AMD), ("AMD Rome 7742", X86, AMD), ("EPYC 9654 (Genoa)", X86, AMD),
    ("Intel Xeon Platinum 8480C", X86, INTEL), ("Sapphire Rapids", X86, INTEL), ("xeon-6776p", X86, INTEL),
    ("NVIDIA Grace", ARM, None), ("AWS Graviton3", ARM, None), ("Ampere Altra Max", ARM, None),
    ("IBM POWER9", POWER, None),
])
def test_a_cpu_named_as_a_datasheet_writes_it_gives_nccls_architecture_and_vendor(name, arch, vendor):
    assert host_cpu(name) == HostCPU(arch, vendor)


def test_nccl_takes_its_amd_rows_for_amd_and_mixed_vendor_hosts_and_its_intel_rows_for_every_other():
    # src/graph/tuning.cc: llMaxBws' AMD row where cpuVendor is AMD or MIXED; getNetOverhead 2 us on x86 AMD only
    amd, intel, grace = host_cpu("AMD EPYC 7742"), host_cpu("Xeon 8480C"), host_cpu("NVIDIA Grace")
    assert (amd.ll_row, amd.overhead_row) == ("amd", "amd")
    assert (intel.ll_row, intel.overhead_row) == ("intel", "intel")
    assert (grace.ll_row, grace.overhead_row) == ("intel", "intel")
    assert (HostCPU.unknown().ll_row, HostCPU.unknown().overhead_row) == ("intel", "intel")
    mixed = communicator_host({amd, intel})
    assert mixed == HostCPU(X86, MIXED) and (mixed.ll_row, mixed.overhead_row) == ("amd", "intel")
    # an Arm host beside an x86 one: both fields mixed (src/init.cc compares them apart)
    assert communicator_host({grace, intel}) == HostCPU(MIXED, MIXED)
    assert communicator_host({amd}) == amd
    # a node whose CPU is not named is like the named ones, not a vendor of its own
    assert communicator_host({HostCPU.unknown(), intel}) == intel
    assert communicator_host({HostCPU.unknown(), grace}) == grace
    assert communicator_host({HostCPU.unknown()}) == HostCPU.unknown()
    assert [h.label for h in (amd, grace, mixed, communicator_host({grace, intel}), HostCPU.unknown())] == [
        "x86 AMD", "Arm", "x86, mixed vendors", "mixed architectures", "not named (NCCL's Intel rows)"]


@given(st.text(max_size=40))
def test_any_text_is_read_as_a_cpu_or_refused_with_a_value_error_saying_what_is_known(text):
    try:
        cpu = host_cpu(text)
    except ValueError as exc:
        assert ("names no vendor or CPU family" in str(exc) and "AMD EPYC" in str(exc)) or "digits" in str(exc)
    else:
        assert cpu.arch in (X86, ARM, POWER)


@pytest.mark.parametrize("name", ["AMD EPYC " + "7" * 5000, "Xeon 1234567890123456", "Transmeta " + "9" * 5000])
def test_a_host_cpu_with_a_model_number_longer_than_any_is_refused_in_one_short_line(name):
    with pytest.raises(ValueError, match=r"^host CPU '.+ holds a number of [\d,]+ digits, more than") as caught:
        host_cpu(name)
    assert len(str(caught.value)) < 300 and "\n" not in str(caught.value)
    assert host_cpu("AMD EPYC 9654") == HostCPU(X86, AMD)  # a model number as datasheets write it: read
    with pytest.raises(ValueError, match=r"\(5,012 characters\) names no vendor"):  # a long name, no number: cut
        host_cpu("Transmeta " + "q" * 5000)


def test_an_unknown_host_cpu_is_refused_naming_its_file_and_field():
    data = {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}, "node": {"host_cpu": "Pentium 4"}},
            "workload": {"model": {"from": "llama-3-8b"}, "parallelism": {"tp": 8},
                         "training": {"global_batch_size": 8, "micro_batch_size": 1, "sequence_length": 1024}}}
    parse_scenario(data, "ok.yaml")  # an Intel part: read
    data["datacenter"]["node"]["host_cpu"] = "Transmeta Crusoe"
    with pytest.raises(ConfigError, match=r"s\.yaml: datacenter\.node\.host_cpu: host CPU 'Transmeta Crusoe' names"):
        parse_scenario(data, "s.yaml")


def test_every_system_template_that_names_a_host_cpu_names_one_simulon_reads():
    named = {}
    for name in template_names("datacenter"):
        cpu = (find_template("datacenter", name) or {}).get("node", {}).get("host_cpu")
        if cpu is not None:
            named[name] = host_cpu(cpu)
    # DGX A100's and AWS p5's hosts are AMD EPYC; DGX H100's Intel Xeon; the Grace Blackwell racks' Arm
    assert named["dgx-a100"].vendor == AMD and named["aws-p5"].vendor == AMD
    assert named["dgx-h100"].vendor == INTEL and named["gb200-nvl72"].arch == ARM
    node = DatacenterConfig.model_validate({"from": "dgx-a100", "cluster": {"num_nodes": 1}}).node
    assert node.host == HostCPU(X86, AMD)
