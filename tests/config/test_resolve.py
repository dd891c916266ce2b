"""config.resolve: free-text hardware and framework descriptions -> templates, and what it refuses."""

from __future__ import annotations

import re

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import ROOT, cli
from simulon.config import DatacenterConfig
from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario
from simulon.config.resolve import (
    Unresolved,
    card_gbps,
    gpu_models,
    resolve_framework,
    resolve_gpu,
    resolve_hardware,
    system_sizes,
)
from simulon.config.templates import find_template, template_names, template_text


@pytest.mark.parametrize(("text", "gpu", "system"), [
    ("8x H100 80GB SXM DGX", "h100-sxm", "dgx-h100"),
    ("GB200 NVL72 rack", "gb200", "gb200-nvl72"),
    ("GB200 NVL36", "gb200", "gb200-nvl36"),
    ("sm_90 Hopper", "h100-sxm", "dgx-h100"),
    ("A100-SXM4-40GB RoCE", "a100-sxm-40gb", "dgx-a100-320gb"),
    ("B300 (HGX)", "b300", "dgx-b300"),
    ("NVIDIA H100 PCIe", "h100-pcie", None),
    ("AMD Instinct MI355X", "mi355x", "mi355x-platform"),
    ("H100 (DGX Cloud)", "h100-sxm", "dgx-cloud-h100"),
    ("H200 (AWS p5en), EFA", "h200-sxm", "aws-p5en"),
    ("GH200 NVL2", "gh200-144gb", "gh200-nvl2"),
    ("Blackwell sm_100", "b200", "dgx-b200"),
    ("8xA100 80GB", "a100-sxm-80gb", "dgx-a100"),  # a count written onto the model
    ("NVL36x2", "gb200", "gb200-nvl36x2"),          # a multiplier written onto the system: two NVL36 racks
    ("p5.48xlarge", "h100-sxm", "aws-p5"),
    ("p4d.24xlarge", "a100-sxm-40gb", "aws-p4d"),
    ("8x A100 80GB (AWS p4de)", "a100-sxm-80gb", "aws-p4de"),
    ("a3-ultragpu-8g", "h200-sxm", "gcp-a3-ultra"),  # Google's machine types, by their names alone
    ("GCP A4 (8x B200, 8x 400G CX-7 RoCE)", "b200", "gcp-a4"),
    ("a4x-highgpu-4g", "gb200", "gcp-a4x"),          # a tray of a GB200 NVL72 rack, not NVIDIA's reference system
])
def test_the_issues_descriptions_resolve_to_a_gpu_and_a_system(text, gpu, system):
    hardware = resolve_hardware(text)
    assert (hardware.gpu, hardware.system) == (gpu, system)


def test_an_architecture_stands_for_its_flagship_and_says_so():
    assert resolve_hardware("sm_90 Hopper").notes == ("sm_90 read as H100, its flagship part",)
    assert resolve_hardware("H100 SXM").notes == ()


@pytest.mark.parametrize(("text", "says"), [
    ("GeForce RTX 5090 (Blackwell)", "RTX 5090 has no GPU template"),
    ("RTX PRO 6000 Blackwell", "names no shipped GPU"),
    ("Jetson Thor Blackwell", "'jetson', a part with no GPU template"),
    ("Ampere A40", "'A40', a part with no GPU template, so 'ampere' is not read as A100"),
    ("sm_120 Blackwell", "'sm_120', a part with no GPU template"),  # compute capability 12.0: GeForce and RTX PRO
    ("sm_89 Ada", "names no shipped GPU"),
    ("sm_90 Blackwell", "two architectures: H100 (sm_90) and B200"),
    ("Ampere AT10", "'AT10', a part with no GPU template"),  # 'at' is a connective, not an InfiniBand rate's stem
])
def test_an_architecture_is_not_read_as_its_flagship_where_the_description_names_another_part(text, says):
    with pytest.raises(Unresolved, match=re.escape(says)):
        resolve_hardware(text)


@pytest.mark.parametrize(("text", "gpu"), [
    ("Hopper 8x400Gbps CX7 NDR400", "h100-sxm"),        # NIC generations and InfiniBand rates name no part
    ("Ampere sm_80 DGX 8x200Gb HDR200", "a100-sxm-80gb"),
    ("NVIDIA Blackwell (8-GPU node)", "b200"),
    ("Hopper sm_90a", "h100-sxm"),
])
def test_an_architecture_beside_network_words_still_stands_for_its_flagship(text, gpu):
    assert resolve_hardware(text).gpu == gpu


@given(st.sampled_from(["Ampere", "Hopper", "Blackwell", "sm_90", "sm_100"]),
       st.from_regex(r"[A-Z]{1,2}[1-9][0-9]{1,2}", fullmatch=True), st.booleans())
def test_no_architecture_stands_for_a_model_no_template_has(arch, model, first):
    known = {w for stem in template_names("datacenter") + template_names("gpu") + template_names("nic")
             + template_names("switch") for w in re.findall(r"[a-z0-9]+", stem)}
    if model.lower() in gpu_models() or model.lower() in known or re.fullmatch(r"(?i)(ndr|hdr|edr|xdr|cx)\d+", model):
        return
    text = f"{model} {arch}" if first else f"{arch} {model}"
    with pytest.raises(Unresolved, match=re.escape(model)):
        resolve_hardware(text)


@pytest.mark.parametrize(("text", "sizes"), [
    ("H100 94GB", "no H100 template has (h100-pcie 80 GB, h100-sxm 80 GB)"),  # H100 NVL's memory, not the SXM's
    ("H20 141GB", "no H20 template has (h20 96 GB)"),                        # the HBM3e H20
    ("A100 96GB", "no A100 template has (a100-pcie-80gb 80 GB, a100-sxm-40gb 40 GB, a100-sxm-80gb 80 GB)"),
    ("GH200 480GB", "no GH200 template has (gh200 96 GB, gh200-144gb 144 GB)"),  # Grace's LPDDR5X, not the HBM
])
def test_a_memory_size_no_template_of_the_gpu_has_is_refused_naming_the_sizes_they_have(text, sizes):
    with pytest.raises(Unresolved, match=re.escape(sizes)):
        resolve_hardware(text)
    with pytest.raises(Unresolved, match="set its memory_capacity_gb"):
        resolve_gpu(text)


VENDOR_SIZES = {
    "B200 192GB": ("b200", "dgx-b200"),          # the package's 192 GB: nvidia-smi's 183,359 MiB, the template's 180
    "B200 180GB": ("b200", "dgx-b200"),
    "H200 144GB": ("h200-sxm", "hgx-h200"),      # the HBM3e stacks' 144 GB, of which 141 GB are usable
    "GB200 192GB": ("gb200", "gb200-nvl72"),
    "8x H100 80GB HBM3": ("h100-sxm", "dgx-h100"),
    "DGX A100 320GB": ("a100-sxm-40gb", "dgx-a100-320gb"),  # a system's memory together names the system
    "DGX A100 640GB": ("a100-sxm-80gb", "dgx-a100"),
}


def test_a_memory_size_a_template_has_as_vendors_write_it_resolves_without_a_note():
    found = {text: resolve_hardware(text) for text in VENDOR_SIZES}
    assert {text: (hw.gpu, hw.system) for text, hw in found.items()} == VENDOR_SIZES
    assert all(hw.notes == () for hw in found.values())


def has_size(stem: str, stated: float, tolerance: float) -> bool:
    """Whether a GPU template's memory_capacity_gb (GiB) is `stated` GB or GiB, within `tolerance`."""
    size = float(find_template("gpu", stem)["memory_capacity_gb"])
    return any(abs(stated - have) <= tolerance * have for have in (size, size * 2**30 / 1e9))


@given(model=st.sampled_from(sorted(gpu_models())), stated=st.integers(min_value=1, max_value=1000))
def test_a_stated_memory_size_resolves_only_to_a_template_of_that_size(model, stated):
    stems = gpu_models()[model]
    try:
        found = resolve_gpu(f"{model.upper()} {stated}GB")[0]
    except Unresolved as exc:
        assert "could be GPU template" in str(exc) or not any(has_size(s, stated, 0.04) for s in stems)
        return
    system_gpus = [s for s in stems if stated in system_sizes([s])]
    assert found in stems and (has_size(found, stated, 0.06) or found in system_gpus)


def test_a_systems_memory_written_after_its_gpu_names_the_gpu_that_system_holds():
    """The DGX A100 320GB holds eight A100 40GB, the 640GB eight A100 80GB: "A100 320GB" is not the 80 GB part."""
    assert resolve_gpu("A100 320GB")[0] == "a100-sxm-40gb"
    assert resolve_gpu("A100 640GB")[0] == "a100-sxm-80gb"


@pytest.mark.parametrize(("text", "gpu", "system"), [
    ("DGX H100 640GB", "h100-sxm", "dgx-h100"), ("DGX B200 1440GB", "b200", "dgx-b200"),
    ("H200 1128GB", "h200-sxm", "hgx-h200"), ("MI300X 1536GB", "mi300x", "mi300x-platform")])
def test_a_node_named_by_its_gpus_memory_together_as_datasheets_total_it_is_that_node(text, gpu, system):
    found = resolve_hardware(text)
    assert (found.gpu, found.system) == (gpu, system)


def test_a_scenario_sets_a_memory_size_no_template_has_beside_from():
    from simulon.config.dc import GPUSpec

    with pytest.raises(ValueError, match=r"'H100 94GB' states 94 GB, which no H100 template has .*"
                                         r"gpu: \{from: h100-sxm, memory_capacity_gb: 94\}"):
        GPUSpec.model_validate({"from": "H100 94GB"})
    nvl = GPUSpec.model_validate({"from": "h100-sxm", "memory_capacity_gb": 94})
    assert nvl.memory_capacity_gb == 94 and nvl.template == "h100-sxm"


@pytest.mark.parametrize("stem", template_names("gpu"))
def test_every_gpu_template_resolves_from_its_own_name_and_aliases(stem):
    doc = find_template("gpu", stem)
    aliases = yaml.safe_load(template_text("gpu", stem)).get("aliases", [])
    for name in [doc["name"], *aliases]:
        assert resolve_gpu(name)[0] == stem, name


@pytest.mark.parametrize("stem", template_names("datacenter"))
def test_every_system_resolves_from_its_own_name(stem):
    assert resolve_hardware(stem).system == stem


def test_the_context_tells_apart_systems_of_one_gpu():
    assert resolve_hardware("H100-80GB").system == "dgx-h100"
    assert resolve_hardware("H100-80GB", "Composer + PyTorch FSDP (llm-foundry)").system == "llm-foundry-h100"
    assert resolve_hardware("B200 single node", "all_reduce_bench.py on AWS P6-B200 nodes").system == "aws-p6-b200"


def test_a_stated_nic_rate_overrides_the_systems_and_an_equal_one_does_not():
    gcp = resolve_hardware("8x H100 DGX, 8x200Gbps NICs per node")
    assert gcp.datacenter["network"]["scale_out"]["nic"] == {"speed": "200Gbps"}
    assert "network" not in resolve_hardware("8x H100 DGX, 8x CX-7 400Gb RoCE").datacenter
    assert "network" not in resolve_hardware("A100-80GB (1600 Gbps RoCE node-node)").datacenter  # 8 x 200G
    slower = resolve_hardware("8x A100 (800 Gbps per node)")
    assert slower.datacenter["network"]["scale_out"]["nic"] == {"speed": "100Gbps"}
    assert "network" not in resolve_hardware("8x A100 NVLink (600GB/s bidir)").datacenter  # bytes: NVLink, not NIC
    assert "network" not in resolve_hardware("p4d.24xlarge, 400 Gbps EFA").datacenter  # the instance's 4 x 100G


@pytest.mark.parametrize(("text", "nic"), [("8x H100 3.2Tbps", None), ("DGX H100, 3.2 Tbps", None),
                                           ("p5.48xlarge 3.2Tbps EFA", None), ("DGX H100 1.6Tbps", "200Gbps")])
def test_a_nodes_network_in_terabits_as_aws_and_nvidia_write_it_is_its_nics_together(text, nic):
    found = resolve_hardware(text).datacenter.get("network", {}).get("scale_out", {}).get("nic")
    assert found == (None if nic is None else {"speed": nic})


@pytest.mark.parametrize(("text", "gpu", "nic"), [
    ("8xA100 80G", "a100-sxm-80gb", None),               # the GPU's memory, as vendors' listings write it
    ("A100 40G", "a100-sxm-40gb", None),
    ("H800-SXM5-80G", "h800-sxm", None),
    ("H100 (80G HBM3)", "h100-sxm", None),
    ("A100 80G x8, 4x 200G IB", "a100-sxm-80gb", "200Gbps"),  # the memory, then the NICs (two GPUs on each)
    ("8x H100 400G", "h100-sxm", None),                  # no H100 has 400 GB: DGX H100's own 400G NICs
    ("H100 200G RoCE", "h100-sxm", "200Gbps"),           # nor 200 GB: a NIC rate
])
def test_a_bare_g_after_the_gpu_is_its_memory_where_a_template_has_that_size(text, gpu, nic):
    hardware = resolve_hardware(text)
    assert hardware.gpu == gpu
    assert hardware.datacenter.get("network", {}).get("scale_out", {}).get("nic", {}).get("speed") == nic


@pytest.mark.parametrize(("text", "per_card", "sharing"), [
    ("A100, 2 nodes, 4x IB 200Gb dual-port per node", "200Gbps", 2),  # ConnectX-6: 200G a card over PCIe 4.0 x16
    ("8x H100, 4x 400Gb dual-port", "400Gbps", 2),                    # ConnectX-7: 400G a card, 1x400 or 2x200
    ("8x H100, 4x 200Gb", "200Gbps", 2),                              # single-port cards: each its line rate
    ("8x H100, 8x 100Gb dual-port", "200Gbps", None),                 # no shipped NIC of that rate: ports add up
])
def test_dual_port_cards_move_at_most_what_the_card_carries(text, per_card, sharing):
    found = resolve_hardware(text).datacenter
    assert found["network"]["scale_out"]["nic"] == {"speed": per_card}
    assert found.get("node", {}).get("gpus_per_nic") == sharing


@given(st.sampled_from([25.0, 100.0, 200.0, 400.0, 800.0]), st.integers(1, 4))
def test_a_card_of_more_ports_moves_no_less_and_no_more_than_its_ports_add_up(rate, ports):
    one = card_gbps(rate, 1)
    assert one == rate
    assert one <= card_gbps(rate, ports) <= ports * rate


@pytest.mark.parametrize(("text", "says"), [
    ("single 100Gbps IB NIC per node (V100 era)", "V100 has no GPU template"),
    ("Intel Gaudi 3", "Intel Gaudi is not modelled"),
    ("a cluster", "names no shipped GPU"),
    ("H100 or A100", "names several GPUs: a100, h100"),
    ("NVL72", "could be system gb200-nvl72 or gb300-nvl72"),
    ("AMD H100", "names vendor amd but GPU H100 is not one of its"),
    ("H200 PCIe", r"no H200 template is PCIe \(shipped: h200-sxm\)"),  # not simulated as the SXM part
    ("H100 NVL", "the H100 NVL .* has no GPU template"),                 # a PCIe card, not the 700 W SXM
    ("H200 NVL 141GB", "the H200 NVL .* has no GPU template"),
])
def test_what_cannot_be_resolved_is_said_with_the_candidates(text, says):
    with pytest.raises(Unresolved, match=says):
        resolve_hardware(text)


def test_nvl_followed_by_a_size_is_a_rack_not_a_card():
    assert resolve_hardware("GB200 NVL 72").system == "gb200-nvl72"
    assert resolve_hardware("GB200 NVL").system == "gb200-nvl72"


def test_a_system_named_without_its_gpu_resolves_through_its_own_words():
    assert resolve_hardware("AWS p6-b200.48xlarge").system == "aws-p6-b200"
    assert resolve_hardware("GCP a3-megagpu-8g").gpu == "h100-sxm"
    assert resolve_hardware("AWS p5en.48xlarge with EFA, 3200 Gbps").system == "aws-p5en"


@pytest.mark.parametrize(("text", "says"), [
    ("a3-highgpu-8g", r"\(the nearest, gcp-a3-mega, lacks 'highgpu'\)"),      # GCP's A3 High, not A3 Mega
    ("a3-edgegpu-8g", r"\(the nearest, gcp-a3-mega, lacks 'edgegpu'\)"),      # nor A3 Edge
    ("GCP A4X Max", r"\(the nearest, gcp-a4x, lacks 'max'\)"),                 # A4X Max runs GB300s
    ("p5e.48xlarge", r"\(the nearest, aws-p5, lacks 'p5e'\)"),                # shares only the instance size
    ("RTX 4090", r"\(RTX 4090 has no GPU template\).*'4090'"),              # shares 'rtx' with a TITAN RTX system
])
def test_a_system_sharing_some_words_with_a_description_is_not_taken_for_another_machine(text, says):
    with pytest.raises(Unresolved, match=says):
        resolve_hardware(text)


def test_a_refusal_never_says_that_no_system_carries_a_word_some_system_carries():
    # 'highgpu' is a word of Google's A4 (a4-highgpu-8g), 'ultra' of its A3 Ultra: neither accounts for the rest
    for text in ("a3-highgpu-8g", "a3-megagpu-8g ultra"):
        with pytest.raises(Unresolved) as refused:
            resolve_hardware(text)
        assert "no shipped system carries the word" not in str(refused.value)


@given(st.sampled_from(["p5en.48xlarge", "a3-megagpu-8g", "p5.48xlarge", "nvl36"]),
       st.sampled_from(["zeta9", "ultra", "foo"]))
def test_a_word_no_system_has_is_never_dropped_from_a_system_only_description(name, extra):
    with pytest.raises(Unresolved, match=repr(extra)):
        resolve_hardware(f"{name} {extra}")


SEPARATORS = st.sampled_from([" ", "-", "_", ", ", " / ", "  "])


@given(st.permutations(["8x", "H100", "80GB", "SXM", "DGX"]), st.lists(SEPARATORS, min_size=4, max_size=4),
       st.lists(st.booleans(), min_size=5, max_size=5))
def test_order_case_and_separators_do_not_change_the_answer(parts, seps, upper):
    words = [p.upper() if u else p.lower() for p, u in zip(parts, upper, strict=True)]
    text = words[0] + "".join(s + w for s, w in zip(seps, words[1:], strict=False))
    hardware = resolve_hardware(text)
    assert (hardware.gpu, hardware.system) == ("h100-sxm", "dgx-h100")


@pytest.mark.parametrize(("text", "name", "version", "te"), [
    ("NeMo 24.07 (Megatron-Core)", "nemo", (24, 7), False),
    ("Megatron-Core r0.8.0", "megatron-core", (0, 8, 0), False),
    ("Megatron-LM @23e00ed0 + TE 2.11 (NGC pytorch 26.01)", "megatron-lm", None, True),
    ("Composer + PyTorch FSDP (llm-foundry)", "llm-foundry", None, False),
    ("megatron_lm v2.5", "megatron-lm", (2, 5), False),
    ("Megatron-Bridge", "megatron-bridge", None, False),  # NeMo 2's training library, not Megatron-LM's 2020-22 code
])
def test_a_framework_resolves_to_its_name_version_and_components(text, name, version, te):
    fw = resolve_framework(text)
    assert (fw.name, fw.version, fw.with_transformer_engine) == (name, version, te)


def test_an_unknown_framework_is_none():
    assert resolve_framework("my own trainer") is None


def test_a_scenarios_datacenter_may_start_from_a_description_as_people_write_it():
    from simulon.config import DatacenterConfig, GPUSpec

    def dc(ref):
        return DatacenterConfig.model_validate({"from": ref, "cluster": {"num_nodes": 2}})

    assert dc("DGX H100 (8x H100 80GB SXM)") == dc("dgx-h100")
    assert dc("p5.48xlarge") == dc("aws-p5")
    stated = dc("8x H100 DGX, 8x200Gbps NICs per node")  # the NIC line rate it states overrides the template's
    assert stated.network.scale_out.nic.speed == 200e9 / 8 and stated.node == dc("dgx-h100").node
    assert GPUSpec.model_validate({"from": "NVIDIA H100 80GB HBM3"}) == GPUSpec.model_validate({"from": "h100-sxm"})
    assert dc("DGX H100 (NVLink4, NVLS), 700W") == dc("dgx-h100")  # what it states of the hardware, checked
    assert GPUSpec.model_validate({"from": "Grace Hopper"}) == GPUSpec.model_validate({"from": "gh200"})


@pytest.mark.parametrize(("ref", "says"), [
    ("dgx-h10", "did you mean dgx-h100"),                                     # a typo keeps its suggestion
    ("DGX H100 turbo", "names dgx-h100, but not 'turbo'"),                     # a word nothing accounts for
    ("NVIDIA H100 PCIe", "names GPU h100-pcie, which no shipped system is built on"),
    ("a3-highgpu-8g", "no shipped system carries all of its words"),
    ("8x A100 NVLink4", "states NVLink 4, but dgx-a100's scale-up is NVSwitch-NVLink3"),
])
def test_a_description_a_scenario_starts_from_is_refused_with_what_it_does_not_resolve(ref, says):
    from simulon.config import DatacenterConfig

    with pytest.raises(ValueError, match=re.escape(says)):
        DatacenterConfig.model_validate({"from": ref, "cluster": {"num_nodes": 1}})


@pytest.mark.parametrize(("text", "gpu", "system"), [
    ("Grace Hopper superchip", "gh200-144gb", "gh200-nvl32"),   # not the H100 its architecture word stands for
    ("Grace Blackwell NVL72", "gb200", "gb200-nvl72"),
    ("GB300 Grace Blackwell Ultra NVL72", "gb300", "gb300-nvl72"),  # the longest product name wins
    ("Blackwell Ultra HGX", "b300", "dgx-b300"),
    ("GB200 superchip", "gb200", "gb200-nvl72"),
])
def test_a_product_name_of_several_words_names_its_gpu_before_an_architecture_does(text, gpu, system):
    hardware = resolve_hardware(text)
    assert (hardware.gpu, hardware.system, hardware.stray) == (gpu, system, ())


@pytest.mark.parametrize(("text", "system"), [
    ("8x H200 SXM (NVLink4/NVSwitch, NVLS/SHARP on)", "hgx-h200"),
    ("GB200 NVL72 (MNNVL, up to 72 GPUs)", "gb200-nvl72"),
    ("AMD Instinct MI300X with Infinity Fabric (xGMI)", "mi300x-platform"),
    ("8x B200 NVLink 5, 1.8TB/s", "dgx-b200"),                 # NVLink both directions
    ("8x H800 (NVLink 200GB/s uni)", "hgx-h800"),             # one direction
    ("8x A100 NVLink (600GB/s bidir)", "dgx-a100"),
    ("H100 SXM5 80GB 3.35TB/s HBM3 700W", "dgx-h100"),         # HBM bandwidth and TDP
    ("DGX B200 with Spectrum-X Ethernet", "dgx-b200"),         # a switch's name: read, and the system's fabric kept
    ("DGX H100 SuperPOD, Quantum-2 NDR", "dgx-h100"),
    ("A100, 2 nodes, 4x IB 200Gb dual-port per node", "dgx-a100"),  # the ports are read as the NIC's rate
    ("A100-SXM4-80GB (Selene DGX A100, 8x HDR IB per node)", "dgx-a100"),  # NVIDIA's DGX A100 SuperPOD
])
def test_what_a_description_states_of_its_interconnect_rates_and_power_is_read_not_stray(text, system):
    hardware = resolve_hardware(text)
    assert (hardware.system, hardware.stray) == (system, ())


@pytest.mark.parametrize(("text", "says"), [
    ("8x A100 NVLink4", r"states NVLink 4, but dgx-a100's scale-up is NVSwitch-NVLink3 \(NVLink 3\)"),
    ("DGX B200 NVLink Gen 4", "NVLink 4, but dgx-b200's scale-up is NVLink-Switch-NVLink5"),
    ("8x A100 (NVLS)", "states NVLS .* dgx-a100's scale-up \\(NVSwitch-NVLink3\\) does not reduce in the switch"),
    ("DGX H100 (MNNVL)", "dgx-h100's NVLink domain is one node of 8 GPUs"),
    ("MI300X NVLink", r"states nvlink, which NVIDIA's GPUs have and the MI300X \(AMD\) does not"),
    ("8x H100 xGMI", "states xgmi, which AMD's GPUs have"),
    ("8x A100 NVLink 400GB/s", r"NVLink 300 GB/s a direction \(600 both\) and HBM 2039 GB/s"),  # an A800's rate
    ("H800 NVLink 400GB/s uni", "NVLink 200 GB/s a direction"),
    ("H100 SXM 500W", "the H100-SXM5-80GB template is a 700 W part"),  # power-capped: another clock
    ("H100 PCIe NVLS", "states NVLS, but the H100-PCIe-80GB is a PCIe card, on no NVSwitch"),  # no system to check
    ("H100 PCIe MNNVL", "states MNNVL, but the H100-PCIe-80GB is a PCIe card"),
    ("A100 PCIe 80GB NVSwitch", "states an NVSwitch, but the A100-PCIe-80GB is a PCIe card"),
])
def test_a_description_contradicting_its_templates_is_refused_with_what_they_have(text, says):
    with pytest.raises(Unresolved, match=says):
        resolve_hardware(text)


def test_a_power_or_rate_a_template_cannot_check_is_said_in_a_note():
    assert resolve_hardware("DGX H100 10.2kW").notes == ("10.2kW read as the system's power, not checked",)


def test_a_b300s_stated_power_is_checked_against_its_1100_w():
    """The B300 template stated no TDP, so any power a B300 description stated was let through with a note."""
    assert resolve_hardware("B300 HGX 1100W").notes == ()
    with pytest.raises(Unresolved, match="the B300 template is a 1100 W part"):
        resolve_hardware("B300 HGX 700W")


def test_bits_are_a_nics_rate_and_bytes_the_gpus():
    assert resolve_hardware("A100-80GB (1600 Gbps RoCE)").datacenter == {"from": "dgx-a100"}  # 8 x 200 Gb/s: as shipped
    with pytest.raises(Unresolved, match="states '1600 GB/s'"):
        resolve_hardware("A100-80GB (1600 GB/s)")


def nvlink_generation(system: str) -> int | None:
    """The NVLink generation a system template's scale-up switch template names ("NVSwitch-NVLink4": 4)."""
    switch = ((find_template("datacenter", system).get("network") or {}).get("scale_up") or {}).get("switch") or {}
    name = (find_template("switch", switch["from"]) or {}).get("name", "") if "from" in switch else ""
    found = re.search(r"nvlink(\d)", name.lower())
    return int(found.group(1)) if found else None


NVLINK_SYSTEMS = [(stem, g) for stem in template_names("datacenter") if (g := nvlink_generation(stem))]


def test_systems_of_three_nvlink_generations_are_shipped():
    assert {g for _, g in NVLINK_SYSTEMS} == {3, 4, 5}


@given(st.sampled_from(NVLINK_SYSTEMS), st.integers(1, 6), st.sampled_from(["NVLink{}", "NVLink {}", "nvlink-gen{}"]))
def test_a_stated_nvlink_generation_resolves_exactly_when_it_is_the_systems(system, generation, spelling):
    (stem, own), text = system, f"{system[0]} {spelling.format(generation)}"
    if generation == own:
        assert resolve_hardware(text).system == stem
    else:
        with pytest.raises(Unresolved, match=f"states NVLink {generation}"):
            resolve_hardware(text)


def test_a_description_with_a_slash_is_read_as_one_where_no_such_file_exists(tmp_path):
    from simulon.config import DatacenterConfig

    def dc(ref):
        return DatacenterConfig.model_validate({"from": ref, "cluster": {"num_nodes": 1}},
                                               context={"base_dir": tmp_path})

    assert dc("8x H200 SXM (NVLink4/NVSwitch, NVLS/SHARP on)") == dc("hgx-h200")
    assert dc("8x A100 NVLink 600GB/s bidir") == dc("dgx-a100")
    with pytest.raises(ValueError, match="cannot read template file"):  # a path-like name stays a missing file
        dc("systems/my-dgx")


@pytest.mark.parametrize(("text", "nodes"), [
    ("4x DGX H100", 4),                  # a count written onto the system's own word: systems
    ("4 nodes of 8x H100", 4),           # a count of nodes; the one before the GPU counts GPUs
    ("8x H100 80GB SXM DGX", None),      # GPUs: one node, the cluster left to the scenario
    ("B200 (1 node, NVLink5)", 1),
    ("16 servers of 8x H200 (HGX)", 16),
    ("4x p5.48xlarge", 4),
    ("GB200 NVL72, 2 racks", 36),        # a rack is the NVLink domain: 18 trays of 4 GPUs
    ("2x NVL36 GB200", 18),
    ("GB300 NVL72 (3 systems)", 54),
    ("2x GB200 NVL72", 36),              # a count before a rack-scale product name counts racks
    ("144x GB200 NVL72", 36),            # or its GPUs, where they fill whole racks: the same two
    ("8x H100 DGX", None),               # a DGX is one node: the count is its GPUs
    ("H100 nodes, 8x CX-7 400Gb RoCE", None),  # a count only where it stands as a word: not H100's 100
    ("p5.48xlarge", None),
    ("NVL36x2", None),                   # a product's multiplier, not a count of racks
])
def test_a_stated_count_of_nodes_or_systems_sizes_the_cluster(text, nodes):
    assert resolve_hardware(text).nodes == nodes


@given(st.integers(1, 256), st.sampled_from(["DGX H100", "DGX B200", "NVL72 GB200", "NVL36 GB200", "HGX H200"]))
def test_n_systems_are_n_nvlink_domains_of_nodes(n, system):
    """Up to 256 systems: the GB200 NVL72 template's three-tier fabric holds 64 pods on its 64-port cores (8b2d5eb
    checks their ports), so 456 racks and more are refused, naming network.scale_out.topology.cores."""
    from simulon.config.dc import DatacenterConfig

    one = DatacenterConfig.model_validate({"from": f"1x {system}"})
    per_system = (one.network.scale_up.domain_gpus or one.node.gpus_per_node) // one.node.gpus_per_node
    assert DatacenterConfig.model_validate({"from": f"{n}x {system}"}).cluster.num_nodes == n * per_system


def test_keys_beside_a_described_system_override_its_stated_nodes():
    from simulon.config.dc import DatacenterConfig

    assert DatacenterConfig.model_validate({"from": "4x DGX H100", "cluster": {"num_nodes": 2}}).cluster.num_nodes == 2


@pytest.mark.parametrize(("text", "says"), [
    ("2 racks of DGX H100", "counts racks of dgx-h100, whose NVLink domain is one node"),
    ("2 nodes, 4x DGX H100", "states 2 and 4 nodes"),
    ("0x DGX H100", "count at least one"),
])
def test_a_count_of_nodes_that_cannot_be_read_one_way_is_refused(text, says):
    with pytest.raises(Unresolved, match=re.escape(says)):
        resolve_hardware(text)


@pytest.mark.parametrize("stem", template_names("datacenter"))
def test_every_shipped_system_takes_a_count_of_its_nodes_in_a_description(stem):
    hardware = resolve_hardware(f"3 nodes of {stem}")
    assert (hardware.system, hardware.nodes) == (stem, 3)


def _sized_scenario(ref: str, num_gpus: int) -> dict:
    """A scenario on `from: ref` with no cluster, whose workload asks for `num_gpus` GPUs (data parallel)."""
    return {"datacenter": {"from": ref},
            "workload": {"model": {"name": "tiny", "num_layers": 2, "hidden_size": 512, "num_heads": 8,
                                   "ffn_hidden_size": 2048, "vocab_size": 32000},
                         "training": {"num_gpus": num_gpus, "global_batch_size": num_gpus, "micro_batch_size": 1,
                                      "sequence_length": 1024}}}


@pytest.mark.parametrize(("text", "num_gpus", "nodes"), [
    ("8x H100 80GB SXM DGX", 8, 1),          # the count before the GPU counts GPUs: the workload's 8 fill one node
    ("GB200 NVL72 rack", 72, 18),            # "rack" without a count: one rack, 18 trays of 4
    ("8xH100", 8, 1),
    ("DGX H100 (8x H100 80GB SXM)", 8, 1),
    ("p4d.24xlarge, 400 Gbps EFA", 8, 1),
    ("GB200 NVL72, 1 rack", 72, 18),         # a count stated: as before
    ("4 nodes of 8x H100", 32, 4),
    ("8x H100 DGX", 16, 2),                  # the workload's GPUs, not the description's, size the cluster
    ("GB200 NVL72", 8, 2),                   # 8 GPUs of a rack-scale system: 2 trays
])
def test_a_described_system_stating_no_node_count_holds_the_workloads_gpus(tmp_path, text, num_gpus, nodes):
    from simulon.config.dc import DatacenterConfig
    from simulon.config.loading import parse_scenario

    sc = parse_scenario(_sized_scenario(text, num_gpus))
    assert sc.datacenter.cluster.num_nodes == nodes
    assert sc.datacenter == DatacenterConfig.model_validate({"from": text, "cluster": {"num_nodes": nodes}})
    path = tmp_path / "sized.yaml"
    path.write_text(yaml.safe_dump(_sized_scenario(text, num_gpus)))
    run = cli("memory", str(path))
    assert run.returncode == 0, run.stderr
    assert "Memory: peak" in run.stdout


@pytest.mark.parametrize(("text", "nodes"), [
    ("GB200 NVL72 rack", 18),
    ("GB300 NVL72 rack", 18),
    ("NVL36 GB200 rack", 9),
    ("GH200 NVL32 rack", 16),
    ("GB200 NVL72 (rack)", 18),
    ("4 nodes of a GB200 NVL72 rack", 4),    # a count stated wins over the bare word
    ("2x GB200 NVL72 rack", 36),
    ("GB200 NVL72 racks", None),             # how many racks is not said
    ("DGX H100 rack", None),                 # a rack of one-node systems holds no number the system says
])
def test_a_rack_without_a_count_is_one_rack_of_a_rack_scale_system(text, nodes):
    assert resolve_hardware(text).nodes == nodes


def test_a_described_systems_gpus_that_fill_no_whole_node_are_refused_saying_the_counts_that_do(tmp_path):
    path = tmp_path / "twelve.yaml"
    path.write_text(yaml.safe_dump(_sized_scenario("8x H100 80GB SXM DGX", 12)))
    run = cli("memory", str(path))
    assert run.returncode == 2
    assert (f"{path}: datacenter.cluster: required: how many nodes (cluster: {{num_nodes: N}}): "
            "workload.training.num_gpus 12 is not a whole number of nodes of 8 GPUs, as 8 (1 node) or 16 (2 nodes) "
            "would be") in run.stderr


def test_a_form_factor_whose_templates_have_another_memory_size_is_refused_naming_that_and_the_way_out():
    with pytest.raises(Unresolved, match=r"no A100 PCIe template has 40 GB \(shipped: a100-pcie-80gb 80 GB.*"
                                         r"gpu: \{from: a100-pcie-80gb, memory_capacity_gb: 40\}"):
        resolve_gpu("A100-PCIE-40GB")  # nvidia-smi's name of the 40 GB PCIe card


@pytest.mark.parametrize("text", ["DGX H100 4x400Gbps", "8x H100 with 4x 400G NICs"])
def test_fewer_nics_than_gpus_are_shared_by_the_gpus_not_split_into_slower_ones(text):
    """Four 400 Gb/s NICs on a DGX H100 were read as eight of 200: the same node total, but a flow capped at 200."""
    hardware = resolve_hardware(text)
    dc = DatacenterConfig.model_validate({**hardware.datacenter, "cluster": {"num_nodes": 2}})
    assert (dc.node.gpus_per_nic, dc.network.scale_out.nic.speed) == (2, 400e9 / 8)


@pytest.mark.parametrize(("text", "nodes"), [
    ("16x H100", 2),           # more than a node's GPUs: the nodes they fill
    ("72x GB200", 18),         # one rack's GPUs, four a tray
    ("8x H100", None),         # one node's GPUs describe the node; the workload sizes the cluster
    ("4x GB200", None),
])
def test_a_count_of_gpus_more_than_a_node_holds_is_the_clusters(text, nodes):
    from simulon.config.dc import described_system

    assert described_system(text).get("cluster") == (None if nodes is None else {"num_nodes": nodes})


@pytest.mark.parametrize("text", ["4x H100", "3x H100 80GB SXM", "12x H100", "6xGB200"])
def test_a_count_of_gpus_no_whole_number_of_nodes_holds_is_refused(tmp_path, text):
    data = _sized_scenario(text, 8)
    path = tmp_path / "odd.yaml"
    path.write_text(yaml.safe_dump(data))
    result = cli("simulate", str(path))
    assert result.returncode == 2
    assert "holds" in result.stderr and "a node" in result.stderr and "Traceback" not in result.stderr
    assert f"{int(text.split('x')[0])}" in result.stderr.split("counts")[1]


@pytest.mark.parametrize(("text", "system"), [
    ("p5en.48xlarge 3200 Gbps EFA", "aws-p5en"),      # "48xlarge" is no count of NICs: 3,200 is the node's total
    ("p4d.24xlarge 400 Gbps EFA", "aws-p4d"),         # was 24 x 400 Gb/s over four NICs
    ("p5.48xlarge 8x H100 3200 Gbps", "aws-p5"),      # "8x H100" counts GPUs
    ("8x H100 3200 Gbps", "dgx-h100"),
    ("GCP A3 Mega a3-megagpu-8G", "gcp-a3-mega"),     # a machine type's "8G" is no 8 Gb/s NIC
])
def test_numbers_of_instance_names_and_gpu_counts_are_no_nic_count_or_rate(text, system):
    hardware = resolve_hardware(text)
    assert hardware.system == system
    assert "network" not in hardware.datacenter  # the system's own NICs, which the stated rate (if any) matches


@pytest.mark.parametrize("text", ["B200 NVL72", "H100 NVL72", "DGX B300 NVL72"])
def test_an_nvlink_domain_the_system_does_not_have_is_refused_not_built_as_its_nodes(text):
    """"B200 NVL72" built DGX B200's 8-GPU domains without a word (nvl72, an NVSwitch alias, passed as a word any
    GPU may carry)."""
    with pytest.raises(Unresolved, match=r"states an NVLink domain of 72 GPUs .* one node of 8 GPUs"):
        resolve_hardware(text)


@pytest.mark.parametrize(("text", "system"), [("GB200 NVL72", "gb200-nvl72"), ("GB300 NVL72", "gb300-nvl72"),
                                             ("GB200 NVL36x2", "gb200-nvl36x2"), ("GH200 NVL32", "gh200-nvl32")])
def test_an_nvlink_domain_its_system_has_resolves(text, system):
    assert resolve_hardware(text).system == system


@pytest.mark.parametrize(("text", "nodes", "gpus"), [
    ("DGX H200 x 3", 3, None),           # a count after the system's name: systems (was read as nothing)
    ("DGX H200 x3", 3, None),
    ("DGX H200 (x3)", 3, None),
    ("DGX H200 ×3", 3, None),
    ("GB200 NVL72 x 2", 36, None),       # two racks of 18 trays
    ("p5.48xlarge x 4", 4, None),
    ("H100 x8", None, 8),                # after the GPU alone: its GPUs, as "8x H100"
    ("GB200 NVL36 x2", None, None),      # the NVL36x2 system's own name, no count
    ("NVL36x2 x 3", 54, None),
])
def test_a_count_written_after_what_it_counts_is_read(text, nodes, gpus):
    hardware = resolve_hardware(text)
    assert (hardware.nodes, hardware.gpus) == (nodes, gpus)


def test_a_count_after_a_system_that_disagrees_with_one_before_it_is_refused():
    with pytest.raises(Unresolved, match="states 2 and 4 nodes"):
        resolve_hardware("4x DGX H100 x 2")


@pytest.mark.parametrize(("text", "nodes"), [
    ("2x GB200 NVL36x2", 36),    # two of the NVL36x2 system, 18 trays each (was read as 2 GPUs)
    ("2x NVL36x2", 36),          # was read as no count
    ("3x gb200-nvl36x2", 54),
])
def test_a_count_before_a_system_whose_name_runs_words_together_counts_systems(text, nodes):
    assert resolve_hardware(text).nodes == nodes


@pytest.mark.parametrize("stem", template_names("datacenter"))
def test_every_shipped_system_takes_a_count_written_after_it(stem):
    hardware = resolve_hardware(f"{stem} x 3")
    assert (hardware.system, hardware.nodes) == (stem, resolve_hardware(f"3 systems of {stem}").nodes)


@pytest.mark.parametrize(("text", "candidates"), [
    ("HGX", "dgx-a100-320gb or dgx-b200 or dgx-b300 or dgx-h100 or hgx-h20 or hgx-h200 or hgx-h800"),  # was hgx-h20
    ("DGX", "dgx-a100 or dgx-a100-320gb or dgx-b200 or dgx-b300 or dgx-cloud-h100 or dgx-h100 or gb200-nvl72 or "
            "gb300-nvl72 or hgx-h200 or hgx-h800"),  # was seven of them, the tie-breaks of one GPU's systems
    ("gcp", "gcp-a3-mega or gcp-a3-ultra or gcp-a4 or gcp-a4x"),
])
def test_a_system_word_shared_by_systems_of_several_gpus_is_refused_naming_them_all(text, candidates):
    with pytest.raises(Unresolved, match=re.escape(f"{text!r} could be system {candidates}, built on different GPUs")):
        resolve_hardware(text)


@pytest.mark.parametrize(("text", "nodes", "gpus"), [
    ("A100-SXM (2 nodes x 8)", 2, None),       # after a count of nodes: a node's GPUs
    ("2 H100 nodes x 8", 2, None),             # ... with the GPU named between (was 2 and 8 nodes: refused)
    ("Titan-RTX x2", None, 2),                 # 'rtx' is the GPU's name, not the system's
    ("mixed RTX-3090x2+Titan-RTXx2", None, None),  # after other GPUs: theirs
])
def test_a_count_written_after_nodes_or_a_gpus_own_words_counts_no_systems(text, nodes, gpus):
    hardware = resolve_hardware(text)
    assert (hardware.nodes, hardware.gpus) == (nodes, gpus)


@pytest.mark.parametrize(("text", "system", "nodes", "gpus"), [
    ("8 H100s", "dgx-h100", None, 8),               # a plural, a count without an "x": was no GPU named
    ("16 H100 GPUs", "dgx-h100", None, 16),          # was no count
    ("8 x NVIDIA H100", "dgx-h100", None, 8),        # a vendor between: was no count
    ("8x H100 x 4", "dgx-h100", None, 32),           # four of eight: was no count (8 and 4 disagreed)
    ("8x H100 80GB SXM5 (x4)", "dgx-h100", None, 32),
    ("2 H100 nodes", "dgx-h100", 2, None),           # nodes follow: a count of nodes, none of GPUs (was neither)
    ("4 DGX H100 servers", "dgx-h100", 4, None),
    ("2 NVIDIA H100 80GB nodes", "dgx-h100", 2, None),
    ("2 GB200 NVL72 racks", "gb200-nvl72", 36, None),
    ("8x A100 single node", "dgx-a100", None, 8),    # ... but "8x" counts GPUs whatever follows
    ("NVLink 4 H100", "dgx-h100", None, None),       # an NVLink generation, no count
    ("dgxh100", "dgx-h100", None, None),             # a system run into its GPU: was no GPU named
    ("GB200NVL72", "gb200-nvl72", None, None),       # a rack's name run into its GPU's: was a stray word
    ("2x GB200NVL72", "gb200-nvl72", 36, None),
    ("MI300Xs", "mi300x-platform", None, None),
])
def test_counts_and_names_are_read_the_way_people_write_them(text, system, nodes, gpus):
    hardware = resolve_hardware(text)
    assert (hardware.system, hardware.nodes, hardware.gpus, hardware.stray) == (system, nodes, gpus, ())


@pytest.mark.parametrize("text", ["8 GPUs per node, H100", "H100, 8 per node", "8x H100 nodes"])
def test_a_count_of_gpus_beside_the_word_node_counts_no_nodes(text):
    """Words between a count and "node" that are not the hardware's name ("GPUs per") make no count of nodes."""
    assert resolve_hardware(text).nodes is None


def test_teslas_brand_is_no_stray_word():
    """NVIDIA's data-center brand of the A100's launch ("Tesla A100") was a word left unaccounted for."""
    assert resolve_hardware("Tesla A100").stray == () and resolve_hardware("Tesla A100 Fermi").stray == ("fermi",)


@pytest.mark.parametrize(("text", "says"), [
    ("Hopper A100", "names the A100, which is no hopper part (hopper: H100, H200, H800, H20, GH200)"),
    ("Ampere H100", "names the H100, which is no ampere part (ampere: A100, 3090)"),  # was the H100
    ("sm_100 B300", "names the B300, which is no sm_100 part (sm_100: B200, GB200)"),  # B300 is sm_103
    ("CDNA3 MI355X", "names the MI355X, which is no cdna3 part (cdna3: MI300X, MI325X)"),  # CDNA 4
])
def test_an_architecture_the_named_gpu_is_not_of_is_refused_not_ignored(text, says):
    with pytest.raises(Unresolved, match=re.escape(f"{text!r} {says}")):
        resolve_hardware(text)


@pytest.mark.parametrize(("text", "gpu"), [
    ("Hopper H200", "h200-sxm"), ("sm_103 B300", "b300"), ("Grace Hopper GH200", "gh200-144gb"),
    ("Blackwell GB200 NVL72", "gb200"), ("CDNA3 MI325X", "mi325x"), ("Ampere RTX 3090", "rtx-3090"),
])
def test_an_architecture_beside_a_gpu_of_it_is_read_as_that_gpu(text, gpu):
    assert resolve_hardware(text).gpu == gpu


@pytest.mark.parametrize(("text", "gpu"), [
    ("Blackwell sm_103", "b300"),   # was refused: "names parts of two architectures: B200 (blackwell) and B300"
    ("sm_103 Blackwell", "b300"),
    ("Ampere sm_80", "a100-sxm-80gb"),
])
def test_two_architectures_of_one_part_name_that_part(text, gpu):
    assert resolve_hardware(text).gpu == gpu


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["{}x H100", "H100 {}GB", "{} nodes of 8x H100", "DGX H100 x {}", "GB200 NVL72, {} racks",
                        "GB200 NVL{}", "DGX H100, {} Tbps", "p5.48xlarge {}"]),
       st.integers(16, 5000))
def test_a_description_with_a_number_longer_than_any_count_is_refused_in_its_own_words(form, digits):
    """A count of 5,000 digits ('GB200 NVL72, 99...9 racks') reached int(), and Python's refusal ('Exceeds the limit
    (4300 digits) for integer string conversion ... use sys.set_int_max_str_digits()') was the scenario's message;
    under 4,300 digits some forms read the number (a NIC rate of infGbps)."""
    text = form.format("9" * digits)
    with pytest.raises(Unresolved, match=f"holds a number of {digits:,} digits"):
        resolve_hardware(text)


def test_a_framework_with_a_version_longer_than_any_is_refused_naming_the_field():
    data = yaml.safe_load((ROOT / "examples" / "scenario.yaml").read_text())
    data["workload"]["framework"] = "NeMo " + "9" * 5000
    with pytest.raises(ConfigError, match=r"^s\.yaml: workload\.framework: 'NeMo 9+\.\.\. \([0-9,]+ characters\) holds "
                                          r"a number of 5,000 digits"):
        parse_scenario(data, "s.yaml")
    data["workload"]["framework"] = "NeMo 24.07"
    assert parse_scenario(data, "s.yaml").workload.framework == "megatron"
