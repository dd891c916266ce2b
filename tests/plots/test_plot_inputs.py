"""Whatever JSON a result file holds, a plot either draws it or refuses it with a ConfigError (exit status 2 on
the command line): never another exception."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulon.config.errors import ConfigError
from simulon.plots import KINDS
from simulon.plots.figure import pyplot

scalars = st.none() | st.booleans() | st.integers(-3, 10) | st.floats(-1, 1e3, allow_nan=False) | st.text(max_size=5)
keys = st.sampled_from(["per_gpu", "schedule", "stages", "spans", "memory", "terms_bytes", "capacity_bytes",
                        "device_bytes", "gpu", "stage", "stands_for", "compute_ms", "exposed_comm_ms", "bubble_ms",
                        "rows", "measured", "predicted", "size_bytes", "busbw_GBps", "iteration_time_ms"])
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner,
                                                                                                max_size=6),
                           max_leaves=25)

JSON_KINDS = sorted(k for k in KINDS if k not in ("scaling", "steps"))


@pytest.mark.parametrize("kind", JSON_KINDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=json_values)
def test_any_json_is_drawn_or_refused_with_a_config_error(kind, data):
    plt = pyplot()
    try:
        fig = KINDS[kind].draw(data, "result.json", None)
    except ConfigError as exc:
        assert str(exc).startswith("result.json")
    else:
        plt.close(fig)
