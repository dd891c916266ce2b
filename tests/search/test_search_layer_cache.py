"""The search's memory check serves layers' activations from one cache for all its strategies (memory.activations
.LayerCache): every strategy's fullest stage is the one the memory model works out without it, and a workload of
another model is never served from it."""

from __future__ import annotations

import random

from helpers import gpt_scenario
from simulon.memory import MemoryModel, scenario_channels
from simulon.memory.activations import ActivationModel, LayerCache
from simulon.search.run import Search, apply


def uncached(search: Search, strategy) -> object:
    """The fullest stage as the memory model gives it with no cache: every stage, the fullest by device bytes."""
    workload = apply(search.workload, strategy)
    model = MemoryModel(workload, search.num_gpus, search.capacity, search.gpu.name, scenario_channels(search.sc))
    return max((model.stage(s) for s in range(strategy.pp)), key=lambda s: s.device)


def test_every_strategy_of_a_search_gets_the_memory_the_uncached_model_gives():
    """Strategies sharing a layer shape (dp, pp, vpp, sharding, layer split) meet the cache's entries; the ones of
    other micro-batch sizes, recomputation, formats and tp do not: all agree with the uncached model to the bit."""
    sc = gpt_scenario(nodes=2, gpus_per_node=8, layers=8, hidden=2048, heads=16, gbs=32, seq=2048)
    search = Search(sc)
    strategies = random.Random(0).sample(list(search.space.strategies()), 400)
    assert len({(s.tp, s.cp, s.micro_batch_size, s.recompute, s.dtype) for s in strategies}) > 20
    for strategy in strategies:
        cached = search.memory(strategy)
        assert cached == uncached(search, strategy), strategy
    assert 0 < len(search.layers.known) < len(strategies)  # shared: fewer layers worked out than strategies


def test_a_workload_of_another_model_is_not_served_from_the_cache():
    one = gpt_scenario(nodes=1, gpus_per_node=8, layers=4, hidden=2048, heads=16, gbs=8, seq=2048).workload
    other = gpt_scenario(nodes=1, gpus_per_node=8, layers=4, hidden=4096, heads=32, gbs=8, seq=2048).workload
    cache = LayerCache(one.model)
    kind = one.model.layer_kinds[0]
    first = ActivationModel(one, cache).layer(kind)
    assert cache.key(ActivationModel(other, cache), kind, None, False) is None
    assert ActivationModel(other, cache).layer(kind) == ActivationModel(other).layer(kind) != first
    assert len(cache.known) == 1
