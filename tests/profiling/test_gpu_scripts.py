"""The GPU benchmark scripts (benchmarks/gpu_*.py, profile_table_rows.py) on a machine that cannot time kernels: their
--help works, and a run is refused with `simulon profile gpu`'s one line and exit status 2 (no traceback), as is
a profile file `profile gpu` would refuse, before anything is timed or written."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from helpers import ROOT

HAS_TORCH = importlib.util.find_spec("torch") is not None
SCRIPTS = {"gpu_sustained_gemm.py": [], "gpu_duty_cycle.py": ["-o", "{out}.json"],
           "gpu_layer_loop.py": ["-o", "{out}.json", "10"], "profile_table_rows.py": ["-o", "{out}.yaml", "10"]}


def script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def no_cuda_message() -> str:
    """What need_torch says on this machine; skips where a CUDA GPU would let the scripts run."""
    if not HAS_TORCH:
        return "timing kernels needs torch, which is not installed"
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    return "no CUDA GPU is visible"


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_each_gpu_script_without_a_cuda_gpu_is_refused_in_one_line_with_exit_2(tmp_path, name):
    message = no_cuda_message()
    assert script(name, "--help").returncode == 0
    run = script(name, *(arg.format(out=tmp_path / "out") for arg in SCRIPTS[name]))
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert message in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert list(tmp_path.iterdir()) == []


def test_profile_table_rows_refuses_a_gpu_no_template_names_as_profile_gpu_does(tmp_path):
    out = tmp_path / "new.yaml"
    run = script("profile_table_rows.py", "-o", str(out), "--name", "NoSuchGPU", "--device", "cpu", "10")
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert f"{out}: --name 'NoSuchGPU' names no shipped GPU template" in run.stderr
    assert not out.exists()


def test_profile_table_rows_refuses_a_file_of_another_gpu(tmp_path):
    out = tmp_path / "h200.yaml"
    out.write_text("from: H200-SXM5-141GB\nkernel_runs: []\n")
    run = script("profile_table_rows.py", "-o", str(out), "--name", "H100", "--device", "cpu", "10")
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert "--name" in run.stderr and str(out) in run.stderr
    assert out.read_text() == "from: H200-SXM5-141GB\nkernel_runs: []\n"
