"""plan-hetero under full recomputation of a block of layers (recompute_num_layers, Megatron's block method): each
stage re-runs the forward of its first N layers only, so the planner's stage times and layer split count the
re-run forward of those N layers, not of every layer (search/hetero.py, unit_costs and split_layers)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.config.loading import parse_scenario
from simulon.search.hetero import Planner, split_layers

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hetero_plan_h100_a100.yaml"


def _stage_seconds(per_layer, extra, recomputed, block, s, n):
    return extra[s] + n * per_layer[s] + min(n, block) * recomputed[s]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=2, max_size=4), st.lists(st.integers(0, 4), min_size=4, max_size=4),
       st.lists(st.integers(0, 6), min_size=4, max_size=4), st.integers(0, 5), st.integers(4, 14))
def test_a_split_under_a_recomputed_block_minimises_the_slowest_stage_as_brute_force_does(speeds, extras, recompute,
                                                                                          block, layers):
    pp = len(speeds)
    per_layer, extra, recomputed = [float(v) for v in speeds], [float(e) for e in extras[:pp]], \
        [float(r) for r in recompute[:pp]]
    counts = split_layers(per_layer, extra, layers, None, recomputed, block)

    def slowest(split):
        return max(_stage_seconds(per_layer, extra, recomputed, block, s, n) for s, n in enumerate(split))

    best = min(slowest(split) for split in itertools.product(range(1, layers + 1), repeat=pp)
               if sum(split) == layers)
    assert sum(counts) == layers and min(counts) >= 1
    assert slowest(counts) == pytest.approx(best)


def _scenario(**parallelism):
    data = yaml.safe_load(EXAMPLE.read_text())
    data["workload"]["parallelism"].update(parallelism)
    return parse_scenario(data, "recompute block")


@pytest.fixture(scope="module")
def stage_ms():
    """The scenario as written's estimated stage times (8 layers a stage), per recompute setting."""
    settings_ = {"none": {}, "every layer": {"recompute": "full"},
                 "first 2 layers": {"recompute": "full", "recompute_num_layers": 2}}
    return {name: Planner(_scenario(**extra)).baseline().stage_ms for name, extra in settings_.items()}


def test_a_stage_recomputing_its_first_2_of_8_layers_adds_a_quarter_of_what_recomputing_all_8_adds(stage_ms):
    none, every, block = stage_ms["none"], stage_ms["every layer"], stage_ms["first 2 layers"]
    for s in (1, 2):  # the middle stages hold decoder layers only
        assert block[s] == pytest.approx(none[s] + (every[s] - none[s]) * 2 / 8, rel=1e-9)
        assert none[s] < block[s] < every[s]
