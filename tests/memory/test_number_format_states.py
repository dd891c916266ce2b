"""Memory terms of each training number format (config/number_formats.py): the quantized weight copies a run
keeps for the step, narrow weights with fp8_params, and the GEMM inputs kept for the weight gradient, block
scales included, in closed form."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import gpt_workload
from simulon.config.common import DType
from simulon.config.hybrid import DENSE_LAYER
from simulon.config.loading import parse_scenario
from simulon.config.number_formats import number_format
from simulon.dag.nodes import NodeKind
from simulon.memory.activations import ActivationModel
from simulon.memory.model import MemoryModel
from simulon.memory.states import ModelStates
from simulon.pipeline import build_dag
from simulon.workload.layout import RankLayout

LAYERS, HIDDEN = 8, 1024
NARROW = ["fp8", "mxfp8", "mxfp4", "nvfp4"]


def workload(dtype: str, **training):
    return gpt_workload(gpus=8, training={"dtype": dtype, **training}, layers=LAYERS, gbs=64)


def states(wl):
    return ModelStates(wl, RankLayout(tp=1, cp=1, dp=8, pp=1, ep=1, etp=1, fsdp=8))


def gemm_params(wl, layers: range) -> float:
    """GEMM weights of the given transformer layers: each layer's parameters less its two norms."""
    st_ = states(wl)
    params = st_.parameters.stage(0)
    return sum(sum(params.of(unit)) - 2 * HIDDEN for unit in layers)


@pytest.mark.parametrize("dtype", NARROW)
def test_cast_weight_copies_are_two_quantized_copies_with_their_block_scales(dtype):
    wl = workload(dtype, bf16_first_layers=0, bf16_last_layers=0)
    fmt = number_format(DType(dtype))
    per_element = DType(dtype).bytes + (fmt.scale_bytes / (fmt.weight_block or fmt.block) if fmt.block else 0.0)
    assert states(wl).stage(0).cast_weights == pytest.approx(2 * per_element * gemm_params(wl, range(LAYERS)))


@pytest.mark.parametrize("written", ["fp4", "FP4", "float4", "nvfp4", "NV-FP4"])
def test_a_bare_fp4_trains_as_nvfp4_as_tables_write_it(written):
    assert workload(written).training.dtype is DType.nvfp4


def test_nvfp4_weight_copies_store_one_e4m3_scale_per_16_elements_though_a_16x16_tile_shares_it():
    # Transformer Engine allocates an NVFP4 weight's scales as any NVFP4 tensor's (1 x 16 blocks, the layout the
    # block-scaled FP4 GEMM reads), its 2D quantization writing a tile's scale to each of its 16 rows
    wl = workload("nvfp4", bf16_first_layers=0, bf16_last_layers=0)
    assert states(wl).stage(0).cast_weights == pytest.approx(2 * (0.5 + 1 / 16) * gemm_params(wl, range(LAYERS)))


@given(st.integers(0, 3), st.integers(0, 3))
def test_layers_kept_in_bf16_have_no_quantized_copies(first, last):
    wl = workload("mxfp8", bf16_first_layers=first, bf16_last_layers=last)
    narrow = range(first, LAYERS - last)
    assert states(wl).stage(0).cast_weights == pytest.approx(2 * (1 + 1 / 32) * gemm_params(wl, narrow))


@pytest.mark.parametrize("dtype", [d for d in NARROW if d != "mxfp4"])  # no MXFP4 weights kept
def test_narrow_params_keep_gemm_weights_only_as_their_two_copies(dtype):
    plain, narrow = states(workload(dtype)).stage(0), states(workload(dtype, fp8_params=True)).stage(0)
    assert narrow.cast_weights == 0.0
    # the 16-bit GEMM weights of the narrow layers are replaced by the two narrow copies the step would otherwise add
    wl = workload(dtype)
    sixteen_bit = 2.0 * gemm_params(wl, _narrow_layers(wl))
    assert narrow.weights == pytest.approx(plain.weights - sixteen_bit + plain.cast_weights)
    # gradients and optimizer states do not depend on the format: Megatron's main_grad and Adam stay fp32
    assert (narrow.gradients, narrow.optimizer) == (plain.gradients, plain.optimizer)


def _narrow_layers(wl) -> range:
    fmt = ModelStates(wl, RankLayout(tp=1, cp=1, dp=8, pp=1, ep=1, etp=1, fsdp=8)).shape.number_format
    return range(fmt.bf16_first, LAYERS - fmt.bf16_last)


@pytest.mark.parametrize("dtype", ["mxfp8", "nvfp4"])
def test_a_block_format_keeps_gemm_inputs_with_their_scales_for_the_weight_gradient(dtype):
    fp8 = ActivationModel(workload("fp8")).layer(DENSE_LAYER).parts
    block = ActivationModel(workload(dtype)).layer(DENSE_LAYER).parts
    fmt = number_format(DType(dtype))
    for part in ("attention GEMM input", "mlp fc2 input"):
        assert block[part] == pytest.approx(fp8[part] * fmt.operand_bytes())
    # the rest is 16-bit whatever the format
    assert block["attention norm input"] == fp8["attention norm input"]


def test_a_layer_kept_in_bf16_keeps_16_bit_gemm_inputs():
    acts = ActivationModel(workload("nvfp4"))
    narrow, wide = acts.layer(DENSE_LAYER).parts, acts.layer(DENSE_LAYER, in_bf16=True).parts
    assert wide["attention GEMM input"] == pytest.approx(narrow["attention GEMM input"] * 2 / (0.5 + 1 / 16))
    assert "attention projection input" not in wide


def test_under_full_sharding_only_the_running_layers_quantized_copies_exist():
    wl = gpt_workload(gpus=8, training={"dtype": "fp8"}, layers=LAYERS, gbs=64,
                      extra_parallelism={"fsdp": "full_shard"})
    one_layer = gemm_params(wl, range(1))
    assert states(wl).stage(0).cast_weights == pytest.approx(2 * 1.0 * one_layer)


def _traced_weight_cast_elements(sc, stage: int) -> float:
    """Elements the traced step's `<gemm>_weight_cast` kernels quantize on the first GPU of a pipeline stage."""
    dag = build_dag(sc)[0]
    compute = np.flatnonzero((dag.kind == NodeKind.compute) & (dag.stage == stage))
    first = dag.gpu[compute].min()
    moved = sum(dag.kernel_specs[k].bytes for k, g in zip(dag.kernel[compute], dag.gpu[compute], strict=True)
                if g == first and dag.kernel_specs[k].name.endswith("_weight_cast"))
    return moved / number_format(DType.mxfp8).cast_bytes(1.0, 2.0, weight=True)


@pytest.mark.parametrize("model", [{"from": "deepseek-v3.2", "num_layers": 4}, {"from": "nemotron-h-8b"},
                                   {"from": "qwen3-next-80b-a3b"}])
def test_the_quantized_weight_copies_are_of_the_weights_the_traced_step_quantizes(model):
    """The memory model took every parameter of a layer but two norms for a GEMM weight the format quantizes: the
    router, absorbed MLA's up-projections (both 16-bit in every recipe), Mamba's and the gated delta net's
    convolutions and per-head parameters, and the word embedding a multi-token-prediction layer's stage holds. A
    4-layer DeepSeek-V3.2 in MXFP8 on two B200s, pp 2: 2,350.2 and 48,523.5 MiB of copies for the 2,284.2 and
    46,594.5 MiB of weights the traced step casts."""
    sc = parse_scenario({"datacenter": {"from": "dgx-b200", "cluster": {"num_nodes": 1}, "node": {"gpus_per_node": 2}},
                         "workload": {"model": model, "parallelism": {"tp": 1, "pp": 2, "distributed_optimizer": True},
                                      "training": {"num_gpus": 2, "global_batch_size": 2, "sequence_length": 1024,
                                                   "dtype": "mxfp8", "bf16_first_layers": 0, "bf16_last_layers": 0}}},
                        "s.yaml")
    copy_bytes = 2 * number_format(DType.mxfp8).operand_bytes()
    for stage in (0, 1):
        held = MemoryModel.of(sc).stage(stage).terms["quantized weight copies"]
        assert held == pytest.approx(copy_bytes * _traced_weight_cast_elements(sc, stage), rel=1e-9)
