"""A search's datacenter that states no node count holds the GPUs the scenario asks for (config.dc's rule), though
the search validates the scenario on one GPU."""

from __future__ import annotations

import pytest
import yaml

from helpers import cli, seed_dict
from simulon.config.errors import ConfigError
from simulon.search.run import Search, load_search_scenario

SCENARIO = """\
datacenter: {{from: "{system}"}}
workload:
  framework: megatron
  model: llama-3.2-1b
  training: {{num_gpus: {gpus}, global_batch_size: 32, sequence_length: 2048}}
"""


@pytest.mark.parametrize(("system", "gpus", "nodes"), [("8x H100 80GB SXM DGX", 16, 2), ("dgx-b200", 8, 1),
                                                       ("GB200 NVL72", 72, 18)])
def test_a_search_sizes_a_datacenter_without_a_node_count_to_the_gpus_it_asks_for(tmp_path, system, gpus, nodes):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(system=system, gpus=gpus))
    sc, asked = load_search_scenario(path)
    assert (asked, sc.datacenter.cluster.num_nodes, sc.datacenter.num_gpus) == (gpus, nodes, gpus)


def test_a_search_asking_for_no_count_of_a_datacenter_without_one_is_refused_saying_what_a_node_holds(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(system="dgx-h100", gpus=8).replace("num_gpus: 8, ", ""))
    with pytest.raises(ConfigError, match=r"datacenter\.cluster: .*how many nodes .*a node holds 8 GPUs"):
        load_search_scenario(path)


@pytest.mark.parametrize(("system", "gpus", "tensor_sizes"), [("GB200 NVL72", 72, (1, 2, 4, 8)),
                                                              ("dgx-h100", 16, (1, 2, 4, 8)),
                                                              ("dgx-h100", 8, (1, 2, 4, 8))])
def test_a_search_tries_tensor_parallelism_up_to_the_nvlink_domain_not_the_node(tmp_path, system, gpus, tensor_sizes):
    """A GB200 NVL72 tray holds 4 GPUs, its NVLink domain 72: tp 8 spans two trays over the NVSwitch (Megatron keeps
    a tensor-parallel group inside one NVLink domain) and was never tried. Llama 3.2 1B's 32 heads and 8 key/value
    heads cap tp at 8."""
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(system=system, gpus=gpus))
    sc, asked = load_search_scenario(path)
    assert Search(sc, asked).space.tried()["tp"] == tensor_sizes


def test_a_scenario_without_a_workload_is_refused_naming_the_file_and_the_block(tmp_path):
    """search said 'the scenario has no workload block to search strategies for', naming no file, where simulate,
    memory, sweep and plan-hetero name it ('FILE: workload: required to ...')."""
    path = tmp_path / "dc.yaml"
    path.write_text(yaml.safe_dump({"datacenter": seed_dict()["datacenter"]}))
    run = cli("search", str(path), "--no-cache")
    assert run.returncode == 2 and run.stderr == f"error: {path}: workload: required to search parallel strategies\n"
