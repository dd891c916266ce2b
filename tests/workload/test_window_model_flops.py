"""Model FLOPs are the model's and the batch's, whatever library runs attention: a sliding window's keys under
PyTorch's math attention and unfused GEMMs as under flash attention (those compute the whole matrix: their time and
hardware FLOPs keep it)."""

from __future__ import annotations

import pytest

from simulon.config.loading import parse_scenario
from simulon.pipeline import simulate


def step(attention: str, window: int | None) -> tuple[float, float]:
    model = {"from": "mistral-7b-v0.1", "num_layers": 2}
    if window:
        model["sliding_window"] = {"size": window, "full_every": 0}
    sc = parse_scenario({
        "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}},
        "workload": {"framework": "megatron", "model": model, "parallelism": {"tp": 8},
                     "training": {"num_gpus": 8, "global_batch_size": 1, "micro_batch_size": 1,
                                  "sequence_length": 4096, "dtype": "bf16", "attention": attention}}}, "test")
    result = simulate(sc).result
    seconds = result.iteration_time_ms / 1e3
    return result.tflops_per_gpu * seconds, result.hardware_tflops_per_gpu * seconds


@pytest.mark.parametrize("library", ["pytorch", "unfused"])
def test_a_windowed_steps_model_flops_are_the_windows_whatever_library_computes_it(library):
    flash, _ = step("flash", 1024)
    whole, _ = step(library, None)
    windowed, hardware = step(library, 1024)
    assert windowed == pytest.approx(flash, rel=1e-9)  # the window, as flash counts it (pytorch counted the matrix)
    assert windowed < whole
    assert hardware >= windowed
