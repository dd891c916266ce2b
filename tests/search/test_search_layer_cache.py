"""The search's memory check serves layers' activations from one cache for all its strategies (memory.activations
.LayerCache): every strategy's fullest stage is the one the memory model works out without it, and a workload of
another model is never served from it."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

from helpers import gpt_scenario
from simulon.memory import MemoryModel, scenario_channels
from simulon.memory.activations import ActivationModel, LayerCache, Recent
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


def counting(monkeypatch, made: Counter) -> None:
    """Count the memory model's stages, the chunks it works out and the schedules it walks."""
    for name in ("stage", "_chunk_layers", "_peaks"):
        counted = getattr(MemoryModel, name)

        def count(*args, counted=counted, name=name, **kwargs):
            made[name] += 1
            return counted(*args, **kwargs)
        monkeypatch.setattr(MemoryModel, name, count if name != "_peaks" else staticmethod(count))


def variants(search: Search, dimension: str, count: int) -> list[list]:
    """`count` groups of the search's strategies equal in every field but `dimension`, each of several values."""
    groups: dict[tuple, list] = {}
    for strategy in search.space.strategies():
        groups.setdefault(dataclasses.astuple(dataclasses.replace(strategy, **{dimension: 0})), []).append(strategy)
    several = [sorted(group) for group in groups.values() if len(group) > 2]
    assert len(several) > count
    return random.Random(1).sample(several, count)


def test_strategies_that_differ_only_in_their_sharding_share_their_chunks(monkeypatch):
    """The activations do not read how the model states are sharded: the distributed-optimizer, ZeRO-2 and FSDP
    variants of a strategy share each chunk (FSDP's transients added on top, so they walk apart), and each variant's
    fullest stage is the uncached model's to the bit."""
    sc = gpt_scenario(nodes=2, gpus_per_node=8, layers=8, hidden=2048, heads=16, gbs=32, seq=2048)
    search, made = Search(sc), Counter()
    strategies = [strategy for group in variants(search, "sharding", 20) for strategy in group]
    expected = [uncached(search, strategy) for strategy in strategies]
    counting(monkeypatch, made)
    assert [search.memory(strategy) for strategy in strategies] == expected
    monkeypatch.undo()
    chunks = made["stage"] * max(s.vpp for s in strategies)
    assert made["_chunk_layers"] == len(search.layers.chunks) <= chunks / 3  # one of three variants works them out


def test_strategies_whose_stages_keep_the_same_share_their_walks(monkeypatch):
    """A rank of context parallelism 2 at twice the micro-batch size holds the same tokens, and with half the
    data-parallel ranks runs as many micro-batches: its stages' walks are the ones of the strategy without, served
    once (the chunks, whose key holds the shard shape, apart), and each fullest stage is the uncached model's to the
    bit."""
    sc = gpt_scenario(nodes=2, gpus_per_node=8, layers=8, hidden=2048, heads=16, gbs=32, seq=2048)
    search, made = Search(sc), Counter()
    space = set(search.space.strategies())
    twins = [(s, t) for s in sorted(space) if s.cp == 1 and (t := dataclasses.replace(
        s, cp=2, micro_batch_size=2 * s.micro_batch_size, dp=s.dp // 2)) in space]
    assert len(twins) > 20
    strategies = [strategy for pair in random.Random(1).sample(twins, 20) for strategy in pair]
    expected = [uncached(search, strategy) for strategy in strategies]
    counting(monkeypatch, made)
    assert [search.memory(strategy) for strategy in strategies] == expected
    monkeypatch.undo()
    assert made["_peaks"] == len(search.layers.walks) < made["stage"]  # each distinct walk once, twins' shared


def test_the_recent_store_keeps_its_newest_entries():
    store = Recent(3)
    for key in range(5):
        store[key] = str(key)
    assert list(store.items()) == [(2, "2"), (3, "3"), (4, "4")]
    assert LayerCache.served(store, 4, lambda: "made") == "4"
    assert LayerCache.served(store, 0, lambda: "made") == "made" and list(store) == [3, 4, 0]
