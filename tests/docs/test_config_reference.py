"""The scenario format's reference (docs/spec/) is written from the config models, so it holds every key a scenario
may give, with the type and default simulon reads: the committed pages are what scripts/config_reference.py writes
today (a field added, renamed or re-described without regenerating them fails here)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import ROOT
from simulon.config.common import range_check
from simulon.config.reference import BLOCKS, block_model, models_in, reference


@pytest.mark.parametrize("block", BLOCKS)
def test_the_committed_reference_page_is_what_the_models_write(block):
    page = ROOT / "docs" / "spec" / f"config-{block}.md"
    assert page.read_text() == reference(block), "run: uv run python scripts/config_reference.py"


@pytest.mark.parametrize("block", BLOCKS)
def test_every_key_of_every_block_a_scenario_may_hold_is_in_its_page(block):
    page, seen, todo = reference(block), set(), [block_model(block)]
    while todo:
        model = todo.pop()
        seen.add(model)
        section = page.split(f"## {model.__name__}\n", 1)[1].split("\n## ", 1)[0]
        keys = set(re.findall(r"^\| `([^`]+)` \|", section, re.MULTILINE))
        assert keys == {f.alias or name for name, f in model.model_fields.items()}, model.__name__
        todo += [inner for f in model.model_fields.values() for inner in models_in(f.annotation) if inner not in seen]


def test_units_are_written_as_a_scenario_writes_them():
    page = reference("datacenter")
    assert ("| `memory_bandwidth` | bandwidth (`400Gbps`, `50GBps`, `3.35TBps`), 1e+06 B/s to 1e+14 B/s | required | "
            "HBM bandwidth |") in page
    assert re.search(r"\| `oversubscription` \| ratio \(`2.0`, or `2:1`\)", page)


@pytest.mark.parametrize(("block", "key", "unit"), [
    ("datacenter", "nvlink_bandwidth", "bandwidth (`400Gbps`"), ("datacenter", "port_speed", "bandwidth (`400Gbps`"),
    ("datacenter", "card_speed", "bandwidth (`400Gbps`"), ("workload", "grad_reduce_dtype", "number format (`bf16`"),
])
def test_an_optional_field_that_reads_a_unit_is_written_with_its_unit_not_as_a_number(block, key, unit):
    """nvlink_bandwidth, pcie_bandwidth, port_speed and card_speed (`Bandwidth | None`) were shown as 'number', though
    a scenario writes them as `900GBps`, as it writes the bandwidths that are required."""
    row = next(line for line in reference(block).splitlines() if line.startswith(f"| `{key}` |"))
    assert row.split(" | ")[1].startswith(unit), row


def test_the_model_block_says_it_may_start_from_a_huggingface_config_as_well_as_a_template():
    page = reference("workload")
    model = page[page.index("## ModelSpec"):].split("| key |")[0]
    assert "`from:` starts the block from a shipped template" in model and "`from_hf:` builds the block" in model
    assert "from_hf" not in page[:page.index("## ModelSpec")]


def reachable_models(block: str) -> list:
    """The config models a top-level block's keys reach, the block's own first."""
    seen, todo = [], [block_model(block)]
    while todo:
        model = todo.pop(0)
        if model not in seen:
            seen.append(model)
            todo += [inner for f in model.model_fields.values() for inner in models_in(f.annotation)]
    return seen


@pytest.mark.parametrize("block", BLOCKS)
def test_every_key_and_every_block_of_the_scenario_format_says_what_it_is(block):
    """91 keys (collective.algorithm, parallelism.tp, training.global_batch_size, ...) had an empty description cell,
    and 8 blocks (TrainingSpec, NodeSpec, ...) no sentence, leaving the reader the key's name alone."""
    undescribed = [f"{model.__name__}.{f.alias or name}" for model in reachable_models(block)
                   for name, f in model.model_fields.items() if not (f.description or "").strip()]
    unsaid = [model.__name__ for model in reachable_models(block) if not (model.__doc__ or "").strip()]
    assert (undescribed, unsaid) == ([], [])


@pytest.mark.parametrize("block", BLOCKS)
def test_every_count_of_the_reference_says_the_range_the_scenario_is_held_to(block):
    """The counts were shown as "whole number" alone, the range a scenario is refused outside of left unsaid."""
    types_of_counts = re.findall(r"^\| `[^`]+` \| (whole number[^|]*) \|", reference(block), re.MULTILINE)
    assert types_of_counts and [t for t in types_of_counts if re.search(r"\d to [\d,]+", t) is None] == []


@pytest.mark.parametrize(("block", "row"), [
    ("collective", "| `num_channels` | whole number, 1 to 64 channels, NCCL's maximum | none |"),
    ("datacenter", "| `gpus_per_node` | whole number, 1 to 1,000,000 GPUs | required |"),
    ("datacenter", "| `qps_per_connection` | whole number, 1 to 128 | `1` |"),
    ("workload", "| `mtp_layers` | whole number, 0 to 10,000 layers | `0` |"),
    ("workload", "| `capacity_factor` | number, positive, at most 64 | none |"),
])
def test_a_counts_range_is_the_one_its_check_refuses_outside_of(block, row):
    assert row in reference(block)


@settings(max_examples=50, deadline=None)
@given(low=st.integers(0, 100), span=st.integers(0, 10**6), over=st.integers(1, 10**6))
def test_a_range_check_says_the_bounds_it_holds_a_value_to(low, span, over):
    check = range_check(low, low + span, f"{low + span:,} things")
    assert check.text == f"{low:,} to {low + span:,} things"
    assert check(low) == low and check(low + span) == low + span
    with pytest.raises(ValueError, match=f"is more than {low + span:,} things"):
        check(low + span + over)
    if low > 0:
        with pytest.raises(ValueError, match=f"must be at least {low}"):
            check(low - 1)
