"""Data-parallel shares (training.dp_shares): each replica runs its own micro-batch count, the gradient reduction
joins them all. Even shares are today's step exactly; on one GPU type uneven shares only lose; on H100 beside A100
shares by speed win; the reduction carries the same bytes; the size estimate, the fold and the planner follow."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from helpers import cli
from simulon.config import ScenarioConfig
from simulon.config.common import FieldError
from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario
from simulon.config.workload import microbatch_steps
from simulon.memory import estimate_memory
from simulon.pipeline import plan_dag, simulate
from simulon.search.hetero import Planner, share_microbatches
from simulon.workload.program import program_of_rank

FABRIC = {"scale_out": {"nic": {"speed": "200Gbps", "latency": "2us"},
                        "topology": {"tiers": 2, "rail_optimized": True, "nics_per_leaf": 8, "spines": 4}},
          "scale_up": {"switch": {"port_speed": "300GBps", "latency": "0.5us"}}}
NODE = {"gpus_per_node": 4, "gpus_per_nic": 1}
FIELD = "workload.training.dp_shares"


def scenario(gpus: tuple[str, ...] = ("H100", "A100"), nodes: int = 2, dp: int = 2, pp: int = 2, gbs: int = 16,
             shares: list[int] | None = None, replica_groups: list[int] | None = None, **parallelism) -> dict:
    """tp 4 (one node) x pp x dp of a small GPT on node groups of `nodes` nodes each; `replica_groups`: the group
    of each replica's whole pipeline."""
    training = {"global_batch_size": gbs, "micro_batch_size": 1, "sequence_length": 1024}
    if shares is not None:
        training["dp_shares"] = shares
    if replica_groups is not None:
        training["stage_groups"] = [replica_groups] * pp
    return {"datacenter": {"node_groups": [{"num_nodes": nodes, "node": {**NODE, "gpu": gpu}} for gpu in gpus],
                           "network": FABRIC},
            "workload": {"model": {"name": "test-gpt", "num_layers": 4, "hidden_size": 1024, "num_heads": 16,
                                   "ffn_hidden_size": 4096, "vocab_size": 32768},
                         "parallelism": {"tp": 4, "pp": pp, "dp": dp, **parallelism}, "training": training}}


def step(data: dict, fold_mode: str = "auto"):
    return simulate(ScenarioConfig.model_validate(data), fold_mode=fold_mode)


# --- even shares are today's step ---------------------------------------------------------------------------------

def test_shares_equal_to_the_even_split_print_the_same_json(tmp_path: Path):
    plain, even = tmp_path / "plain.yaml", tmp_path / "even.yaml"
    plain.write_text(yaml.safe_dump(scenario(replica_groups=[0, 1])))
    even.write_text(yaml.safe_dump(scenario(replica_groups=[0, 1], shares=[8, 8])))
    a, b = cli("simulate", str(plain), "--json"), cli("simulate", str(even), "--json")
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout


# --- what uneven shares do ----------------------------------------------------------------------------------------

def moved(moves: list[tuple[int, int]]) -> list[int]:
    """Four replicas' 16 micro-batches, 4 each, after moving one from a to b for each (a, b) (a keeping one)."""
    shares = [4] * 4
    for a, b in moves:
        if a != b and shares[a] > 1:
            shares[a], shares[b] = shares[a] - 1, shares[b] + 1
    return shares


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=8).map(moved)
       .filter(lambda shares: len(set(shares)) > 1))
def test_on_one_gpu_type_uneven_shares_are_never_faster_than_even(shares):
    one_type = {"gpus": ("A100", "A100"), "nodes": 4, "dp": 4, "gbs": 16}
    even = step(scenario(**one_type)).result.iteration_time_ms
    assert step(scenario(**one_type, shares=shares)).result.iteration_time_ms >= even


@pytest.fixture(scope="module")
def mixed():
    """Replica 0 on the H100s, replica 1 on the A100s: even shares, and shares the planner gives by speed."""
    data = scenario(replica_groups=[0, 1])
    planner = Planner(ScenarioConfig.model_validate(data))
    shared = planner.with_shares(planner.baseline())
    return data, shared, step(data), step(scenario(replica_groups=[0, 1], shares=list(shared.dp_shares)))


def test_a_replay_that_ends_as_estimated_leaves_the_estimated_shares(mixed):
    data, shared, _, _ = mixed
    planner = Planner(ScenarioConfig.model_validate(data))
    even = planner.baseline()
    period, fill = planner.replica_lines(even)
    ends = [f + planner.microbatches * p for p, f in zip(period, fill, strict=True)]
    assert planner.calibration(even, ends) == pytest.approx([1.0, 1.0])
    assert planner.with_shares(even, [1.0, 1.0]).dp_shares == shared.dp_shares
    slower_a100 = planner.with_shares(even, [1.0, 1.5]).dp_shares
    assert slower_a100[1] < shared.dp_shares[1]


def test_on_h100_beside_a100_shares_by_speed_beat_even_shares(mixed):
    """Shares by speed take at least half the way from even shares to the step of replicas whose throughputs add
    (the harmonic mean of the all-H100 and all-A100 steps); whole micro-batches keep it from the whole way. The
    bound was a fixed 0.9 of the even step, which the tp all-reduces on NCCL's channel count for their size
    (fa9c537) left at 0.9005 (17.51 against 19.45 ms; the ideal 16.71)."""
    _, shared, even, by_speed = mixed
    h100, a100 = shared.dp_shares
    assert h100 > a100 and h100 + a100 == 16
    alone = [step(scenario(gpus=(gpu, gpu), replica_groups=[0, 1])).result.iteration_time_ms
             for gpu in ("H100", "A100")]
    added = 2 / sum(1 / ms for ms in alone)
    assert added < by_speed.result.iteration_time_ms <= (added + even.result.iteration_time_ms) / 2


def test_throughput_counts_the_real_global_batch(mixed):
    _, _, even, by_speed = mixed
    for sim in (even, by_speed):
        assert sim.result.tokens_per_s * sim.result.iteration_time_ms / 1e3 == pytest.approx(16 * 1024)
    assert by_speed.dag.total_flops() == pytest.approx(even.dag.total_flops(), rel=1e-12)


def test_each_replica_runs_its_own_count_of_micro_batches(mixed):
    _, shared, _, by_speed = mixed
    dag = by_speed.dag
    for replica, count in enumerate(shared.dp_shares):
        gpu = 4 * replica  # stage 0, tp rank 0 of the replica
        run = np.unique(dag.microbatch[(dag.gpu == gpu) & (dag.kind == 0) & (dag.microbatch >= 0)])
        assert run.tolist() == list(range(count))


def dp_reductions(sim) -> Counter:
    return Counter((c.label, c.group, c.nbytes) for c in sim.dag.collectives if c.label.startswith("grad_"))


def reduction_flow_bytes(sim) -> float:
    dag = sim.dag
    reductions = [i for i, c in enumerate(dag.collectives) if c.label.startswith("grad_")]
    return float(dag.size[(dag.kind == 1) & np.isin(dag.coll, reductions)].sum())


def test_the_gradient_reduction_carries_the_same_bytes_whatever_the_shares(mixed):
    _, _, even, by_speed = mixed
    assert dp_reductions(by_speed) == dp_reductions(even) and dp_reductions(even)
    assert reduction_flow_bytes(by_speed) == reduction_flow_bytes(even) > 0


def test_memory_walks_the_replica_with_the_most_micro_batches():
    """1F1B keeps min(pp - stage, m) micro-batches in flight: with fewer than pp, the larger share sets the peak."""
    shares = scenario(pp=4, nodes=4, shares=[1, 3], gbs=4, replica_groups=[0, 1])
    largest = scenario(pp=4, nodes=4, gbs=6, replica_groups=[0, 1])  # 3 micro-batches each
    stages = [estimate_memory(ScenarioConfig.model_validate(d)).stages for d in (shares, largest)]
    assert [(s.allocated, s.microbatches_in_flight) for s in stages[0]] == \
        [(s.allocated, s.microbatches_in_flight) for s in stages[1]]
    assert stages[0][0].microbatches_in_flight == 3


# --- the DAG: counted before it is built, folded only among replicas running alike -----------------------------

@pytest.mark.parametrize("mode", ["full", "symmetric"])
@pytest.mark.parametrize("shares, groups", [([11, 5, 11, 5], [0, 1, 0, 1]), ([6, 6, 2, 2], [0, 0, 1, 1]),
                                            ([5, 3, 4, 4], [0, 1, 0, 1])])
def test_the_size_counted_before_building_is_the_size_built(shares, groups, mode):
    data = scenario(nodes=4, dp=4, shares=shares, replica_groups=groups, gbs=sum(shares), distributed_optimizer=True)
    planned = plan_dag(ScenarioConfig.model_validate(data), mode)
    dag, size = planned.build(), planned.size()
    assert (size.nodes, size.flows) == (dag.num_nodes, int((dag.kind == 1).sum()))


@pytest.mark.parametrize("shares, folded_dp", [([11, 5, 11, 5], True), ([6, 6, 2, 2], False), ([8, 4, 2, 2], False)])
def test_the_fold_stands_a_replica_only_for_one_running_the_same_micro_batches(shares, folded_dp):
    data = scenario(gpus=("A100", "A100"), nodes=4, dp=4, shares=shares, gbs=sum(shares))
    planned = plan_dag(ScenarioConfig.model_validate(data), "symmetric")
    program = program_of_rank(planned.programs, planned.layout)
    assert (program[planned.fold.rep] == program).all()
    assert ("dp" in planned.fold.axes) == folded_dp


def test_a_folded_step_with_shares_equals_the_full_one():
    data = scenario(nodes=4, dp=4, shares=[11, 5, 11, 5], replica_groups=[0, 1, 0, 1], gbs=32)
    folded, full = step(data, "symmetric"), step(data, "full")
    assert folded.result.simulated_gpus < full.result.simulated_gpus
    assert folded.result.iteration_time_ms == pytest.approx(full.result.iteration_time_ms, rel=1e-3)


# --- sharing micro-batches by speed ---------------------------------------------------------------------------------

def latest(period, fill, counts):
    return max(f + m * p for p, f, m in zip(period, fill, counts, strict=True))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=2, max_size=3), st.lists(st.integers(0, 6), min_size=3, max_size=3),
       st.integers(0, 8), st.sampled_from([(1, 1), (2, 2), (2, 4), (3, 3)]))
def test_the_shares_minimise_the_latest_replica_as_brute_force_does(period, fill, extra, steps):
    step_, least = steps
    dp = len(period)
    fill = fill[:dp]
    total = dp * least + extra * step_
    counts = share_microbatches([float(p) for p in period], [float(f) for f in fill], total, step_, least)
    assert sum(counts) == total and all(m >= least and (m - least) % step_ == 0 for m in counts)
    best = min(latest(period, fill, c) for c in itertools.product(range(least, total + 1, step_), repeat=dp)
               if sum(c) == total)
    assert latest(period, fill, counts) == pytest.approx(best)


@pytest.mark.parametrize("par", [{"pipeline_schedule": "1f1b"}, {"vpp": 2}, {"pipeline_schedule": "dualpipe"},
                                 {"pipeline_schedule": "zb_h1"}])
def test_the_counts_the_planner_shares_in_are_those_the_schedule_accepts(par):
    step_, least = microbatch_steps(ScenarioConfig.model_validate(scenario(**par)).workload.parallelism)
    for count in range(1, 16):
        data = scenario(shares=[count, 16], gbs=16 + count, **par)
        accepted = count >= least and (count - least) % step_ == 0
        if accepted:
            ScenarioConfig.model_validate(data)
        else:
            with pytest.raises((FieldError, ValidationError), match="dp_shares"):
                ScenarioConfig.model_validate(data)


def test_plan_hetero_with_dp_shares_is_never_slower_than_even_shares(tmp_path: Path):
    path, out = tmp_path / "mixed.yaml", tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(scenario(replica_groups=[0, 1], gbs=32)))
    run = cli("plan-hetero", str(path), "--dp-shares", "--simulate", "1", "--json", "-o", str(out))
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    plans = result["simulated"]
    assert any(p["dp_shares"] for p in plans)
    for shared in (p for p in plans if p["dp_shares"]):
        even = [p for p in plans if p["stage_groups"] == shared["stage_groups"]
                and p["layers_per_stage"] == shared["layers_per_stage"] and p["dp_shares"] is None]
        assert even and shared["simulated_ms"] < min(p["simulated_ms"] for p in even)
    assert result["best"]["simulated_ms"] == min(p["simulated_ms"] for p in plans)
    assert yaml.safe_load(out.read_text())["workload"]["training"].get("dp_shares") == result["best"]["dp_shares"]


# --- bad input ----------------------------------------------------------------------------------------------------

BAD = st.one_of(
    st.lists(st.integers(1, 16), min_size=1, max_size=4).filter(lambda s: len(s) != 2),   # wrong length
    st.tuples(st.integers(1, 20), st.integers(1, 20)).filter(lambda s: sum(s) != 16).map(list),  # wrong sum
    st.tuples(st.integers(-5, 0), st.integers(16, 21)).map(list),  # zero or negative
)


@settings(max_examples=25, deadline=None)
@given(BAD)
def test_bad_shares_are_refused_naming_the_field(shares):
    with pytest.raises((FieldError, ValidationError), match="dp_shares"):
        ScenarioConfig.model_validate(scenario(shares=shares))


@pytest.mark.parametrize("shares, par, says", [
    ([3, 13], {"vpp": 2}, "multiple of pp"),
    ([5, 11], {"pipeline_schedule": "dualpipe"}, "even"),
    ([4, 12], {"ep": 2}, "expert parallelism"),
    ([4, 12], {"fsdp": "full_shard"}, "fsdp"),
])
def test_shares_a_schedule_or_a_sharding_cannot_run_are_refused(tmp_path: Path, shares, par, says):
    data = scenario(shares=shares, **par)
    if "ep" in par:
        data["workload"]["model"]["moe"] = {"num_experts": 4, "top_k": 2}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    run = cli("simulate", str(path))
    assert run.returncode == 2
    assert FIELD in run.stderr and says in run.stderr and "Traceback" not in run.stderr


@settings(max_examples=10, deadline=None)
@given(first=st.integers(1, 15),
       case=st.sampled_from([({"pipeline_schedule": "zb_v"}, "pipeline_schedule: zb_v runs two model chunks"),
                             ({"pipeline_schedule": "interleaved_1f1b"}, "vpp: the interleaved schedule needs vpp > 1"),
                             ({"pipeline_schedule": "1f1b", "vpp": 2}, "pipeline_schedule: 1f1b runs one model chunk"),
                             ({"microbatch_group_size": 2}, "microbatch_group_size: only the interleaved schedule")]))
def test_a_schedule_no_shares_could_run_is_refused_naming_its_own_field_not_the_shares(first, case):
    """A schedule its parallelism cannot place was blamed on dp_shares ('workload.training.dp_shares: replica 0: zb_v
    runs two model chunks per rank as a V, not vpp = 1') though no shares would mend it; without dp_shares the same
    scenario names the schedule's field."""
    par, says = case
    for shares in ([first, 16 - first], None):
        with pytest.raises(ConfigError) as refused:
            parse_scenario(scenario(shares=shares, **par), "s.yaml")
        assert str(refused.value).startswith(f"s.yaml: workload.parallelism.{says}"), str(refused.value)


def test_a_step_with_shares_is_simulated_whole_under_auto_and_sampling_it_names_the_shares(monkeypatch):
    import simulon.pipeline as pipeline_module
    sc = ScenarioConfig.model_validate(scenario(shares=[11, 5]))
    monkeypatch.setattr(pipeline_module, "SAMPLE_ABOVE_NODES", 1)
    assert simulate(sc, micro_batches="auto").result.sampling is None
    with pytest.raises(FieldError, match="dp_shares"):
        simulate(sc, micro_batches="sample")
