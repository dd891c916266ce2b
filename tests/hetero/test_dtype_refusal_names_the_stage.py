"""On a heterogeneous cluster, a training dtype one node group's GPU has no peak in is refused naming the stages that
run on that group and what put them there (training.stage_groups, or ranks filling the groups in order), since
moving those stages is the other way out: the refusal named the GPU alone ('GPU A100-SXM4-80GB has no fp8 peak')."""

from __future__ import annotations

import pytest

from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario


def _scenario(**training) -> dict:
    groups = [{"from": "dgx-h100", "num_nodes": 2}, {"from": "dgx-a100", "num_nodes": 2}]
    return {"datacenter": {"datacenter": {"name": "mixed"}, "node_groups": groups},
            "workload": {"framework": "megatron", "model": "llama-3-8b", "parallelism": {"tp": 8, "pp": 2},
                         "training": {"global_batch_size": 16, "micro_batch_size": 1, "sequence_length": 4096,
                                      "dtype": "fp8", **training}}}


def test_fp8_on_a_stage_that_stage_groups_puts_on_a100s_is_refused_naming_the_stage_and_stage_groups():
    with pytest.raises(ConfigError) as refused:
        parse_scenario(_scenario(stage_groups=[0, 1], num_gpus=16), "mixed.yaml")
    assert str(refused.value) == ("mixed.yaml: workload.training.dtype: GPU A100-SXM4-80GB has no fp8 peak (it lists "
                                  "fp32, tf32, bf16, fp16); training.stage_groups puts stage 1 on node group 1 "
                                  "(dgx-a100)")


def test_fp8_on_stages_the_rank_order_puts_on_a100s_is_refused_naming_that_order():
    with pytest.raises(ConfigError, match=r"ranks filling the node groups in order \(pipeline outermost\) put stage 1 "
                                          r"on node group 1 \(dgx-a100\)$"):
        parse_scenario(_scenario(), "mixed.yaml")


def test_fp8_with_every_stage_on_the_h100s_is_accepted():
    parse_scenario(_scenario(stage_groups=[0, 0], num_gpus=16), "mixed.yaml")
