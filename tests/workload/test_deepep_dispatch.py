"""MoE token dispatch through DeepEP (training.moe_dispatcher: deepep) with node-limited routing (model.moe
num_groups / group_topk): the fields, their HuggingFace names, the calls the workload emits, the DAG's size, and a
folded step on a rail-optimized fabric against the full expansion."""

from __future__ import annotations

import json
from functools import cache

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.collective.deepep import Routing, routed_name
from simulon.collective.types import CollType
from simulon.compute.populate import populate
from simulon.config.common import FieldError
from simulon.config.dc import FabricSpec
from simulon.config.errors import ConfigError
from simulon.config.hf import model_from_hf
from simulon.config.loading import parse_scenario
from simulon.config.scenario import ScenarioConfig
from simulon.config.workload import ModelSpec, MoESpec
from simulon.pipeline import build_dag, run_populated, step_size
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import CollectiveOp

MOE = {"num_experts": 16, "top_k": 2, "num_groups": 4, "group_topk": 2}
RAILS = {"tiers": 2, "rail_optimized": True, "nics_per_leaf": 8, "spines": 2}
FABRICS = {"one unit": RAILS, "two units": {**RAILS, "nics_per_leaf": 4}}


def scenario(dispatcher: str, fabric: str = "one unit") -> ScenarioConfig:
    """8 nodes of 4 GPUs, two stages of 4 nodes, expert parallelism over a stage's 16 GPUs."""
    sc = gpt_scenario(nodes=8, gpus_per_node=4, pp=2, ep=16, layers=4, moe=MOE, gbs=32)
    net = sc.datacenter.network
    scale_out = net.scale_out.model_copy(update={"topology": FabricSpec.model_validate(FABRICS[fabric])})
    dc = sc.datacenter.model_copy(update={"network": net.model_copy(update={"scale_out": scale_out})})
    training = sc.workload.training.model_copy(update={"moe_dispatcher": dispatcher})
    return sc.model_copy(update={"datacenter": dc, "workload": sc.workload.model_copy(update={"training": training})})


def moe_block(**fields) -> dict:
    return {"num_experts": 64, "top_k": 4, **fields}


@settings(max_examples=40, deadline=None)
@given(groups=st.integers(1, 80), group_topk=st.integers(1, 80), top_k=st.integers(1, 64))
def test_routing_fields_that_do_not_fit_are_refused_naming_the_field(groups, group_topk, top_k):
    block = moe_block(num_groups=groups, group_topk=group_topk, top_k=top_k)
    if 64 % groups:
        field = "num_groups"
    elif group_topk > groups:
        field = "group_topk"
    elif top_k > group_topk * 64 // groups:
        field = "top_k"
    else:
        assert MoESpec.model_validate(block).routable_experts == group_topk * 64 // groups
        return
    with pytest.raises(ValueError, match=f"{field}: ") as error:
        MoESpec.model_validate(block)
    assert isinstance(error.value.errors()[0]["ctx"]["error"], FieldError)
    assert error.value.errors()[0]["ctx"]["error"].field == field


def test_a_scenario_with_groups_not_dividing_the_experts_is_bad_input_naming_the_field():
    data = yaml.safe_load("""
datacenter: {from: hgx-h800, cluster: {num_nodes: 8}}
workload:
  model: {from: deepseek-v3, moe: {num_experts: 256, top_k: 8, num_groups: 3, group_topk: 2}}
  parallelism: {pp: 1, ep: 64}
  training: {global_batch_size: 64, sequence_length: 4096, moe_dispatcher: deepep}
""")
    with pytest.raises(ConfigError, match=r"s\.yaml: workload\.model\.moe\.num_groups: 3 does not divide num_experts"):
        parse_scenario(data, "s.yaml", None)


def test_deepseek_v3_routes_over_4_of_8_groups_in_its_template_and_from_its_hf_config(tmp_path):
    template = ModelSpec.model_validate({"from": "deepseek-v3"}).moe
    assert (template.num_groups, template.group_topk) == (8, 4)
    config = {"model_type": "deepseek_v3", "hidden_act": "silu", "hidden_size": 7168, "intermediate_size": 18432,
              "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
              "num_experts_per_tok": 8, "n_group": 8, "topk_group": 4, "first_k_dense_replace": 3,
              "num_attention_heads": 128, "num_key_value_heads": 128, "num_hidden_layers": 61, "kv_lora_rank": 512,
              "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "rms_norm_eps": 1e-06,
              "vocab_size": 129280}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    moe = model_from_hf(path)["moe"]
    assert (moe["num_groups"], moe["group_topk"]) == (8, 4)
    path.write_text(json.dumps({k: v for k, v in config.items() if k not in ("n_group", "topk_group")}))
    assert (model_from_hf(path)["moe"]["num_groups"], model_from_hf(path)["moe"]["group_topk"]) == (1, 1)


def all_to_alls(sc: ScenarioConfig) -> list[CollectiveOp]:
    programs = MegatronTracer(sc.workload, sc.datacenter.num_gpus).stage_programs()
    return [op for p in programs for op in p.ops if isinstance(op, CollectiveOp) and op.ctype == CollType.AllToAll]


def test_the_deepep_dispatcher_runs_dispatch_and_combine_as_routed_deepep_on_the_same_buffer():
    plain, deep = all_to_alls(scenario("alltoall")), all_to_alls(scenario("deepep"))
    assert plain and len(plain) == len(deep)
    assert {op.algorithm for op in plain} == {""}  # the scenario's algorithm, as before
    assert {op.algorithm for op in deep} == {routed_name(Routing(16, 4, 2, 2))}
    assert [op.nbytes for op in plain] == [op.nbytes for op in deep]
    assert {op.label for op in deep} == {"moe_dispatch", "moe_combine"}


@cache
def built(dispatcher: str, expand: str, fabric: str):
    sc = scenario(dispatcher, fabric)
    dag, topology, fold = build_dag(sc, expand)
    return sc, dag, topology, fold


def step_ms(dispatcher: str, expand: str, fabric: str) -> float:
    sc, dag, topology, fold = built(dispatcher, expand, fabric)
    populate(dag, sc.datacenter.node.gpu, sc.workload.training.dtype)
    return run_populated(sc, dag, topology, fold).result.iteration_time_ms


@pytest.mark.parametrize("fabric", list(FABRICS))
def test_a_folded_step_with_deepep_on_a_rail_optimized_fabric_takes_the_full_expansions_time_within_one_percent(
        fabric):
    full = step_ms("deepep", "full", fabric)
    assert "dp" in built("deepep", "symmetric", fabric)[3].axes
    assert step_ms("deepep", "symmetric", fabric) == pytest.approx(full, rel=0.01)


def test_deepep_builds_fewer_flows_than_the_all_to_all_and_the_size_estimate_counts_them():
    sizes = {}
    for dispatcher in ("alltoall", "deepep"):
        sc, dag, _, _ = built(dispatcher, "symmetric", "one unit")
        estimate = step_size(sc, "symmetric")
        assert estimate.nodes == dag.num_nodes and estimate.flows == int((dag.kind == 1).sum())
        sizes[dispatcher] = estimate
    # per member and call: 15 peers under NCCL; 3 rail messages, 3 sends in the node and 3 forwards under DeepEP
    assert sizes["deepep"].flows < sizes["alltoall"].flows
