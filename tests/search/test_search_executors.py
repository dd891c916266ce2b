"""Where a search's replays run: a local process pool or a Ray cluster give the same answer."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import ROOT, SEED_SCENARIO, gpt_scenario
from simulon.executors import ProcessExecutor, RayExecutor
from simulon.search.run import Search


def small():
    return gpt_scenario(nodes=2, gpus_per_node=4, layers=8, gbs=16, seq=1024)


def test_the_process_pool_hands_back_every_job_once_with_its_index():
    done = dict(ProcessExecutor(2).map_unordered(abs, [-3, 1, -2, 5]))
    assert done == {0: 3, 1: 1, 2: 2, 3: 5}


def test_a_search_on_a_local_ray_instance_gives_exactly_the_process_pools_answer():
    ray = pytest.importorskip("ray", reason="Ray is not installed (the optional extra: uv sync --extra ray)")
    pooled = Search(small()).run(top=5, replay=3, executor=ProcessExecutor(2))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = Search(small()).run(top=5, replay=3, executor=RayExecutor())
    finally:
        ray.shutdown()
    assert on_ray.replayed == 3 and on_ray.to_json()["top"] == pooled.to_json()["top"]


def test_without_ray_the_ray_executor_is_a_one_line_error_saying_how_to_install_it():
    run = subprocess.run([sys.executable, "-c", "import sys; sys.modules['ray'] = None; "
                          "from simulon.cli.app import main; main()", "search", str(SEED_SCENARIO), "--executor",
                          "ray", "--no-cache"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "--executor ray: Ray is not installed" in run.stderr and "uv sync --extra ray" in run.stderr


def test_a_local_ray_instance_is_started_once_for_every_step_of_a_search_and_stopped_when_the_command_fails(
        monkeypatch):
    ray = pytest.importorskip("ray", reason="Ray is not installed (the optional extra: uv sync --extra ray)")
    started = []
    init = ray.init
    monkeypatch.setattr(ray, "init", lambda **options: started.append(options) or init(**options))
    with pytest.raises(RuntimeError, match="after the search"), RayExecutor() as runner:
        result = Search(small()).run(top=5, replay=3, executor=runner)  # estimate parts, sizing, replays
        assert ray.is_initialized() and result.replayed == 3
        raise RuntimeError("a failure after the search")
    assert len(started) == 1 and not ray.is_initialized()
