"""A GEMM that runs in a narrow format (fp8, MXFP8, NVFP4) reads the quantized copies of its operands that
Transformer Engine's casts write, as the GEMM timing model reads them (compute.gemm), and writes its output in 16 bits:
its bytes, and so its arithmetic intensity, which analysis.exposure compares with the GPU's ridge point, are the
narrow kernel's. Counted in 16 bits, the MXFP8 expert GEMMs of GPT-OSS 120B on a GB200 (1,024 tokens an expert)
fell under its ridge and the findings called 47.5% of the step memory-bound (279.5 ms of 587.9; 133.9 now)."""

from __future__ import annotations

import pytest

from helpers import gpt_scenario
from simulon.analysis.exposure import memory_bound
from simulon.config.common import DType
from simulon.config.loading import parse_scenario
from simulon.config.number_formats import number_format
from simulon.pipeline import build_dag
from simulon.workload.kernels import KernelClass, Phase

GEMMS = (KernelClass.gemm, KernelClass.grouped_gemm)


def scenario(dtype: str, gpu: str = "B200", **shape):
    data = gpt_scenario(nodes=1, gpus_per_node=8, ep=8, **{"layers": 2, "gbs": 8, **shape},
                        moe={"num_experts": 64, "top_k": 4}, activation="swiglu").as_data()
    data["datacenter"]["node"]["gpu"] = gpu
    data["workload"]["training"].update(dtype=dtype, bf16_first_layers=0, bf16_last_layers=0)  # every layer narrow
    return parse_scenario(data, "s.yaml")


@pytest.mark.parametrize("dtype", ["fp8", "mxfp8", "nvfp4"])
def test_a_narrow_gemm_moves_its_quantized_operands_and_a_16_bit_output(dtype):
    operand = number_format(DType(dtype))
    narrow = [s for s in build_dag(scenario(dtype), "full")[0].kernel_specs
              if s.kclass in GEMMS and "precision" not in dict(s.shape)]
    assert {s.name for s in narrow} >= {"attn_qkv", "moe_expert_linear1", "moe_expert_linear2"}
    for s in narrow:
        m, n, k, groups = (s.param(key) for key in ("m", "n", "k", "groups"))
        second = operand.operand_bytes() if s.phase == Phase.bwd_wg else operand.weight_operand_bytes
        assert s.bytes == pytest.approx(operand.operand_bytes() * m * k + second * k * n * groups + 2 * m * n), s


def test_the_lm_head_kept_in_bf16_moves_16_bit_operands():
    head = [s for s in build_dag(scenario("mxfp8"), "full")[0].kernel_specs if s.name == "lm_head"]
    for s in head:
        m, n, k, groups = (s.param(key) for key in ("m", "n", "k", "groups"))
        assert s.bytes == pytest.approx(2 * (m * k + k * n * groups + m * n))


def test_an_mxfp8_expert_gemm_of_gpt_oss_shape_is_compute_bound_on_a_gb200():
    # 1,024 tokens an expert (8 ranks x 2,048 tokens x top-4 over 64 experts), 2,880 wide as GPT-OSS's experts
    sc = scenario("mxfp8", "GB200", hidden=2880, ffn=2880, heads=64, seq=2048)
    gpu = sc.datacenter.node.gpu
    ridge = gpu.peak_flops(DType.mxfp8) / gpu.memory_bandwidth
    specs = build_dag(sc, "full")[0].kernel_specs
    bound = memory_bound(build_dag(sc, "full")[0], ridge)
    experts = [i for i, s in enumerate(specs) if s.name == "moe_expert_linear1" and s.phase == Phase.fwd]
    assert experts and not bound[experts].any()
