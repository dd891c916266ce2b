"""Megatron-Core launches each gradient bucket's reduction during the last micro-batch's backward (or after the
backward, without overlap_grad_reduce): more micro-batches a step do not hide more of it, so exposed data-parallel
communication is not advised them. The example moe_96gpu.yaml's DP finding, 51.7 ms at 10 micro-batches, was 51.7 ms
at 20, where its advice read "more micro-batches so that backward hides the gradient reduction"."""

from __future__ import annotations

import pytest

from helpers import finding_of, gpt_scenario
from simulon.analysis.findings import Settings, advice
from simulon.config import ScenarioConfig
from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario


def data_parallel(gbs: int, **parallelism) -> ScenarioConfig:
    return gpt_scenario(nodes=2, gpus_per_node=1, layers=2, gbs=gbs, nic="25Gbps", extra_parallelism=parallelism)


def dp_finding(sc: ScenarioConfig):
    return finding_of(sc, "DP")


@pytest.mark.parametrize("parallelism", [{}, {"overlap_grad_reduce": False}, {"distributed_optimizer": True}],
                         ids=["overlapped", "after the backward", "distributed optimizer"])
def test_exposed_gradient_reduction_is_not_advised_more_micro_batches_which_leave_it_as_it_is(parallelism):
    finding = dp_finding(data_parallel(2, **parallelism))  # one micro-batch a replica
    assert "micro-batches" not in finding.advice
    assert dp_finding(data_parallel(8, **parallelism)).at_stake_ms == pytest.approx(finding.at_stake_ms, rel=0.05)


def test_fsdp_communication_is_not_advised_the_gradient_buckets_it_does_not_use_but_zero_2():
    """FSDP's per-layer gathers and reduce-scatters take no gradient bucket (Mixtral 8x7B's first 8 layers under
    ZeRO-3 on two DGX H100: DP 13.4 ms exposed with grad_bucket_size 200M as without); ZeRO-2 gathers once a
    micro-batch."""
    zero3 = dp_finding(data_parallel(8, fsdp="full_shard"))
    assert "grad_bucket_size" not in zero3.advice and "overlap_grad_reduce" not in zero3.advice
    assert "fsdp: shard_grad_op" in zero3.advice
    assert dp_finding(data_parallel(8, fsdp="shard_grad_op")).at_stake_ms < zero3.at_stake_ms
    bucketed = data_parallel(8, fsdp="full_shard").as_data()
    bucketed["workload"]["training"]["grad_bucket_size"] = 1_000_000
    with pytest.raises(ConfigError, match="grad_bucket_size: has no effect under fsdp"):  # a bucket size is refused
        parse_scenario(bucketed, "s.yaml")
    assert "grad_bucket_size" not in dp_finding(data_parallel(8, fsdp="shard_grad_op")).advice


def test_the_embedding_gradient_sum_names_the_copies_the_model_has_not_a_tied_embedding_it_lacks():
    """DeepSeek-V3 (tie_embeddings false) was told its stages 'sum the tied embedding's gradients': the copy summed
    with stage 0's is its multi-token-prediction layer's, which looks its tokens up in the main model's embedding."""
    mtp = gpt_scenario(nodes=1, gpus_per_node=2, pp=2, gbs=4, extra_model={"tie_embeddings": False, "mtp_layers": 1})
    text = advice("DP", Settings.of(mtp), "DP embedding_grad_allreduce (AllReduce)")
    assert "tied" not in text
    assert text == ("a faster link between pipeline stages 0 and 1, which sum the gradients of the word embedding and "
                    "the multi-token-prediction layers' copy after the backward")
    tied = gpt_scenario(nodes=1, gpus_per_node=2, pp=2, gbs=4, extra_model={"tie_embeddings": True})
    assert Settings.of(tied).embedding_copies == ("pipeline stages 0 and 1, which sum the gradients of the word "
                                                  "embedding and its copy tied to the LM head")
    assert Settings.of(gpt_scenario(nodes=1, gpus_per_node=2, gbs=4)).embedding_copies is None
