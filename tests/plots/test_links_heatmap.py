"""The links heat map's data (`simulate --json`'s analysis.links.over_time): each busiest link's mean load per time
bin, the exact bin means of its load step function, so that over the whole step they average to the link's
utilisation; the `links` plot names the missing field when a result lacks them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulon.analysis.links import LinkSeries, load_over_time
from simulon.config.errors import ConfigError
from simulon.plots.links import links


def test_each_links_bins_average_to_its_utilisation_over_the_step(results):
    data = json.loads(results["simulate"].read_text())
    info = data["analysis"]["links"]
    rows = info["over_time"]["links"]
    assert [r["link"] for r in rows] == [b["link"] for b in info["busiest"]] and rows
    assert info["over_time"]["bin_ms"] * len(rows[0]["load"]) == pytest.approx(data["iteration_time_ms"])
    for row, busiest in zip(rows, info["busiest"], strict=True):
        assert np.mean(row["load"]) == pytest.approx(busiest["utilisation"], rel=1e-9)
        assert min(row["load"]) >= 0


@given(st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 2.0)), min_size=1, max_size=12),
       st.integers(1, 40))
def test_the_bins_hold_the_exact_integral_of_the_load(steps, bins):
    times = np.array(sorted(t for t, _ in steps))
    load = np.array([level for _, level in steps])
    load[-1] = 0.0  # a link's load returns to zero after its last flow
    row = load_over_time([LinkSeries("l", times, load)], 1.0, bins)["links"][0]["load"]
    integral = float(np.sum(load[:-1] * np.diff(times)))
    assert sum(row) / bins == pytest.approx(integral, abs=1e-9)
    assert min(row) >= -1e-12 and max(row) <= load.max() + 1e-9


@pytest.mark.parametrize(("data", "field"), [
    ({"analysis": {"links": {"busiest": []}}}, "analysis.links: over_time: missing"),
    ({"analysis": {"links": {"over_time": {"bin_ms": 1.0, "links": []}}}},
     "analysis.links.over_time.links: empty: no link carried traffic"),
    ({"analysis": {"links": {"over_time": {"bin_ms": 1.0, "links": [{"link": "a", "load": ["x"]}]}}}},
     "analysis.links.over_time.links[0].load[0]: expected a number, got 'x'"),
])
def test_a_result_without_the_links_load_names_the_field(data, field):
    with pytest.raises(ConfigError, match=field.replace("[", r"\[").replace("]", r"\]")):
        links(data, "r.json")
