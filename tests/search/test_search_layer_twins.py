"""The search's estimate costs each layer as what it runs (search.estimate.LayerUnit): through its sliding window
(model.sliding_window) and in bf16 where the number format keeps it there (training.bf16_first/last_layers), as the
tracer's twins (LayerKernels.at) do in the replay."""

from __future__ import annotations

import pytest

from helpers import estimate_over_replay, gpt_scenario
from simulon.config.scenario import ScenarioConfig
from simulon.search.estimate import Estimator, LayerUnit, unit_kind
from simulon.search.run import Search, apply
from simulon.search.space import Strategy
from simulon.workload.layer_kernels import LayerKernels

SEQ = 8192


def windowed(full_every: int | None, seq: int = SEQ) -> ScenarioConfig:
    """Four layers; full_every None: no window, 0: every layer windowed, 2: every other (GPT-OSS)."""
    model = {} if full_every is None else {"sliding_window": {"size": 128, "full_every": full_every}}
    return gpt_scenario(nodes=1, gpus_per_node=4, layers=4, hidden=1024, heads=16, seq=seq, gbs=4, extra_model=model)


def narrow(first: int, last: int) -> ScenarioConfig:
    """Eight layers in NVFP4 on B200s, `first` and `last` of them kept in bf16."""
    data = gpt_scenario(nodes=1, gpus_per_node=4, layers=8, hidden=2048, heads=16, seq=2048, gbs=4).model_dump(
        mode="json", exclude_none=True)
    data["datacenter"]["node"]["gpu"] = "B200"
    data["workload"]["training"].update(dtype="nvfp4", bf16_first_layers=first, bf16_last_layers=last)
    return ScenarioConfig.model_validate(data)


def compute_s(sc: ScenarioConfig) -> float:
    dc = sc.datacenter
    estimator = Estimator.on(sc.workload, dc, sc.collective)
    strategy = Strategy.of(sc)
    return estimator.estimate(strategy, apply(sc.workload, strategy)).compute_s


def test_a_layer_unit_is_its_kind_with_the_twin_it_runs():
    kernels = LayerKernels.of(windowed(2).workload)
    assert [unit_kind(kernels, layer) for layer in range(4)] == [
        LayerUnit(("attention", "mlp"), False, 128), LayerUnit(("attention", "mlp"), False, 0)] * 2
    nvfp4 = LayerKernels.of(narrow(1, 2).workload)
    assert [unit_kind(nvfp4, layer).bf16 for layer in range(8)] == [True] + [False] * 5 + [True] * 2
    assert unit_kind(kernels, -1) == -1  # the embedding and the head are themselves


def test_the_estimate_times_windowed_layers_through_their_window_and_every_layer_as_its_own():
    full, every, alternate = compute_s(windowed(None)), compute_s(windowed(0)), compute_s(windowed(2))
    assert every < 0.8 * full  # 8,192 tokens: attention over 128 keys instead of the causal 4,096 on average
    # two windowed layers and two full ones: half of each (the embedding and the head the same in all three)
    assert alternate == pytest.approx((every + full) / 2, rel=1e-9)


def test_the_estimate_of_a_windowed_model_follows_its_replay():
    sc = windowed(2)
    assert 0.8 < estimate_over_replay(Search(sc), sc, Strategy.of(sc), 4) < 1.2


def test_the_estimate_times_the_layers_a_narrow_format_keeps_in_bf16_at_the_bf16_rate():
    none, some, half = compute_s(narrow(0, 0)), compute_s(narrow(1, 2)), compute_s(narrow(2, 2))
    assert none < some < half
    # each bf16 layer adds the same: three of them, then four
    assert (some - none) / 3 == pytest.approx((half - none) / 4, rel=1e-9)
