"""A training row that gives only a GPU count takes the layout its own source states for the same model."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.validate.report import read_table, shipped_table
from simulon.validate.training import LAYOUT_COLUMNS, scenario_from_row, validate_training, with_source_layouts

ROWS = read_table(shipped_table("training"))


def _strong_scaling() -> list[int]:
    return [i for i, r in enumerate(ROWS) if r["subset"] == "mcore_r0.8_h100_strong_scaling"]


def test_megatron_strong_scaling_rows_run_the_model_table_layout_of_the_same_model():
    filled = with_source_layouts(ROWS)
    table = next(r for r in ROWS if r["subset"] == "mcore_r0.8_h100_weak_scaling" and r["model"] == "GPT-177B")
    for index in _strong_scaling():
        assert not ROWS[index]["tp"] and filled[index]["tp"] == table["tp"] and filled[index]["pp"] == table["pp"]
        assert "same source and model" in filled[index]["notes"]
        parallelism = scenario_from_row(filled[index]).workload.parallelism
        assert (parallelism.tp, parallelism.pp) == (int(table["tp"]), int(table["pp"]))


def test_only_layout_columns_and_notes_change_and_only_on_rows_without_a_layout():
    filled = with_source_layouts(ROWS)
    for before, after in zip(ROWS, filled, strict=True):
        changed = {c for c in before if before[c] != after[c]}
        assert changed <= {*LAYOUT_COLUMNS, "notes"}
        if changed:
            assert not any(before[c].strip() for c in ("tp", "pp", "dp", "zero_or_fsdp"))


@settings(max_examples=30, deadline=None)
@given(gpus=st.integers(1, 10_000))
def test_a_layout_is_taken_only_where_its_model_parallel_size_divides_the_gpu_count(gpus):
    index = _strong_scaling()[0]
    row = {**ROWS[index], "num_gpus": str(gpus)}
    filled = with_source_layouts([*ROWS[:index], row, *ROWS[index + 1:]])[index]
    assert bool(filled["tp"]) == (gpus % 48 == 0)


def test_a_row_of_another_model_takes_nothing():
    index = _strong_scaling()[0]
    row = {**ROWS[index], "layers": "80"}
    assert with_source_layouts([*ROWS[:index], row, *ROWS[index + 1:]])[index] == row


@settings(max_examples=20, deadline=None)
@given(tp=st.sampled_from(["0", "-2", "two", "1.5"]), gpus=st.sampled_from(["32", "0", "-8"]))
def test_a_row_whose_layout_is_bad_input_lends_it_to_no_row_and_the_table_still_runs(tp, gpus):
    """A user's row with tp 0 beside one of the same source and model giving only a GPU count stopped the whole
    validation ('internal error: Unsupported: tp: 0 is not a count'); it is skipped alone, naming tp."""
    def user_row(**cells):
        return {**dict.fromkeys(ROWS[0], ""), "subset": "mine", "source": "me", "hardware": "H100",
                "model": "Llama 3 8B", "seq_len": "4096", "framework": "Megatron-Core", "mbs": "1", "gbs": "64",
                "iter_time_s": "3.0", **cells}
    rows = [user_row(num_gpus="16", tp=tp, pp="2"), user_row(num_gpus=gpus)]
    filled = with_source_layouts(rows)
    assert filled[1] == rows[1]
    report = validate_training([user_row(num_gpus="16", tp=tp, pp="2"), user_row(num_gpus="0")])
    assert [s.index for s in report.skipped] == [0, 1] and report.skipped[0].reason.startswith("tp: ")
