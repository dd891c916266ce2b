"""A replica's micro-batch share that falls short of the interleaved schedule's microbatch_group_size is refused
naming the share, its count and the setting it falls short of, not the group size alone as if it were the share
("replica 1: 4: ..." read as four micro-batches where replica 1 runs 2)."""

from __future__ import annotations

import pytest

from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario


def _scenario(shares: list[int], group: int) -> dict:
    groups = [{"from": "dgx-h100", "num_nodes": 2}, {"from": "dgx-a100", "num_nodes": 2}]
    return {"datacenter": {"datacenter": {"name": "mixed"}, "node_groups": groups},
            "workload": {"framework": "megatron", "model": "llama-3-8b",
                         "parallelism": {"tp": 8, "pp": 2, "dp": 2, "vpp": 2, "microbatch_group_size": group},
                         "training": {"global_batch_size": sum(shares), "micro_batch_size": 1,
                                      "sequence_length": 4096, "stage_groups": [[0, 1], [0, 1]],
                                      "dp_shares": shares}}}


def test_a_share_below_the_microbatch_group_size_is_refused_naming_its_count_and_the_group_size():
    with pytest.raises(ConfigError) as refused:
        parse_scenario(_scenario([14, 2], 4), "shares.yaml")
    message = str(refused.value)
    assert "workload.training.dp_shares: replica 1: 2 micro-batches against microbatch_group_size 4:" in message
    assert "replica 1: 4:" not in message


def test_a_share_that_is_no_multiple_of_pp_is_refused_as_before():
    data = _scenario([11, 5], 4)
    del data["workload"]["parallelism"]["microbatch_group_size"]
    with pytest.raises(ConfigError, match=r"dp_shares: replica 0: 11 micro-batches is not a multiple of pp = 2"):
        parse_scenario(data, "shares.yaml")
