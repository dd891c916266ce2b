"""The cast kernels of per-tensor fp8 write the transposed copy only on GPUs whose FP8 GEMMs read the TN layout
alone (Transformer Engine's `is_non_tn_fp8_gemm_supported`: Hopper writes cast + transpose, Blackwell's data-center
parts the one copy that serves every GEMM). The trace stays the same on every GPU; each GPU times a cast by what it
writes (KernelSpec.bytes_on)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_workload
from simulon.compute.analytical import AnalyticalModel
from simulon.compute.profile import PROFILE_REPEATS, KernelProfile
from simulon.config.common import DType
from simulon.config.dc import GPUSpec
from simulon.workload.kernels import Phase, memory_bound
from simulon.workload.layer_kernels import LayerKernels


def kernels(dtype: str, **training) -> LayerKernels:
    return LayerKernels.of(gpt_workload(training={"dtype": dtype, "bf16_first_layers": 0, "bf16_last_layers": 0,
                                                  **training}, layers=8))


def casts(k: LayerKernels) -> list:
    return [spec for name, specs in k.table.items() if name.endswith("_cast") for spec in specs.values()] + list(
        k.weight_casts.values())


@pytest.mark.parametrize(("recipe", "reads"), [("delayed", 1), ("current", 2)])
def test_per_tensor_fp8_casts_write_one_copy_where_fp8_gemms_read_every_layout(recipe, reads):
    k = kernels("fp8", fp8_recipe=recipe)
    for name in ("attn_qkv", "mlp_linear2"):
        fwd = k[name][Phase.fwd]
        for phase, elements in ((Phase.fwd, fwd.param("m") * fwd.param("k")),
                                (Phase.bwd_ig, fwd.param("m") * fwd.param("n"))):
            cast = k[f"{name}_cast"][phase]
            assert cast.bytes_on(False) == pytest.approx(elements * (reads * 2.0 + 2))  # cast and transpose
            assert cast.bytes_on(True) == pytest.approx(elements * (reads * 2.0 + 1))   # the one copy
        weight = k.weight_casts[name]
        assert weight.bytes_on(True) == pytest.approx(fwd.param("n") * fwd.param("k") * (reads * 2.0 + 1))


@pytest.mark.parametrize("dtype", ["mxfp8", "nvfp4", "mxfp4"])
def test_block_scaled_casts_write_both_copies_on_every_gpu(dtype):
    for spec in casts(kernels(dtype)):
        assert spec.bytes_on(True) == spec.bytes_on(False) == spec.bytes


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["delayed", "current"]), st.sampled_from(["h100-sxm", "h200-sxm", "b200", "gb300"]))
def test_a_gpu_times_an_fp8_cast_by_the_copies_it_writes(recipe, stem):
    gpu = GPUSpec.model_validate({"from": stem})
    model = AnalyticalModel(gpu, DType.fp8, sustained_load=True)
    specs = casts(kernels("fp8", fp8_recipe=recipe))
    written = [memory_bound(s.name, s.phase, s.bytes - s.transpose_bytes * gpu.fp8_any_layout, 1.0) for s in specs]
    assert list(model.seconds(specs)) == pytest.approx(list(model.seconds(written)))


def test_fp8_casts_on_a_b200_take_less_time_than_on_a_b200_that_would_write_transposes():
    gpu = GPUSpec.model_validate({"from": "b200"})
    hopper_like = GPUSpec.model_validate({"from": "b200", "compute_capability": 9.0})
    specs = casts(kernels("fp8"))
    on = {g.compute_capability: AnalyticalModel(g, DType.fp8, sustained_load=True).seconds(specs).sum()
          for g in (gpu, hopper_like)}
    assert on[10.0] < on[9.0]


def test_fp8_params_transpose_each_fp8_weight_once_a_step_only_where_fp8_gemms_read_tn_alone():
    # Transformer Engine's post_all_gather_processing: Float8Tensor._create_transpose unless the GEMMs read every
    # layout; read the fp8 weight, write its transpose
    k = kernels("fp8", fp8_params=True)
    fwd = k["mlp_linear1"][Phase.fwd]
    transpose = k.weight_casts["mlp_linear1"]
    assert transpose.name == "mlp_linear1_weight_transpose"
    assert transpose.bytes_on(False) == pytest.approx(2 * fwd.param("n") * fwd.param("k"))
    hopper, blackwell = (AnalyticalModel(GPUSpec.model_validate({"from": stem}), DType.fp8, sustained_load=True)
                         for stem in ("h100-sxm", "b200"))
    assert hopper.seconds([transpose])[0] > 0
    assert blackwell.seconds([transpose])[0] == 0.0  # no kernel runs


@pytest.mark.parametrize("dtype", ["fp8", "mxfp8", "nvfp4"])
def test_frozen_narrow_weights_of_a_lora_run_are_not_transposed_or_requantized_each_step(dtype):
    # LoRA's base weights never change: Transformer Engine keeps the transpose (or second copy) it made once, as it
    # drops a Float8Tensor's transpose only when its data changes; the trained run re-makes it each step
    trained = kernels(dtype, fp8_params=True).weight_casts
    assert trained["mlp_linear1"].name.startswith("mlp_linear1_weight_")
    assert kernels(dtype, fp8_params=True, peft="lora").weight_casts == {}


def test_nvfp4_params_make_their_column_wise_copy_from_the_gathered_row_wise_one_on_every_gpu():
    # Transformer Engine's post_all_gather_processing: _nvfp4_2d_multi_tensor_transpose reads each weight's packed
    # e2m1 data and its e4m3 scale per 16 and writes the column-wise data and scales, on Blackwell too
    k = kernels("nvfp4", fp8_params=True, bf16_first_layers=0, bf16_last_layers=0)
    fwd = k["mlp_linear1"][Phase.fwd]
    transpose = k.weight_casts["mlp_linear1"]
    assert transpose.name == "mlp_linear1_weight_transpose"
    assert transpose.bytes_on(True) == pytest.approx(2 * (0.5 + 1 / 16) * fwd.param("n") * fwd.param("k"))
    blackwell = AnalyticalModel(GPUSpec.model_validate({"from": "b200"}), DType.nvfp4, sustained_load=True)
    assert blackwell.seconds([transpose])[0] > 0


@pytest.mark.parametrize("stem", ["h100-sxm", "b200"])
def test_a_profiled_gpu_times_an_fp8_cast_by_the_copies_it_writes_as_the_model_does(stem):
    """The profiler times a cast as a copy of all its bytes, transpose included (profiling/recipes.py); a profile of a
    B200, whose FP8 GEMMs read every layout, timed its casts as measured, transposes and all, and fp8_params' weight
    transpose (a kernel that does not run there) at its measured 0.2 ms where the calibrated model gives 0."""
    k = kernels("fp8", fp8_params=True)
    cast, transpose = k["mlp_linear1_cast"][Phase.fwd], k.weight_casts["mlp_linear1"]
    runs = [{"kernel": s.name, "params": {**dict(s.shape), "phase": "fwd", "dtype": "fp8"}, "times_ms": [0.2]}
            for s in (cast, transpose)]
    gpu = GPUSpec.model_validate({"from": stem, "kernel_runs": runs})
    model = AnalyticalModel(gpu, DType.fp8, sustained_load=True)
    profile = KernelProfile(gpu, DType.fp8, model, AnalyticalModel(gpu, DType.fp8, repeats=PROFILE_REPEATS))
    whole = [memory_bound(s.name, s.phase, s.bytes, 1.0) for s in (cast, transpose)]
    carried = [profile.seconds(s) for s in whole]  # the measured copies at the step's clock
    written = model.seconds([cast, transpose]) / model.seconds(whole)
    assert [profile.seconds(cast), profile.seconds(transpose)] == pytest.approx(list(carried * written))
    if gpu.fp8_any_layout:
        assert profile.seconds(transpose) == 0.0 and profile.seconds(cast) < carried[0]
    else:
        assert [profile.seconds(cast), profile.seconds(transpose)] == pytest.approx(carried)
