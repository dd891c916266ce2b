"""Training number formats (config/number_formats.py) in the kernel model and the tracer: GEMM rates, the bytes
of the cast kernels, the layers a recipe keeps in bf16, and the refusal of a format on a GPU without its rate."""

from __future__ import annotations

import csv

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import cli, gpt_workload, seed_dict
from simulon.compute.analytical import AnalyticalModel
from simulon.config.common import DType
from simulon.config.dc import GPUSpec
from simulon.config.loading import ConfigError, parse_scenario
from simulon.config.number_formats import NUMBER_FORMATS, TrainingFormat, number_format, precision_named
from simulon.validate.report import shipped_table
from simulon.validate.training import scenario_from_row
from simulon.workload.kernels import KernelClass, Phase, gemm
from simulon.workload.layer_kernels import LayerKernels
from simulon.workload.megatron import MegatronTracer

BLACKWELL = ("b200", "b300", "gb200", "gb300")


def gpu(stem: str) -> GPUSpec:
    return GPUSpec.model_validate({"from": stem})


def kernels(dtype: str, **training) -> LayerKernels:
    return LayerKernels.of(gpt_workload(training={"dtype": dtype, **training}, layers=8))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(BLACKWELL), st.integers(7, 15), st.integers(7, 15), st.integers(7, 15))
def test_a_gemm_in_nvfp4_takes_no_longer_than_in_mxfp8_nor_mxfp8_than_bf16(stem, m, n, k):
    spec = [gemm("g", Phase.fwd, 2**m, 2**n, 2**k, 2.0)]
    models = [AnalyticalModel(gpu(stem), d, sustained_load=True) for d in (DType.nvfp4, DType.mxfp8, DType.bf16)]
    # the work after the launch: each dtype's launch overhead is fitted on its own rows (a fraction of a
    # microsecond apart), which decides the order of kernels that take no longer than their launch
    times = [float(model.seconds(spec)[0]) - model.gemm.overhead_us * 1e-6 for model in models]
    assert times[0] <= times[1] <= times[2]


def test_a_large_gemm_runs_near_the_ratio_of_the_formats_peaks():
    b200, big = gpu("b200"), [gemm("g", Phase.fwd, 16384, 16384, 16384, 2.0)]
    fp8, mxfp8, nvfp4 = (float(AnalyticalModel(b200, d).seconds(big)[0]) for d in (DType.fp8, DType.mxfp8,
                                                                                    DType.nvfp4))
    # compute-bound: MXFP8 at fp8's rate and fitted efficiency, its scales a rounding error; NVFP4 at twice the rate
    assert mxfp8 == pytest.approx(fp8, rel=0.01) and 1.6 < mxfp8 / nvfp4 <= 2.0 + 1e-9
    # B300 (Blackwell Ultra) has 1.5x B200's fp4 rate and the same fp8 rate
    b300 = [float(AnalyticalModel(gpu("b300"), d).seconds(big)[0]) for d in (DType.mxfp8, DType.nvfp4)]
    assert b300[0] == pytest.approx(mxfp8, rel=0.05) and b300[1] < nvfp4


def test_block_scales_add_their_bytes_to_a_memory_bound_gemm():
    # a skinny GEMM that streams its weight: operands cost element + scale / block bytes
    skinny = [gemm("g", Phase.fwd, 16, 16384, 16384, 2.0)]
    b200 = gpu("b200")
    fp8, mxfp8 = (float(AnalyticalModel(b200, d).seconds(skinny)[0]) for d in (DType.fp8, DType.mxfp8))
    assert mxfp8 > fp8


@pytest.mark.parametrize("dtype, block, scale", [("mxfp8", 32, 1.0), ("mxfp4", 32, 1.0), ("nvfp4", 16, 1.0)])
def test_block_formats_store_one_scale_per_block(dtype, block, scale):
    fmt = number_format(DType(dtype))
    assert (fmt.block, fmt.scale_bytes) == (block, scale)
    assert fmt.operand_bytes() == pytest.approx(DType(dtype).bytes + scale / block)


@pytest.mark.parametrize("dtype, recipe, reads", [("fp8", "delayed", 1), ("fp8", "current", 2), ("mxfp8", None, 1),
                                                  ("mxfp4", None, 1), ("nvfp4", None, 3)])
def test_cast_kernels_move_input_bytes_plus_both_quantized_copies_with_their_scales(dtype, recipe, reads):
    training = {"fp8_recipe": recipe} if recipe else {}
    k = kernels(dtype, **training)
    fmt = number_format(DType(dtype))
    per_copy = fmt.element_bytes + (fmt.scale_bytes / fmt.block if fmt.block else 0.0)
    for name in ("attn_qkv", "mlp_linear2"):
        fwd = k[name][Phase.fwd]
        cast = k[f"{name}_cast"]
        elements = fwd.param("m") * fwd.param("k")
        assert cast[Phase.fwd].bytes == pytest.approx(elements * (reads * 2.0 + 2 * per_copy))
        grads = fwd.param("m") * fwd.param("n")
        assert cast[Phase.bwd_ig].bytes == pytest.approx(grads * (reads * 2.0 + 2 * per_copy))


def test_nvfp4_reads_activations_and_gradients_three_times_for_the_hadamard_copy_and_weights_twice():
    # Transformer Engine's NVFP4Quantizer with RHT (inputs and gradients): amax before and after the transform in one
    # read, the row-wise cast, and the RHT-fused column-wise cast, each reading the 16-bit tensor; weights (no RHT,
    # 16 x 16 tiles): amax, then one cast writing both copies
    k, fmt = kernels("nvfp4"), number_format(DType.nvfp4)
    fwd = k["attn_qkv"][Phase.fwd]
    copies = 2 * fmt.operand_bytes()
    activations = fwd.param("m") * fwd.param("k")
    assert k["attn_qkv_cast"][Phase.fwd].bytes == pytest.approx(activations * (3 * 2.0 + copies))
    gradients = fwd.param("m") * fwd.param("n")
    assert k["attn_qkv_cast"][Phase.bwd_ig].bytes == pytest.approx(gradients * (3 * 2.0 + copies))
    weight = k.weight_casts["attn_qkv"]
    assert weight.bytes == pytest.approx(fwd.param("n") * fwd.param("k") * (2 * 2.0 + 2 * fmt.weight_operand_bytes))


def test_current_scaling_costs_one_more_read_of_each_tensor_than_delayed():
    delayed, current = kernels("fp8"), kernels("fp8", fp8_recipe="current")
    fwd = delayed["attn_qkv"][Phase.fwd]
    extra = current["attn_qkv_cast"][Phase.fwd].bytes - delayed["attn_qkv_cast"][Phase.fwd].bytes
    assert extra == pytest.approx(fwd.param("m") * fwd.param("k") * 2.0)
    # the GEMMs themselves are the same
    assert current["attn_qkv"][Phase.fwd] == fwd


def test_every_quantized_format_keeps_router_and_lm_head_in_bf16():
    for dtype in (d for d, f in NUMBER_FORMATS.items() if f.quantized):
        k = kernels(dtype.value)
        assert k["lm_head"][Phase.fwd].param("precision") == "bf16"
        assert "lm_head_cast" not in k and "attn_qkv_cast" in k


def test_nvfp4_keeps_the_papers_share_of_first_and_last_layers_in_bf16():
    # arXiv 2509.25149 keeps the first 2 and last 8 of 62 blocks in bf16: on 62 layers exactly that
    fmt = TrainingFormat.of(DType.nvfp4, 62)
    assert (fmt.bf16_first, fmt.bf16_last) == (2, 8)
    assert [fmt.layer_in_bf16(i) for i in (0, 1, 2, 53, 54, 61)] == [True, True, False, False, True, True]
    assert not fmt.layer_in_bf16(-1) and not fmt.layer_in_bf16(-2)  # embedding and head are not layers
    # fp8 and mxfp8 keep none unless asked (Megatron's --first-last-layers-bf16 is off by default)
    assert TrainingFormat.of(DType.mxfp8, 62).bf16_last == 0
    asked = TrainingFormat.of(DType.fp8, 62, bf16_layers=(1, 1))
    assert asked.layer_in_bf16(0) and asked.layer_in_bf16(61) and not asked.layer_in_bf16(1)


@given(st.integers(1, 200))
def test_nvfp4_keeps_about_the_papers_share_of_layers_in_bf16_at_any_depth(layers):
    # each of the first and last counts within half a layer of the paper's share (2/62 and 8/62 of the depth), so
    # that a model cut to a few layers still runs most of them in NVFP4 (rounded up: 3 of 8 layers, 1 of 1)
    fmt = TrainingFormat.of(DType.nvfp4, layers)
    assert abs(fmt.bf16_first - 2 / 62 * layers) <= 0.5 and abs(fmt.bf16_last - 8 / 62 * layers) <= 0.5
    assert sum(fmt.layer_in_bf16(i) for i in range(layers)) <= 10 / 62 * layers + 1


def test_the_tracer_runs_bf16_layers_in_bf16_without_casts():
    wl = gpt_workload(training={"dtype": "nvfp4", "bf16_first_layers": 1, "bf16_last_layers": 2}, layers=8)
    program = MegatronTracer(wl, 4).stage_program(0)
    by_layer: dict[int, set[str]] = {}
    for op in program.ops:
        kernel = getattr(op, "kernel", None)
        if kernel is not None and kernel.kclass == KernelClass.gemm and op.layer >= 0:
            by_layer.setdefault(op.layer, set()).add(str(dict(kernel.shape).get("precision", "nvfp4")))
    casts = {op.layer for op in program.ops if getattr(op, "kernel", None) is not None
             and op.kernel.name.endswith("_cast")}
    assert by_layer[0] == by_layer[6] == by_layer[7] == {"bf16"}
    assert all(by_layer[i] == {"nvfp4"} for i in range(1, 6))
    assert casts == set(range(1, 6))


def test_a_format_on_a_gpu_without_its_rate_is_refused_naming_both():
    with pytest.raises(ValueError, match=r"H100.*mxfp8"):
        AnalyticalModel(gpu("h100-sxm"), DType.mxfp8)
    for stem in BLACKWELL:  # every Blackwell template lists both formats' rates
        assert gpu(stem).peak_flops(DType.mxfp8) == gpu(stem).peak_flops(DType.fp8)
        assert gpu(stem).peak_flops(DType.nvfp4) == gpu(stem).peak_flops(DType.fp4)


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(["mxfp8", "nvfp4"]), st.sampled_from(["h100-sxm", "a100-sxm-80gb", "mi300x", "h200-sxm"]))
def test_a_scenario_training_a_block_format_on_a_gpu_without_it_is_bad_input(dtype, stem):
    data = seed_dict()
    data["datacenter"]["node"]["gpu"] = stem
    data["collective"].pop("library")  # the seed's nccl, which an MI300X does not run (the vendor's by default)
    data["workload"]["training"]["dtype"] = dtype
    with pytest.raises(ConfigError, match=f"workload.training.dtype.*{dtype}"):
        parse_scenario(data, "s.yaml")


def test_the_cli_exits_2_naming_the_gpu_and_the_format(tmp_path):
    data = seed_dict()
    data["workload"]["training"]["dtype"] = "nvfp4"
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    proc = cli("simulate", "s.yaml", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "nvfp4" in proc.stderr and "H100" in proc.stderr and "workload.training.dtype" in proc.stderr


def test_an_fp8_recipe_with_a_block_format_is_bad_input():
    data = seed_dict()
    data["workload"]["training"].update({"dtype": "mxfp8", "fp8_recipe": "current"})
    data["datacenter"]["node"]["gpu"] = "b200"
    with pytest.raises(ConfigError, match=r"fp8_recipe.*mxfp8"):
        parse_scenario(data, "s.yaml")


@pytest.mark.parametrize("dtype", ["fp8", "mxfp8", "nvfp4"])
def test_a_16_bit_weight_is_quantized_with_its_scales_by_a_cast_kernel(dtype):
    fmt = number_format(DType(dtype))
    k = kernels(dtype)
    fwd = k["mlp_linear1"][Phase.fwd]
    weights = fwd.param("k") * fwd.param("n")
    block = fmt.weight_block or fmt.block
    per_copy = fmt.element_bytes + (fmt.scale_bytes / block if block else 0.0)
    reads = 2 if fmt.amax_pass else 1
    assert k.weight_casts["mlp_linear1"].bytes == pytest.approx(weights * (reads * 2.0 + 2 * per_copy))
    # weights already narrow: no cast; per-tensor fp8 transposes its fp8 weight instead (test_fp8_casts_by_architecture)
    # as NVFP4 does its gathered row-wise copy, and MXFP8 quantizes the bf16 weights it gathers (test_mxfp8_params_...)
    narrow = kernels(dtype, fp8_params=True).weight_casts
    assert all(name.endswith(("_weight_transpose", "_weight_requantize")) for name in (s.name for s in narrow.values()))
    assert narrow


def test_mxfp8_params_gathered_in_bf16_are_quantized_into_both_copies_and_the_gathered_data_zeroed_once_a_step():
    # Megatron's _post_param_sync with the gradient buffer borrowed for the gather: copy_tensors_to_quantized_params
    # (read bf16, write the row-wise and the column-wise e4m3 copy with an e8m0 scale per 32), then param_data.zero_()
    k = kernels("mxfp8", fp8_params=True)
    fwd = k["mlp_linear1"][Phase.fwd]
    weights = fwd.param("k") * fwd.param("n")
    requantize = k.weight_casts["mlp_linear1"]
    assert requantize.name == "mlp_linear1_weight_requantize"
    assert requantize.bytes == pytest.approx(weights * (2.0 + 2 * (1 + 1 / 32) + 2.0))
    assert k.weight_cast("mlp_linear1", 0) is requantize and k.weight_cast("mlp_linear1", 1) is None
    # Megatron-FSDP gathers both quantized copies themselves: nothing to quantize after
    fsdp = LayerKernels.of(gpt_workload(training={"dtype": "mxfp8", "fp8_params": True}, layers=8,
                                        extra_parallelism={"fsdp": "full_shard"}))
    assert fsdp.weight_casts == {}


def weight_casts(wl, gpus: int = 4) -> dict[int, int]:
    """Weight-cast kernels of stage 0 by micro-batch."""
    counts: dict[int, int] = {}
    for op in MegatronTracer(wl, gpus).stage_program(0).ops:
        kernel = getattr(op, "kernel", None)
        if kernel is not None and kernel.name.endswith("_weight_cast"):
            counts[op.microbatch] = counts.get(op.microbatch, 0) + 1
    return counts


def test_weights_are_quantized_once_a_step_or_every_micro_batch_under_full_sharding():
    cached = weight_casts(gpt_workload(training={"dtype": "mxfp8"}, layers=4, gbs=16))
    # four layers x four GEMMs (QKV, projection, fc1, fc2), at the first micro-batch only
    assert cached == {0: 16}
    sharded = weight_casts(gpt_workload(training={"dtype": "mxfp8"}, layers=4, gbs=16,
                                        extra_parallelism={"fsdp": "full_shard"}))
    assert set(sharded) == set(range(4)) and set(sharded.values()) == {16}
    assert weight_casts(gpt_workload(training={"dtype": "mxfp8", "fp8_params": True}, layers=4, gbs=16)) == {}


@pytest.mark.parametrize("text, dtype, recipe", [
    ("NVFP4", "nvfp4", None), ("FP4 (Blackwell)", "nvfp4", None), ("MXFP8 (TE 2.x)", "mxfp8", None),
    ("MXFP4", "mxfp4", None), ("mx-fp4 (Quartet)", "mxfp4", None), ("MX FP8", "mxfp8", None), ("mx_fp4", "mxfp4", None),
    ("FP8 current-scaling", "fp8", "current"), ("fp8 tensorwise", "fp8", "current"), ("amp_fp8/DEFAULT", "fp8", None),
    ("BF16/FP16", "bf16", None), ("fp16 mixed", "fp16", None), ("not stated", None, None),
])
def test_a_precision_written_as_tables_write_it_names_its_format(text, dtype, recipe):
    named, fp8_recipe = precision_named(text)
    assert (named.value if named else None, fp8_recipe) == (dtype, recipe)


def test_a_users_nvfp4_row_on_b200_is_simulated_in_nvfp4_not_bf16():
    with open(shipped_table("training"), newline="") as handle:
        columns = next(csv.reader(handle))
    row = {**dict.fromkeys(columns, ""), "subset": "mine", "hardware": "8x B200 (DGX B200)", "num_gpus": "8",
           "model": "meta-llama/Llama-3.1-8B", "layers": "2", "seq_len": "2048", "precision": "NVFP4",
           "framework": "Megatron-LM", "tp": "1", "gbs": "8", "mbs": "1", "iter_time_s": "0.5"}
    assert scenario_from_row(row).workload.training.dtype is DType.nvfp4


def test_mxfp4_runs_at_the_fp4_rate_beside_nvfp4_with_cheaper_casts_and_no_bf16_layers():
    # OCP MXFP4: 32-element blocks, e8m0 scales, no per-tensor scale (so no amax pass): on Blackwell its GEMMs run
    # at NVFP4's FP4 rate and efficiency, its casts move fewer bytes, and no recipe keeps layers in bf16
    big = [gemm("g", Phase.fwd, 16384, 16384, 16384, 2.0)]
    for stem in BLACKWELL:
        mx, nv = (float(AnalyticalModel(gpu(stem), d).seconds(big)[0]) for d in (DType.mxfp4, DType.nvfp4))
        assert mx == pytest.approx(nv, rel=0.01)
    mx, nv = kernels("mxfp4"), kernels("nvfp4")
    assert mx["attn_qkv_cast"][Phase.fwd].bytes < nv["attn_qkv_cast"][Phase.fwd].bytes
    assert TrainingFormat.of(DType.mxfp4, 62).bf16_first == TrainingFormat.of(DType.mxfp4, 62).bf16_last == 0


def test_mxfp4_runs_on_mi355x_which_has_no_nvfp4_and_is_refused_on_hopper():
    assert DType.mxfp4 in gpu("mi355x").peak_tflops and DType.nvfp4 not in gpu("mi355x").peak_tflops
    data = seed_dict()
    data["datacenter"]["node"]["gpu"] = {"from": "h100-sxm"}
    data["workload"]["training"]["dtype"] = "MXFP4"
    with pytest.raises(ConfigError, match="mxfp4"):
        parse_scenario(data, "s.yaml")


@pytest.mark.parametrize(("dtype", "bf16_last", "in_bf16"),
                         [("fp8", 1, False), ("mxfp8", 2, False), ("nvfp4", 0, True), ("nvfp4", None, True),
                          ("mxfp4", None, True)])
def test_multi_token_prediction_layers_run_in_fp8_under_an_fp8_recipe_and_in_bf16_under_an_fp4_one(dtype, bf16_last,
                                                                                                     in_bf16):
    # Megatron-Core's MultiTokenPredictionLayer runs under the global fp8 context (no layer number, so not among
    # the last layers kept in bf16) and ignores fp4 ("currently ignoring FP4 in MTP layers")
    fmt = TrainingFormat.of(DType(dtype), 61, bf16_layers=(None, bf16_last))
    assert fmt.layer_in_bf16(61) is in_bf16 and fmt.layer_in_bf16(62) is in_bf16  # the MTP layers after 61
    wl = gpt_workload(training={"dtype": dtype, **({} if bf16_last is None else {"bf16_last_layers": bf16_last})},
                      model={"mtp_layers": 1}, layers=8)
    mtp = LayerKernels.of(wl).at(8)
    assert ("attn_qkv_cast" not in mtp.table) is in_bf16


@pytest.mark.parametrize("dtype", ["fp8", "mxfp8", "nvfp4"])
def test_mlas_up_projections_quantize_their_own_latents_where_its_down_projections_share_one_cast(dtype):
    """MLA's query and key-value up-projections read the latents after q_layernorm and kv_layernorm, not the hidden
    state their down-projections share, so each has its input cast in the forward; the tracer counted them among
    the GEMMs sharing an earlier one's cast and quantized neither (DeepSeek-V3 with 4 layers, fp8, 8 H100s, ep 8:
    576.12 ms a step, 576.29 with their casts)."""
    sc = parse_scenario({"datacenter": {"from": "dgx-b200", "cluster": {"num_nodes": 1}},
                         "workload": {"model": {"from": "deepseek-v3", "num_layers": 4}, "parallelism": {"tp": 1},
                                      "training": {"num_gpus": 8, "global_batch_size": 8, "sequence_length": 4096,
                                                   "dtype": dtype}}}, "s.yaml")
    k, mla, fmt = LayerKernels.of(sc.workload), sc.workload.model.mla, TrainingFormat.of_workload(sc.workload)
    tokens = 4096
    for name, width in (("attn_q_up", mla.q_lora_rank), ("attn_kv_up", mla.kv_lora_rank)):
        assert k[f"{name}_cast"][Phase.fwd].bytes == pytest.approx(
            fmt.format.cast_bytes(tokens * width, 2.0, fmt.amax_pass))  # the trace's: the transpose marked, not cut
    # each down projection, a Transformer Engine Linear with its own quantizer, casts the norm's output itself
    assert Phase.fwd in k["attn_q_down_cast"] and Phase.fwd in k["attn_kv_down_cast"]
