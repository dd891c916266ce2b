"""Context parallelism by all-to-all (DeepSpeed-Ulysses; Megatron's --cp-comm-type a2a, Transformer Engine's
AttnFuncWithCPAndQKVOA2A) and its hierarchical form a2a+p2p (all-to-all inside groups of consecutive context-parallel
ranks, the key/value ring between them): the collectives each layer runs, the attention it computes against the
all-gather's, the process groups, what it keeps, and what is refused."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from helpers import cli, gpt_scenario
from simulon.collective.types import CollType
from simulon.memory.activations import ActivationModel
from simulon.pipeline import simulate
from simulon.search.run import Search, apply, scenario_for
from simulon.search.space import Space, Strategy
from simulon.workload.kernels import Phase
from simulon.workload.layout import RankLayout
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import CollectiveOp, ComputeOp

LAYERS, HIDDEN, HEADS = 2, 1024, 8


def scenario(cp: int, comm: str, sizes: list[int] | None = None, nic: str = "400Gbps", seq: int = 8192,
             kv_heads: int | None = None, tp: int = 1):
    extra = {"cp": cp, "context_parallel_comm": comm}
    if sizes:
        extra["hierarchical_context_parallel_sizes"] = sizes
    return gpt_scenario(nodes=2, gpus_per_node=4, tp=tp, layers=LAYERS, hidden=HIDDEN, heads=HEADS, seq=seq,
                        gbs=8 // (cp * tp), nic=nic, kv_heads=kv_heads, extra_parallelism=extra)


def program(sc):
    tracer = MegatronTracer(sc.workload, 8)
    return tracer, tracer.stage_program(0).ops


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_each_layer_sends_q_k_v_and_the_output_all_to_all_each_way(cp):
    tracer, ops = program(scenario(cp, "a2a", kv_heads=8))
    micro, tokens = tracer.num_microbatches, 8192 // cp
    a2a = [op for op in ops if isinstance(op, CollectiveOp) and op.axis == "cp_a2a"]
    assert all(op.ctype == CollType.AllToAll for op in a2a)
    assert not [op for op in ops if isinstance(op, CollectiveOp) and op.axis in ("cp", "cp_p2p")]
    for phase in (Phase.fwd, Phase.bwd_ig):
        mine = [op for op in a2a if op.phase == phase]
        assert len(mine) == 4 * LAYERS * micro
        # Q, K, V and the output of the rank's share of the sequence, every head: 4 x tokens x hidden x 2 bytes
        assert sum(op.nbytes for op in mine) == pytest.approx(4 * tokens * HIDDEN * 2 * LAYERS * micro)


def attention_flops(sc) -> tuple[float, float]:
    kernels = [op.kernel for op in program(sc)[1] if isinstance(op, ComputeOp) and op.kernel.name == "attn_flash"]
    return sum(k.flops for k in kernels), sum(k.hw_flops for k in kernels)


@pytest.mark.parametrize(("cp", "comm", "sizes"), [(2, "a2a", None), (8, "a2a", None), (4, "a2a+p2p", [2, 2]),
                                                   (8, "a2a+p2p", [2, 4]), (8, "a2a+p2p", [4, 2])])
def test_every_variant_computes_the_attention_of_the_gathered_keys(cp, comm, sizes):
    assert attention_flops(scenario(cp, comm, sizes)) == pytest.approx(attention_flops(scenario(cp, "all_gather")))


@pytest.mark.parametrize(("a2a", "ring"), [(2, 4), (4, 2), (2, 2)])
def test_a2a_p2p_splits_the_heads_in_each_group_and_passes_the_ring_between_groups(a2a, ring):
    tracer, ops = program(scenario(a2a * ring, "a2a+p2p", [a2a, ring]))
    micro = tracer.num_microbatches
    sends = [op for op in ops if isinstance(op, CollectiveOp) and op.axis == "cp_p2p" and op.phase == Phase.fwd]
    assert len(sends) == (ring - 1) * LAYERS * micro
    blocks = [op.kernel for op in ops if isinstance(op, ComputeOp) and op.kernel.name == "attn_flash"
              and op.kernel.phase == Phase.fwd]
    assert len(blocks) == ring * LAYERS * micro
    assert {(k.param("heads"), k.param("seq_q")) for k in blocks} == {(HEADS // a2a, 8192 // ring)}
    layout = tracer.layout
    assert layout.group("cp_a2a", 0) == tuple(range(a2a))
    assert layout.group("cp_p2p", 0) == tuple(range(0, a2a * ring, a2a))


@given(tp=st.sampled_from([1, 2]), a2a=st.sampled_from([1, 2, 4]), ring=st.sampled_from([1, 2, 4]),
       rank=st.integers(0, 63))
def test_the_all_to_all_groups_and_the_rings_between_them_tile_each_context_parallel_group(tp, a2a, ring, rank):
    layout = RankLayout(tp=tp, cp=a2a * ring, dp=2, pp=2, cp_a2a=a2a)
    rank %= layout.num_gpus
    inner, outer = layout.group("cp_a2a", rank), layout.group("cp_p2p", rank)
    assert set(inner) & set(outer) == {rank} and len(inner) == a2a and len(outer) == ring
    assert {i for r in outer for i in layout.group("cp_a2a", r)} == set(layout.group("cp", rank))


def test_the_head_split_keeps_the_attention_kernel_s_own_output_beside_the_projection_s():
    ring = ActivationModel(scenario(4, "p2p").workload).layer(("attention", "mlp")).parts
    a2a = ActivationModel(scenario(4, "a2a").workload).layer(("attention", "mlp")).parts
    assert a2a["attention output before the all-to-all"] == a2a["attention output"] == ring["attention output"]
    assert {k: v for k, v in a2a.items() if k != "attention output before the all-to-all"} == ring


@pytest.mark.parametrize("comm", ["a2a", "a2a+p2p"])
def test_a_faster_network_never_slows_the_all_to_all_variants(comm):
    sizes = [2, 2] if comm == "a2a+p2p" else None
    slow = simulate(scenario(4, comm, sizes, nic="100Gbps")).result.iteration_time_ms
    fast = simulate(scenario(4, comm, sizes, nic="800Gbps")).result.iteration_time_ms
    assert fast <= slow


@pytest.mark.parametrize(("comm", "sizes"), [("a2a", None), ("a2a+p2p", [2, 2])])
def test_the_search_s_estimate_of_the_all_to_all_follows_the_replay(comm, sizes):
    """One layer's forward and backward on four context-parallel ranks over two nodes, exposed cp communication."""
    sc = scenario(4, comm, sizes)
    strategy = Strategy(1, 1, 1, 2, 4, 1, 1, 1, False, "none", "distributed_optimizer", "bf16", False)
    estimate = Search(sc).estimator.estimate(strategy, apply(sc.workload, strategy))
    replayed = simulate(scenario_for(sc, strategy, 8)).result.iteration_time_ms
    assert 0.75 < estimate.iteration_s * 1e3 / replayed < 1.25


@pytest.mark.parametrize(("change", "says"), [
    ({"context_parallel_comm": "a2a", "cp": 8, "kv_heads": 4}, "a2a splits each tensor-parallel rank's 8 heads "
     "and 4 key/value heads over 8 ranks, which must divide both"),
    ({"context_parallel_comm": "a2a+p2p", "cp": 4, "sizes": [2, 4]}, "hierarchical_context_parallel_sizes: 2 x 4 = 8, "
     "but cp is 4"),
    ({"context_parallel_comm": "a2a+p2p", "cp": 4}, "hierarchical_context_parallel_sizes: is needed with a2a+p2p"),
    ({"context_parallel_comm": "p2p", "cp": 4, "sizes": [2, 2]}, "applies to context_parallel_comm a2a+p2p only"),
])
def test_a_context_parallel_split_the_heads_cannot_take_is_refused_naming_the_field(change, says):
    with pytest.raises(ValueError, match=r"workload\.parallelism\.") as caught:  # pydantic's, as the loader reads it
        scenario(change["cp"], change["context_parallel_comm"], change.get("sizes"), kv_heads=change.get("kv_heads"))
    assert says in str(caught.value)


@pytest.mark.parametrize(("sizes", "says"), [
    ([4], "[4]: it takes two entries, [all-to-all ranks, ring ranks], not 1"),
    ([2, 2, 1], "[2, 2, 1]: it takes two entries"), ("2,2", "expected a list")])
def test_hierarchical_sizes_of_another_length_are_one_plain_problem(tmp_path, sizes, says):
    data = scenario(4, "a2a+p2p", [2, 2]).model_dump(mode="json", exclude_none=True)
    data["workload"]["parallelism"]["hierarchical_context_parallel_sizes"] = sizes
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    run = cli("simulate", str(path))
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert f"workload.parallelism.hierarchical_context_parallel_sizes: {says}" in run.stderr, run.stderr


def test_the_search_offers_the_all_to_all_only_context_sizes_that_split_the_heads():
    sc = scenario(2, "a2a", kv_heads=2)
    kept = list(Space(sc.workload, 8, 4, fp8=False).strategies())
    assert {(s.tp, s.cp) for s in kept if s.cp > 1} == {(1, 2)}  # 2 key/value heads: cp 2 at tp 1, none at tp 2
    assert all(scenario_for(sc, s, 8) for s in kept[::25])
