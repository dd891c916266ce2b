"""The GH200's two variants, one die at the same peaks: the 144 GB HBM3e part has more HBM bandwidth than the 96 GB
HBM3 one and nothing less, so none of its kernels runs slower (gpu/gh200.yaml, gpu/gh200-144gb.yaml). Without a TDP
neither was the fitted Hopper parts' twin, and the 144 GB part, nearest the H200 in bandwidth, borrowed its
lower-clocked GEMM fit: a Llama 3.1 8B step on GH200 NVL2 ran 2,080.2 ms against the 96 GB part's 2,055.1 ms."""

from __future__ import annotations

import pytest

from simulon.compute.analytical import AnalyticalModel
from simulon.compute.calibration import same_chip, shipped_gpu
from simulon.config import parse_scenario
from simulon.config.common import DType
from simulon.workload.layer_kernels import LayerKernels


def layer_specs(dtype: str) -> list:
    data = {"datacenter": {"from": "gh200-nvl2", "cluster": {"num_nodes": 1}},
            "workload": {"model": {"from": "llama-3.1-8b", "num_layers": 2},
                         "parallelism": {"tp": 2, "pp": 1},
                         "training": {"global_batch_size": 4, "micro_batch_size": 1, "sequence_length": 4096,
                                      "dtype": dtype}}}
    kernels = LayerKernels.of(parse_scenario(data).workload)
    return [spec for name in kernels.table for spec in kernels[name].values()]


def test_both_gh200_variants_are_the_h100_sxm_chip_at_its_power_limit():
    """NVIDIA gives the GH200 module's power alone (450-1,000 W with the Grace CPU): each template's tdp_w is the
    H100 SXM's, so that both borrow the fitted Hopper twins' fits as one chip does (Calibrations.bandwidth_lenders)."""
    for stem in ("gh200", "gh200-144gb"):
        assert shipped_gpu(stem).tdp_w == 700
        assert same_chip(shipped_gpu(stem), shipped_gpu("h100-sxm"))


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_no_kernel_of_a_llama_layer_runs_slower_on_the_144_gb_gh200_than_on_the_96_gb_one(dtype):
    assert shipped_gpu("gh200-144gb").memory_bandwidth > shipped_gpu("gh200").memory_bandwidth
    specs = layer_specs(dtype)
    hbm3, hbm3e = (AnalyticalModel(shipped_gpu(stem), DType(dtype), sustained_load=True).seconds(specs)
                   for stem in ("gh200", "gh200-144gb"))
    slower = [(spec.name, float(a), float(b))
              for spec, a, b in zip(specs, hbm3, hbm3e, strict=True) if b > a * 1.000001]
    assert not slower
