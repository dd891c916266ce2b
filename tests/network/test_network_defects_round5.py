"""Round 5 of network and collective defects: a lone collective too large for the memory is refused before it is
built, NVLS is refused where NCCL leaves it off, a fabric's switches must have the ports it gives them, and the
topology summary counts the links the fabric builds."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from helpers import cli
from simulon.collective.decompose import flow_count, flow_set
from simulon.collective.shape import GroupShape
from simulon.collective.tuner import CollectivePlan
from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.dag.size import TooLarge
from simulon.network.calibration import LinkModel
from simulon.network.draw import _links
from simulon.network.summary import TopologySummary
from simulon.network.topology import Topology
from simulon.pipeline import collective_sweep

A2A = CollType.AllToAll


def dgx_h100(nodes: int, scale_out: dict | None = None) -> DatacenterConfig:
    return DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": nodes},
                                            **({"network": {"scale_out": scale_out}} if scale_out else {})})


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "dc.yaml"
    path.write_text(text)
    return path


def assert_bad_input(proc, *pieces: str) -> str:
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line, line
    for piece in pieces:
        assert piece in line, (piece, line)
    return line


# ---- A: a lone collective's flows counted before they are built ----

@pytest.mark.parametrize(("nodes", "algorithm"), [(1, "p2p"), (2, "p2p"), (4, "p2p"), (2, "pxn")])
def test_an_all_to_all_is_counted_without_building_it_at_the_flows_it_builds(nodes, algorithm):
    shape = GroupShape.of(tuple(range(8 * nodes)), 8)
    for channels in (1, 4, 32):
        built = len(flow_set(A2A, range(8 * nodes), 2**20, channels, algorithm, shape=shape, one_period=True))
        assert flow_count(A2A, shape, 2**20, channels, algorithm, one_period=True) == built


def test_an_all_to_all_too_large_for_the_memory_limit_is_refused_before_it_is_built():
    dc = dgx_h100(64)  # 512 GPUs: 261,632 flows a channel
    with pytest.raises(TooLarge, match=r"AllToAll of 1MiB over 512 GPUs makes 261,632 flows.*--max-memory"):
        collective_sweep(dc, "alltoall", range(512), [2**20], memory_limit=100e6)


def test_the_collective_command_refuses_a_run_over_max_memory_with_exit_2_naming_the_scenario(tmp_path):
    """As simulate's refusal does: 'error: FILE: the run is too large ...' (collective's named no file)."""
    path = write(tmp_path, "datacenter:\n  from: dgx-h100\n  cluster: {num_nodes: 4}\n")
    proc = cli("collective", str(path), "--op", "alltoall", "--sizes", "1MiB", "--max-memory", "10MB")
    line = assert_bad_input(proc, "too large for the memory", "992 flows", "10.0 MB are available", "--max-memory")
    assert line.startswith(f"error: {path}: the run is too large"), line
    ran = cli("collective", str(path), "--op", "alltoall", "--sizes", "1MiB", "--max-memory", "1GB", "--json")
    assert ran.returncode == 0, ran.stderr


# ---- B: NVLS (and NVLS-tree) needs more than two GPUs of a communicator in the domain ----

def test_a_fixed_nvls_over_two_gpus_of_a_domain_is_refused_as_nccl_leaves_nvls_off():
    plan = CollectivePlan(Topology.from_datacenter(dgx_h100(1), model=LinkModel.ideal()), "nvls", "auto", None)
    for ctype in (CollType.AllReduce, CollType.AllGather, CollType.ReduceScatter):
        with pytest.raises(ValueError, match=r"nvls needs more than 2 GPUs in the NVLink domain.*has 2"):
            plan.choose(ctype, (0, 1), 2**20)
        assert plan.choose(ctype, (0, 1, 2), 2**20).algorithm == "nvls"


def test_a_fixed_nvls_tree_over_two_gpus_a_domain_is_refused_as_nvls_is():
    """NVLS-tree reduces in each domain's switch first: NCCL leaves NVLS off there too (it ran, 2 GPUs a node)."""
    plan = CollectivePlan(Topology.from_datacenter(dgx_h100(2), model=LinkModel.ideal()), "nvls_tree", "auto", None)
    with pytest.raises(ValueError, match=r"nvls_tree .* more than 2 GPUs a domain, and this group has 2"):
        plan.choose(CollType.AllReduce, (0, 1, 8, 9), 2**20)
    assert plan.choose(CollType.AllReduce, (0, 1, 2, 8, 9, 10), 2**20).algorithm == "nvls_tree"


def test_the_collective_command_refuses_nvls_on_two_gpus_with_exit_2(tmp_path):
    path = write(tmp_path, "datacenter:\n  from: dgx-h100\n  cluster: {num_nodes: 1}\n")
    proc = cli("collective", str(path), "--group", "0-1", "--algorithm", "nvls", "--sizes", "1MiB")
    assert_bad_input(proc, "--algorithm", "nvls needs more than 2 GPUs")


# ---- C: switches with fewer ports than the fabric gives them ----

@pytest.mark.parametrize(("topology", "ports", "field"), [
    ({"tiers": 2, "nics_per_leaf": 32, "spines": 4}, 16, "topology.nics_per_leaf"),
    ({"tiers": 2, "nics_per_leaf": 128, "spines": 4}, None, "topology.nics_per_leaf"),
    ({"tiers": 3, "nics_per_leaf": 8, "spines": 8, "leaves_per_pod": 48, "cores": 32}, None,
     "topology.leaves_per_pod"),
    # 64 NIC ports and, non-blocking, 64 uplinks: 128 ports on a 64-port leaf (before, its uplinks went uncounted)
    ({"tiers": 2, "nics_per_leaf": 64, "spines": 4}, None, "topology.nics_per_leaf"),
    # a spine of a pod of 24 leaves of 8 uplinks over 4 spines: 48 cables down and 48 up
    ({"tiers": 3, "nics_per_leaf": 8, "spines": 4, "leaves_per_pod": 24, "cores": 4}, None,
     "topology.leaves_per_pod"),
])
def test_a_fabric_whose_switches_need_more_ports_than_the_switch_has_is_refused(topology, ports, field):
    switch = {"from": "quantum-2-qm9700", **({"port_count": ports} if ports else {})}
    with pytest.raises(ValidationError, match=rf"{field}.*switch \(Quantum-2-QM9700\) has {ports or 64}"):
        dgx_h100(4, {"switch": switch, "topology": topology})


def test_a_fabric_within_the_switch_ports_still_loads():
    dgx_h100(4, {"topology": {"tiers": 2, "nics_per_leaf": 32, "spines": 4}})  # 32 down, 32 up
    dgx_h100(4, {"topology": {"tiers": 2, "nics_per_leaf": 48, "spines": 4, "oversubscription": 3.0}})  # 48, 16
    # Alibaba HPN: 128 half-rate (200G) ports of dual-ToR NICs per leaf, two to a switch port through breakouts,
    # and 120 half-rate uplinks (60 at 400G, an oversubscription of 128:120) on its 51.2 Tb/s ToR: 62 ports of 800G
    tomahawk = {"from": "tomahawk-5"}
    dgx_h100(16, {"topology": "alibaba-hpn", "switch": tomahawk})
    with pytest.raises(ValidationError, match=r"a leaf needs 128 NIC ports and 120 uplinks.*has 64"):
        dgx_h100(16, {"topology": "alibaba-hpn"})  # on a 64-port 400G QM9700 it needs 124 of them
    with pytest.raises(ValidationError, match=r"a leaf needs 128 NIC ports.*has 64"):
        dgx_h100(16, {"topology": {"from": "alibaba-hpn", "dual_tor": False, "planes": 1}, "switch": tomahawk})
    dgx_h100(8, {"topology": {"tiers": 3, "nics_per_leaf": 8, "spines": 8, "leaves_per_pod": 32, "cores": 32}})


def test_the_topology_command_names_the_file_and_field_of_a_leaf_with_too_few_ports(tmp_path):
    path = write(tmp_path, "datacenter:\n  from: dgx-h100\n  cluster: {num_nodes: 4}\n  network:\n    scale_out:\n"
                           "      switch: {from: quantum-2-qm9700, port_count: 16}\n"
                           "      topology: {tiers: 2, nics_per_leaf: 32, spines: 4}\n")
    proc = cli("topology", str(path))
    assert_bad_input(proc, "dc.yaml", "scale_out.topology.nics_per_leaf", "32 NIC ports", "has 16")


# ---- D: the summary counts the uplinks the fabric builds ----

@pytest.mark.parametrize("routing", ["ecmp", "adaptive"])
def test_the_summary_counts_one_spine_link_per_leaf_uplink_port_not_every_spine(routing):
    dc = dgx_h100(4, {"topology": {"tiers": 2, "nics_per_leaf": 8, "spines": 16, "routing": routing}})
    topo = Topology.from_datacenter(dc, model=LinkModel.ideal())
    spine = TopologySummary.of(topo).tiers[2]
    assert topo.fabric.leaf_uplinks == 8
    assert (spine.switches, spine.links) == (16, 4 * 8)      # 4 leaves, 8 uplink ports each
    drawn = [(leaf, spine) for below, leaf, above, spine in _links(topo) if (below, above) == ("leaf", "spine")]
    assert len(drawn) == 4 * 8 and {spine for _, spine in drawn} == set(range(8))


def test_the_dgx_a100_320gb_builds_the_superpods_fabric_its_40_port_leaves_can_hold():
    """20 nodes a leaf, 20 ports down and 20 up, as the DGX A100 (640 GB); it had 32 NICs a leaf, 64 ports."""
    for nodes, fabric in ((64, "dgx-superpod-hdr"), (128, "dgx-superpod-hdr-3-tier")):
        dc = DatacenterConfig.model_validate({"from": "dgx-a100-320gb", "cluster": {"num_nodes": nodes}})
        topology = dc.network.scale_out.sized(nodes * 8).topology
        assert (topology.name, topology.nics_per_leaf) == (fabric, 20)


def test_a_refused_fabric_template_names_the_switch_it_is_built_of_and_that_switch_fits():
    with pytest.raises(ValidationError, match=r"spectrum-x fabric is built of \{from: spectrum-4-sn5600\}"):
        dgx_h100(64, {"topology": "spectrum-x"})  # DGX H100's own QM9700: 64 ports for 128 half-rate links
    dgx_h100(64, {"topology": "spectrum-x", "switch": {"from": "spectrum-4-sn5600"}})


def test_a_fabrics_switch_must_be_a_shipped_switch():
    with pytest.raises(ValidationError, match=r"switch[\s\S]*quantum-9"):
        dgx_h100(4, {"topology": {"tiers": 2, "nics_per_leaf": 8, "spines": 4, "switch": "quantum-9"}})
