"""The strategy search: exact pruning, feasibility, the estimate against the replay, and the command."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections import Counter
from unittest.mock import patch

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import SEED_SCENARIO, cli, gpt_scenario, merge
from simulon.config.loading import parse_scenario
from simulon.memory import estimate_memory
from simulon.pipeline import simulate
from simulon.search.estimate import Estimate, Estimator
from simulon.search.export import megatron_arguments, scenario_yaml
from simulon.search.run import Ranked, Reused, Search, SearchResult, anchored_ms, apply, median_anchor, scenario_for
from simulon.search.space import Limits, Space, Strategy
from simulon.workload.kernels import Phase
from simulon.workload.layer_kernels import LayerKernels
from simulon.workload.megatron import MegatronTracer
from simulon.workload.program import ComputeOp


def small(**knobs):
    return gpt_scenario(nodes=2, gpus_per_node=4, layers=8, gbs=16, seq=1024, **knobs)


def test_every_strategy_the_rules_keep_is_a_valid_scenario_and_every_count_adds_up():
    sc = small()
    space = Space(sc.workload, 8, 4, fp8=True)
    kept = list(space.strategies())
    assert space.enumerated == len(kept) + sum(space.pruned.values())
    for strategy in kept[::7]:
        assert scenario_for(sc, strategy, 8).workload.parallelism.tp == strategy.tp
    assert all(s.tp * s.pp * s.cp * s.dp == 8 for s in kept)


def test_limits_keep_only_the_values_asked_for():
    sc = small()
    space = Space(sc.workload, 8, 4, fp8=False, limits=Limits({"tp": (2,), "recompute": ("none",)}))
    kept = list(space.strategies())
    assert kept and {s.tp for s in kept} == {2} and {s.recompute for s in kept} == {"none"}


def test_a_strategy_reported_to_fit_fits_by_the_memory_model_and_the_winner_is_the_fastest_replayed():
    result = Search(small()).run(top=5, replay=3, workers=1)
    assert result.estimated > 0 and result.replayed == 3
    replayed = [r for r in result.ranked if r.replay_ms is not None]
    assert result.ranked[0] is replayed[0] and replayed == sorted(replayed, key=lambda r: r.replay_ms)
    best = result.ranked[0]
    report = estimate_memory(scenario_for(small(), best.strategy, 8))
    assert report.fits and report.peak.device / 2**30 == pytest.approx(best.peak_memory_gib)
    assert simulate(scenario_for(small(), best.strategy, 8)).result.iteration_time_ms == pytest.approx(best.replay_ms)


def test_the_estimate_ranks_like_the_replay_on_distinct_strategies():
    sc = small()
    search = Search(sc)
    strategies = [Strategy(1, 1, 1, 8, 1, 1, 1, 2, False, "none", "distributed_optimizer", "bf16", False),
                  Strategy(4, 1, 1, 2, 1, 1, 4, 2, True, "none", "distributed_optimizer", "bf16", False),
                  Strategy(1, 4, 1, 2, 1, 1, 1, 1, False, "full", "distributed_optimizer", "bf16", False)]
    estimated = [search.estimator.estimate(s, apply(sc.workload, s)).iteration_s for s in strategies]
    replayed = [simulate(scenario_for(sc, s, 8)).result.iteration_time_ms for s in strategies]
    assert sorted(range(3), key=estimated.__getitem__) == sorted(range(3), key=replayed.__getitem__)
    for e, r in zip(estimated, replayed, strict=True):
        assert 0.5 < 1e3 * e / r < 1.5


def test_a_strategy_of_another_recompute_mode_drops_the_bases_settings_of_the_mode_it_replaces():
    sc = gpt_scenario(nodes=1, gpus_per_node=1, layers=2, gbs=2, seq=1024,
                      extra_parallelism={"recompute": "selective", "recompute_modules": ["mlp"]})
    modes = {mode: apply(sc.workload, Strategy(1, 1, 1, 1, 1, 1, 1, 1, False, mode, "distributed_optimizer", "bf16",
                                               False)).parallelism for mode in ("none", "selective", "full")}
    assert {mode: (p.recompute, p.recompute_modules) for mode, p in modes.items()} == {
        "none": ("none", None), "selective": ("selective", ["mlp"]), "full": ("full", None)}


@pytest.mark.parametrize("sharding, bucket", [("fsdp", None), ("zero2", None), ("distributed_optimizer", 10**6)])
def test_a_strategy_sharded_by_fsdp_drops_the_bases_gradient_bucket_size_which_fsdp_does_not_read(sharding, bucket):
    base = gpt_scenario(nodes=1, gpus_per_node=2, layers=2, gbs=2, seq=1024).as_data()
    base["workload"]["training"]["grad_bucket_size"] = 10**6
    strategy = Strategy(1, 1, 1, 1, 1, 1, 1, 1, False, "none", sharding, "bf16", False)
    sc = scenario_for(parse_scenario(base, "s.yaml"), strategy, 2)  # the scenario refuses a bucket size beside FSDP
    assert sc.workload.training.grad_bucket_size == bucket


def test_full_recomputation_of_the_first_layers_of_each_chunk_is_written_as_megatrons_block_method():
    sc = gpt_scenario(nodes=1, gpus_per_node=1, layers=2, gbs=2, seq=1024,
                      extra_parallelism={"recompute": "full", "recompute_num_layers": 1})
    full = Strategy(1, 1, 1, 1, 1, 1, 1, 1, False, "full", "distributed_optimizer", "bf16", False)
    args = " ".join(megatron_arguments(full, sc))
    assert "--recompute-method block --recompute-num-layers 1" in args, args
    every = gpt_scenario(nodes=1, gpus_per_node=1, layers=2, gbs=2, seq=1024, extra_parallelism={"recompute": "full"})
    assert "--recompute-method uniform --recompute-num-layers 1" in " ".join(megatron_arguments(full, every))


@pytest.mark.parametrize(("pp", "vpp"), [(2, 1), (4, 1), (2, 2)])
def test_a_strategy_whose_chunks_hold_fewer_layers_than_the_base_recomputes_every_layer_as_the_base_did(pp, vpp):
    """recompute_num_layers 8 of an 8-layer model recomputes every layer; a strategy of more stages kept the count
    and was refused (Megatron-Core accepts at most a rank's layers), so the search lost it."""
    sc = small(extra_parallelism={"recompute": "full", "recompute_num_layers": 8})
    strategy = Strategy(1, pp, vpp, 8 // pp, 1, 1, 1, 1, False, "full", "distributed_optimizer", "bf16", False)
    par = scenario_for(sc, strategy, 8).workload.parallelism
    assert all(par.recomputes_layer(position) for position in range(8 // (pp * vpp)))
    assert par.recompute_num_layers is None
    kept = small(extra_parallelism={"recompute": "full", "recompute_num_layers": 1})
    assert scenario_for(kept, strategy, 8).workload.parallelism.recompute_num_layers == 1


@pytest.mark.parametrize("modules", [None, ["layernorm", "mlp"], ["context", "layernorm", "mlp_in"]])
def test_the_estimates_selective_recomputation_is_what_the_tracer_re_runs(modules):
    extra = {"recompute": "selective", **({"recompute_modules": modules} if modules else {})}
    sc = gpt_scenario(nodes=1, gpus_per_node=1, layers=2, gbs=2, seq=1024, extra_parallelism=extra)
    strategy = Strategy(1, 1, 1, 1, 1, 1, 1, 1, False, "selective", "distributed_optimizer", "bf16", False)
    search = Search(sc)
    estimate = search.estimator.estimate(strategy, apply(sc.workload, strategy))
    traced = [op.kernel for program in MegatronTracer(sc.workload, 1).stage_programs() for op in program.ops
              if isinstance(op, ComputeOp) and op.kernel.phase == Phase.recompute]
    assert traced and estimate.recompute_s == pytest.approx(search.estimator.kernel_seconds("bf16", traced).sum())


@pytest.mark.parametrize("sequence_parallel", [True, False])
def test_the_estimate_exposes_the_tensor_parallel_communication_the_replay_waits_for(sequence_parallel):
    """One rank group, no data or pipeline parallelism: all the replay's exposed communication is tensor-parallel.
    Both leave the backward's input re-gather and dgrad reduction (or the input gradient's all-reduce) to run beside
    the GEMMs, as Megatron and Transformer Engine do; counting them as waited for overstates it by 65-70%. Since the
    replay slows a GEMM beside a collective only while the collective holds SMs, as the estimate does, the steps
    agree within 0.03% (39.53 / 39.54 ms with sequence parallelism, 37.35 / 37.36 without), and the exposed
    tensor-parallel time within 16% and 21% (9.87 / 8.52 ms, 5.99 / 4.96 ms), where the replay's GEMMs beside the
    input gradient's all-reduce now stretch only while it runs."""
    sc = gpt_scenario(nodes=1, gpus_per_node=4, layers=4, hidden=4096, heads=32, gbs=4, seq=2048)
    strategy = Strategy(4, 1, 1, 1, 1, 1, 4, 1, sequence_parallel, "none", "distributed_optimizer", "bf16", False)
    estimate = Search(sc).estimator.estimate(strategy, apply(sc.workload, strategy))
    replayed = simulate(scenario_for(sc, strategy, 4)).result
    assert estimate.tp_s * 1e3 == pytest.approx(replayed.breakdown["exposed_comm_ms"], rel=0.25)
    assert estimate.iteration_s * 1e3 == pytest.approx(replayed.iteration_time_ms, rel=0.005)


def test_the_winner_is_written_as_a_scenario_that_simulates_and_as_megatron_arguments():
    sc = small()
    strategy = Strategy(2, 2, 2, 2, 1, 1, 2, 1, True, "selective", "distributed_optimizer", "bf16", True)
    text = scenario_yaml(sc, strategy, 8, "test")
    again = parse_scenario(yaml.safe_load(text))
    assert again.workload.parallelism.vpp == 2 and again.workload.parallelism.tp_comm_overlap
    args = " ".join(megatron_arguments(strategy, sc))
    assert "--tensor-model-parallel-size 2" in args and "--num-layers-per-virtual-pipeline-stage 2" in args
    assert "--recompute-granularity selective" in args and "--use-distributed-optimizer" in args
    assert "--recompute-modules" not in args  # core attention alone, Megatron's default
    modules = sc.model_copy(update={"workload": sc.workload.model_copy(update={
        "parallelism": sc.workload.parallelism.model_copy(update={"recompute_modules": ["mlp_in", "layernorm"]})})})
    assert "--recompute-modules layernorm mlp" in megatron_arguments(strategy, modules)
    jax = sc.model_copy(update={"workload": sc.workload.model_copy(update={
        "parallelism": sc.workload.parallelism.model_copy(update={"recompute_modules": ["context"]})})})
    assert "--recompute-modules" not in " ".join(megatron_arguments(strategy, jax))  # core_attn, the default
    # the simulation overlapped the data-parallel sync, which Megatron-LM does only when told
    assert "--overlap-grad-reduce" in args and "--overlap-param-gather" in args
    serial = sc.model_copy(update={"workload": sc.workload.model_copy(update={
        "parallelism": sc.workload.parallelism.model_copy(update={"overlap_grad_reduce": False})})})
    assert "--overlap" not in " ".join(a for a in megatron_arguments(strategy, serial) if a != "--tp-comm-overlap")


def test_the_command_prints_the_counts_the_table_and_the_winners_arguments(tmp_path):
    best, ranking = tmp_path / "best.yaml", tmp_path / "ranking.csv"
    run = cli("search", str(SEED_SCENARIO), "--replay", "1", "--top", "3", "--write-best", str(best),
              "-o", str(ranking))
    assert run.returncode == 0, run.stderr
    assert "strategies enumerated" in run.stdout and "Megatron-LM: --tensor-model-parallel-size" in run.stdout
    assert cli("simulate", str(best)).returncode == 0
    data = json.loads(cli("search", str(SEED_SCENARIO), "--replay", "1", "--top", "3", "--json").stdout)
    assert data["enumerated"] == data["pruned"] + data["infeasible"] + data["estimated"]
    assert len(data["top"]) == 3 and data["top"][0]["replayed"] and data["top"][0]["fits"]
    text = ranking.read_bytes()  # lines end as the sweep's CSV's do (csv's default wrote CRLF)
    assert b"\r" not in text and text.count(b"\n") == 4
    rows = list(csv.DictReader(io.StringIO(text.decode())))
    assert [float(r["iteration_time_ms"]) for r in rows] == [t["iteration_time_ms"] for t in data["top"]]


def test_the_rankings_flags_read_true_or_false_as_the_json_and_a_sweeps_csv_write_them(tmp_path):
    """They were Python's True and False."""
    ranking = tmp_path / "ranking.csv"
    run = cli("search", str(SEED_SCENARIO), "--no-cache", "--replay", "0", "--top", "2", "-o", str(ranking))
    assert run.returncode == 0, run.stderr
    rows = list(csv.DictReader(io.StringIO(ranking.read_text())))
    flags = ("sequence_parallel", "tp_comm_overlap", "zero_bubble", "fits", "replayed")
    assert {row[flag] for row in rows for flag in flags} <= {"true", "false"} and rows[0]["fits"] == "true"


def test_a_search_that_replays_nothing_does_not_say_its_estimates_were_scaled_by_replays():
    run = cli("search", str(SEED_SCENARIO), "--replay", "0", "--top", "2")
    assert run.returncode == 0, run.stderr
    assert "(* step ms estimated: none replayed)" in run.stdout and "scaled by" not in run.stdout


def test_a_space_where_nothing_fits_says_so_with_the_closest_miss(tmp_path):
    data = yaml.safe_load(SEED_SCENARIO.read_text())
    data["workload"]["model"].update({"num_layers": 96, "hidden_size": 12288, "num_heads": 96,
                                      "ffn_hidden_size": 49152})
    path = tmp_path / "huge.yaml"
    path.write_text(yaml.safe_dump(data))
    run = cli("search", str(path), "--replay", "0")
    assert run.returncode == 2 and "no strategy fits on 4 GPUs" in run.stderr and "closest:" in run.stderr
    assert "Traceback" not in run.stderr


def test_bad_restrictions_are_one_line_errors():
    run = cli("search", str(SEED_SCENARIO), "--fix", "color=red")
    assert run.returncode == 2 and "--fix: expected NAME=VALUE" in run.stderr


def test_the_search_orders_measured_strategy_families_as_the_measurements_do():
    from simulon.search.agreement import RESOLVED, families, pooled_tau
    from simulon.validate.report import read_table, shipped_table

    found = families(read_table(shipped_table("training")))
    assert len(found) >= 10
    # over the 12 pairs measured 1% apart or more: estimated and replayed 1.0; over all 15 pairs 0.867 each (the
    # issue's 0.8), the one discordant pair measured 0.12% apart. Megatron-LM's own defaults (gradients reduced after
    # the backward, one bucket, synchronously) and the estimate hiding the backward's TP collectives as the replay
    # does moved all-pairs from 0.467 and 0.600
    assert pooled_tau(found, "estimated", RESOLVED) == 1.0 and pooled_tau(found, "replayed", RESOLVED) == 1.0
    assert pooled_tau(found, "estimated") >= 0.8 and pooled_tau(found, "replayed") >= 0.8


def test_a_bad_gpu_count_in_the_searched_file_is_a_one_line_error(tmp_path):
    data = yaml.safe_load(SEED_SCENARIO.read_text())
    data["workload"]["training"]["num_gpus"] = "many"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    run = cli("search", str(path), "--replay", "0")
    assert run.returncode == 2 and "workload.training.num_gpus" in run.stderr and "Traceback" not in run.stderr


def test_uneven_stages_are_searched_with_chunks_dividing_every_stage_and_run_as_the_split_they_name():
    sc = gpt_scenario(nodes=2, gpus_per_node=4, layers=10, gbs=16, seq=1024)
    space = Space(sc.workload, 8, 4, fp8=False)
    assert space.splits(4, 1) == [(0, 0), (3, 1), (2, 2), (1, 3)]  # middle stages of 3 layers each
    assert space.splits(4, 2) == [(0, 0)] and space.splits(1, 1) == [(0, 0)]  # 3-layer stages do not split in 2
    assert space.splits(2, 2) == [(0, 0), (6, 4), (4, 6)]  # each stage's layers split over its two chunks
    assert space.splits(2, 1) == [(0, 0), (6, 4), (4, 6)]  # 5 + 5 is the even split itself
    kept = list(space.strategies())
    uneven = [s for s in kept if s.first_layers]
    assert uneven and all(s.pp > 1 for s in uneven) and any(s.vpp > 1 for s in uneven)
    assert all(layers % s.vpp == 0 for s in uneven for layers in s.layers_per_stage(10))
    assert all(sum(s.layers_per_stage(10)) == 10 for s in uneven)
    lighter_head = Strategy(1, 2, 1, 4, 1, 1, 1, 1, False, "none", "distributed_optimizer", "bf16", False, 6, 4)
    scenario = scenario_for(sc, lighter_head, 8)
    assert scenario.workload.parallelism.layers_per_stage == [6, 4]
    assert "--decoder-last-pipeline-num-layers 4" in " ".join(megatron_arguments(lighter_head, sc))
    # the last stage holds the LM head: moving a layer off it shortens the step, in the estimate and the replay
    heavier_head = Strategy(1, 2, 1, 4, 1, 1, 1, 1, False, "none", "distributed_optimizer", "bf16", False, 4, 6)
    search = Search(sc)
    estimated = [search.estimator.estimate(s, apply(sc.workload, s)).iteration_s for s in (lighter_head, heavier_head)]
    replayed = [simulate(scenario_for(sc, s, 8)).result.iteration_time_ms for s in (lighter_head, heavier_head)]
    assert estimated[0] < estimated[1] and replayed[0] < replayed[1]


def test_the_last_stage_may_give_up_a_layer_more_for_each_multi_token_prediction_layer_it_holds():
    def splits(mtp: int) -> list[tuple[int, int]]:
        sc = gpt_scenario(nodes=2, gpus_per_node=4, layers=13, gbs=16, seq=1024, extra_model={"mtp_layers": mtp})
        return Space(sc.workload, 8, 4, fp8=False).splits(4, 1)

    assert splits(0) == [(0, 0), (3, 2), (2, 3)] and splits(1) == [(0, 0), (4, 1), (3, 2), (2, 3)]
    middle_of = {split: (13 - sum(split)) // 2 for split in splits(1) if split != (0, 0)}
    added = set(splits(1)) - set(splits(0))
    # the MTP layer's stage may hold 3 fewer than the middle stages, the first still at most 2 fewer
    assert added and all(middle_of[s] - s[1] == 3 and middle_of[s] - s[0] <= 2 for s in added)
    assert all(middle_of[s] - s[1] <= 3 and middle_of[s] - s[0] <= 2 for s in middle_of)
    assert len(splits(1)) == len(set(splits(1)))


def test_a_published_nemo_recipe_fits_and_ranks_in_the_searchs_top_ten_percent():
    from simulon.search.agreement import TOP_SHARE, check_recipes, recipe_rows
    from simulon.validate.report import read_table, shipped_table

    rows = read_table(shipped_table("training"))
    llama2_7b = [i for i in recipe_rows(rows) if rows[i]["model"] == "LLAMA2-7B" and rows[i]["num_gpus"] == "8"][:1]
    (check,), skipped = check_recipes(rows, llama2_7b)
    assert not skipped and check.fits and check.feasible > 1000 and check.share <= TOP_SHARE and check.passes


def test_a_recipe_is_a_proxy_only_where_it_runs_fewer_layers_than_the_model_it_names():
    from simulon.search.agreement import is_proxy
    from simulon.validate.report import read_table, shipped_table
    from simulon.validate.training import scenario_from_row

    rows = read_table(shipped_table("training"))
    grok = {int(r["layers"]): r for r in rows if r["model"].startswith("Grok-1") and r["precision"] == "FP8"}
    assert all("proxy config" in r["notes"] for r in grok.values())  # the table notes every Grok-1 row alike
    assert {layers: is_proxy(r, scenario_from_row(r)) for layers, r in grok.items()} == {
        4: True, 8: True, 16: True, 32: True, 64: False}


def test_a_proxys_strategy_counts_only_if_its_pipeline_stretched_to_the_full_model_still_fits():
    """Grok-1 on 16 GPUs in 4 of its 64 layers: the recipe (tp 4, ep 4) stretched to 16 stages fits an H100; no
    tensor parallelism fits the proxy but, with 16 micro-batches in flight on the first stage, not the full model."""
    import dataclasses

    from simulon.search.agreement import fits_full_model, full_layers
    from simulon.validate.report import read_table, shipped_table
    from simulon.validate.training import scenario_from_row

    rows = read_table(shipped_table("training"))
    row = next(r for r in rows if r["model"].startswith("Grok-1") and r["num_gpus"] == "16" and r["precision"] == "FP8")
    sc = scenario_from_row(row)
    search, recipe = Search(sc, 16, fp8=False), Strategy.of(sc)
    assert full_layers(row, sc) == 64
    no_tp = dataclasses.replace(recipe, tp=1, etp=1, dp=16, sequence_parallel=False, tp_comm_overlap=False)
    assert search.memory(recipe).fits and search.memory(no_tp).fits
    assert fits_full_model(search, recipe, 64) and not fits_full_model(search, no_tp, 64)
    assert not fits_full_model(search, recipe, 63)  # 63 layers are no whole number of 4-layer proxies


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.1, 10.0), min_size=2, max_size=6), st.lists(st.floats(0.1, 10.0), min_size=6, max_size=6))
def test_pairs_measured_within_the_resolution_are_left_out_of_tau_and_no_others(measured, predicted):
    from simulon.search.agreement import Family, pooled_tau
    predicted = predicted[:len(measured)]
    family = Family("f", tuple(range(len(measured))), tuple(measured), tuple(predicted), tuple(predicted))
    assert pooled_tau([family], "replayed", 0.0) == pytest.approx(pooled_tau([family], "replayed"), nan_ok=True)
    spread = [(a, b) for i, a in enumerate(measured) for b in measured[i + 1:]]
    if all(abs(a - b) <= 0.05 * max(a, b) for a, b in spread):
        assert pooled_tau([family], "replayed", 0.05) != pooled_tau([family], "replayed", 0.05)  # nan: no pair left


def _ranked(estimate_ms: float, replay_ms: float | None, sharding: str) -> Ranked:
    strategy = Strategy(1, 4, 8, 1, 1, 1, 1, 1, False, "none", sharding, "fp8", False)
    estimate = Estimate(estimate_ms / 1e3, *[0.0] * 9)
    return Ranked(strategy, estimate, 10.0, 80.0, 0, replay_ms)


@given(st.lists(st.tuples(st.floats(1.0, 1e5), st.floats(0.5, 2.0)), min_size=1, max_size=6),
       st.integers(0, 5))
@settings(max_examples=200, deadline=None)
def test_an_unreplayed_twin_of_the_median_replayed_strategy_gets_its_replayed_time_and_ranks_after_it(runs, pick):
    """zero2 and fsdp at dp 1 are the same run with the same estimate: if only one is replayed, the other is
    scaled by the replayed ones' median ratio, which must give the replayed time to the bit, and of the tie the
    replayed strategy comes first (the seed scenario's search once ranked the unreplayed twin 1 ulp faster)."""
    replayed = [_ranked(ms, ms * ratio, f"s{i}") for i, (ms, ratio) in enumerate(runs)]
    anchor = median_anchor(replayed)
    ratios = sorted(r.replay_ms / (1e3 * r.estimate.iteration_s) for r in replayed)
    assert anchor[0] / anchor[1] == pytest.approx(ratios[(len(ratios) - 1) // 2])
    twin_of = next(r for r in replayed if (r.replay_ms, 1e3 * r.estimate.iteration_s) == anchor)
    twin = dataclasses.replace(twin_of, replay_ms=None, anchor=anchor,
                               strategy=dataclasses.replace(twin_of.strategy, sharding="a"))
    assert twin.iteration_ms == twin_of.replay_ms
    other = dataclasses.replace(replayed[pick % len(replayed)], replay_ms=None, anchor=anchor)
    assert other.iteration_ms == pytest.approx(other.estimate.iteration_s * 1e3 * anchor[0] / anchor[1])
    result = SearchResult(0, Counter(), Counter(), 0, len(replayed), 0.0, [], 1.0, 4, 1.0, {}, None,
                          anchor, Reused(False, 0), [])
    order = sorted([twin, twin_of], key=result.rank_key)
    assert order[0] is twin_of  # the twin's strategy sorts first by its fields, yet the replayed one leads
    # the Pareto front (pareto.points) times an unreplayed strategy from the result's anchor as the table does
    assert anchored_ms(twin.estimate, result.anchor) == twin.iteration_ms == twin_of.replay_ms
    assert result.estimate_scale == anchor[0] / anchor[1]


@pytest.mark.parametrize(("dtype", "flags"), [
    ("fp8", ["--fp8-format hybrid", "--fp8-recipe delayed"]), ("mxfp8", ["--fp8-format e4m3", "--fp8-recipe mxfp8"]),
    # NVFP4's recipe keeps 2/62 and 8/62 of the layers in bf16: 0 and 1 of these 8, to the nearest layer
    ("nvfp4", ["--fp4-format e2m1", "--fp4-recipe nvfp4", "--first-last-layers-bf16", "--num-layers-at-start-in-bf16 0",
               "--num-layers-at-end-in-bf16 1"]),
    ("mxfp4", ["--fp4-format e2m1", "--fp4-recipe custom"]),  # Megatron-Core's Fp4Recipe has nvfp4 and custom only
])
def test_a_narrow_format_is_exported_as_megatron_cores_recipe_for_it(dtype, flags):
    strategy = Strategy(2, 2, 2, 2, 1, 1, 2, 1, True, "selective", "distributed_optimizer", dtype, True)
    args = megatron_arguments(strategy, small())
    assert all(flag in args for flag in flags) and "--bf16" in args
    assert ("--first-last-layers-bf16" in args) == (dtype == "nvfp4")
    assert not any(arg.endswith("-param-gather") and arg != "--overlap-param-gather" for arg in args)


@pytest.mark.parametrize(("dtype", "flag"), [("fp32", None), ("tf32", None), ("fp16", "--fp16"), ("bf16", "--bf16")])
def test_the_megatron_arguments_name_the_16_bit_type_of_16_bit_runs_only(dtype, flag):
    """An fp32 search printed --bf16, which trains in bf16: fp32 training names neither --bf16 nor --fp16."""
    sc = parse_scenario(merge(small().as_data(), {"workload": {"training": {"dtype": dtype}}}), "test")
    args = megatron_arguments(Strategy.of(sc), sc)
    assert [arg for arg in args if arg in ("--bf16", "--fp16")] == ([flag] if flag else [])


def narrow(dtype: str, **training) -> object:
    """small() on B200s training in `dtype` with the training settings given."""
    data = merge(small().as_data(), {"datacenter": {"node": {"gpu": "B200"}},
                                     "workload": {"parallelism": {"distributed_optimizer": True},
                                                  "training": {"dtype": dtype, **training}}})
    return parse_scenario(data, "test")


@pytest.mark.parametrize(("dtype", "training", "flags", "absent"), [
    ("fp8", {"fp8_recipe": "current"}, ["--fp8-recipe tensorwise"], ["--fp8-recipe delayed"]),
    ("fp8", {"fp8_params": True}, ["--fp8-recipe delayed", "--fp8-param-gather"], ["--first-last-layers-bf16"]),
    ("mxfp8", {"fp8_params": True, "bf16_last_layers": 1},
     ["--fp8-param-gather", "--reuse-grad-buf-for-mxfp8-param-ag", "--first-last-layers-bf16",
      "--num-layers-at-start-in-bf16 0", "--num-layers-at-end-in-bf16 1"], []),
    ("nvfp4", {"fp8_params": True, "bf16_first_layers": 0, "bf16_last_layers": 0}, ["--fp4-param-gather"],
     ["--first-last-layers-bf16"]),
])
def test_the_megatron_arguments_train_in_the_format_as_the_search_simulated_it(dtype, training, flags, absent):
    """The exported flags run the number format as simulon did: its fp8 recipe (Megatron's default is delayed, and
    simulon's too, where the flags said tensorwise, current scaling, which casts with an amax pass first), narrow
    weights (fp8_params, left out before; MXFP8's gathered in bf16 as simulon traces them, which Megatron's distributed
    optimizer needs --reuse-grad-buf-for-mxfp8-param-ag for) and the layers kept in bf16 (NVFP4's recipe keeps some by
    default, Megatron none unless --first-last-layers-bf16)."""
    sc = narrow(dtype, **training)
    args = megatron_arguments(Strategy.of(sc), sc)
    assert all(flag in args for flag in flags), args
    assert not any(flag in args for flag in absent), args


def test_an_fp8_fsdp_estimate_counts_the_weight_casts_each_micro_batch_runs():
    """Under FSDP full sharding Transformer Engine keeps no quantized weight between micro-batches, so each
    micro-batch's forward quantizes every weight again: left out, the estimate of this step was 66.2 ms against a
    69.2 ms replay (and FSDP ranked above a ZeRO-2 that replays faster); the compute grows by those casts alone.
    Since the sequence-parallel fp8 gathers move one byte an element (18c36d1) the estimate's tensor-parallel time
    fell 8.81 -> 7.53 ms where the replay barely moved (69.60 -> 69.41 ms): 67.81 ms, 0.977 of it (0.992 before).
    Since the sharded estimate slows kernels beside FSDP's backward gathers and reduce-scatters as two collectives at
    once (search.estimate.held_twice), which made ZeRO-2's estimates agree with their replays, FSDP's run long:
    70.61 ms against a 67.60 ms replay (1.044), the bound 5% where it was 3%; with only the backward gathers from the
    third unit on beside a reduce-scatter (the first two run before any), 69.58 ms (1.029)."""
    sc = gpt_scenario(nodes=1, gpus_per_node=4, layers=4, hidden=4096, heads=32, gbs=8, seq=2048)
    fsdp = Strategy(2, 1, 1, 2, 1, 1, 2, 1, True, "none", "fsdp", "fp8", False)
    search = Search(sc)
    estimate = search.estimator.estimate(fsdp, apply(sc.workload, fsdp))
    replayed = simulate(scenario_for(sc, fsdp, 4)).result
    assert estimate.iteration_s * 1e3 == pytest.approx(replayed.iteration_time_ms, rel=0.05)
    zero2 = dataclasses.replace(fsdp, sharding="zero2")
    cached = search.estimator.estimate(zero2, apply(sc.workload, zero2))
    kernels = LayerKernels.shared(apply(sc.workload, fsdp))
    casts = [kernels.weight_casts[name] for name in kernels.weight_casts] * 4  # four layers on the one stage
    assert casts
    per_microbatch = search.estimator.kernel_seconds("fp8", casts).sum()
    assert estimate.compute_s - cached.compute_s == pytest.approx(3 * per_microbatch, rel=1e-9)  # 4 micro-batches
    # against ZeRO-2's one cast a step, at the first micro-batch


def test_an_fp8_estimate_counts_the_weight_casts_of_the_first_micro_batch_once_a_step():
    """Transformer Engine quantizes the 16-bit weights at the step's first micro-batch and keeps the copy for the
    rest: that cast runs once a step, and was left out of the estimate (57.8 ms against a 62.9 ms replay); a bf16
    step has no casts. (With ZeRO-2's every-micro-batch gathers counted the step is estimated 64.2 ms against a 63.2
    ms replay, the cast's 0.6 ms beyond it: within 2%, where it was 7.7% short. Since the replay slows a GEMM beside
    a collective only while it holds SMs, as the estimate does, whichever starts first, it replays 60.5 ms against an
    estimate of 62.9: within 4%, the estimate long.)"""
    sc = gpt_scenario(nodes=1, gpus_per_node=4, layers=4, hidden=4096, heads=32, gbs=8, seq=2048)
    zero2 = Strategy(2, 1, 1, 2, 1, 1, 2, 1, True, "none", "zero2", "fp8", False)
    search = Search(sc)
    estimate = search.estimator.estimate(zero2, apply(sc.workload, zero2))
    kernels = LayerKernels.shared(apply(sc.workload, zero2))
    casts = [kernels.weight_casts[name] for name in kernels.weight_casts] * 4  # four layers on the one stage
    once = search.estimator.kernel_seconds("fp8", casts).sum()
    with patch.object(Estimator, "_stage_weight_casts", return_value=0.0):
        without = Search(sc).estimator.estimate(zero2, apply(sc.workload, zero2))
    assert once > 0 and estimate.iteration_s - without.iteration_s == pytest.approx(once, rel=1e-9)
    assert estimate.compute_s - without.compute_s == pytest.approx(once, rel=1e-9)
    replayed = simulate(scenario_for(sc, zero2, 4)).result.iteration_time_ms
    assert estimate.iteration_s * 1e3 == pytest.approx(replayed, rel=0.04)
    bf16 = dataclasses.replace(zero2, dtype="bf16")
    assert not LayerKernels.shared(apply(sc.workload, bf16)).weight_casts
