"""A row's recompute cell may give full recomputation's layer count in parentheses ('full(2)', 'full (block, 4
layers)': Megatron's --recompute-method block --recompute-num-layers): validate memory and validate training read
it as recompute_num_layers, where they read every such cell as full recomputation of every layer (Llama 2 7B at pp 4
on 8 H100s with 'full(2)' was predicted 21.54 GiB, the all-layer figure; with 2 of 8 layers a stage recomputing,
32.84). A count under selective recomputation, or several numbers, are skipped naming the column."""

from __future__ import annotations

import pytest

from simulon.validate.memory import scenario_from_row as memory_scenario
from simulon.validate.memory import validate_memory
from simulon.validate.report import read_table, shipped_table
from simulon.validate.training import scenario_from_row as training_scenario

ROW = {"source": "our cluster", "locator": "", "model": "llama-2-7b", "hardware": "H100", "framework": "Megatron-LM",
       "num_gpus": "8", "tp": "1", "pp": "4", "dp": "2", "cp": "1", "ep": "1", "vpp": "", "sp": "true",
       "recompute": "full", "zero_or_fsdp": "distopt", "mbs": "1", "gbs": "64", "seq_len": "4096", "dtype": "bf16",
       "mem_gib": "40", "mem_kind": "allocated", "notes": ""}


@pytest.mark.parametrize(("cell", "layers"), [("full(2)", 2), ("full (block, 4 layers)", 4), ("FULL (1)", 1),
                                              ("full", None), ("full (activation checkpointing)", None)])
def test_a_full_recompute_cells_layer_count_is_recompute_num_layers(cell, layers):
    assert memory_scenario({**ROW, "recompute": cell}).workload.parallelism.recompute_num_layers == layers


def test_recomputing_fewer_layers_is_predicted_to_keep_more_memory():
    predicted = [validate_memory([{**ROW, "recompute": cell}]).rows[0].predicted for cell in ("full(2)", "full")]
    assert predicted[0] > predicted[1]


@pytest.mark.parametrize(("cell", "said"), [("full(0)", "recompute_num_layers: must be at least 1"),
                                            ("full(9)", "9 is more than the 8 layers"),
                                            ("selective(4)", "gives a layer count only as full recomputation's"),
                                            ("full(2, 4)", "gives a layer count only as full recomputation's"),
                                            ("full(2.5)", "gives a layer count only as full recomputation's")])
def test_a_layer_count_no_run_can_take_is_skipped_saying_why(cell, said):
    assert said in validate_memory([{**ROW, "recompute": cell}]).skipped[0].reason


def test_validate_training_reads_the_layer_count_too():
    row = next(r for r in read_table(shipped_table("training")) if r["recompute"].startswith("full"))
    assert training_scenario({**row, "recompute": "full(1)"}).workload.parallelism.recompute_num_layers == 1
    assert training_scenario(row).workload.parallelism.recompute_num_layers is None
