"""Per-tensor fp8 keeps a transposed copy of each quantized tensor only on GPUs whose FP8 GEMMs read the TN layout
alone (Hopper): Transformer Engine's `is_non_tn_fp8_gemm_supported` (compute capability 10.x, 11.x and 13.0 on)
makes one `_data` serve both usages on Blackwell's data-center parts. Block-scaled formats (MXFP8, NVFP4) keep their
column-wise copy on every GPU: its scales run along the other axis."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import gpt_scenario, gpt_workload
from simulon.config.dc import GPUSpec
from simulon.config.hybrid import DENSE_LAYER
from simulon.config.loading import parse_scenario
from simulon.config.number_formats import NUMBER_FORMATS, number_format
from simulon.config.resolve import ARCHITECTURE_PARTS
from simulon.config.templates import template_names
from simulon.memory.activations import ActivationModel
from simulon.memory.model import MemoryModel
from simulon.memory.states import ModelStates
from simulon.workload.layout import RankLayout

LAYERS, HIDDEN = 8, 1024


def states(dtype: str, any_layout: bool, **training) -> ModelStates:
    wl = gpt_workload(gpus=8, training={"dtype": dtype, "bf16_first_layers": 0, "bf16_last_layers": 0, **training},
                      layers=LAYERS, gbs=64)
    return ModelStates(wl, RankLayout(tp=1, cp=1, dp=8, pp=1, ep=1, etp=1, fsdp=8), any_layout)


def gemm_params(st_: ModelStates) -> float:
    params = st_.parameters.stage(0)
    return sum(sum(params.of(unit)) - 2 * HIDDEN for unit in range(LAYERS))


@pytest.mark.parametrize(("capability", "any_layout"), [
    (8.0, False), (8.9, False), (9.0, False), (10.0, True), (10.3, True), (11.0, True), (12.0, False),
    (12.1, False), (13.0, True), (None, True)])
def test_fp8_gemms_read_every_layout_exactly_where_transformer_engine_says(capability, any_layout):
    # a GPU of its own (no template's figures or name), so that only its stated capability decides; one stating none
    # has the capability of the shipped GPU nearest it (GPUSpec.capability), here the B200's 10.0
    gpu = GPUSpec.model_validate({"from": "b200", "name": "next-gpu", "memory_bandwidth": "9.5TBps",
                                  "compute_capability": capability})
    assert gpu.template is None
    assert gpu.fp8_any_layout is any_layout


@pytest.mark.parametrize(("gpu", "any_layout"), [("h100-sxm", False), ("h200-sxm", False), ("gh200", False),
                                                 ("b200", True), ("b300", True), ("gb200", True), ("gb300", True),
                                                 ("a100-sxm-80gb", False), ("mi300x", False)])
def test_shipped_gpus_know_whether_their_fp8_gemms_read_every_layout(gpu, any_layout):
    assert GPUSpec.model_validate({"from": gpu}).fp8_any_layout is any_layout


def test_every_nvidia_template_states_the_compute_capability_its_architecture_names():
    for stem in template_names("gpu"):
        gpu = GPUSpec.model_validate({"from": stem})
        assert (gpu.compute_capability is None) == (gpu.vendor != "nvidia"), stem
    for arch, parts in ARCHITECTURE_PARTS.items():
        if arch.startswith("sm_") and arch[-1].isdigit():
            for part in parts:
                stated = GPUSpec.model_validate({"from": part.lower()}).compute_capability
                assert round(stated * 10) == int(arch[3:]), (arch, part)


def test_per_tensor_fp8_weights_keep_one_copy_where_fp8_gemms_read_every_layout():
    hopper, blackwell = states("fp8", False), states("fp8", True)
    assert hopper.stage(0).cast_weights == pytest.approx(2 * gemm_params(hopper))
    assert blackwell.stage(0).cast_weights == pytest.approx(gemm_params(blackwell))


@pytest.mark.parametrize("dtype", ["mxfp8", "nvfp4", "mxfp4"])
def test_block_scaled_weights_keep_both_copies_on_every_gpu(dtype):
    assert states(dtype, True).stage(0).cast_weights == pytest.approx(states(dtype, False).stage(0).cast_weights)


def test_fp8_params_keep_no_transpose_where_fp8_gemms_read_every_layout():
    hopper, blackwell = states("fp8", False, fp8_params=True), states("fp8", True, fp8_params=True)
    assert hopper.stage(0).weights - blackwell.stage(0).weights == pytest.approx(gemm_params(hopper))


@given(st.sampled_from([d for d, f in NUMBER_FORMATS.items() if f.quantized]), st.booleans())
def test_quantized_copies_are_one_only_for_per_tensor_scales_on_any_layout_gpus(dtype, any_layout):
    fmt = number_format(dtype)
    assert fmt.copies(any_layout) == (1 if any_layout and fmt.block is None else 2)


def scenario(system: str, dtype: str) -> dict:
    return {"datacenter": {"from": system}, "collective": {"library": "nccl"},
            "workload": {"framework": "megatron", "model": "llama-3-8b",
                         "parallelism": {"tp": 1, "pp": 1, "distributed_optimizer": True},
                         "training": {"num_gpus": 8, "global_batch_size": 8, "micro_batch_size": 1,
                                      "sequence_length": 4096, "dtype": dtype}}}


def test_llama3_8b_fp8_on_a_dgx_b200_keeps_half_the_quantized_weight_bytes_of_a_dgx_h100():
    from simulon.config.scenario import ScenarioConfig

    copies = {system: MemoryModel.of(ScenarioConfig.model_validate(scenario(system, "fp8"))).stage(0)
              .terms["quantized weight copies"] for system in ("dgx-b200", "dgx-h100")}
    assert copies["dgx-b200"] == pytest.approx(copies["dgx-h100"] / 2)
    assert copies["dgx-h100"] / 2**30 == pytest.approx(13.0, abs=0.01)  # 6.98B GEMM weights, fp8 and transpose


def test_a_gpu_written_with_a_templates_figures_is_that_gpu_with_its_compute_capability():
    sheet = GPUSpec.model_validate({"from": "b200"}).model_dump(exclude={"compute_capability"})
    mine = GPUSpec.model_validate({**sheet, "name": "my-blackwell"})
    assert mine.template == "b200"
    assert mine.fp8_any_layout


def held_for_weight_gradient(dtype: str, any_layout: bool) -> float:
    """What one 8-layer GPT stage's split backward holds from a layer's B to its W (ActivationModel.deferred)."""
    wl = gpt_workload(gpus=8, seq=2048, mbs=1, gbs=8, hidden=HIDDEN, heads=16, layers=LAYERS,
                      training={"dtype": dtype, "bf16_first_layers": 0, "bf16_last_layers": 0})
    return ActivationModel(wl).layer(DENSE_LAYER).held_for_weight_gradient(any_layout)


@pytest.mark.parametrize("recipe", ["delayed", "current"])
def test_a_deferred_weight_gradient_holds_one_per_tensor_fp8_output_gradient_where_fp8_gemms_read_every_layout(
        recipe):
    """Transformer Engine quantizes a split backward's output gradient for both usages and its WeightGradStore keeps
    it until W: on Blackwell one `_data` serves both (Float8Quantizer::create_tensor allocates no transpose where
    is_non_tn_fp8_gemm_supported), so 1 byte an element, not the 2 counted on every GPU before (an 8-layer
    1024-wide GPT at 2048 tokens, pp 2, ZB-H1, B200: the last stage's peak 2,684.7 MiB, as on H100 less its weight
    transposes; 2,612.7 MiB with the fix, the 4 layers' output gradients of 9h a token, 18 MiB each, held once)."""
    hopper, blackwell = held_for_weight_gradient("fp8", False), held_for_weight_gradient("fp8", True)
    output_gradients = 2048 * HIDDEN * (3 + 1 + 4 + 1)  # QKV, projection, fc1, fc2
    assert hopper - blackwell == pytest.approx(output_gradients)
    wl = gpt_workload(gpus=8, layers=LAYERS, training={"dtype": "fp8", "fp8_recipe": recipe})
    assert ActivationModel(wl).grad_output(True) == 1.0 and ActivationModel(wl).grad_output(False) == 2.0


@pytest.mark.parametrize("dtype", ["bf16", "mxfp8", "nvfp4", "mxfp4"])
def test_a_deferred_weight_gradient_holds_the_same_on_every_gpu_in_a_16_bit_or_block_scaled_format(dtype):
    assert held_for_weight_gradient(dtype, True) == held_for_weight_gradient(dtype, False)


def test_a_zb_h1_stage_on_b200_holds_less_for_its_deferred_weight_gradients_than_on_h100_in_per_tensor_fp8():
    def stage(gpu: str):
        data = gpt_scenario(gpus_per_node=4, pp=2, layers=LAYERS, seq=2048, gbs=16,
                            extra_parallelism={"pipeline_schedule": "zb_h1"}).as_data()
        data["datacenter"]["node"]["gpu"] = gpu
        data["workload"]["training"]["dtype"] = "fp8"
        return MemoryModel.of(parse_scenario(data, "s.yaml")).stage(1)

    hopper, blackwell = stage("H100"), stage("B200")
    assert hopper.unit_deferred[LAYERS - 1] - blackwell.unit_deferred[LAYERS - 1] == pytest.approx(2048 * HIDDEN * 9)
    weight_transposes = hopper.terms["quantized weight copies"] - blackwell.terms["quantized weight copies"]
    assert hopper.allocated - blackwell.allocated == pytest.approx(weight_transposes + 4 * 2048 * HIDDEN * 9)
