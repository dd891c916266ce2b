"""Layer splits over pipeline stages and model chunks, as Megatron-Core's flags and layout strings make them."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from simulon.config.common import FieldError
from simulon.config.pipeline_layout import balanced_counts, layout_counts, parse_layout, virtual_stage_layers
from simulon.config.workload import ParallelismSpec


@dataclass
class Split:
    """The fields a split reads, for calling it without a whole scenario."""

    pp: int = 1
    vpp: int = 1
    pipeline_layout: str | None = None
    layers_per_stage: list[int] | None = None
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    account_for_embedding_in_pipeline_split: bool = False
    account_for_loss_in_pipeline_split: bool = False
    pipeline_schedule: str = "1f1b"


def megatron_accounted(num_layers: int, virtual: int, embedding: bool, loss: bool) -> list[int]:
    """Megatron-Core's split with --account-for-embedding/loss-in-pipeline-split, written out directly."""
    per_stage = (num_layers + embedding + loss) // virtual
    return [per_stage - (embedding and v == 0) - (loss and v == virtual - 1) for v in range(virtual)]


def test_deepseek_v3_recipe_layout_unrolls_to_its_32_virtual_stages():
    stages = parse_layout("Et*3|(tt|)*29,m|L")
    assert stages[0] == "Ettt" and stages[1:30] == ["tt"] * 29 and stages[30:] == ["m", "L"]
    assert layout_counts("Et*3|(tt|)*29,t|L", 62) == (3, *(2,) * 29, 1, 0)


def test_a_layout_string_sets_vpp_as_megatron_derives_it():
    par = ParallelismSpec.model_validate({"pp": 16, "pipeline_layout": "Et*3|(tt|)*29,t|L"})
    assert par.vpp == 2 and par.interleaved
    assert virtual_stage_layers(par, 62)[:2] == (3, 2)


def test_per_stage_counts_split_over_chunks_in_virtual_stage_order():
    # chunk c of stage s is virtual stage c * pp + s
    assert virtual_stage_layers(Split(pp=2, vpp=2, layers_per_stage=[6, 2]), 8) == (3, 1, 3, 1)
    assert virtual_stage_layers(Split(pp=2, vpp=2, layers_per_stage=[3, 1, 3, 1]), 8) == (3, 1, 3, 1)


def test_first_and_last_stage_layers_leave_the_rest_even_as_megatron_does():
    # Megatron: --decoder-first-pipeline-num-layers 4 --decoder-last-pipeline-num-layers 3, 61 layers, pp 8
    split = virtual_stage_layers(Split(pp=8, first_stage_layers=4, last_stage_layers=3), 61)
    assert split == (4, 9, 9, 9, 9, 9, 9, 3)
    interleaved = virtual_stage_layers(Split(pp=4, vpp=2, first_stage_layers=2, last_stage_layers=2), 16)
    assert interleaved == (1, 3, 3, 1, 1, 3, 3, 1)


def test_llama3_405b_on_16_stages_of_8_chunks_gives_the_ends_one_layer_fewer():
    # 126 layers + embedding + loss = 128 = 16 x 8 virtual stages of one layer: the first and last hold none
    split = virtual_stage_layers(Split(pp=16, vpp=8, account_for_embedding_in_pipeline_split=True,
                                       account_for_loss_in_pipeline_split=True), 126)
    assert split[0] == split[-1] == 0 and set(split[1:-1]) == {1}


@given(virtual=st.integers(1, 64), per_stage=st.integers(1, 12), embedding=st.booleans(), loss=st.booleans())
def test_the_automatic_split_is_megatrons_accounting_split_where_that_divides(virtual, per_stage, embedding, loss):
    num_layers = virtual * per_stage - embedding - loss
    if num_layers < 1:
        return
    automatic = balanced_counts(num_layers, virtual, embedding, loss)
    assert list(automatic) == megatron_accounted(num_layers, virtual, embedding, loss)
    flags = Split(pp=virtual, account_for_embedding_in_pipeline_split=embedding,
                  account_for_loss_in_pipeline_split=loss)
    assert list(virtual_stage_layers(flags, num_layers)) == megatron_accounted(num_layers, virtual, embedding, loss)


@given(pp=st.integers(1, 32), vpp=st.integers(1, 8), num_layers=st.integers(1, 300))
def test_every_split_places_each_layer_once_and_balances_the_load_within_one_layer(pp, vpp, num_layers):
    split = virtual_stage_layers(Split(pp=pp, vpp=vpp), num_layers)
    assert len(split) == pp * vpp and sum(split) == num_layers and min(split) >= 0
    if num_layers % (pp * vpp):
        loads = list(split)
        loads[0] += 1
        loads[-1] += 1
        assert max(loads) - min(loads) <= 1
    else:
        assert set(split) == {num_layers // (pp * vpp)}


@given(layout=st.text(alphabet="EtLm|()*,0123456789x", max_size=30))
def test_any_layout_string_is_a_split_or_a_field_error(layout):
    try:
        par = ParallelismSpec.model_validate({"pp": 2, "pipeline_layout": layout})
    except ValueError:
        return  # refused by the config's own validation, with a message
    try:
        split = virtual_stage_layers(par, 8)
    except FieldError as error:
        assert error.field == "workload.parallelism.pipeline_layout"
    else:
        assert sum(split) == 8 and len(split) == 2 * par.vpp


@pytest.mark.parametrize("fields, words", [
    ({"pp": 2, "layers_per_stage": [5, 3], "vpp": 2}, ["5 layers do not split over vpp = 2"]),
    ({"pp": 3, "layers_per_stage": [4, 4]}, ["2 entries for pp = 3"]),
    # one count per virtual stage without vpp written (a layout string sets vpp, a list does not)
    ({"pp": 2, "layers_per_stage": [1, 3, 3, 1]}, ["4 entries for pp = 2 stages",
                                                   "one per virtual stage needs vpp = 2, which is 1"]),
    ({"pp": 4, "first_stage_layers": 1}, ["3 stages cannot split the remaining 7"]),
    ({"pp": 1, "last_stage_layers": 1}, ["need pp > 1"]),
    ({"pp": 4, "first_stage_layers": 4, "last_stage_layers": 4},
     ["hold all of the model's 8 layers, and the other 2 stages would hold none"]),
    ({"pp": 3, "first_stage_layers": 8}, ["holds all of the model's 8 layers, and the other 2 stages would hold none"]),
])
def test_impossible_splits_say_which_field_and_why(fields, words):
    with pytest.raises(FieldError) as error:
        virtual_stage_layers(Split(**fields), 8)
    for word in words:
        assert word in error.value.message


END_FIELDS = st.sampled_from([("first_stage_layers",), ("last_stage_layers",),
                              ("first_stage_layers", "last_stage_layers")])


@given(pp=st.integers(2, 16), vpp=st.integers(1, 4), num_layers=st.integers(1, 128), fields=END_FIELDS,
       data=st.data())
def test_first_or_last_stage_layers_beyond_the_model_name_the_fields_and_its_layers_and_no_negative_count(
        pp, vpp, num_layers, fields, data):
    counts = [data.draw(st.integers(0, 2 * num_layers + 1), label=field) for field in fields]
    assume(sum(counts) > num_layers)
    with pytest.raises(FieldError) as error:
        virtual_stage_layers(Split(pp=pp, vpp=vpp, **dict(zip(fields, counts, strict=True))), num_layers)
    assert error.value.field == f"workload.parallelism.{fields[0]}"
    assert all(f"{field} = {count}" in error.value.message for field, count in zip(fields, counts, strict=True))
    assert f"more than the model's {num_layers} layers" in error.value.message
    assert not re.search(r"-\d", error.value.message)


@given(pp=st.integers(1, 16), num_layers=st.integers(1, 128), fields=END_FIELDS, data=st.data())
def test_a_refused_first_or_last_stage_count_is_blamed_on_a_field_given_and_never_shows_a_negative_count(
        pp, num_layers, fields, data):
    counts = [data.draw(st.integers(0, num_layers), label=field) for field in fields]
    try:
        split = virtual_stage_layers(Split(pp=pp, **dict(zip(fields, counts, strict=True))), num_layers)
    except FieldError as error:
        assert error.field.removeprefix("workload.parallelism.") in fields
        assert not re.search(r"-\d", error.message)
    else:
        assert sum(split) == num_layers and len(split) == pp


@pytest.mark.parametrize("fields, message", [
    ({"first_stage_layers": 17}, "first_stage_layers = 17 is more than the model's 16 layers"),
    ({"last_stage_layers": 20}, "last_stage_layers = 20 is more than the model's 16 layers"),
    ({"first_stage_layers": 10, "last_stage_layers": 10},
     "first_stage_layers = 10 and last_stage_layers = 10 add up to 20, more than the model's 16 layers"),
    ({"first_stage_layers": 5, "last_stage_layers": 5},
     "first_stage_layers = 5 and last_stage_layers = 5 hold 10 of the model's 16 layers, and no other stage is left "
     "for the remaining 6"),
])
def test_on_two_stages_end_counts_that_do_not_add_up_to_the_16_layers_say_so(fields, message):
    with pytest.raises(FieldError, match=re.escape(message)):
        virtual_stage_layers(Split(pp=2, **fields), 16)


@pytest.mark.parametrize("fields", [{"first_stage_layers": 0}, {"last_stage_layers": 0},
                                    {"first_stage_layers": 8, "last_stage_layers": 0}])
def test_a_first_or_last_stage_count_of_no_layer_is_refused_as_megatron_refuses_it(fields):
    """Megatron-Core's TransformerConfig refuses num_layers_in_first/last_pipeline_stage <= 0; first_stage_layers 0
    simulated a pipeline whose first stage held only the embedding. The field of the 0 is named, with the splits
    that do place a stage of no layer."""
    empty = next(name for name, layers in fields.items() if not layers)
    refused = re.escape("0: Megatron-Core refuses a first or last stage of no layer")
    with pytest.raises(FieldError, match=refused) as error:
        virtual_stage_layers(Split(pp=3, **fields), 16)
    assert error.value.field == f"workload.parallelism.{empty}"
    assert virtual_stage_layers(Split(pp=2, layers_per_stage=[0, 16]), 16) == (0, 16)


def test_a_layout_that_unrolls_to_billions_of_symbols_is_refused_before_it_is_built():
    with pytest.raises(ValueError, match="unrolls to more than"):
        parse_layout("E(t|)*999999999999L")


@settings(max_examples=15, deadline=None)
@given(st.integers(6, 6000), st.sampled_from(["Et*{}|L", "E(t|)*{}L"]))
def test_a_repeat_of_any_length_is_refused_in_the_layouts_words_and_leading_zeros_are_read(digits, form):
    """A repeat count of over 4,300 digits was refused in Python's words ('Exceeds the limit (4300 digits) for integer
    string conversion ... use sys.set_int_max_str_digits()'), the whole count quoted in the message."""
    with pytest.raises(ValueError, match="unrolls to more than 40,000 symbols") as refused:
        parse_layout(form.format("9" * digits))
    assert len(str(refused.value)) < 120
    assert parse_layout(form.format("0" * digits + "2")) == parse_layout(form.format(2))
