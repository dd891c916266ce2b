"""Times are written with three significant figures below 10 ms and one decimal from there up (analysis/shown.py):
a 0.146 ms step read "Total: 0.1 ms"; a large one reads as it always did ("Total: 529.2 ms")."""

from __future__ import annotations

import json
import math

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from helpers import cli, seed_dict
from simulon.analysis.shown import shown_ms


@given(st.floats(1e-3, 10, exclude_max=True))
def test_a_time_under_ten_milliseconds_keeps_three_significant_figures(ms):
    text = shown_ms(ms)
    assert float(text) == pytest.approx(ms, rel=5e-3)  # three figures: within half a unit of the third
    assert float(text) == float(f"{ms:.3g}")


@given(st.floats(10, 1e12))
def test_a_time_of_ten_milliseconds_and_more_reads_as_it_did_with_one_decimal(ms):
    assert shown_ms(ms) == f"{ms:,.1f}"


@pytest.mark.parametrize(("ms", "text"), [(0.146, "0.146"), (0.1463, "0.146"), (2.0, "2.0"), (0.02, "0.02"),
                                          (9.996, "10.0"), (529.2163, "529.2"), (7108.44, "7,108.4"), (0.0, "0.0"),
                                          (-0.146, "-0.146"), (2e-7, "2e-07")])
def test_sample_times_are_written_as_a_reader_expects(ms, text):
    assert shown_ms(ms) == text


@given(st.floats(-1e6, 1e6, allow_nan=False).filter(lambda v: v != 0))
def test_a_change_is_written_with_its_sign(ms):
    assert shown_ms(ms, signed=True) == ("+" if ms > 0 else "") + shown_ms(ms)
    assert math.copysign(1, float(shown_ms(ms).replace(",", ""))) == math.copysign(1, ms)


def test_the_headline_of_a_tiny_step_gives_three_significant_figures(tmp_path):
    data = seed_dict()
    data["workload"]["model"].update(num_layers=2, hidden_size=256, num_heads=4, num_kv_heads=4, ffn_hidden_size=1024)
    data["workload"]["training"]["sequence_length"] = 64
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    step = json.loads(cli("simulate", str(path), "--json").stdout)["iteration_time_ms"]
    headline = cli("simulate", str(path)).stdout.splitlines()[0]
    assert step < 10 and headline.startswith("GPUs: 4 | Total: ") and headline.endswith(" ms")
    assert float(headline.removeprefix("GPUs: 4 | Total: ").removesuffix(" ms")) == float(f"{step:.3g}")
