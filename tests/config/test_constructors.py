"""A config block built by calling its class (the Python API: `ParallelismSpec(pp=2, vpp=2)`) is the block
`model_validate` builds from the same fields: the validators that complete a block (the interleaved schedule named,
the fabric sized to the cluster, sequence parallelism for an MoE over tp, the node count from the workload) return
a completed copy, which pydantic drops when a class is called rather than validated."""

from __future__ import annotations

import warnings

from hypothesis import given
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.config.dc import DatacenterConfig
from simulon.config.workload import MegatronWorkload, ParallelismSpec


def built_both_ways(cls, data: dict):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        called = cls(**data)
    return called, cls.model_validate(data)


def test_a_parallelism_block_with_chunks_and_no_schedule_called_by_class_runs_interleaved_1f1b():
    called, validated = built_both_ways(ParallelismSpec, {"pp": 2, "vpp": 2})
    assert called.pipeline_schedule == validated.pipeline_schedule == "interleaved_1f1b"
    assert called == validated and called.model_fields_set == validated.model_fields_set


@given(pp=st.sampled_from([1, 2, 4]), vpp=st.sampled_from([1, 2, 3]), tp=st.sampled_from([1, 2, 8]),
       named=st.sampled_from([None, "interleaved_1f1b", "zb_v"]))
def test_any_parallelism_block_called_by_class_equals_the_validated_one(pp, vpp, tp, named):
    data = {"pp": pp, "vpp": vpp, "tp": tp} | ({"pipeline_schedule": named} if named else {})
    called, validated = built_both_ways(ParallelismSpec, data)
    assert called == validated and called.model_fields_set == validated.model_fields_set


def test_a_datacenter_called_by_class_takes_the_fabric_its_template_lists_for_its_size():
    source = {"from": "dgx-b200", "cluster": {"num_nodes": 64}}
    called, validated = built_both_ways(DatacenterConfig, source)
    assert called.network.scale_out.topology == validated.network.scale_out.topology
    assert called == validated


def test_an_moe_workload_over_tp_called_by_class_runs_with_sequence_parallelism():
    workload = gpt_scenario(tp=2, moe={"num_experts": 4, "top_k": 2}).workload
    data = workload.model_dump(exclude_unset=True)
    data["parallelism"].pop("sequence_parallel", None)
    called, validated = built_both_ways(MegatronWorkload, data)
    assert called.parallelism.sequence_parallel is validated.parallelism.sequence_parallel is True
