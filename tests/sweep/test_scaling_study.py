"""The scaling study of a sweep's rows: which swept fields change the GPU count, weak or strong scaling,
efficiency as tokens/s per GPU against the smallest point, and the term whose share grows most where
efficiency falls most."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulon.sweep.run import EXPOSED
from simulon.sweep.scaling import TERMS, gpu_axes, scaling_kind, scaling_study


def row(gpus: int, tokens: float, step_ms: float, nic: str = "400Gbps", **terms: float) -> dict[str, str]:
    values = {t: 0.0 for t in TERMS} | {"compute_ms": step_ms} | terms
    return {"nodes": str(gpus // 8), "nic": nic, "num_gpus": str(gpus), "tokens_per_step": str(tokens),
            "step_ms": str(step_ms), "tokens_per_s": str(tokens / step_ms * 1e3),
            **{k: str(v) for k, v in values.items()}}


def test_the_field_that_changes_the_gpus_is_told_from_the_others():
    rows = [row(g, 1e6, 100, nic) for g in (8, 16) for nic in ("200Gbps", "400Gbps")]
    assert gpu_axes(rows, ["nodes", "nic"]) == ["nodes"]
    series = scaling_study(rows, ["nodes", "nic"])
    assert [s.name for s in series] == ["nic=200Gbps", "nic=400Gbps"] and all(s.gpus == [8, 16] for s in series)


def test_no_series_without_a_field_that_changes_the_gpus():
    assert scaling_study([row(8, 1e6, 100, "200Gbps"), row(8, 1e6, 90, "400Gbps")], ["nic"]) == []


@pytest.mark.parametrize(("tokens", "kind"), [((1e6, 1e6, 1e6), "strong"), ((1e6, 2e6, 4e6), "weak"),
                                              ((1e6, 3e6, 4e6), "mixed")])
def test_weak_or_strong_scaling_is_read_from_the_tokens_per_step(tokens, kind):
    assert scaling_kind([row(g, t, 100) for g, t in zip((8, 16, 32), tokens, strict=True)]) == kind


@given(st.lists(st.floats(10, 1e4), min_size=2, max_size=6))
def test_strong_scaling_efficiency_is_the_speed_up_over_the_ideal_one(steps):
    gpus = [8 * 2**i for i in range(len(steps))]
    (series,) = scaling_study([row(g, 1e6, s) for g, s in zip(gpus, steps, strict=True)], ["nodes"])
    for g, s, e in zip(gpus, steps, series.efficiency, strict=True):
        assert e == pytest.approx((steps[0] / s) / (g / gpus[0]), rel=1e-9)


def test_weak_scaling_efficiency_is_the_first_step_time_over_each():
    (series,) = scaling_study([row(8, 1e6, 100), row(16, 2e6, 125)], ["nodes"])
    assert series.kind == "weak" and series.efficiency == pytest.approx([1.0, 0.8])


def test_where_efficiency_falls_most_the_term_whose_share_grows_most_is_named():
    dp = EXPOSED[EXPOSED.index("exposed_dp_comm_ms")]
    rows = [row(8, 1e6, 100, bubble_ms=10), row(16, 1e6, 55, bubble_ms=6, **{dp: 2}),
            row(32, 1e6, 40, bubble_ms=4, **{dp: 12})]
    (series,) = scaling_study(rows, ["nodes"])
    worst = series.worst
    assert (worst.from_gpus, worst.to_gpus, worst.term) == (16, 32, dp)
    assert worst.share_before == pytest.approx(2 / 55) and worst.share_after == pytest.approx(12 / 40)
    assert "from 16 to 32 GPUs" in worst.describe() and "exposed dp comm" in worst.describe()


def test_no_break_is_reported_where_efficiency_never_falls():
    (series,) = scaling_study([row(8, 1e6, 100), row(16, 1e6, 50)], ["nodes"])
    assert series.worst is None and series.efficiency == pytest.approx([1.0, 1.0])


@given(st.floats(0.1, 2.0), st.floats(1e-3, 0.5))
def test_a_fall_in_efficiency_is_never_described_as_between_two_equal_figures(before, fall):
    # a weak-scaling series whose second point ran a little faster than its first, and whose third fell back
    steps = [100.0, 100.0 / before, 100.0 / (before - fall * before)]
    (series,) = scaling_study([row(8 * 2**i, 1e6 * 2**i, s) for i, s in enumerate(steps)], ["nodes"])
    if series.worst is not None:
        shown = series.worst.describe().split("(")[1].split(")")[0].split(" -> ")
        assert shown[0] != shown[1]
        assert float(shown[0].rstrip("%")) > float(shown[1].rstrip("%"))
