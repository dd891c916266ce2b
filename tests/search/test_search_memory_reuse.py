"""The search's memory check shares work between its strategies (memory/model.py): each stage's model chunks are
summed once per layer span, ends, shard shape and recomputation (LayerCache.chunks), the stages of alike layers are
found once per layer split (LayerCache.splits), and a stage's schedule is walked once per schedule shape and chunk
figures (model.walked). Every strategy's fullest stage is still the one the memory model works out alone, without
any of it, to the bit; and a strategy that changes only what none of it reads works out none of it again."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.memory import MemoryModel, StageMemory, scenario_channels
from simulon.memory import model as memory_model
from simulon.memory.activations import ActivationModel
from simulon.memory.states import ModelStates
from simulon.search.run import Search, apply
from simulon.workload.layer_kernels import ShardShape
from simulon.workload.parameters import PipelineLayers

SCENARIO = gpt_scenario(nodes=2, gpus_per_node=8, layers=10, hidden=1024, heads=16, gbs=64, seq=1024,
                        moe={"num_experts": 8, "top_k": 2, "first_dense_layers": 2}, extra_model={"mtp_layers": 1})
SEARCH = Search(SCENARIO)
STRATEGIES = sorted(s for s in SEARCH.space.strategies() if s.pp > 2)


def bits(memory: StageMemory) -> dict:
    """Every figure of a stage's peak, floats as their exact hexadecimal spelling."""
    def exact(value):
        if isinstance(value, float):
            return value.hex()
        if isinstance(value, dict):
            return {key: exact(item) for key, item in value.items()}
        return value
    return exact({**dataclasses.asdict(memory), "device": memory.device})


def forget_walks() -> None:
    """Drop every walk kept from an earlier strategy (model.walked), where the memory model keeps any."""
    kept = getattr(memory_model, "walked", None)
    if kept is not None:
        kept.cache_clear()


def alone(search: Search, strategy) -> StageMemory:
    """The fullest stage as the memory model gives it with nothing shared: no layer cache, no walk kept from an
    earlier strategy, every stage worked out on its own (the first of the largest)."""
    forget_walks()
    workload = apply(search.workload, strategy)
    model = MemoryModel(workload, search.num_gpus, search.capacity, search.gpu.name, scenario_channels(search.sc),
                        fp8_any_layout=search.gpu.fp8_any_layout)
    return max((model.stage(s) for s in range(strategy.pp)), key=lambda s: s.device)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(picks=st.lists(st.integers(0, len(STRATEGIES) - 1), min_size=2, max_size=6))
def test_every_strategy_after_others_gets_the_fullest_stage_the_model_gives_alone(picks):
    """Strategies checked one after another in one search (sharing its caches) each get, to the bit, the stage
    the memory model gives that strategy alone, whatever was checked before."""
    search = Search(SCENARIO)
    shared = [bits(search.memory(STRATEGIES[pick])) for pick in picks]
    for pick, memory in zip(picks, shared, strict=True):
        assert memory == bits(alone(search, STRATEGIES[pick])), STRATEGIES[pick]


def test_a_strategy_differing_only_in_its_sharding_sums_and_walks_no_stage_again(monkeypatch):
    """Plain data parallelism and ZeRO-1 keep the same activations and run the same schedule: the second strategy's
    memory check groups no layers into kinds and walks no schedule (its states are its own)."""
    first = next(s for s in STRATEGIES if s.sharding == "distributed_optimizer" and s.pp == 4)
    second = dataclasses.replace(first, sharding="ddp")
    search = Search(SCENARIO)
    forget_walks()
    search.memory(first)
    grouped, walks = [], []
    kinds, peaks = ActivationModel.layer_kinds, MemoryModel._peaks
    monkeypatch.setattr(ActivationModel, "layer_kinds", lambda self, layers: grouped.append(layers) or kinds(self,
                                                                                                              layers))
    monkeypatch.setattr(MemoryModel, "_peaks", staticmethod(lambda *args: walks.append(args) or peaks(*args)))
    memory = search.memory(second)
    assert (grouped, walks) == ([], [])
    assert bits(memory) == bits(alone(search, second))


def test_a_memory_model_works_out_its_workloads_shard_shape_and_layer_split_once(monkeypatch):
    """The activations, the states and the parameter table read one shard shape and one layer split, which the
    memory model works out once for each strategy (and the states' figures are those of their own)."""
    strategy = next(s for s in STRATEGIES if s.sharding == "fsdp")
    workload = apply(SEARCH.workload, strategy)
    shapes, splits = [], []
    shape_of, split_of = ShardShape.of.__func__, PipelineLayers.of.__func__
    monkeypatch.setattr(ShardShape, "of", classmethod(lambda cls, wl: shapes.append(1) or shape_of(cls, wl)))
    monkeypatch.setattr(PipelineLayers, "of", classmethod(lambda cls, wl: splits.append(1) or split_of(cls, wl)))
    model = MemoryModel(workload, SEARCH.num_gpus, SEARCH.capacity)
    assert (len(shapes), len(splits)) == (1, 1)
    alone = ModelStates(workload, model.layout)
    assert [model.states.stage(s) for s in range(strategy.pp)] == [alone.stage(s) for s in range(strategy.pp)]


def test_fsdps_transients_are_worked_out_once_a_stage_not_once_a_chunk_and_direction(monkeypatch):
    """Under FSDP a stage's chunks hold the same gathered weights and unsharded gradients on top (the stage's most):
    summing the chunks of a two-chunk stage reads each of its layers' parameters once."""
    strategy = next(s for s in SEARCH.space.strategies() if s.sharding == "fsdp" and (s.pp, s.vpp) == (2, 2))
    model = MemoryModel(apply(SEARCH.workload, strategy), SEARCH.num_gpus, SEARCH.capacity)
    read = []
    params = type(model.states.kernels).layer_params
    monkeypatch.setattr(type(model.states.kernels), "layer_params", lambda self, *a: read.append(1) or params(self, *a))
    chunks = model._chunks(1)
    assert len(read) == sum(len(model.layers.layers_of(1, chunk)) for chunk in range(2))
    assert chunks[0].backward > 0 and chunks[0].forward > 0
