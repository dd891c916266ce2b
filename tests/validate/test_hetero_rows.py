"""Sailor's heterogeneous OPT-350M runs (memory.csv rows) read into plain data: node groups, stages and their
GPU types, batch and measured time, checked against the rows themselves and against Sailor's plan files."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.validate.hetero_rows import BadRow, NodeGroup, Stage, is_sailor_row, parse_row, sailor_runs
from simulon.validate.report import read_table, shipped_table

ROWS = read_table(shipped_table("memory"))
RUNS = sailor_runs(ROWS)
SAILOR = [(i, row) for i, row in enumerate(ROWS) if is_sailor_row(row)]


def test_all_nine_sailor_rows_are_read_and_nothing_else():
    assert len(RUNS) == 9
    assert all(ROWS[r.index]["source"].startswith("Sailor") for r in RUNS)


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r.locator.rsplit("/", 1)[-1])
def test_a_run_is_consistent_with_itself(run):
    assert run.num_gpus == run.tp * run.pp * run.dp == sum(g.gpus for g in run.groups)
    assert len(run.stages) == run.pp and all(len(s.replicas) == run.dp for s in run.stages)
    # OPT-350M: 24 transformer layers; Sailor counts the embedding (first stage) and head (last stage) as layers
    assert sum(s.transformer_layers for s in run.stages) == 24
    assert sum(s.layers for s in run.stages) == 26
    assert run.stages[0].embedding and run.stages[-1].head
    assert not any(s.embedding for s in run.stages[1:]) and not any(s.head for s in run.stages[:-1])
    assert run.num_microbatches * run.micro_batch_size * run.dp == run.global_batch_size
    # one node per stage replica, tp of its GPUs used; the locator's N is the node count
    assert run.num_nodes == run.pp * run.dp == int(run.locator.split("/N")[1].split("/")[0])
    assert all(g.gpus_per_node == run.tp for g in run.groups)
    assert run.model == "opt-350m" and run.sequence_length == 2048 and run.iteration_s > 0


def test_the_n4_d2_row_is_sailors_plan_file():
    # eth-easl/sailor sailor/Planner/simulations/validation/mit/N4/plan_config_N4_D2.json: layers_per_stage
    # [0..11], [12..25]; stage 0 on RTX-3090 and RTX-2080 nodes, stage 1 on Titan-RTX and RTX-2080 nodes, tp 8;
    # mbs 2, gbs 256, "real": 66.06712
    run = next(r for r in RUNS if r.locator.endswith("plan_config_N4_D2.json"))
    assert run.stages == (Stage(12, 11, True, False, ("rtx-3090", "rtx-2080-ti")),
                          Stage(14, 13, False, True, ("titan-rtx", "rtx-2080-ti")))
    assert set(run.groups) == {NodeGroup("rtx-3090", "RTX-3090", 1, 8), NodeGroup("rtx-2080-ti", "RTX-2080", 2, 8),
                               NodeGroup("titan-rtx", "Titan-RTX", 1, 8)}
    assert (run.micro_batch_size, run.global_batch_size, run.num_microbatches) == (2, 256, 64)
    assert run.iteration_s == 66.06712


def test_the_two_gpu_per_node_runs_use_two_gpus_of_each_node():
    # plan_config_N2_D1.json: [["RTX-3090", 2, ...]], 2 and [["Titan-RTX", 2, ...]], 2: tp 2 on each node
    run = next(r for r in RUNS if r.locator.endswith("plan_config_N2_D1.json"))
    assert [(g.gpu, g.nodes, g.gpus_per_node) for g in run.groups] == [("rtx-3090", 1, 2), ("titan-rtx", 1, 2)]
    assert [s.transformer_layers for s in run.stages] == [11, 13]


def test_parsing_is_deterministic():
    assert sailor_runs(ROWS) == RUNS


@pytest.mark.parametrize(("column", "value", "message"), [
    ("tp", "0", "tp: expected a positive integer"),
    ("num_gpus", "33", "num_gpus: 33 is not tp*pp*dp"),
    ("model", "OPT-9000", "model: 'OPT-9000' has no model template"),
    ("hardware", "mixed RTX-3090x8+RTX-2080x8+Titan-RTXx8", "hardware: 8 RTX-2080 GPUs, but the stages use 2"),
    ("hardware", "mixed RTX-3090x8+RTX-4090x16+Titan-RTXx8", "hardware:"),
    ("gbs", "250", "gbs: 250 is not a multiple of mbs*dp = 4"),
    ("source", "Megatron", "source: 'Megatron' is not Sailor's"),
])
def test_a_bad_cell_is_refused_naming_the_row_and_the_field(column, value, message):
    index, row = next((i, r) for i, r in SAILOR if r["locator"].endswith("plan_config_N4_D2.json"))
    with pytest.raises(BadRow, match="^row 60: " + message.replace("*", r"\*").replace("(", r"\(")):
        parse_row({**row, column: value}, index)


@pytest.mark.parametrize(("broken", "message"), [
    ("iter_s=", "no 'iter_s='"), ("layers/stage", "no 'layers/stage"), ("stage->GPU types", "no 'stage->GPU types"),
])
def test_notes_missing_a_part_are_refused(broken, message):
    index, row = SAILOR[4]
    with pytest.raises(BadRow, match=f"row {index}: notes: {message}"):
        parse_row({**row, "notes": row["notes"].replace(broken, "something else")}, index)


@pytest.mark.parametrize(("pattern", "replacement", "message"), [
    ("[12, 14]", "[12, 15]", "sum to 27, not the model's 24 layers"),
    ("[12, 14]", "[26]", "1 layer counts and 2 stages"),
    ("Titan-RTX/RTX-2080", "Titan-RTX", "stage 1 runs on 1 GPU types, not dp = 2"),
])
def test_inconsistent_notes_are_refused(pattern, replacement, message):
    index, row = next((i, r) for i, r in SAILOR if r["locator"].endswith("plan_config_N4_D2.json"))
    with pytest.raises(BadRow, match=message):
        parse_row({**row, "notes": row["notes"].replace(pattern, replacement)}, index)


@settings(max_examples=60, deadline=None)
@given(row=st.sampled_from(SAILOR), column=st.sampled_from(["tp", "pp", "dp", "num_gpus", "mbs", "gbs", "seq_len",
                                                             "notes", "hardware", "model"]),
       junk=st.text(max_size=12))
def test_any_garbled_cell_parses_to_a_consistent_run_or_raises_bad_row(row, column, junk):
    index, data = row
    try:
        run = parse_row({**data, column: junk}, index)
    except BadRow as exc:
        assert str(exc).startswith(f"row {index}: ")
    else:
        assert run.num_gpus == run.tp * run.pp * run.dp == sum(g.gpus for g in run.groups)


def test_runs_are_plain_frozen_data():
    run = RUNS[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.tp = 4  # type: ignore[misc]
