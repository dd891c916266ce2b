"""A user's memory row whose zero_or_fsdp cell gives the shard group ('FSDP=8', as validate training reads it:
hybrid sharding over 8 ranks, replicated across the rest) is predicted with that group: validate memory read any
cell naming FSDP as sharding over every data-parallel rank, so Llama 3 8B with FSDP=8 on 32 H100s was predicted
11.79 GiB allocated, where sharding over 8 ranks holds 24.41."""

from __future__ import annotations

import pytest

from simulon.validate.memory import scenario_from_row, validate_memory

ROW = {"source": "our cluster", "locator": "", "model": "llama-3-8b", "hardware": "H100", "framework": "torchtitan",
       "num_gpus": "32", "tp": "1", "pp": "1", "dp": "32", "cp": "1", "ep": "1", "vpp": "", "sp": "false",
       "recompute": "full", "zero_or_fsdp": "FSDP", "mbs": "1", "gbs": "32", "seq_len": "4096", "dtype": "bf16",
       "mem_gib": "40", "mem_kind": "allocated", "notes": ""}


@pytest.mark.parametrize(("cell", "group"), [("FSDP=8", 8), ("fsdp = 4", 4), ("ZeRO-3 (FSDP=16)", 16),
                                             ("FSDP=32", None), ("FSDP", None)])
def test_an_fsdp_cell_giving_its_shard_group_is_the_scenarios_fsdp_size(cell, group):
    par = scenario_from_row({**ROW, "zero_or_fsdp": cell}).workload.parallelism
    assert par.fsdp == "full_shard" and par.fsdp_size == group


def test_a_smaller_shard_group_is_predicted_to_hold_more():
    eight, every = (validate_memory([{**ROW, "zero_or_fsdp": cell}]).rows[0].predicted for cell in ("FSDP=8", "FSDP"))
    assert eight > every


@pytest.mark.parametrize(("cell", "said"), [("FSDP=x", "gives FSDP=x, not a number of ranks"),
                                            ("FSDP=0", "zero_or_fsdp: 0 is not a count"),
                                            ("FSDP=3", "fsdp_size: 3 does not divide dp*cp = 32")])
def test_a_shard_group_no_run_can_have_is_skipped_saying_why(cell, said):
    assert said in validate_memory([{**ROW, "zero_or_fsdp": cell}]).skipped[0].reason


@pytest.mark.parametrize(("cell", "fsdp", "group"), [("ZeRO-2 (FSDP=8)", "shard_grad_op", 8),
                                                     ("zero stage 2", "shard_grad_op", None),
                                                     ("full_shard", "full_shard", None),
                                                     ("distopt(ZeRO-1)", "none", None)])
def test_a_cell_naming_a_zero_stage_is_that_stage_whatever_else_it_names(cell, fsdp, group):
    """Read as a framework's description is (config.frameworks.sharding_named): before, any cell containing 'fsdp'
    was full sharding, so 'ZeRO-2 (FSDP=8)' was ZeRO-3."""
    par = scenario_from_row({**ROW, "zero_or_fsdp": cell}).workload.parallelism
    assert (par.fsdp, par.fsdp_size) == (fsdp, group)
    assert par.distributed_optimizer == (cell == "distopt(ZeRO-1)")
