"""The heterogeneous planner (search/hetero.py): its layer split against brute force, and its plans against
the simulated scenario as written."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import cli
from simulon.config.loading import load_scenario, parse_scenario
from simulon.search.hetero import Planner, placements, split_layers

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "hetero_plan_h100_a100.yaml"


def slowest(per_layer, extra, counts):
    return max(e + n * t for t, e, n in zip(per_layer, extra, counts, strict=True))


def test_equal_stages_get_equal_layers():
    assert split_layers([1.0] * 4, [0.0] * 4, 32) == [8, 8, 8, 8]


def test_a_stage_twice_as_fast_gets_twice_the_layers():
    assert split_layers([1.0, 2.0, 2.0], [0.0] * 3, 32) == [16, 8, 8]


def test_the_stages_holding_embedding_and_head_get_fewer_layers():
    counts = split_layers([1.0] * 4, [0.0, 0.0, 0.0, 3.0], 32)
    assert counts[3] < counts[0] and sum(counts) == 32


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=2, max_size=4), st.lists(st.integers(0, 4), min_size=4, max_size=4),
       st.integers(4, 14))
def test_the_split_minimises_the_slowest_stage_as_brute_force_does(speeds, extras, layers):
    pp = len(speeds)
    per_layer, extra = [float(s) for s in speeds], [float(e) for e in extras[:pp]]
    counts = split_layers(per_layer, extra, layers)
    assert sum(counts) == layers and min(counts) >= 1
    best = min(slowest(per_layer, extra, c) for c in itertools.product(range(1, layers + 1), repeat=pp)
               if sum(c) == layers)
    assert slowest(per_layer, extra, counts) == pytest.approx(best)


@given(st.lists(st.integers(1, 6), min_size=2, max_size=4), st.integers(6, 20))
def test_caps_are_respected_or_the_split_is_refused(caps, layers):
    counts = split_layers([1.0] * len(caps), [0.0] * len(caps), layers, caps)
    if sum(caps) < layers or layers < len(caps):
        assert counts is None
    else:
        assert sum(counts) == layers and all(1 <= n <= c for n, c in zip(counts, caps, strict=True))


def test_placements_use_each_group_for_its_stages():
    found = placements([2, 2])
    assert len(found) == 6 and all(sorted(p) == [0, 0, 1, 1] for p in found)


@pytest.fixture(scope="module")
def planned():
    data = yaml.safe_load(EXAMPLE.read_text())
    data["workload"]["training"].update({"global_batch_size": 8, "sequence_length": 2048})
    sc = parse_scenario(data, "test")
    return sc, Planner(sc).run(simulate_best=1)


def test_the_plan_is_never_slower_than_the_scenario_as_written(planned):
    _, result = planned
    assert result.best.simulated_ms <= result.baseline.simulated_ms
    assert result.baseline.label == "as written" and len(result.simulated) == 2


def test_the_plan_gives_the_faster_gpus_more_layers(planned):
    _, result = planned
    best = result.best
    h100 = [n for g, n in zip(best.stage_groups, best.layers_per_stage, strict=True) if g == 0]
    a100 = [n for g, n in zip(best.stage_groups, best.layers_per_stage, strict=True) if g == 1]
    assert min(h100) > max(a100)
    assert result.gain > 0.2  # the even split leaves the A100 stages holding the H100s up


def test_the_estimate_is_near_the_simulation(planned):
    _, result = planned
    for plan in result.simulated:
        assert plan.estimated_ms == pytest.approx(plan.simulated_ms, rel=0.15)


def test_two_groups_of_one_gpu_type_keep_a_balanced_split(planned):
    sc, _ = planned
    data = sc.model_dump(mode="json", exclude_none=True)
    data["datacenter"]["node_groups"][1] = data["datacenter"]["node_groups"][0]
    plan = Planner(parse_scenario(data, "test")).plan_of((0, 1, 0, 1))
    assert max(plan.layers_per_stage) - min(plan.layers_per_stage) <= 2


def test_plan_hetero_writes_a_scenario_that_simulates_to_the_plan(tmp_path):
    out = tmp_path / "plan.yaml"
    run = cli("plan-hetero", str(EXAMPLE), "--simulate", "1", "--json", "-o", str(out))
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    sc = load_scenario(out)
    assert list(sc.workload.training.stage_groups) == result["best"]["stage_groups"]
    assert list(sc.workload.parallelism.layers_per_stage) == result["best"]["layers_per_stage"]


def test_plan_hetero_refuses_a_scenario_without_a_pipeline(tmp_path):
    data = yaml.safe_load(EXAMPLE.read_text())
    data["workload"]["parallelism"].update({"pp": 1, "dp": 4})
    path = tmp_path / "flat.yaml"
    path.write_text(yaml.safe_dump(data))
    run = cli("plan-hetero", str(path))
    assert run.returncode == 2
    assert "pp" in run.stderr and "Traceback" not in run.stderr


def test_simulate_0_simulates_the_scenario_as_written_alone_and_it_is_the_plan(planned):
    from simulon.pipeline import simulate

    sc, _ = planned
    simulated = []
    result = Planner(sc).run(simulate_best=0, simulate=lambda s: simulated.append(s) or simulate(s))
    assert len(simulated) == 1 and [p.label for p in result.simulated] == ["as written"]
    assert result.best == result.baseline and result.gain == 0.0


NO_FIT = {"datacenter": {"datacenter": {"name": "nofit"},
                         "node_groups": [{"from": "dgx-h100", "num_nodes": 1}, {"from": "dgx-a100-320gb",
                                                                                  "num_nodes": 1}]},
          "workload": {"framework": "megatron", "model": "llama-3-70b",
                       "parallelism": {"tp": 8, "pp": 2, "dp": 1, "sequence_parallel": True,
                                       "distributed_optimizer": True},
                       "training": {"global_batch_size": 8, "micro_batch_size": 1, "sequence_length": 4096,
                                    "dtype": "bf16"}}}
"""Llama 3 70B on one DGX H100 and one DGX A100 (40 GB GPUs) in tp8 x pp2: half the model fits on no A100."""


def test_plan_hetero_with_no_placement_that_fits_exits_2_saying_what_the_best_needs_and_writes_nothing(tmp_path):
    path, out = tmp_path / "nofit.yaml", tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(NO_FIT))
    run = cli("plan-hetero", str(path), "--simulate", "1", "-o", str(out))
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert "no placement fits in memory" in run.stderr and "GiB on stage 1 against its GPU's 40.0 GiB" in run.stderr
    assert not out.exists() and run.stdout == ""


@pytest.mark.parametrize("name", ["h100\nx: 1.yaml", os.fsdecode(b"h100-a100 caf\xe9.yaml")])
def test_a_written_plan_reads_back_whatever_the_scenarios_file_name_holds(tmp_path, name):
    data = yaml.safe_load(EXAMPLE.read_text())
    data["workload"]["model"] = {"from": "llama-3-8b", "num_layers": 8}
    data["workload"]["training"].update(global_batch_size=4, sequence_length=1024)
    (tmp_path / name).write_text(yaml.safe_dump(data))
    run = cli("plan-hetero", name, "--simulate", "0", "-o", "plan.yaml", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    plan = load_scenario(tmp_path / "plan.yaml")
    assert plan.workload.parallelism.layers_per_stage is not None
