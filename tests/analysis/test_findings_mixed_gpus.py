"""On a cluster of several GPU models the findings say which group of GPUs each is on: the GPU's type beside its
number, and for idle time the busiest GPU where it is of another type (the group the idle ones wait for)."""

from __future__ import annotations

from pathlib import Path

from simulon.analysis.exposure import GPUExposure
from simulon.analysis.findings import Settings, findings
from simulon.config.loading import load_scenario

H100, A100 = "H100-SXM5-80GB", "A100-SXM4-80GB"


def row(gpu: int, stage: int, *, bubble: float = 0.0, tp: float = 0.0) -> GPUExposure:
    return GPUExposure(gpu, stage, 1, 10.0, 0.0, {"TP": tp, "CP": 0.0, "EP": 0.0, "DP": 0.0, "PP": 0.0}, bubble)


def test_a_finding_on_a_mixed_cluster_names_the_type_of_its_gpu_and_idle_time_names_the_busiest_type():
    """Llama 3 8B at vpp 2 on a DGX H100 stage and a DGX A100 one idled the H100s 918.9 ms and the A100s 15.4 ms;
    the finding read "idle time ...: 918.9 ms on GPU 0 (stage 0)", naming neither type nor the A100s it waits on."""
    settings = Settings(devices=(H100, H100, A100, A100))
    rows = [row(0, 0, bubble=918.9, tp=20.0), row(2, 1, bubble=15.4, tp=438.2)]
    found = {f.term: f for f in findings(rows, {"by_term_ms": {}}, {}, 1639.3, settings)}
    assert found["TP"].where == f"GPU 2 ({A100}, stage 1)"
    assert found["bubble"].where == f"GPU 0 ({H100}, stage 0)"
    assert found["bubble"].detail.endswith(f"on GPU 0 ({H100}, stage 0), 56.1% of the step; the busiest is GPU 2 "
                                           f"({A100}, stage 1), idle 15.4 ms")


def test_on_one_gpu_type_findings_name_the_gpu_and_stage_only():
    rows = [row(0, 0, bubble=918.9), row(2, 1, bubble=15.4)]
    (bubble,) = findings(rows, {"by_term_ms": {}}, {}, 1639.3, Settings())
    assert bubble.where == "GPU 0 (stage 0)" and "busiest" not in bubble.detail
    same = Settings(devices=(H100,) * 4)  # the busiest of the idlest's own type says nothing more
    assert "busiest" not in findings(rows, {"by_term_ms": {}}, {}, 1639.3, same)[0].detail


def test_the_settings_of_a_mixed_cluster_give_each_rank_its_gpu_type():
    sc = load_scenario(Path(__file__).parents[2] / "examples" / "hetero_h100_a100.yaml")  # H100 stage, A100 stage
    assert Settings.of(sc).devices == (H100,) * 16 + (A100,) * 16
