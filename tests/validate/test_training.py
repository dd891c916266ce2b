"""Training-run validation: rows become scenarios, measurements become iteration times, the CLI reports."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from helpers import RecordingPool, cli
from simulon import executors
from simulon.pipeline import planned_size
from simulon.validate.report import contradicting, read_table, shipped_table
from simulon.validate.training import (
    ROW_FOLD,
    Unsupported,
    implied_iterations,
    measured_iteration,
    planned_row,
    sample_rows,
    scenario_from_row,
    simulate_row,
    validate_training,
    with_source_layouts,
)

ROOT = Path(__file__).resolve().parents[2]

TABLE = shipped_table("training")


@pytest.fixture(scope="module")
def rows() -> list[dict[str, str]]:
    return read_table(TABLE)


def _row(rows, **match) -> tuple[int, dict[str, str]]:
    return next((i, r) for i, r in enumerate(rows) if all(r[k] == v for k, v in match.items()))


def test_every_row_becomes_a_scenario_or_says_why_not(rows):
    skipped = []
    for row in rows:
        try:
            sc = scenario_from_row(row)
        except Unsupported as exc:
            assert str(exc), "a skip must give its reason"
            skipped.append(str(exc))
            continue
        assert sc.workload.training.num_gpus == int(row["num_gpus"])
    assert len(skipped) <= 0.1 * len(rows), skipped


def test_a_dgx_cloud_recipe_row_keeps_its_strategy(rows):
    _, row = _row(rows, subset="dgxc_benchmarking_v24.11.1", model="Llama 3.1 405B", num_gpus="576")
    sc = scenario_from_row(row)
    par, train = sc.workload.parallelism, sc.workload.training
    assert (par.tp, par.pp, par.cp, par.vpp) == (8, 9, 2, 7)
    assert sc.workload.model.num_layers == 126 and sc.workload.model.kv_heads == 8
    assert par.sequence_parallel and par.tp_comm_overlap and par.distributed_optimizer
    assert train.global_batch_size == 252 and train.sequence_length == 8192
    assert sc.datacenter.cluster.num_nodes == 72 and sc.datacenter.node.gpu.name.startswith("H100")
    # the flash-attention charts state no batch: their source's 0.5M-token batches apply
    for model, gbs in (("GPT3-125M (seq 2048) [Megatron-LM]", 256), ("GPT2-125M (seq 1024) [HuggingFace]", 512)):
        _, chart = _row(rows, subset="flash_attention_training_efficiency_chart", model=model)
        assert not chart["gbs"] and scenario_from_row(chart).workload.training.global_batch_size == gbs
    # a recipe that recomputes activations without the row saying so (MaxText's remat_policy=custom, keeping the
    # attention projections): the norms, core attention and its output, the MLP's input projections, under cuDNN's
    _, maxtext = _row(rows, subset="dgxc_benchmarking_v24.11.1", model="Llama 2 70B (MaxText/JAX)")
    sc = scenario_from_row(maxtext)
    assert not maxtext["recompute"] and sc.workload.parallelism.recompute == "selective"
    assert sc.workload.parallelism.recomputed_modules == {"context", "layernorm", "mlp_in"}
    assert sc.workload.training.attention == "cudnn"
    # Paxml's GPT 5B: FSDP over the 8 GPUs of a node (ICI mesh [1, 8, 1], one node on the DCN's FSDP axis)
    _, paxml = _row(rows, subset="dgxc_benchmarking_v24.11.1", model="GPT 5B (Paxml/JAX)", num_gpus="128")
    par = scenario_from_row(paxml).workload.parallelism
    assert (par.fsdp, par.fsdp_size, par.recomputed_modules) == ("full_shard", 8, {"context", "layernorm"})
    _, proxy = _row(rows, subset="dgxc_benchmarking_v24.11.1", model="Llama 3.1 405B", num_gpus="32")
    par = scenario_from_row(proxy).workload.parallelism  # the recipe's vpp 7, kept on its one stage
    assert (par.tp, par.pp, par.vpp) == (8, 1, 1)


def test_nemo_recipe_rows_run_with_the_settings_their_launcher_configs_give(rows):
    from simulon.memory.model import estimate_memory

    _, nemotron = _row(rows, subset="dgxc_benchmarking_v24.11.1", model="Nemotron4 340B", num_gpus="128",
                       precision="BF16")
    sc = scenario_from_row(nemotron)
    train = sc.workload.training  # nemotron4-340b-synth.yaml: distributed_fused_adam at dtype bf16, selective
    assert (train.master_weights_dtype.value, train.adam_moments_dtype.value) == ("bf16", "bf16")
    assert sc.workload.parallelism.recompute == "selective" and train.cross_entropy == "fused"
    assert not train.fp8_params and estimate_memory(sc).fits  # 6 B of optimizer state per parameter over dp 2
    _, fp8 = _row(rows, subset="dgxc_benchmarking_v24.11.1", model="Llama 3.1 70B", precision="FP8")
    assert scenario_from_row(fp8).workload.training.fp8_params  # configure.sh: +model.fp8_params=${FP8_ENABLED}
    _, sft = _row(rows, subset="nemo_24.07_finetune_fp8_h100", model="LLAMA2-70B SFT")
    train = scenario_from_row(sft).workload.training  # conf/peft/llama/sft.yaml, examples/peft/llama/h100/
    assert (train.master_weights_dtype.value, train.fp8_params) == ("bf16", True)
    # examples/peft/llama/h100/: one layer per virtual stage for the SFT runs over pipelines, none for LoRA's
    vpp = {model: scenario_from_row(_row(rows, subset="nemo_24.07_finetune_fp8_h100", model=model)[1])
           .workload.parallelism.vpp for model in ("LLAMA2-13B SFT", "LLAMA2-70B SFT", "LLAMA2-70B LoRA")}
    assert vpp == {"LLAMA2-13B SFT": 10, "LLAMA2-70B SFT": 20, "LLAMA2-70B LoRA": 1}
    _, maxtext = _row(rows, subset="dgxc_benchmarking_v24.11.1", model="Llama 2 70B (MaxText/JAX)", precision="FP8")
    train = scenario_from_row(maxtext).workload.training  # a JAX recipe: none of NeMo's settings
    assert (train.master_weights_dtype.value, train.fp8_params, train.cross_entropy) == ("fp32", False,
                                                                                         "vocab_parallel")


def test_runs_of_2021_route_statically_and_runs_on_a_current_nccl_adaptively(rows):
    _, sc21 = _row(rows, subset="megatron_sc21_table1", model="GPT-1T")  # Megatron-LM 2021: NCCL before 2.16
    _, mcore = _row(rows, subset="mcore_r0.8_h100_weak_scaling", model="GPT-462B")
    routing = {name: scenario_from_row(row).datacenter.network.scale_out.topology.routing
               for name, row in (("sc21", sc21), ("mcore", mcore))}
    assert routing == {"sc21": "static", "mcore": "adaptive"}


def test_a_row_gets_as_many_nodes_as_its_system_needs_for_its_gpus(rows):
    _, row = _row(rows, subset="dgxc_benchmarking_v24.11.1", model="Llama 3.1 405B", num_gpus="576")
    sc = scenario_from_row({**row, "hardware": "GB200 NVL72", "nodes": ""})  # 4 GPUs per node
    assert sc.datacenter.node.gpus_per_node == 4 and sc.datacenter.cluster.num_nodes == 576 // 4


def test_a_note_on_dense_layers_shapes_the_truncated_moe_model(rows):
    _, v3 = _row(rows, subset="simumax_b200_release_v1.2", model="deepseekv3 (truncated to 4 layers)")
    _, v2 = _row(rows, subset="simumax_b200_release_v1.2", model="deepseekv2 (truncated to 4 layers)")
    assert "DeepSeekV3 rows dense_layers=1" in v3["notes"] and "DeepSeekV3 rows dense_layers=1" in v2["notes"]
    assert scenario_from_row(v3).workload.model.moe.first_dense_layers == 1  # the template's full model has 3
    assert scenario_from_row(v2).workload.model.moe.first_dense_layers == 1  # its template's own count


def test_a_megatron_lm_command_line_builds_no_multi_token_prediction_whatever_the_model_was_published_with(rows):
    _, v3 = _row(rows, subset="simumax_b200_release_v1.2", model="deepseekv3 (truncated to 4 layers)")
    assert scenario_from_row(v3).workload.model.mtp_layers == 0  # Megatron-LM's --mtp-num-layers is off by default
    nemo = {**v3, "framework": "NeMo 24.12", "model": "DeepSeek-V3", "layers": "", "tp": "8", "pp": "16",
            "ep": "8", "num_gpus": "1024", "nodes": "128", "hardware": "8x B200 (NVLink5)"}  # not v3's "1 node"
    assert scenario_from_row(nemo).workload.model.mtp_layers == 1  # the model's own, where the framework's unknown


def test_a_row_resizing_its_templates_model_keeps_the_templates_mlp_ratio(rows):
    _, row = _row(rows, subset="mcore_r0.8_h100_weak_scaling", model="GPT-1.7B")
    model = scenario_from_row(row).workload.model
    # the SC'21 GPT-1.7B template is 2,304 wide with a 9,216 MLP; Megatron-Core's is 2,048 wide, its MLP 4 x that
    assert (model.hidden_size, model.ffn_hidden_size) == (2048, 8192)


def test_a_megatron_gpt_given_by_its_shapes_is_megatrons_gpt_tied_with_dropout(rows):
    _, row = _row(rows, subset="mcore_r0.8_h100_weak_scaling", model="GPT-7.1B")
    model = scenario_from_row(row).workload.model
    assert model.dropout == 0.1 and not model.tie_embeddings  # dropout 0.1; its stated 7.1B is the untied count
    unsized = scenario_from_row({**row, "model": "GPT"}).workload.model
    assert unsized.tie_embeddings  # Megatron-LM's default where no size says otherwise: no --untie-...
    llm_foundry = {**row, "framework": "llm-foundry"}  # another framework's GPT is not Megatron's
    assert not scenario_from_row(llm_foundry).workload.model.tie_embeddings


def test_an_fsdp_row_shards_and_recomputes(rows):
    _, row = _row(rows, subset="llm_foundry_mpt_benchmarks", model="MPT-70b", num_gpus="256")
    par = scenario_from_row(row).workload.parallelism
    assert par.fsdp == "full_shard" and par.recompute == "full" and not par.distributed_optimizer


def test_rows_without_a_layout_that_cannot_fit_are_skipped(rows):
    _, row = _row(rows, subset="mcore_r0.8_h100_strong_scaling", num_gpus="4608")
    with pytest.raises(Unsupported, match="no parallel layout"):
        scenario_from_row(row)


class _Result:
    num_gpus = 64

    def __init__(self, flops: float, recompute: float):
        self.flops, self.recompute = flops, recompute

    def step_flops(self, hardware: bool = False) -> float:
        return self.flops + (self.recompute if hardware else 0.0)


class _Sim:
    def __init__(self, flops: float, recompute: float = 0.0):
        self.result = _Result(flops, recompute)


@pytest.mark.parametrize(("columns", "expected"), [
    ({"iter_time_s": "2.5"}, 2.5),
    ({"tokens_per_s_total": "1000"}, 256 * 2048 / 1000),
    ({"tokens_per_s_per_gpu": "10"}, 256 * 2048 / (10 * 64)),
    ({"samples_per_s": "4"}, 256 / 4),
    ({"tflops_per_gpu": "100", "mfu_pct": "30"}, 1e18 / (100e12 * 64)),  # model FLOPs
    ({"tflops_per_gpu": "100", "hfu_pct": "30"}, 1.5e18 / (100e12 * 64)),  # hardware FLOPs
    ({"mfu_pct": "50"}, 1e18 / (0.5 * 989.4e12 * 64)),
    ({"hfu_pct": "50"}, 1.5e18 / (0.5 * 989.4e12 * 64)),
])
def test_measurements_convert_to_an_iteration_time(rows, columns, expected):
    _, row = _row(rows, subset="mcore_r0.8_h100_weak_scaling", model="GPT-7.1B")
    row = {**row, **dict.fromkeys(("iter_time_s", "tokens_per_s_total", "tokens_per_s_per_gpu", "samples_per_s",
                                   "tflops_per_gpu", "mfu_pct", "hfu_pct"), ""), **columns}
    row.update(num_gpus="64", gbs="256", seq_len="2048", tp="1", pp="1", dp="64")
    sc = scenario_from_row(row)
    metric, seconds = measured_iteration(row, _Sim(1e18, 0.5e18), sc)
    assert metric in columns
    assert seconds == pytest.approx(expected)


@pytest.mark.parametrize(("columns", "named"), [
    ({"iter_time_s": "2.5", "tokens_per_s_total": "1000"}, "iter_time_s 2.5 and tokens_per_s_total 1000 (524 s an "
                                                          "iteration) are 210x apart"),
    ({"tokens_per_s_total": "1000", "tokens_per_s_per_gpu": "100"}, "tokens_per_s_total 1000 (524 s an iteration) "
                                                                      "and tokens_per_s_per_gpu 100 (81.9 s an "
                                                                      "iteration) are 6.4x apart"),
])
def test_a_row_whose_iteration_time_and_token_rates_contradict_each_other_is_not_compared_and_says_which(
        rows, columns, named):
    _, row = _row(rows, subset="mcore_r0.8_h100_weak_scaling", model="GPT-7.1B")
    row = {**row, **dict.fromkeys(("iter_time_s", "tokens_per_s_total", "tokens_per_s_per_gpu", "samples_per_s",
                                   "tflops_per_gpu", "mfu_pct", "hfu_pct"), ""), **columns}
    row.update(num_gpus="64", gbs="256", seq_len="2048", tp="1", pp="1", dp="64")
    report = validate_training([row])
    assert not report.rows
    assert [s.reason for s in report.skipped] == ["measured cells contradict each other beyond their rounding and "
                                                  f"5%: {named}"]


def test_an_iteration_time_and_token_rates_agreeing_within_their_rounding_and_5_percent_are_one_measurement(rows):
    _, row = _row(rows, subset="mcore_r0.8_h100_weak_scaling", model="GPT-7.1B")
    row = {**row, "num_gpus": "64", "gbs": "256", "seq_len": "2048", "tp": "1", "pp": "1", "dp": "64",
           "iter_time_s": "2.5", "tokens_per_s_total": "209715", "tokens_per_s_per_gpu": "3400"}  # 4% off
    assert contradicting(implied_iterations(row, scenario_from_row(row))) is None
    assert "tokens_per_s_per_gpu 3500" in contradicting(implied_iterations({**row, "tokens_per_s_per_gpu": "3500"},
                                                                           scenario_from_row(row)))


def test_validate_training_reports_rows_and_skips(rows, tmp_path):
    picks = [_row(rows, subset="flash_attention_training_speed", model="GPT3-125M (FlashAttention impl)")[1],
             _row(rows, subset="mcore_r0.8_h100_strong_scaling", num_gpus="4608")[1],
             _row(rows, subset="simumax_b200_release_v1.2", tp="4", pp="1", grad_accum="4")[1]]
    report = validate_training(picks)
    assert [r.index for r in report.rows] == [0, 2] and [s.index for s in report.skipped] == [1]
    for r in report.rows:
        assert r.predicted > 0 and r.error_pct == pytest.approx(100 * (r.predicted - r.measured) / r.measured)
    path = tmp_path / "three.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(picks[0]))
        writer.writeheader()
        writer.writerows(picks)
    run = cli("validate", "training", "--csv", str(path), "--json", timeout=600)
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert {r["index"] for r in data["rows"]} == {0, 2} and data["skipped"][0]["index"] == 1
    assert data["mape_pct"] == pytest.approx(sum(abs(r["error_pct"]) for r in data["rows"]) / 2)



CROSS_SECTION_MAPE_PCT = 10.0
"""The issue's bound. The cross-section's MAPE was 9.1% when it was set (30 rows from the 11 subsets with rows of
64 GPUs or fewer); the whole table was at 9.2% over 333 rows."""


def test_a_cross_section_of_the_table_holds_its_accuracy(rows):
    """The three smallest rows of every subset, simulated end to end: all evaluated, MAPE within the bound."""
    picked = sample_rows(rows, max_gpus=64, per_subset=3)
    report = validate_training([rows[i] for i in picked])
    assert not report.skipped, [(picked[s.index], s.reason) for s in report.skipped]
    subsets = {rows[i]["subset"] for i in picked}
    assert len(subsets) >= 10 and len(report.rows) == len(picked) >= 25
    mape = sum(abs(r.error_pct) for r in report.rows) / len(report.rows)
    assert mape <= CROSS_SECTION_MAPE_PCT, [(picked[r.index], round(r.error_pct, 1)) for r in report.rows]


def test_the_report_is_the_same_for_any_number_of_jobs_and_a_row_over_its_share_runs_later_by_its_need(
        rows, monkeypatch):
    """Rows run on a pool sharing the memory limit: a limit that holds the largest row alone but not beside
    another still simulates it as one job would (planned within the whole limit, run after the others, admitted
    by its need), and every row is reported in the table's order with the same figures."""
    picks = [_row(rows, subset="flash_attention_training_speed", model="GPT3-125M (FlashAttention impl)")[1],
             _row(rows, subset="mcore_r0.8_h100_strong_scaling", num_gpus="4608")[1],
             _row(rows, subset="megatron_sc21_table1", num_gpus="32")[1],
             _row(rows, subset="simumax_b200_release_v1.2", tp="4", pp="1", grad_accum="4")[1]]

    def needs(limit):
        plans = [(sc := scenario_from_row(row), planned_row(sc, limit)) for row in picks[2:]]
        return [planned_size(sc, step, ROW_FOLD, limit).memory_bytes() for sc, step in plans]

    whole = needs(None)
    limit = 1.5 * max(whole)
    assert needs(limit) == whole and min(whole) <= limit / 2 < max(whole)
    serial = validate_training(picks, memory_limit=limit)
    pools = []
    monkeypatch.setattr(executors, "ProcessExecutor", lambda jobs, memory=None: pools.append(
        RecordingPool(jobs, memory)) or pools[-1])
    parallel = validate_training(picks, memory_limit=limit, jobs=2)
    assert parallel == serial and [r.index for r in serial.rows] == [0, 2, 3] and serial.skipped[0].index == 1
    assert [pool.needs for pool in pools] == [[None], [[max(whole)]]]


def test_a_row_too_large_for_the_memory_given_is_skipped_with_the_reason_and_the_rest_go_on(rows):
    small = _row(rows, subset="flash_attention_training_speed", model="GPT3-125M (FlashAttention impl)")[1]
    report = validate_training([small, small], memory_limit=1e3)
    assert not report.rows and [s.index for s in report.skipped] == [0, 1]
    assert all(s.reason.startswith("too large: ") and "0.0 " not in s.reason and "1.0 KB are available"
               in s.reason for s in report.skipped)  # config.units.memory_amount: never "0.0 GB"
    assert [r.index for r in validate_training([small], memory_limit=None).rows] == [0]


def test_transformer_engine_frameworks_run_cudnn_attention_and_the_others_their_own(rows):
    """NeMo and Megatron-Core build on Transformer Engine, which runs cuDNN's fused attention on Hopper; the
    FlashAttention chart's runs and MosaicML's keep the kernels their sources name (MosaicML's large-scale table
    its own: the test above)."""
    first = {subset: next(r for r in rows if r["subset"] == subset and "Large Scale" not in r["source"])
             for subset in ("nemo_24.07_pretrain_fp8_h100", "mcore_r0.8_h100_weak_scaling",
                            "simumax_b200_release_v1.2", "llm_foundry_mpt_benchmarks", "megatron_sc21_table1")}
    attention = {subset: scenario_from_row(row).workload.training.attention for subset, row in first.items()}
    assert attention == {"nemo_24.07_pretrain_fp8_h100": "cudnn", "mcore_r0.8_h100_weak_scaling": "cudnn",
                         "simumax_b200_release_v1.2": "cudnn", "llm_foundry_mpt_benchmarks": "flash_triton",
                         "megatron_sc21_table1": "unfused"}


def test_dgx_cloud_recipes_that_turn_cudnn_attention_off_run_flash_attention(rows):
    """dgxc-benchmarking 35a9aecc exports NVTE_FUSED_ATTN=0 in grok1/configure.sh, nemotron/configure.sh (340B) and
    nemo_megatron/launch.sh (GPT-3 175B, whichever DTYPE it runs), so Transformer Engine runs FlashAttention-2 there;
    llama3.1/configure.sh and paxml/configure.sh export NVTE_FUSED_ATTN=1 and keep cuDNN's."""
    dgxc = [r for r in rows if r["subset"] == "dgxc_benchmarking_v24.11.1"]
    gpt3 = [r for r in dgxc if "nemo_megatron/README_175b" in r["source_locator"]]
    assert {r["precision"] for r in gpt3} == {"BF16", "FP8"} and len(gpt3) == 8
    assert {scenario_from_row(r).workload.training.attention for r in gpt3} == {"flash"}
    for model in ("Grok-1 314B (MoE, NeMo)", "Nemotron4 340B"):
        assert scenario_from_row(next(r for r in dgxc if r["model"] == model)).workload.training.attention == "flash"
    for model in ("Llama 3.1 70B", "GPT-3 175B (Paxml/JAX)"):
        assert scenario_from_row(next(r for r in dgxc if r["model"] == model)).workload.training.attention == "cudnn"


def test_llm_foundrys_large_scale_h100_table_runs_the_attention_its_sweep_gave_each_model(rows):
    """sweep.py, which came with the "Large Scale, >= 128 GPUs" table (llm-foundry 5e85bd62), runs MPT-1b, 3b, 7b and
    70b with FlashAttention-2 and 13b and 30b with the Triton kernel; the smaller tables ran the Triton default."""
    large = [r for r in rows if r["subset"] == "llm_foundry_mpt_benchmarks" and "Large Scale" in r["source"]]
    by_model = {r["model"]: scenario_from_row(r).workload.training.attention for r in large}
    assert {"MPT-1b", "MPT-7b", "MPT-70b", "MPT-13b", "MPT-30b"} <= set(by_model)
    assert by_model == {m: "flash_triton" if m in ("MPT-13b", "MPT-30b") else "flash" for m in by_model}
    small = [r for r in rows if r["subset"] == "llm_foundry_mpt_benchmarks" and "Large Scale" not in r["source"]]
    assert len(small) > 100 and {scenario_from_row(r).workload.training.attention for r in small} == {"flash_triton"}


def test_a_megatron_gpts_embeddings_are_tied_or_not_as_its_stated_size_says(rows):
    # Megatron-Core's scaling GPTs count as untied ('GPT-1.7B': 1.75B so, 1.48B tied), the SC'21 paper's as tied
    # ('GPT-1.7B' there is 2,304 wide with a 51,200 vocabulary: 1.65B tied, 1.77B untied)
    for subset, tied in (("mcore_r0.8_h100_weak_scaling", False), ("megatron_sc21_table1", True)):
        models = [scenario_from_row(row).workload.model for row in rows if row["subset"] == subset]
        assert models and {m.tie_embeddings for m in models} == {tied}, subset
    # a size both counts round to keeps Megatron-LM's default: GPT-2 XL's '1.6B' (1.56B tied, 1.63B untied)
    _, xl = _row(rows, subset="flash_attention_training_efficiency_chart", model="GPT2-1.6B (seq 1024) [Megatron-LM]")
    assert scenario_from_row(xl).workload.model.tie_embeddings


def test_a_recompute_cell_naming_modules_recomputes_those_modules(rows):
    _, row = _row(rows, subset="dgxc_benchmarking_v24.11.1", model="Nemotron4 340B", num_gpus="128", precision="BF16")
    par = scenario_from_row({**row, "recompute": "selective (layernorm, mlp, not_a_module)"}).workload.parallelism
    assert par.recompute == "selective" and par.recompute_modules == ["layernorm", "mlp"]
    assert scenario_from_row({**row, "recompute": "selective"}).workload.parallelism.recompute_modules is None


def test_the_sp_and_etp_columns_override_the_frameworks_habits(rows):
    _, row = _row(rows, subset="dgxc_benchmarking_v24.11.1", model="Nemotron4 340B", num_gpus="128", precision="BF16")
    assert scenario_from_row(row).workload.parallelism.sequence_parallel  # NeMo's recipes: on
    off = scenario_from_row({**row, "sp": "no"}).workload.parallelism
    assert not off.sequence_parallel and not off.tp_comm_overlap
    assert scenario_from_row({**row, "sp": "yes"}).workload.parallelism.sequence_parallel
    assert scenario_from_row({**row, "etp": "1"}).workload.parallelism.expert_tensor_parallel is None  # no experts


def test_every_run_of_the_unseen_megatron_bridge_table_becomes_the_scenario_its_recipe_states():
    table = with_source_layouts(read_table(str(ROOT / "benchmarks" / "data" / "megatron_bridge_cards.csv")))
    scenarios = [scenario_from_row(row) for row in table]
    assert len(scenarios) == 13
    deepseek = scenarios[0].workload  # deepseek_v3_pretrain_1024gpu_h100_bf16_config
    assert (deepseek.parallelism.tp, deepseek.parallelism.pp, deepseek.parallelism.vpp, deepseek.parallelism.ep) == (
        2, 8, 4, 64)
    assert deepseek.parallelism.recompute_modules == ["mla_up_proj", "mlp"] and deepseek.model.mtp_layers == 1
    assert deepseek.parallelism.etp == 1 and deepseek.parallelism.sequence_parallel  # the etp and sp columns
    dtypes = [sc.workload.training.dtype.value for sc in scenarios]
    assert dtypes == ["bf16"] + ["mxfp8"] * 10 + ["bf16", "mxfp8"]
    # HybridEP, which deduplicates as DeepEP does, wherever the recipe dispatches through it; GPT-OSS's GB200 BF16
    # recipe keeps its base recipe's all-to-all dispatcher; Megatron-Bridge fuses the loss everywhere
    assert [sc.workload.training.moe_dispatcher for sc in scenarios] == ["deepep"] * 11 + ["alltoall", "deepep"]
    assert {sc.workload.training.cross_entropy for sc in scenarios} == {"fused"}
    # the GB200/GB300 MXFP8 DeepSeek-V3 and Qwen3 recipes and both GPT-OSS ones overlap the all-to-alls; DeepSeek-V3's
    # H100 one (which also reduces gradients after the backward) and Nemotron 3 Nano's do not
    assert [sc.workload.parallelism.overlap_moe_expert_parallel_comm for sc in scenarios] == (
        [False] + [True] * 9 + [False, True, True])
    assert not deepseek.parallelism.overlap_grad_reduce and scenarios[1].workload.parallelism.overlap_grad_reduce
    assert deepseek.parallelism.pipeline_layout == "Et|(tt|)*30mL"
    assert scenarios[1].workload.parallelism.pipeline_layout == scenarios[2].workload.parallelism.pipeline_layout == (
        "Et*4|(t*4|)*14tmL")  # GB200's from the (pp 4, vpp 4) default, GB300's stated
    gpt_oss = scenarios[11].workload
    assert gpt_oss.training.sequence_length == 4096 and gpt_oss.parallelism.recompute_modules == ["layernorm",
                                                                                                  "moe_act"]


def test_megatron_core_scaling_runs_interleave_one_layer_a_virtual_stage_where_pipelined(rows):
    """Megatron-Core's scaling README overlaps pipeline communication, which Megatron-LM allows only on the
    interleaved schedule: its pipelined rows, which state no vpp, run one layer per virtual stage (the depth most of
    NVIDIA's recipes in the table give); its unpipelined rows, a row stating its vpp and other frameworks' rows
    without one keep theirs."""
    subset = "mcore_r0.8_h100_weak_scaling"
    layouts = {}
    for row in (r for r in rows if r["subset"] == subset):
        par = scenario_from_row(row).workload.parallelism
        layouts[row["model"]] = (par.pp, par.vpp)
    assert layouts["GPT-70B"] == (2, 42) and layouts["GPT-177B"] == (6, 16) and layouts["GPT-462B"] == (16, 7)
    assert layouts["GPT-32B"] == (1, 1)
    _, row = _row(rows, subset=subset, model="GPT-177B")
    assert scenario_from_row({**row, "vpp": "4"}).workload.parallelism.vpp == 4
    # the same run under Megatron-LM's own command line (no overlap claimed) stays on plain 1F1B
    assert scenario_from_row({**row, "framework": "Megatron-LM @23e00ed0 + TE 2.11"}).workload.parallelism.vpp == 1
    # a layer count the pipeline cannot split one layer a chunk evenly is not interleaved
    assert scenario_from_row({**row, "layers": "97", "pp": "6", "num_gpus": "2304"}).workload.parallelism.vpp == 1


def test_every_megatron_bridge_card_run_fits_by_the_memory_model_as_each_ran():
    # every run of the table completed its 50 steps: the memory model must not say one would run out of memory
    # (before the all-to-all overlap's combined steps kept one layer more, not a micro-batch, and expandable
    # segments reserved what is allocated, 7 of the 13 did not fit; Qwen3-30B-A3B on 8 GB300s needed 476.9 GiB)
    from simulon.memory import estimate_memory

    table = with_source_layouts(read_table(str(ROOT / "benchmarks" / "data" / "megatron_bridge_cards.csv")))
    reports = [estimate_memory(scenario_from_row(row)) for row in table]
    assert all(report.fits for report in reports), [round(r.peak.device / 2**30, 1) for r in reports]
    assert all(sc.workload.training.expandable_segments for sc in map(scenario_from_row, table))


def test_a_row_whose_cells_a_block_refuses_is_skipped_with_one_line_naming_the_field(rows):
    row = {**rows[10], "layers": "1e9"}
    (skipped,) = validate_training([row]).skipped
    assert skipped.reason == "row: num_layers: 1000000000 is more than 10,000 layers"


@pytest.mark.parametrize(("times", "compared"), [(7.8, False), (1 / 7.8, False), (1.3, True), (1 / 1.3, True)])
def test_a_row_whose_flop_rate_and_token_rate_lie_over_1_5x_apart_at_the_steps_flops_is_not_compared(
        rows, times, compared):
    """Sources count a step's FLOPs their own way (the shipped rows up to 1.23x from simulon's): a FLOP rate is no
    exact conversion of a token rate, but one 7.8x off is a cell in the wrong column, and the row was compared on its
    token rate as if nothing were wrong."""
    _, row = _row(rows, subset="flash_attention_training_speed", model="GPT3-125M (FlashAttention impl)")
    sc = scenario_from_row(row)
    tokens_per_s = float(row["tokens_per_s_total"])
    step_s = sc.workload.training.global_batch_size * sc.workload.training.sequence_length / tokens_per_s
    flops = simulate_row(sc).result.step_flops()
    consistent = flops / step_s / sc.workload.training.num_gpus / 1e12
    report = validate_training([{**row, "tflops_per_gpu": f"{consistent * times:.6g}"}])
    if compared:
        assert len(report.rows) == 1 and not report.skipped
        return
    assert not report.rows
    (skipped,) = report.skipped
    assert skipped.reason.startswith("measured cells contradict each other beyond 1.5x: tflops_per_gpu ")
    assert f"7.8x the {step_s:.3g} s of tokens_per_s_total 1310000.0" in skipped.reason
