"""On a cluster of several GPU models a kernel is memory-bound by its own GPU's ridge point (peak FLOP/s over HBM
bandwidth), not by the ranks' mean: an H200's ridge (206 FLOPs a byte) is lower than an H100's (295)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simulon.analysis.exposure import exposure
from simulon.cli.report import run_scenario
from simulon.config.common import DType
from simulon.config.loading import load_scenario

EXAMPLE = Path(__file__).parents[2] / "examples" / "hetero_h100_a100.yaml"


@pytest.fixture(scope="module")
def h100_and_h200(tmp_path_factory):
    """Llama 3 8B on a DGX H100 stage and an HGX H200 one, tp 8, 256-token sequences: its MLP GEMMs' FLOPs a byte
    lie between the two ridges."""
    data = yaml.safe_load(EXAMPLE.read_text())
    data["datacenter"]["node_groups"] = [{"from": "dgx-h100", "num_nodes": 1}, {"from": "hgx-h200", "num_nodes": 1}]
    data["workload"]["parallelism"].update(dp=1, layers_per_stage=[16, 16])
    data["workload"]["training"].update(global_batch_size=4, sequence_length=256)
    path = tmp_path_factory.mktemp("mixed") / "h100_h200.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_scenario(path).placement(), *run_scenario(path, quiet=True)


def test_each_gpus_memory_bound_time_is_by_its_own_gpus_ridge_point(h100_and_h200):
    """Before, every kernel was held to the ranks' mean ridge (243), and the H200 stage's memory-bound time counted
    its MLP GEMMs: 25.0 ms against its own 14.7 ms."""
    placement, sim, analysis = h100_and_h200
    ridges = {}
    for row in analysis.per_gpu:
        gpu = placement.gpu_of(row.gpu)
        ridges[gpu.name] = ridge = gpu.peak_flops(DType.bf16) / gpu.memory_bandwidth
        alone = next(r for r in exposure(sim.dag, sim.timeline, ridge) if r.gpu == row.gpu)
        assert row.memory_bound_ms == pytest.approx(alone.memory_bound_ms, rel=1e-12)
        assert row.compute_bound_ms == pytest.approx(alone.compute_bound_ms, rel=1e-12)
    assert set(ridges) == {"H100-SXM5-80GB", "H200-SXM5-141GB"}
    h200 = [r for r in analysis.per_gpu if placement.gpu_of(r.gpu).name.startswith("H200")]
    by_mean = {r.gpu: r for r in exposure(sim.dag, sim.timeline, sum(ridges.values()) / 2)}  # as many of each
    assert h200 and all(by_mean[r.gpu].memory_bound_ms > 1.5 * r.memory_bound_ms for r in h200)  # a telling case
    assert analysis.to_dict()["ridge_flops_per_byte"][str(h200[0].gpu)] == pytest.approx(ridges["H200-SXM5-141GB"])
