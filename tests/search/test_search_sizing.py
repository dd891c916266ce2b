"""A search's datacenter that states no node count holds the GPUs the scenario asks for (config.dc's rule), though
the search validates the scenario on one GPU."""

from __future__ import annotations

import pytest

from simulon.config.errors import ConfigError
from simulon.search.run import load_search_scenario

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
