"""Heterogeneous datacenters: `node_groups` in place of `cluster` and `node`, group templates, per-rank accessors,
stage-to-group placement, and the refusal of bad input naming its field."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import ROOT, cli
from simulon.config import ConfigError, DatacenterConfig, ScenarioConfig, load_scenario
from simulon.config.loading import parse_scenario

EXAMPLE = ROOT / "examples" / "hetero_h100_a100.yaml"

FABRIC = {"scale_out": {"topology": {"tiers": 2, "rail_optimized": True, "nics_per_leaf": 16, "spines": 8}}}


def mixed(h100_nodes: int = 2, a100_nodes: int = 2, **extra) -> dict:
    return {"node_groups": [{"from": "dgx-h100", "num_nodes": h100_nodes},
                            {"from": "dgx-a100", "num_nodes": a100_nodes}], "network": FABRIC, **extra}


def dc(data: dict) -> DatacenterConfig:
    return DatacenterConfig.model_validate(data)


def scenario_error(data: dict) -> str:
    with pytest.raises(ConfigError) as info:
        parse_scenario(data, "s.yaml")
    return str(info.value)


# --- the two forms ---------------------------------------------------------------------------------

def test_the_single_node_type_form_is_one_group_with_the_datacenter_network():
    d = dc({"from": "dgx-h100", "cluster": {"num_nodes": 3}})
    (group,) = d.groups
    assert (group.num_nodes, group.first_gpu, group.num_gpus) == (3, 0, 24)
    assert group.node is d.node and group.nic is d.network.scale_out.nic
    assert group.scale_up is d.network.scale_up
    assert not d.heterogeneous and d.num_gpus == 24 and d.num_nodes == 3
    assert d.placement().uniform and d.placement().group.tolist() == [0] * 24


def test_a_group_from_a_system_template_takes_its_node_scale_up_and_nic():
    d = dc(mixed(2, 3))
    h100, a100 = d.groups
    assert d.heterogeneous and d.num_gpus == 40 and d.node is None and d.cluster is None
    assert (h100.gpu.name, a100.gpu.name) == ("H100-SXM5-80GB", "A100-SXM4-80GB")
    assert (h100.scale_up_bandwidth, a100.scale_up_bandwidth) == (450e9, 300e9)
    assert (h100.nic.speed, a100.nic.speed) == (50e9, 25e9)
    assert (h100.first_gpu, a100.first_gpu) == (0, 16)
    assert (h100.name, a100.name) == ("dgx-h100", "dgx-a100")


def test_a_node_from_a_system_template_takes_only_its_node_and_keys_beside_it_override():
    d = dc({"from": "dgx-h100", "node_groups": [
        {"num_nodes": 1, "node": {"from": "dgx-a100", "gpu": {"from": "a100-sxm-40gb"}}},
        {"num_nodes": 1, "node": {"from": "dgx-h100"},
         "network": {"scale_out": {"nic": {"from": "connectx-8-800g"}}}}]})
    first, second = d.groups
    assert first.gpu.memory_capacity_gb == 40
    assert first.nic.name == d.network.scale_out.nic.name == "ConnectX-7-NDR"  # the datacenter's NIC
    assert first.scale_up is d.network.scale_up                                # and scale-up
    assert second.nic.speed == 100e9


def test_per_rank_accessors_follow_the_groups_in_order():
    p = dc(mixed(1, 2)).placement()
    assert p.group.tolist() == [0] * 8 + [1] * 16
    assert p.gpu_of(7).name.startswith("H100") and p.gpu_of(8).name.startswith("A100")
    assert p.ranks_of(1).tolist() == list(range(8, 24))
    assert p.per_rank(lambda g: g.index) == p.group.tolist()


def test_the_mean_peak_is_the_sum_of_the_gpus_peaks_over_their_number():
    d = dc(mixed(1, 3))
    p = d.placement()
    h, a = (g.gpu.peak_flops("bf16") for g in d.groups)
    assert p.peak_flops("bf16") == pytest.approx((8 * h + 24 * a) / 32)
    assert dc({"from": "dgx-h100", "cluster": {"num_nodes": 5}}).placement().peak_flops("bf16") == h


def test_single_node_is_the_node_of_one_type_and_refuses_several():
    assert dc({"from": "dgx-h100", "cluster": {"num_nodes": 1}}).single_node("x").gpus_per_node == 8
    one = dc({"node_groups": [{"from": "dgx-h100", "num_nodes": 1}, {"from": "dgx-h100", "num_nodes": 2}],
              "network": FABRIC})
    assert one.single_node("x").gpu.name.startswith("H100")
    with pytest.raises(ValueError, match=r"the strategy search works on one GPU type.*H100.*A100"):
        dc(mixed()).single_node("the strategy search")


def test_single_node_names_what_differs_between_groups_of_one_gpu_model():
    """An H100 group of 40 GB beside one of 80 GB: the message named one type ('node groups of H100-SXM5-80GB')."""
    two_sizes = dc({"node_groups": [{"from": "dgx-h100", "num_nodes": 1},
                                    {"from": "dgx-h100", "num_nodes": 1,
                                     "node": {"gpu": {"from": "H100", "memory_capacity_gb": 40}}}],
                    "network": FABRIC})
    with pytest.raises(ValueError) as refused:
        two_sizes.single_node("the strategy search")
    assert str(refused.value) == (
        "the strategy search works on one node type; this datacenter's node groups 0 and 1 (dgx-h100, dgx-h100), "
        "both of H100-SXM5-80GB, differ in node.gpu.memory_capacity_gb (80.0 against 40.0)")


def test_the_example_loads_and_dumps_back_to_the_same_datacenter():
    sc = load_scenario(EXAMPLE)
    again = ScenarioConfig.model_validate(sc.model_dump(exclude_none=True))
    assert again.datacenter.groups == sc.datacenter.groups


# --- placement ---------------------------------------------------------------------------------------

def example(**training) -> dict:
    data = yaml.safe_load(EXAMPLE.read_text())
    data["workload"]["training"].update(training)
    return data


def test_stage_groups_put_each_stage_on_its_group():
    sc = parse_scenario(example(stage_groups=[1, 0]))
    assert sc.placement().group.tolist() == [1] * 16 + [0] * 16
    assert parse_scenario(example()).placement().group.tolist() == [0] * 16 + [1] * 16


@pytest.mark.parametrize(("stage_groups", "expected"), [
    ([0], "1 entries, but pp = 2"),
    ([0, 2], "stage 1: group 2 does not exist"),
    ([0, 0], "the stages on group 0 (dgx-h100) need 32 GPUs, but it has 16"),
    ([[0, 1, 1], 1], "stage 0: 3 groups, but dp = 2"),
    ([[0, 0], [0, 1]], "the stages on group 0 (dgx-h100) need 24 GPUs, but it has 16"),
    ([[0, 2], 1], "stage 0: group 2 does not exist"),
    ([0, -1], "stage 1: group -1 does not exist"),
])
def test_a_bad_stage_to_group_map_is_refused_naming_the_field(stage_groups, expected):
    message = scenario_error(example(stage_groups=stage_groups))
    assert message.startswith("s.yaml: workload.training.stage_groups: "), message
    assert expected in message


def test_each_data_parallel_replica_of_a_stage_may_have_its_own_group():
    """As Sailor's plans do: a stage's replicas on nodes of different GPU types."""
    sc = parse_scenario(example(stage_groups=[[0, 1], [1, 0]]))
    assert sc.placement().group.tolist() == [0] * 8 + [1] * 8 + [1] * 8 + [0] * 8
    assert parse_scenario(example(stage_groups=[[1, 1], 0])).placement().group.tolist() == [1] * 16 + [0] * 16


def test_stages_that_split_a_node_cannot_be_mapped_to_groups():
    data = example(stage_groups=[0, 0, 0, 0, 1, 1, 1, 1])
    data["workload"]["parallelism"].update(tp=4, pp=8, dp=1, layers_per_stage=None)
    assert "not whole nodes of 8" in scenario_error(data)


# --- bad input ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("datacenter", "field", "expected"), [
    ({"from": "dgx-h100", "cluster": {"num_nodes": 1}, "node_groups": [{"from": "dgx-a100", "num_nodes": 1}]},
     "datacenter.node_groups", "not both (found cluster)"),
    ({"network": FABRIC}, "datacenter.cluster", "required (or give node_groups"),
    ({"node_groups": [], "network": FABRIC}, "datacenter.node_groups", "at least one group"),
    ({"node_groups": [{"from": "dgx-h100", "num_nodes": 1},
                      {"from": "dgx-a100", "num_nodes": 1, "node": {"gpus_per_node": 4}}], "network": FABRIC},
     "datacenter.node_groups[1].node.gpus_per_node", "4, but group 0 has 8"),
    ({"node_groups": [{"from": "dgx-h100", "num_nodes": 1},
                      {"from": "dgx-a100", "num_nodes": 1, "node": {"gpus_per_nic": 2}}], "network": FABRIC},
     "datacenter.node_groups[1].node.gpus_per_nic", "2, but group 0 has 1"),
    ({"node_groups": [{"from": "dgx-h100", "num_nodes": 1, "node": {"gpus_per_nic": 3}}], "network": FABRIC},
     "datacenter.node_groups[0].node", "gpus_per_nic (3) must divide gpus_per_node (8)"),
    ({"node_groups": [{"from": "dgx-h100", "num_nodes": 1},
                      {"from": "dgx-a100", "num_nodes": 1, "network": {"scale_up": {"domain_gpus": 16}}}],
      "network": FABRIC},
     "datacenter.node_groups[1].network.scale_up.domain_gpus", "16, but group 0 has 8"),
    ({"node_groups": [{"num_nodes": 1, "node": {"gpus_per_node": 2,
                                                "gpu": {"from": "h100-pcie", "nvlink_bandwidth": None}}},
                      {"from": "dgx-a100", "num_nodes": 1}], "network": FABRIC},
     "datacenter.network.scale_up.switch.port_speed", "no NVLink bandwidth"),
    ({"node_groups": [{"num_nodes": 2, "node": {"gpus_per_node": 1, "gpu": "H100"}}]},
     "datacenter.network.scale_out.nic", "needs a NIC"),
    ({"node_groups": [{"from": "dgx-nonesuch", "num_nodes": 1}]}, "datacenter.node_groups[0]",
     "unknown datacenter template 'dgx-nonesuch'"),
    ({"node_groups": [{"num_nodes": 1, "node": {"from": "h100-nonesuch"}}]}, "datacenter.node_groups[0].node",
     "read as a description it names dgx-h100, but not 'nonesuch'"),
])
def test_bad_node_groups_are_refused_naming_the_field(datacenter, field, expected):
    data = example()
    data["datacenter"] = datacenter
    message = scenario_error(data)
    assert message.startswith(f"s.yaml: {field}"), message
    assert expected in message, message


def test_bad_node_groups_are_exit_2_with_one_line_on_the_cli(tmp_path: Path):
    data = example()
    data["datacenter"]["node_groups"][1]["node"] = {"gpus_per_node": 4}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    run = cli("simulate", str(path))
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert "node_groups[1].node.gpus_per_node" in run.stderr and "bad.yaml" in run.stderr


GROUP_FIELDS = {
    "num_nodes": st.one_of(st.integers(max_value=0), st.just("two"), st.none(), st.floats(0.5, 3.5)),
    "node": st.one_of(st.just({"gpus_per_node": 0, "gpu": "H100"}), st.just({"gpus_per_node": 8, "gpu": "H100",
                                                                               "gpus_per_nic": 5}),
                      st.just({"gpu": "no-such-gpu"}), st.just([]), st.just("no-such-system"), st.none()),
    "network": st.one_of(st.just({"scale_out": {"switch": {"from": "tomahawk-5"}}}), st.just({"bogus": 1}),
                         st.just({"scale_up": {"kind": "torus"}}), st.just(3)),
    "bogus_key": st.just(1),
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(sorted(GROUP_FIELDS)), data=st.data(), which=st.integers(0, 1))
def test_any_bad_group_field_is_a_config_error_naming_that_group(field, data, which):
    value = data.draw(GROUP_FIELDS[field])
    scenario = example()
    groups = scenario["datacenter"]["node_groups"]
    groups[which] = {**groups[which], field: value}
    message = scenario_error(copy.deepcopy(scenario))
    assert message.startswith("s.yaml: datacenter.node_groups"), message
    assert f"[{which}]" in message, message


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-2, 3), min_size=0, max_size=4))
def test_any_stage_to_group_map_is_taken_or_refused_naming_the_field(stage_groups):
    data = example(stage_groups=stage_groups)
    valid = len(stage_groups) == 2 and sorted(stage_groups) == [0, 1]
    if valid:
        sc = parse_scenario(data, "s.yaml")
        assert sc.placement().group.tolist() == np.repeat(stage_groups, 16).tolist()
    else:
        assert scenario_error(data).startswith("s.yaml: workload.training.stage_groups: ")


@pytest.mark.parametrize(("nodes", "near"), [(19, "18 or 20"), (23, "22 or 24")])
def test_a_node_count_that_leaves_no_two_trays_of_an_nvlink_rack_together_is_refused(tmp_path, nodes, near):
    path = tmp_path / "trays.yaml"
    path.write_text(yaml.safe_dump({"datacenter": {"from": "gb200-nvl72", "cluster": {"num_nodes": nodes}},
                                    "workload": {"model": "llama3-8b", "training": {
                                        "num_gpus": 4 * nodes, "global_batch_size": 4 * nodes,
                                        "micro_batch_size": 1, "sequence_length": 1024}}}))
    result = cli("simulate", str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert re.search(rf"datacenter.cluster.num_nodes: {nodes} nodes of 4 GPUs .* use {near} nodes", result.stderr)


@pytest.mark.parametrize(("nodes", "domain"), [(18, 72), (20, 40), (38, 8), (2, 72), (36, 72)])
def test_a_node_count_some_segment_divides_keeps_its_racks_nvlink(nodes, domain):
    from simulon.config.dc import DatacenterConfig

    assert DatacenterConfig.model_validate({"from": "gb200-nvl72",
                                            "cluster": {"num_nodes": nodes}}).domain_gpus == domain


def test_a_group_from_a_description_stating_its_nodes_takes_them_unless_num_nodes_is_given():
    """`from: "DGX H100 x 2"` was refused, "num_nodes: required field is missing", the count it states unread."""
    from simulon.config.dc import NodeGroup

    assert NodeGroup.model_validate({"from": "DGX H100 x 2"}).num_nodes == 2
    assert NodeGroup.model_validate({"from": "2x GB200 NVL72"}).num_nodes == 36  # 2 racks of 18 trays
    assert NodeGroup.model_validate({"from": "4x DGX H100", "num_nodes": 1}).num_nodes == 1
    with pytest.raises(ValueError, match="num_nodes"):
        NodeGroup.model_validate({"from": "8x H100"})  # one node's GPUs: how many nodes is not said
