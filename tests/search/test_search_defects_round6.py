"""The search and the heterogeneous planner against what `simulate` and `memory` say of the same scenario: the
memory check takes the fullest stage where the layers differ in kind and the scenario's NCCL channels; the rules
keep what the configuration accepts (an odd sequence without context parallelism, tensor parallelism without
sequence parallelism where the sequence cannot be split) and drop what it refuses (a tp that does not divide the MLP,
TP overlap without sequence parallelism); the planner may put every stage on the faster group."""

from __future__ import annotations

import pytest
import yaml

from helpers import cli, gpt_scenario
from simulon.config.loading import parse_scenario
from simulon.memory import estimate_memory
from simulon.search.hetero import Planner, stage_counts
from simulon.search.run import Search, scenario_for
from simulon.search.space import RULES, Limits, Space, broken_rules

SEQUENCE_RULE = 1 + RULES.index(next(r for r in RULES if "must divide the sequence" in r))
OVERLAP_RULE = 1 + RULES.index(next(r for r in RULES if "its overlap need tp > 1" in r))


def peak_as_simulate_counts(sc, strategy, num_gpus: int) -> float:
    return estimate_memory(scenario_for(sc, strategy, num_gpus)).peak.device


@pytest.mark.parametrize("extra", [
    {"moe": {"num_experts": 8, "top_k": 2, "first_dense_layers": 2}, "layers": 8, "hidden": 2048, "heads": 16},
    {"extra_model": {"hybrid_pattern": "MMMEEEMM", "mamba": {"state_size": 128, "num_heads": 32, "head_dim": 64,
                                                             "num_groups": 8}},
     "moe": {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 8192}, "layers": 8, "hidden": 2048},
], ids=["moe-after-dense-layers", "hybrid"])
def test_the_search_checks_the_fullest_stage_where_the_layers_differ_in_kind(extra):
    sc = gpt_scenario(nodes=1, gpus_per_node=4, gbs=8, seq=1024, **extra)
    search = Search(sc, 4, fp8=False)
    pipelined = [s for s in Space(sc.workload, 4, 4, fp8=False).strategies() if s.pp == 4 and s.vpp == 1][:6]
    assert pipelined
    for strategy in pipelined:
        assert search.memory(strategy).device == pytest.approx(peak_as_simulate_counts(sc, strategy, 4), rel=1e-9)


@pytest.mark.parametrize("split", [{"account_for_embedding_in_pipeline_split": True},
                                   {"account_for_loss_in_pipeline_split": True}], ids=["embedding", "loss"])
def test_the_search_checks_every_stage_where_the_embedding_or_the_loss_takes_a_layers_share(split):
    """With the embedding counted as a layer, stage 0's first chunk holds no layer and stage 1 keeps the most: the
    search took stages 0 and pp-1 only and wrote out Llama 3 405B at tp8 pp16 vpp8 as fitting in 77.2 GiB, which
    `memory` puts at 91.7 GiB on stage 1."""
    sc = gpt_scenario(nodes=2, gpus_per_node=4, gbs=32, seq=4096, layers=15, vocab=1024, extra_parallelism=split)
    search = Search(sc, 8, fp8=False)
    pipelined = [s for s in Space(sc.workload, 8, 4, fp8=False).strategies() if s.pp >= 4 and s.vpp > 1][:12]
    assert pipelined
    for strategy in pipelined:
        assert search.memory(strategy).device == pytest.approx(peak_as_simulate_counts(sc, strategy, 8), rel=1e-9)


def test_the_search_counts_the_nccl_buffers_of_the_scenarios_channels():
    sc = gpt_scenario(nodes=1, gpus_per_node=4, gbs=8, seq=1024, layers=8)
    sc = parse_scenario({**sc.model_dump(mode="json", exclude_none=True), "collective": {"num_channels": 64}}, "t")
    search = Search(sc, 4, fp8=False)
    strategies = list(Space(sc.workload, 4, 4, fp8=False).strategies())[:5]
    for strategy in strategies:
        assert search.memory(strategy).device == pytest.approx(peak_as_simulate_counts(sc, strategy, 4), rel=1e-9)


def test_tensor_parallelism_that_does_not_divide_the_mlp_is_not_tried():
    sc = gpt_scenario(nodes=1, gpus_per_node=4, ffn=11010)  # 16 heads: tp 4 divides them, not 11,010
    assert Space(sc.workload, 4, 4, fp8=False).tensor_sizes() == [1, 2]


def rules(seq: int, **knobs) -> int:
    values = {"tp": 1, "pp": 1, "vpp": 1, "cp": 1, "ep": 1, "unsplit": False, "mbs": 1, "sp": False, "ddp": False,
              "overlap": False, "uneven": False, **knobs}
    return int(broken_rules(8, 4, 4, seq, *values.values()))


def test_an_odd_sequence_breaks_no_rule_without_context_parallelism_and_the_cp_rule_with_it():
    assert rules(2047) == 0
    assert rules(2047, cp=2, tp=1) == SEQUENCE_RULE


def test_tp_without_sequence_parallelism_is_searched_beside_it_and_alone_where_the_sequence_cannot_be_split():
    """Sequence parallelism gathers a column-parallel GEMM's input again for its weight gradient: its twin without
    it may run faster (a tp 2 run 1,319 ms against the best with it, 1,353), so neither is pruned for the other."""
    assert rules(2050, tp=4) == 0                      # sp would need 4 | 2050: only the plain tp runs
    assert rules(2048, tp=4) == 0
    assert rules(2048, tp=4, sp=True) == 0
    assert rules(2050, tp=4, sp=True) == SEQUENCE_RULE


def test_tp_overlap_without_sequence_parallelism_breaks_the_overlap_rule():
    assert rules(2050, tp=4, overlap=True) == OVERLAP_RULE


HETERO = {
    "datacenter": {"datacenter": {"name": "a100-h100-mixed"},
                   "node_groups": [{"from": "dgx-a100", "num_nodes": 2}, {"from": "dgx-h100", "num_nodes": 2}]},
    "workload": {"framework": "megatron", "model": "llama-3-8b",
                 "parallelism": {"tp": 8, "pp": 2, "dp": 1, "sequence_parallel": True, "distributed_optimizer": True},
                 "training": {"num_gpus": 16, "global_batch_size": 8, "micro_batch_size": 1, "sequence_length": 4096,
                              "dtype": "bf16"}},
}


def test_groups_holding_more_than_pp_stages_share_them_every_way():
    assert stage_counts(parse_scenario(HETERO, "test")) == [(2, 0), (1, 1), (0, 2)]


def test_the_planner_puts_the_whole_pipeline_on_the_faster_group_when_it_can_hold_it():
    """It filled the first group (A100) and never tried the H100s: 841.6 ms where they run 477.7."""
    sc = parse_scenario(HETERO, "test")
    best = Planner(sc).run(simulate_best=1).best
    assert best.stage_groups == (1, 1)


def test_the_search_finds_a_middle_stage_fullest_under_zb_h1_with_full_recomputation():
    """One layer kind, ZB-H1, full recomputation, stages of 3, 4 x 6 and 2 layers: a later stage defers more weight
    gradients, each holding more than its layer kept, so stage 6, a middle one, is the fullest (3.4 GiB as `simulate`
    counts, against 2.6 on the last), and the search's check, over every stage, finds it."""
    sc = gpt_scenario(nodes=2, gpus_per_node=4, layers=29, hidden=1024, heads=8, gbs=16, seq=2048, vocab=4096)
    search = Search(sc, 8, fp8=False)
    strategy = next(s for s in Space(sc.workload, 8, 4, fp8=False, limits=Limits({"zero_bubble": (True,)})).strategies()
                    if s.pp == 8 and s.recompute == "full" and s.last_layers == 2 and s.micro_batch_size == 1)
    assert search.memory(strategy).device == pytest.approx(peak_as_simulate_counts(sc, strategy, 8), rel=1e-9)
    assert estimate_memory(scenario_for(sc, strategy, 8)).peak.stage == 6


def test_a_step_under_a_millisecond_is_printed_to_its_figures_not_as_zero(tmp_path):
    """A one-layer model of one-token sequences steps in a fraction of a millisecond: the table printed 0 ms and
    the winner's breakdown nothing at all."""
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({
        "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}},
        "workload": {"framework": "megatron", "parallelism": {"tp": 1},
                     "model": {"name": "tiny", "hidden_size": 64, "num_layers": 1, "num_heads": 4,
                               "ffn_hidden_size": 128, "vocab_size": 256},
                     "training": {"num_gpus": 8, "global_batch_size": 8, "micro_batch_size": 1,
                                  "sequence_length": 1}}}))
    done = cli("search", str(path), "--replay", "0", "--no-cache", "--top", "1")
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.replace(" ", "").startswith("│1│"))
    step = float(row.split("│")[4].strip().rstrip(" *"))
    assert 0 < step < 1
    terms = done.stdout.split("Where the winner's step goes (estimate, ms): ")[1].splitlines()[0]
    assert terms.startswith("compute 0.") and float(terms.split(",")[0].split()[1]) < step
