"""Where a search's replays run: a local process pool or a Ray cluster give the same answer."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from helpers import ROOT, SEED_SCENARIO, gpt_scenario
from simulon import executors
from simulon.config.errors import ConfigError
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


def test_joining_a_ray_address_where_nothing_answers_is_refused_within_the_join_limit():
    """`search --executor ray --ray-address 127.0.0.1:1` (or an address whose port accepts and never answers) hung
    in ray.init for more than ten minutes; the join now gives up after RayExecutor's join_seconds, with one error
    naming the address, and the process exits at once (Ray's client is left retrying on a thread that does not hold
    it open)."""
    pytest.importorskip("ray", reason="Ray is not installed (the optional extra: uv sync --extra ray)")
    silent = socket.create_server(("0.0.0.0", 0), backlog=8)  # accepts connections, never says a word
    port = silent.getsockname()[1]
    script = ("import sys\nfrom simulon.config.errors import ConfigError\nfrom simulon.executors import RayExecutor\n"
              "try:\n    RayExecutor(sys.argv[1], join_seconds=2).connect()\n"
              "except ConfigError as exc:\n    print(exc)\n    sys.exit(2)\n")
    try:
        address, started = f"127.0.0.1:{port}", time.monotonic()
        run = subprocess.run([sys.executable, "-c", script, address], capture_output=True, text=True, cwd=ROOT,
                             timeout=60)
        assert run.returncode == 2 and time.monotonic() - started < 30, run.stderr[-2000:]
        assert run.stdout.strip() == (f"--ray-address {address}: cannot join the Ray cluster: no Ray cluster "
                                      "answered there within 2 s")
        assert "SIGTERM handler is not set" not in run.stderr
    finally:
        silent.close()


def test_a_ray_task_whose_worker_dies_is_run_once_and_its_failure_reported(tmp_path):
    """Ray retried a task whose worker died (3 times by default; one killed by its node's memory monitor without
    end), so a replay or sweep point too large for its node was run again and again; each task now runs once."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (the optional extra: uv sync --extra ray)")
    attempts = tmp_path / "attempts"

    def dies(job):
        with open(attempts, "a") as log:
            log.write(f"{job}\n")
        os._exit(1)

    with pytest.raises(ray.exceptions.WorkerCrashedError), RayExecutor() as runner:
        dict(runner.map_unordered(dies, [7]))
    assert attempts.read_text() == "7\n"


def test_a_ray_task_killed_by_its_nodes_memory_monitor_ends_as_a_memory_error_naming_the_job(monkeypatch):
    """Ray's OutOfMemoryError (a page of node statistics) ended the command as an internal error; it now ends as a
    local worker's MemoryError does (the CLI's one line on running out of memory), naming the job."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (the optional extra: uv sync --extra ray)")

    class Remote:
        def remote(self, job):
            return job

    def get(job):
        raise ray.exceptions.OutOfMemoryError("Task was killed due to the node running low on memory.\nMemory ...")

    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "remote", lambda **options: lambda function: Remote())
    monkeypatch.setattr(ray, "wait", lambda refs, num_returns: (refs[:1], refs[1:]))
    monkeypatch.setattr(ray, "get", get)
    with pytest.raises(MemoryError, match=r"^job 0 was killed by its Ray node's memory monitor$"):
        dict(RayExecutor().map_unordered(abs, ["a"]))


@pytest.mark.parametrize(("address", "why"), [("foo", "Invalid address format: foo"), ("", "Invalid address format"),
                                              ("10.0.0.1:port", "Unable to parse port number from port")])
def test_a_ray_address_ray_cannot_read_is_refused_naming_it(address, why):
    """`--ray-address foo` (or an empty one, or a port that is no number) ended as 'internal error: ValueError:
    Invalid address format: foo', exit 1, where an address that cannot be joined is bad input (exit 2)."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (the optional extra: uv sync --extra ray)")
    with pytest.raises(ConfigError, match=rf"^--ray-address {address}: cannot join the Ray cluster: {why}"):
        RayExecutor(address).connect()
    assert not ray.is_initialized()


def test_without_an_address_a_new_local_instance_is_started_never_the_cluster_ray_start_recorded(monkeypatch,
                                                                                                 tmp_path):
    """ray.init(address=None) joins the cluster the last `ray start` on the machine recorded (its temp folder's
    ray_current_cluster), and one no longer running was waited for without end (`search --executor ray` hung); the
    executor now asks for "local", as the README says (a new instance), and RAY_ADDRESS, Ray's own variable, is
    joined within the join limit, named in the error."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (the optional extra: uv sync --extra ray)")
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text("127.0.0.1:1")  # a `ray start` head since killed
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    asked = []

    def init(**options):
        asked.append(options["address"])
        if options["address"] != "local":
            time.sleep(30)  # as Ray waits on a cluster that no longer answers

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    RayExecutor(join_seconds=0.5).connect()
    assert asked == ["local"]
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    with pytest.raises(ConfigError, match=r"^RAY_ADDRESS 127\.0\.0\.1:1: cannot join the Ray cluster: no Ray cluster "
                                          r"answered there within 0\.5 s$"):
        RayExecutor(join_seconds=0.5).connect()


def test_max_memory_on_ray_refuses_a_task_needing_more_as_the_local_pool_does(monkeypatch):
    """`search --executor ray --max-memory 10MB` replayed every strategy (3 of 3 on an 8-GPU MoE, each needing about
    0.1 GB) where the local pool refused all three: the limit was dropped on the way to Ray. Each task may now take
    at most the limit; one needing more comes back Refused, saying so, and the others run."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (the optional extra: uv sync --extra ray)")

    class Remote:
        def options(self, **resources):
            return self

        def remote(self, job):
            return job

    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True, "Resources": {"memory": 64e9}}])
    monkeypatch.setattr(ray, "remote", lambda **options: lambda function: Remote())
    monkeypatch.setattr(ray, "wait", lambda refs, num_returns: (refs[:1], refs[1:]))
    monkeypatch.setattr(ray, "get", lambda job: -job)
    runner = executors.executor("ray", memory=1e9)
    done = dict(runner.map_unordered(abs, [1, 2], needs=[2e9, 5e8]))
    assert done[1] == -2 and isinstance(done[0], executors.Refused)
    assert done[0].reason == "needs about 2.0 GB, more than the 1.0 GB each Ray task may use (--max-memory)"


def test_a_ray_task_may_take_its_largest_live_node_s_memory_and_no_more_than_max_memory(monkeypatch):
    """What a search plans each replay within (Executor.ceiling) on Ray: a dead node's memory does not count, and
    --max-memory caps it as it caps the tasks' admission."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (the optional extra: uv sync --extra ray)")
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True, "Resources": {"memory": 64e9}},
                                               {"Alive": False, "Resources": {"memory": 128e9}}])
    assert executors.executor("ray").ceiling() == 64e9
    assert executors.executor("ray", memory=1e9).ceiling() == 1e9
    assert executors.executor("ray", memory=1e12).ceiling() == 64e9


@pytest.mark.parametrize(("failure", "mode", "said"), [
    ("auth", "token", "Token authentication is enabled but no authentication token was found"),
    ("connect", None, "Failed to connect to Ray cluster at 10.0.0.1:6379; a cluster that requires Ray's token "
                      r"authentication .* set RAY_AUTH_MODE=token and its token \(RAY_AUTH_TOKEN, .*\)$"),
    ("connect", "token", "Failed to connect to Ray cluster at 10.0.0.1:6379$")])
def test_a_cluster_needing_a_token_is_refused_saying_how_to_give_it(monkeypatch, failure, mode, said):
    """Under RAY_AUTH_MODE=token without a token, Ray's AuthenticationError ended `--ray-address` as an internal
    error (exit 1); without RAY_AUTH_MODE=token, Ray joins an address with no token and a cluster requiring one
    answers only 'Failed to connect to Ray cluster at ...', as if nothing were there. The first is now refused
    naming the address (exit 2), and the second says how a cluster with token authentication is joined."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (the optional extra: uv sync --extra ray)")

    def init(**options):
        if failure == "auth":
            raise ray.exceptions.AuthenticationError("Token authentication is enabled but no authentication token "
                                                     "was found")
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    if mode is None:
        monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    else:
        monkeypatch.setenv("RAY_AUTH_MODE", mode)
    with pytest.raises(ConfigError, match=rf"^--ray-address 10\.0\.0\.1:6379: cannot join the Ray cluster: {said}"):
        RayExecutor("10.0.0.1:6379", join_seconds=5).connect()


def test_joining_a_cluster_whose_workers_run_another_simulon_is_refused_naming_the_nodes(monkeypatch):
    """A cluster whose workers imported another simulon ran every job there: one without the job's function ended
    as 'internal error: RayTaskError(RuntimeError): The remote function failed to import on the worker ...' (exit
    1) after the CSV was made, and one with it gave its own numbers silently. Each node is now asked which
    simulon its workers run (executors.simulon_build) as the cluster is joined, and another is refused."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (the optional extra: uv sync --extra ray)")
    ours = executors.simulon_build()
    builds = {"10.0.0.2": ours, "10.0.0.3": "0.0.9+0123456789ab", "10.0.0.4": None}
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **options: None)
    monkeypatch.setattr(RayExecutor, "worker_builds", lambda self: builds)
    with pytest.raises(ConfigError, match=r"^--executor ray: the Ray nodes at 10\.0\.0\.3 \(0\.0\.9\+0123456789ab\), "
                                          r"10\.0\.0\.4 \(none its workers can run\) run another simulon than this "
                                          rf"command's, {ours.replace('+', '[+]')}; every node needs the same"):
        RayExecutor("10.0.0.1:6379").connect()
    builds = {"10.0.0.2": ours}
    RayExecutor("10.0.0.1:6379").connect()


def test_a_simulon_differing_in_one_template_has_another_build(tmp_path):
    """simulon's version stays the same between commits; the build a node is asked for also digests the package's
    code and data, so that a worker computing other numbers is told apart."""
    copy = tmp_path / "simulon"
    shutil.copytree(ROOT / "src" / "simulon", copy, ignore=shutil.ignore_patterns("__pycache__"))
    template = next(copy.rglob("*.yaml"))
    script = "from simulon.executors import simulon_build; print(simulon_build())"

    def build() -> str:
        return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONPATH": str(tmp_path)}).stdout.strip()

    same = build()
    template.write_text(template.read_text() + "\n# changed\n")
    assert same == executors.simulon_build() and build() != same
