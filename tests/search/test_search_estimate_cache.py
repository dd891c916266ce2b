"""The estimator's caches change no figure: each kernel is timed once per number format and gives what one call of
the compute model over the whole list gives, in any order and with repeats; a search over a MoE model (whose
strategies share most kernels across expert layouts) finds the same estimates with a fresh estimator per
strategy as with one shared by all."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import ROOT, gpt_scenario
from simulon.search.run import Search, apply
from simulon.search.space import Limits
from simulon.workload.kernels import Phase
from simulon.workload.layer_kernels import LayerKernels


def moe_scenario():
    return gpt_scenario(nodes=2, gpus_per_node=4, layers=4, gbs=16, seq=1024,
                        moe={"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 512})


def every_spec(search: Search) -> list:
    """Every kernel of a few strategies' tables (dense and expert GEMMs, attention, elementwise)."""
    specs = []
    for strategy in list(search.space.strategies())[:200:20]:
        table = LayerKernels.of(apply(search.workload, strategy)).table
        specs += [spec for phases in table.values() for phase, spec in phases.items() if phase != Phase.recompute]
    return specs


SEARCH = Search(moe_scenario(), limits=Limits({"dtype": ("bf16",)}))
SPECS = every_spec(SEARCH)


@given(picks=st.lists(st.integers(0, len(SPECS) - 1), min_size=1, max_size=60), again=st.booleans())
@settings(max_examples=100, deadline=None)
def test_a_kernel_timed_once_and_reused_gives_what_the_compute_model_gives_for_the_whole_list(picks, again):
    specs = [SPECS[i] for i in picks]
    direct = SEARCH.estimator.compute_model("bf16").seconds(specs)
    if again:  # some kernels already known, the rest timed now
        SEARCH.estimator.kernel_seconds("bf16", specs[: len(specs) // 2])
    cached = SEARCH.estimator.kernel_seconds("bf16", specs)
    assert cached.tolist() == direct.tolist()
    assert float(cached.sum()) == float(direct.sum())


def test_an_estimator_shared_by_every_strategy_estimates_each_as_a_fresh_one_does():
    sc = moe_scenario()
    shared = Search(sc, limits=Limits({"dtype": ("bf16",), "recompute": ("none",)}))
    strategies = list(shared.space.strategies())[::7][:40]
    assert len({(s.ep, s.etp, s.micro_batch_size) for s in strategies}) > 3
    for strategy in strategies:
        workload = apply(sc.workload, strategy)
        alone = Search(sc).estimator.estimate(strategy, workload)
        assert shared.estimator.estimate(strategy, workload) == alone
        assert np.isfinite(alone.iteration_s) and alone.iteration_s > 0


def test_a_profiled_gpus_kernels_are_estimated_as_the_replay_times_them_from_its_profile():
    """The estimate timed every kernel with the compute model, the replay with the GPU's measured profile: with a
    user's profile whose tp-2 GEMMs ran 3x the model, the search ranked tp2 best (342 ms) where tp4 replays at 194."""
    from simulon.compute.populate import spec_seconds
    from simulon.config.common import DType
    from simulon.config.loading import parse_scenario

    profile = ROOT / "src" / "simulon" / "compute" / "data" / "profiles" / "h100-sxm5-80gb.yaml"
    data = gpt_scenario(nodes=1, gpus_per_node=8, layers=2, hidden=4096, heads=32, gbs=16, seq=2048).model_dump(
        mode="json", exclude_none=True)
    data["datacenter"]["node"]["gpu"] = {"from": str(profile)}
    search = Search(parse_scenario(data, "test"), limits=Limits({"dtype": ("bf16",)}))
    specs = list(dict.fromkeys(every_spec(search)))
    replayed, measured = spec_seconds(specs, search.gpu, DType.bf16)
    assert measured > 0  # the profile holds some of these kernels
    assert search.estimator.kernel_seconds("bf16", specs).tolist() == replayed.tolist()
