"""The seed API's decompose_collective: groups over several nodes (gpus_per_node) for the algorithms that work
across nodes, refusal of sizes and ranks that are not sizes and ranks, and the algorithm that ran named in the
result; and two commands' messages around it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import cli
from simulon.collective.decompose import decompose_collective


@pytest.mark.parametrize("algorithm", ["tree", "collnet_direct", "collnet_chain", "nvls_tree", "hierarchical"])
def test_algorithms_across_nodes_decompose_a_group_placed_on_its_nodes(algorithm):
    ranks = list(range(16))
    result, _ = decompose_collective("AllReduce", ranks, 2**20, 4, algorithm, gpus_per_node=8)
    assert result.algorithm == algorithm
    assert {f.channel for f in result.flows} == set(range(4))
    assert {f.src for f in result.flows} | {f.dst for f in result.flows} <= {*ranks, -1}  # -1: a switch
    crossing = [f for f in result.flows if min(f.src, f.dst) >= 0 and f.src // 8 != f.dst // 8]
    assert crossing or algorithm in ("collnet_direct", "collnet_chain")  # those cross through the switch


def test_inside_one_node_the_algorithms_across_nodes_are_still_refused():
    with pytest.raises(ValueError, match="reduces across nodes"):
        decompose_collective("AllReduce", list(range(8)), 2**20, 1, "collnet_direct", gpus_per_node=8)


@given(size=st.sampled_from([math.nan, math.inf, -1.0, 0.0]))
def test_a_size_that_is_not_a_positive_finite_byte_count_is_refused(size):
    with pytest.raises(ValueError, match="is not a positive finite number of bytes"):
        decompose_collective("AllReduce", [0, 1, 2, 3], size)


@settings(max_examples=30)
@given(bad=st.one_of(st.floats(-10, 10).filter(lambda x: x != int(x) if math.isfinite(x) else True),
                     st.integers(-100, -1)))
def test_a_rank_that_is_not_a_whole_number_from_0_is_refused(bad):
    with pytest.raises(ValueError, match="group_ranks holds"):
        decompose_collective("AllReduce", [bad, 100, 101], 1024)


@pytest.mark.parametrize("ctype", ["AllToAll", "SendRecv"])
def test_a_point_to_point_collective_names_p2p_as_the_algorithm_that_ran(ctype):
    result, _ = decompose_collective(ctype, [0, 1, 2, 3], 2**20, 1)
    assert result.algorithm == "p2p"
    assert decompose_collective(ctype, [0, 1, 2, 3], 2**20, 1, "p2p")[0].flows == result.flows


def test_a_collective_on_a_datacenter_of_one_gpu_names_the_datacenter_not_an_option(tmp_path):
    path = tmp_path / "one.yaml"
    path.write_text("datacenter:\n  from: dgx-h100\n  node: {gpus_per_node: 1}\n  cluster: {num_nodes: 1}\n")
    proc = cli("collective", str(path), "--sizes", "1MiB")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (f"error: {path}: datacenter: a collective needs at least two GPUs, and the "
                                   "datacenter has 1")


def test_a_fabric_the_scenario_replaces_is_not_held_to_its_nic_speed(tmp_path):
    """800G NICs on a DGX H100 under its own single switch: the template's NDR SuperPOD fabric, which cannot hold
    them, was refused though unused."""
    path = tmp_path / "dc.yaml"
    path.write_text("datacenter:\n  from: dgx-h100\n  cluster: {num_nodes: 4}\n  network:\n    scale_out:\n"
                    "      topology: single-switch\n      nic: {speed: 800Gbps}\n")
    proc = cli("topology", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "scale-out 1,600 GB/s" in proc.stdout
