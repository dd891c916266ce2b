"""`validate training` reads a row's zero_or_fsdp cell as `validate memory` does (report.sharding_cell, over
config.frameworks.sharding_named, the one home of sharding names): ZeRO stages, FSDP's strategies, distopt and DDP
by name, the name before a parenthetical note first (llm-foundry's 'SHARD_GRAD_OP (ZeRO-3 equiv.)' is
SHARD_GRAD_OP), the framework's own sharding where the cell is blank; a cell naming none is skipped, naming the
column. It knew FULL_SHARD, SHARD_GRAD_OP and FSDP=N alone, and refused 'ZeRO-1' and 'DDP'."""

from __future__ import annotations

import csv

import pytest

from simulon.config.frameworks import framework_defaults
from simulon.validate.report import Unsupported, shipped_table
from simulon.validate.training import scenario_from_row


def training_row(sharding: str) -> dict[str, str]:
    with open(shipped_table("training"), newline="") as handle:
        columns = next(csv.reader(handle))
    return {**dict.fromkeys(columns, ""), "subset": "mine", "hardware": "8x H100 (DGX H100)", "num_gpus": "8",
            "model": "meta-llama/Llama-3.1-8B", "layers": "2", "seq_len": "2048", "precision": "bf16",
            "framework": "Megatron-LM", "tp": "1", "gbs": "8", "mbs": "1", "iter_time_s": "0.5",
            "zero_or_fsdp": sharding}


@pytest.mark.parametrize(("cell", "fsdp", "distributed_optimizer"), [
    ("ZeRO-1", "none", True), ("distopt (ZeRO-1)", "none", True), ("DDP", "none", False),
    ("ZeRO-3", "full_shard", False),
    ("FULL_SHARD (ZeRO-3 equiv.)", "full_shard", False), ("SHARD_GRAD_OP (ZeRO-3 equiv.)", "shard_grad_op", False),
    ("FSDP=4", "full_shard", False), ("none", "none", False)])
def test_a_training_rows_sharding_cell_is_read_as_validate_memory_reads_it(cell, fsdp, distributed_optimizer):
    parallelism = scenario_from_row(training_row(cell)).workload.parallelism
    assert (parallelism.fsdp, parallelism.distributed_optimizer) == (fsdp, distributed_optimizer)


def test_a_blank_sharding_cell_is_the_frameworks_own_and_an_unknown_one_is_skipped_naming_the_column():
    own = framework_defaults("Megatron-LM")  # a bare Megatron-LM in a table: the 2021 one, no distributed optimizer
    parallelism = scenario_from_row(training_row("")).workload.parallelism
    assert (parallelism.fsdp, parallelism.distributed_optimizer) == (own.fsdp, own.distributed_optimizer)
    with pytest.raises(Unsupported, match="zero_or_fsdp: 'sharded somehow' is none of ZeRO-1/2/3"):
        scenario_from_row(training_row("sharded somehow"))
