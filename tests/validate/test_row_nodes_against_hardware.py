"""A table row whose `nodes` cell and hardware description count different nodes ("DGX H100 x 4" and 2) is skipped
saying both, not run on the cell's count as if the description said nothing; where they agree, or one is blank, the
row is read as before."""

from __future__ import annotations

import csv

import pytest

from simulon.validate.collectives import system_of
from simulon.validate.report import Unsupported, shipped_table
from simulon.validate.training import scenario_from_row


def training_row(**cells: str) -> dict[str, str]:
    with shipped_table("training").open() as table:
        header = next(csv.reader(table))
    return {**dict.fromkeys(header, ""), "model": "llama-3-8b", "framework": "Megatron-Core", "tp": "8", "pp": "1",
            "mbs": "1", "gbs": "32", "seq_len": "4096", "iter_time_s": "1", **cells}


def test_a_training_row_whose_nodes_contradict_its_hardware_is_skipped_saying_both():
    with pytest.raises(Unsupported, match=r"hardware: 'DGX H100 x 4' states 4 nodes, but the row gives 2: say one"):
        scenario_from_row(training_row(hardware="DGX H100 x 4", nodes="2", num_gpus="16"))


@pytest.mark.parametrize("nodes", ["4", ""])
def test_a_training_row_whose_nodes_agree_with_its_hardware_or_are_blank_is_read(nodes):
    sc = scenario_from_row(training_row(hardware="DGX H100 x 4", nodes=nodes, num_gpus="32"))
    assert sc.datacenter.cluster.num_nodes == 4


def test_a_collective_row_whose_nodes_contradict_its_hardware_is_skipped_saying_both():
    assert system_of({"hardware": "4x DGX H100", "nodes": "2"}) == (
        "hardware: '4x DGX H100' states 4 nodes, but the row gives 2: say one")
    assert system_of({"hardware": "4x DGX H100", "nodes": "4"}).nodes == 4
