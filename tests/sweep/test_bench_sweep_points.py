"""benchmarks/bench_sweep.py's weak-scaling study (GPT-3 175B from 16 to 1,024 A100s) is a sweep `simulon sweep`
accepts: every point validates, on the fabric the DGX A100 template builds for its size, so the benchmark the README
quotes runs at all (it was refused once its leaves of 32 NICs and 32 uplinks no longer fitted 40-port switches)."""

from __future__ import annotations

import importlib.util

import yaml

from helpers import ROOT
from simulon.sweep.points import parse_axis, sweep_points


def bench_sweep():
    spec = importlib.util.spec_from_file_location("bench_sweep", ROOT / "benchmarks/bench_sweep.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_point_of_the_sweep_benchmark_validates_as_simulon_sweep_reads_it(tmp_path):
    bench = bench_sweep()
    scenario = tmp_path / "gpt3.yaml"
    scenario.write_text(yaml.safe_dump(bench.base_scenario()))
    points = sweep_points(scenario, [parse_axis(f"{bench.SWEPT}={bench.POINTS}")])
    gpus = [8 * p.settings["datacenter.cluster.num_nodes"] for p in points]
    assert gpus == [16, 32, 64, 128, 256, 512, 1024]
    assert {p.settings["workload.training.global_batch_size"] / n for p, n in zip(points, gpus, strict=True)} == {1.5}
