"""Running a sweep: one CSV row per point, in the points' order, the same bytes however it ran; rows already in
the CSV (by the hash of the point's resolved scenario) are kept and not re-run; a row cut short is re-run."""

from __future__ import annotations

import csv

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import RecordingPool
from simulon import executors
from simulon.config.errors import ConfigError
from simulon.executors import RayExecutor
from simulon.pipeline import simulate, step_size
from simulon.sweep import run as sweep_run
from simulon.sweep.points import parse_axis, points_at, sweep_points
from simulon.sweep.run import METRICS, read_done, run_sweep


class Recorder:
    def __init__(self):
        self.events = []

    def stage(self, description, total=None, unit=""):
        self.events.append(("stage", total, unit))

    def advance(self, done):
        self.events.append(("advance", done, None))


@pytest.fixture()
def points(scenario):
    return sweep_points(scenario, [parse_axis("cluster.num_nodes=1,2"), parse_axis("parallelism.pp=1,2")])


@pytest.fixture()
def counted(monkeypatch):
    """The points simulated, by key (the sweep's worker function, counted)."""
    calls = []
    original = sweep_run.point_metrics

    def counting(args):
        calls.append(args)
        return original(args)

    monkeypatch.setattr(sweep_run, "point_metrics", counting)
    return calls


def test_each_point_gets_one_row_in_order_with_what_its_simulation_reports(points, tmp_path, counted):
    out = tmp_path / "sweep.csv"
    progress = Recorder()
    rows, kept = run_sweep(points, out, progress=progress)
    assert kept == 0 and len(counted) == 4
    table = list(csv.DictReader(out.open()))
    assert table == rows
    assert [r["key"] for r in table] == [p.key for p in points]
    assert list(table[0]) == ["key", "datacenter.cluster.num_nodes", "workload.parallelism.pp", *METRICS]
    assert [(r["datacenter.cluster.num_nodes"], r["workload.parallelism.pp"]) for r in table] == [
        ("1", "1"), ("1", "2"), ("2", "1"), ("2", "2")]
    direct = simulate(points[3].scenario).result
    assert float(table[3]["step_ms"]) == pytest.approx(direct.iteration_time_ms, rel=1e-8)
    assert int(table[3]["num_gpus"]) == 16 and float(table[3]["mfu"]) == pytest.approx(direct.mfu, rel=1e-8)
    for row in table:  # compute + exposed communication + bubble = step (averaged over the GPUs)
        parts = sum(float(row[k]) for k in ("compute_ms", "exposed_comm_ms", "bubble_ms"))
        assert parts == pytest.approx(float(row["step_ms"]), rel=1e-6)
    assert progress.events == [("stage", 4, "points"), *[("advance", n, None) for n in range(1, 5)]]


def test_a_sweep_run_again_with_another_expansion_does_not_take_the_earlier_rows_for_its_own(points, tmp_path,
                                                                                             counted):
    """The rows of --expand full were kept for --expand symmetric (the key hashed the scenario alone), whose steps
    differ: the mode is part of a point's key, and the file is refused naming it, not rewritten."""
    out = tmp_path / "sweep.csv"
    run_sweep(points, out, fold_mode="full")
    first = out.read_bytes()
    with pytest.raises(ConfigError) as refused:
        run_sweep(points, out, fold_mode="symmetric")
    assert "simulated from another scenario or with another --expand" in str(refused.value)
    assert len(counted) == 4 and out.read_bytes() == first
    _, kept = run_sweep(points, out, fold_mode="full")
    assert kept == 4 and len(counted) == 4


@pytest.mark.parametrize("cut", [1, 5, 40])
def test_a_last_row_cut_anywhere_is_not_taken_for_a_finished_point(points, tmp_path, cut):
    out = tmp_path / "sweep.csv"
    run_sweep(points, out)
    whole = out.read_bytes()
    out.write_bytes(whole[:-cut])  # cut inside the last row: its "fits" (or more) half written
    assert len(read_done(out)) == 3


def test_a_finished_sweep_run_again_keeps_every_row_and_simulates_nothing(points, tmp_path, counted):
    out = tmp_path / "sweep.csv"
    run_sweep(points, out)
    first = out.read_bytes()
    _, kept = run_sweep(points, out)
    assert kept == 4 and len(counted) == 4 and out.read_bytes() == first


def test_a_row_cut_short_by_a_kill_is_run_again_and_the_file_comes_out_the_same(points, tmp_path, counted):
    out = tmp_path / "sweep.csv"
    run_sweep(points, out)
    whole = out.read_bytes()
    out.write_bytes(whole[: whole.rindex(b"\n", 0, len(whole) - 1) + 40])  # the last row half written
    _, kept = run_sweep(points, out)
    assert kept == 3 and len(counted) == 5 and out.read_bytes() == whole


def test_a_larger_sweep_keeps_the_points_it_shares_with_an_earlier_one(scenario, tmp_path, counted):
    out = tmp_path / "sweep.csv"
    run_sweep(sweep_points(scenario, [parse_axis("cluster.num_nodes=1,2")]), out)
    _, kept = run_sweep(sweep_points(scenario, [parse_axis("cluster.num_nodes=1,2,4")]), out)
    assert kept == 2 and len(counted) == 3


def test_points_run_on_processes_give_the_same_file_as_in_one_process(points, tmp_path):
    serial, parallel = tmp_path / "serial.csv", tmp_path / "parallel.csv"
    run_sweep(points, serial, jobs=1)
    run_sweep(points, parallel, jobs=2)
    assert parallel.read_bytes() == serial.read_bytes()


def test_a_file_that_is_not_a_sweeps_csv_is_not_overwritten(points, tmp_path):
    out = tmp_path / "notes.csv"
    out.write_text("name,value\na,1\n")
    with pytest.raises(ConfigError, match="not a sweep's CSV"):
        run_sweep(points, out)
    assert out.read_text() == "name,value\na,1\n"


def test_a_file_that_is_not_utf8_is_refused_as_no_sweeps_csv_and_not_overwritten(points, tmp_path):
    """It was refused with Python's codec error ("'utf-8' codec can't decode byte 0xe9 in position 3: invalid
    continuation byte")."""
    out = tmp_path / "notes.csv"
    out.write_bytes(b"caf\xe9,b\n1,2\n")
    with pytest.raises(ConfigError, match=r"^-o .*notes\.csv: exists and is not a sweep's CSV \(not UTF-8 text "
                                          r"\(byte 0xe9 at offset 3\); save it as UTF-8\); name another file$"):
        run_sweep(points, out)
    assert out.read_bytes() == b"caf\xe9,b\n1,2\n"


@given(st.lists(st.sampled_from([",", "\n", '"', "x", "1", "key", *METRICS]), max_size=60).map("".join))
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_whatever_the_csv_holds_its_rows_are_read_or_the_file_is_refused(tmp_path, content):
    out = tmp_path / "any.csv"
    out.write_text(content)
    try:
        done = read_done(out)
    except ConfigError as exc:
        assert "not a sweep's CSV" in str(exc) or "row is damaged" in str(exc)
    else:
        assert all(set(metrics) == set(METRICS) for metrics in done.values())


@pytest.mark.parametrize(("column", "value", "expected"), [
    ("step_ms", "abc", "expected a number, got 'abc'"), ("mfu", "nan", "expected a number, got 'nan'"),
    ("fits", "maybe", "expected true or false, got 'maybe'"),
    ("num_gpus", "0", "expected a whole number of GPUs from 1 to 1,000,000, got '0'"),
    ("num_gpus", "1.5", "expected a whole number of GPUs from 1 to 1,000,000, got '1.5'"),
    ("step_ms", "0", "expected a step time above 0, got '0'"),
])
def test_an_earlier_row_with_a_damaged_metric_is_refused_naming_the_line_and_column_not_reused(
        points, tmp_path, column, value, expected):
    out = tmp_path / "sweep.csv"
    run_sweep(points, out)
    rows = list(csv.DictReader(out.open()))
    rows[1][column] = value
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    damaged = out.read_text()
    with pytest.raises(ConfigError, match=f"-o {out}: line 3, column {column}: {expected}"):
        run_sweep(points, out)
    assert out.read_text() == damaged


HETERO = {"datacenter": {"datacenter": {"name": "mix"}, "node_groups": [
    {"from": "dgx-h100", "num_nodes": 1},
    {"from": "dgx-a100", "num_nodes": 1, "network": {"scale_out": {"nic": {"speed": "100Gbps"}}}}]},
    "workload": {"model": "llama-3.2-1b", "parallelism": {"tp": 1, "pp": 1},
                 "training": {"global_batch_size": 16, "micro_batch_size": 1, "sequence_length": 2048}}}
PIPELINED = {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}},
             "workload": {"model": "llama-3.2-1b", "parallelism": {"tp": 2, "pp": 2, "vpp": 2},
                          "training": {"global_batch_size": 16, "micro_batch_size": 1, "sequence_length": 2048}}}


@pytest.mark.parametrize("data", [HETERO, PIPELINED], ids=["mixed GPUs, dp over both", "tp2 pp2 vpp2"])
def test_a_rows_exposed_communication_by_kind_adds_up_to_its_exposed_communication(data):
    # the kinds are averaged over the GPUs as the total is, and an instant two kinds share counts once
    row = {name: float(value) for name, value in sweep_run.point_metrics((data, "auto", None, None)).items()
           if name not in ("fits",)}
    kinds = [row[name] for name in sweep_run.EXPOSED]
    assert sum(kinds) == pytest.approx(row["exposed_comm_ms"], rel=1e-7)  # each written to 9 digits (DIGITS)
    assert min(kinds) >= 0 and max(kinds) > 0


def test_a_sweep_onto_the_csv_of_another_over_the_same_fields_keeps_its_rows_after_its_own(scenario, tmp_path,
                                                                                          counted):
    out = tmp_path / "sweep.csv"
    first, _ = run_sweep(sweep_points(scenario, [parse_axis("cluster.num_nodes=1,2")]), out)
    rows, kept = run_sweep(sweep_points(scenario, [parse_axis("cluster.num_nodes=4")]), out)
    assert kept == 0 and len(counted) == 3 and len(rows) == 1
    assert list(csv.DictReader(out.open())) == rows + first


def test_a_sweep_over_other_fields_onto_an_existing_csv_is_refused_and_leaves_it_as_it_was(points, scenario,
                                                                                          tmp_path):
    out = tmp_path / "sweep.csv"
    run_sweep(points, out)
    before = out.read_bytes()
    with pytest.raises(ConfigError, match=r"holds 2 rows of other points, swept over "
                                          r"datacenter.cluster.num_nodes, workload.parallelism.pp"):
        run_sweep(sweep_points(scenario, [parse_axis("cluster.num_nodes=1,2")]), out)
    assert out.read_bytes() == before


def test_a_row_of_one_of_the_sweeps_points_simulated_from_a_changed_scenario_is_refused_not_dropped(scenario,
                                                                                                  tmp_path):
    out = tmp_path / "sweep.csv"
    run_sweep(sweep_points(scenario, [parse_axis("cluster.num_nodes=1,2")]), out)
    before = out.read_bytes()
    scenario.write_text(scenario.read_text().replace("sequence_length: 1024", "sequence_length: 2048"))
    with pytest.raises(ConfigError, match=r"is the point datacenter\.cluster\.num_nodes=1 of this sweep "
                                          r"simulated from another scenario"):
        run_sweep(sweep_points(scenario, [parse_axis("cluster.num_nodes=1,2")]), out)
    assert out.read_bytes() == before



def sizes(points, limit):
    return [step_size(p.scenario, micro_batches="auto", memory_limit=limit).memory_bytes() for p in points]


def test_a_points_row_is_the_same_whatever_runs_beside_it_and_a_point_over_its_share_runs_later_by_its_need(
        points, tmp_path, monkeypatch):
    """Each point of a pool took the limit over the jobs, so that a limit which holds the largest point alone, but
    not two, sampled it (or refused it) at --jobs 2 where --jobs 1 replayed it whole: the answer depended on --jobs."""
    whole = sizes(points, None)
    limit = 1.5 * max(whole)
    assert sizes(points, limit) == whole and sizes(points, limit / 2) != whole
    serial, parallel = tmp_path / "serial.csv", tmp_path / "parallel.csv"
    run_sweep(points, serial, jobs=1, memory_limit=limit)
    pools = []
    monkeypatch.setattr(executors, "ProcessExecutor", lambda jobs, memory=None: pools.append(
        RecordingPool(jobs, memory)) or pools[-1])
    run_sweep(points, parallel, jobs=2, memory_limit=limit)
    assert parallel.read_bytes() == serial.read_bytes()
    over = [need for need in whole if need > limit / 2]
    assert over and [pool.needs for pool in pools] == [[None], [over]]


def test_a_point_too_large_even_alone_is_refused_with_simulates_own_message_not_a_share_of_the_memory(
        points, tmp_path):
    with pytest.raises(ConfigError) as refused:
        run_sweep(points, tmp_path / "s.csv", jobs=2, memory_limit=1e6)
    text = str(refused.value)
    assert text.startswith("sweep point ") and "are available" in text and "running at once" not in text


def test_a_sweep_stopped_by_a_point_that_cannot_run_leaves_no_file_it_made_and_wrote_no_row_to(scenario, tmp_path,
                                                                                              counted):
    """It left a CSV holding only its header. NVLS-tree on groups inside one NVLink domain is refused for the group
    (not the collective type), and that too before any point runs."""
    points = sweep_points(scenario, [parse_axis("collective.algorithm=nvls_tree,auto")])
    out = tmp_path / "s.csv"
    with pytest.raises(ConfigError, match="nvls_tree runs across NVLink domains, and this group is inside one"):
        run_sweep(points, out)
    assert not out.exists() and counted == []
    run_sweep(points[1:], out)  # a file with rows is kept, however the sweep onto it ends
    before = out.read_bytes()
    with pytest.raises(ConfigError, match="nvls_tree"):
        run_sweep(points, out)
    assert out.read_bytes() == before


def test_a_sampled_points_exposed_communication_by_kind_is_the_steps_as_a_whole_replay_gives_it(tmp_path):
    """Under a memory limit a sweep samples a point at two micro-batch counts and extrapolates; the exposed
    communication by kind was read off the larger replay alone (TP 222 ms of a step's 3,552 on the README's example
    at 64 micro-batches), so the row depended on the limit and its kinds did not add up to its exposed total."""
    import yaml

    from helpers import ROOT

    data = yaml.safe_load((ROOT / "examples" / "scenario.yaml").read_text())
    data["workload"]["parallelism"]["num_microbatches"] = 64
    data["workload"]["training"]["global_batch_size"] = 64
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(data))
    sampled, whole = tmp_path / "sampled.csv", tmp_path / "whole.csv"
    points = sweep_points(path, [parse_axis("collective.num_channels=1")])
    run_sweep(points, sampled, memory_limit=100e6)
    run_sweep(points, whole)
    from simulon.config.loading import load_scenario
    from simulon.pipeline import plan_step

    assert plan_step(load_scenario(path), memory_limit=100e6, micro_batches="auto").counts is not None  # sampled
    rows = [next(csv.DictReader(p.open())) for p in (sampled, whole)]
    kinds = [name for name in METRICS if name.startswith("exposed_") and name != "exposed_comm_ms"]
    for name in kinds:
        assert float(rows[0][name]) == pytest.approx(float(rows[1][name]), rel=1e-6, abs=1e-6)
    assert sum(float(rows[0][name]) for name in kinds) == pytest.approx(float(rows[0]["exposed_comm_ms"]), rel=1e-6)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_point_whose_algorithm_cannot_run_its_steps_collectives_is_refused_before_any_point_runs(
        scenario, tmp_path, counted, jobs):
    """collective.algorithm=pat passed the points' validation and failed only when its DAG was built: ring and tree
    ran first, and the CSV kept the ring row on a local pool and no row on Ray, whichever finished first."""
    points = sweep_points(scenario, [parse_axis("collective.algorithm=ring,tree,pat")])
    out = tmp_path / "s.csv"
    with pytest.raises(ConfigError) as refused:
        run_sweep(points, out, jobs=jobs)
    assert str(refused.value) == ("sweep point collective.algorithm=pat: collective.algorithm: AllReduce has no pat "
                                  "decomposition (pat does AllGather, ReduceScatter)")
    assert counted == [] and not out.exists()


def test_a_sweep_refused_for_a_point_that_cannot_run_leaves_an_earlier_csv_as_it_was(scenario, tmp_path, counted):
    out = tmp_path / "s.csv"
    run_sweep(sweep_points(scenario, [parse_axis("collective.algorithm=ring")]), out)
    before = out.read_bytes()
    with pytest.raises(ConfigError, match=r"collective\.algorithm=pat"):
        run_sweep(sweep_points(scenario, [parse_axis("collective.algorithm=ring,pat")]), out)
    assert out.read_bytes() == before and len(counted) == 1


@pytest.mark.parametrize(("arguments", "error", "message"), [
    ({"fold_mode": "xx"}, ValueError, "fold_mode: expected auto, full or symmetric, got 'xx'"),
    ({"jobs": 0}, ValueError, "jobs: expected a positive number of processes, got 0"),
    ({"jobs": -1}, ValueError, "jobs: expected a positive number of processes, got -1"),
    ({"jobs": 1.5}, TypeError, "jobs: expected a whole number of processes, got 1.5"),
    ({"memory_limit": -1}, ValueError, "memory_limit: must be positive, got -1 B"),
])
def test_run_sweep_refuses_an_argument_the_cli_refuses_naming_it_before_the_csv_is_touched(
        points, tmp_path, counted, arguments, error, message):
    """An invalid fold_mode left a CSV holding only its header; jobs=0 and jobs=-1 ran, where --jobs refuses them."""
    out = tmp_path / "s.csv"
    with pytest.raises(error) as refused:
        run_sweep(points, out, **arguments)
    assert str(refused.value) == message
    assert counted == [] and not out.exists()


def test_run_sweep_takes_its_csv_as_a_str_and_refuses_what_is_no_path_or_no_points(scenario, tmp_path):
    """A str path ended in AttributeError: 'str' object has no attribute 'exists'."""
    points = sweep_points(scenario, [parse_axis("cluster.num_nodes=1")])
    rows, kept = run_sweep(points, str(tmp_path / "s.csv"))
    assert kept == 0 and (tmp_path / "s.csv").read_text().count("\n") == 2 and rows[0]["num_gpus"] == "8"
    with pytest.raises(TypeError, match=r"^path: expected the sweep CSV's path \(a str or pathlib.Path\), got int"):
        run_sweep(points, 5)
    with pytest.raises(ValueError, match=r"^points: expected at least one point to sweep"):
        run_sweep([], tmp_path / "e.csv")
    assert not (tmp_path / "e.csv").exists()


def test_a_ray_cluster_that_cannot_be_joined_is_refused_before_the_csv_is_touched(points, tmp_path, monkeypatch,
                                                                                   counted):
    """`sweep --executor ray --ray-address 127.0.0.1:1` wrote the CSV's header before Ray was reached, and left it
    behind when joining failed; the Ray executor now connects first, and a failure to join names the address."""
    ray = pytest.importorskip("ray")

    def unreachable(**kwargs):
        raise ConnectionError(f"no Ray cluster at {kwargs['address']}")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", unreachable)
    out = tmp_path / "s.csv"
    with pytest.raises(ConfigError, match=r"--ray-address 127\.0\.0\.1:1: cannot join the Ray cluster"):
        run_sweep(points, out, runner=RayExecutor("127.0.0.1:1"))
    assert not out.exists() and counted == []


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_a_sweep_interrupted_before_its_first_row_leaves_no_csv_behind(points, tmp_path, monkeypatch, stop):
    """Ctrl-C (or SIGTERM, which the CLI unwinds as SystemExit) before any point finished left a CSV holding only
    its header, where a point that cannot run already removed it; a CSV that already held rows keeps them."""
    def interrupted(args):
        raise stop()

    monkeypatch.setattr(sweep_run, "point_metrics", interrupted)
    out = tmp_path / "s.csv"
    with pytest.raises(stop):
        run_sweep(points, out)
    assert not out.exists()


def test_a_point_too_large_even_sampled_is_not_told_to_sample_with_an_option_the_sweep_lacks(scenario, tmp_path):
    """A point refused while sampled at the fewest micro-batches its schedule allows was told to try
    '--micro-batches sample', which the sweep has no option for and which samples the same counts."""
    import yaml

    data = yaml.safe_load(scenario.read_text())
    data["workload"]["training"]["global_batch_size"] = 256
    scenario.write_text(yaml.safe_dump(data))
    points = sweep_points(scenario, [parse_axis("parallelism.pp=2")])
    with pytest.raises(ConfigError) as refused:
        run_sweep(points, tmp_path / "s.csv", memory_limit=1e6)
    text = str(refused.value)
    assert "(sampling 2 of the step's 128 micro-batches)" in text and "--micro-batches" not in text
    assert "a smaller global batch) or a smaller cluster, or raise the limit with --max-memory" in text


def planned_needs(points, limit):
    """The bytes each point's step takes planned within `limit` bytes, as its worker plans it."""
    from simulon.pipeline import plan_step, planned_size

    return [planned_size(p.scenario, plan_step(p.scenario, "auto", limit, micro_batches="auto"), "auto",
                         limit).memory_bytes() for p in points]


def test_points_on_a_runner_are_sized_first_and_each_admitted_by_its_need(points, tmp_path):
    """On a runner (Ray; here a recording process pool) every point ran at once with no memory asked for, each
    planned within the whole limit, so that several could together take more than the machine has; each is now
    sized first and handed over with its need, which the runner admits it by."""
    pool = RecordingPool(2, memory=1e9)
    rows, _ = run_sweep(points, tmp_path / "pooled.csv", runner=pool)
    serial, _ = run_sweep(points, tmp_path / "serial.csv", memory_limit=1e9)
    assert pool.needs == [None, pytest.approx(planned_needs(points, 1e9))] and rows == serial


def test_points_on_a_local_ray_instance_give_the_serial_file_each_asking_for_its_need_within_the_nodes_memory(
        points, tmp_path, monkeypatch):
    """`sweep --executor ray` planned each point within this machine's available memory (or --max-memory) and asked
    Ray for no memory, so Ray started as many as it had CPUs whatever they needed; each task is now planned within
    the largest node's memory (here 200 MB of Ray's `memory` resource, against GBs available) and asks for its need
    as that resource."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (the optional extra: uv sync --extra ray)")
    handed = []
    original = RayExecutor.map_unordered

    def recording(self, function, jobs, needs=None):
        handed.append(([job[2] for job in jobs], needs))
        return original(self, function, jobs, needs)

    monkeypatch.setattr(RayExecutor, "map_unordered", recording)
    node, serial, on_ray = 200e6, tmp_path / "serial.csv", tmp_path / "ray.csv"
    run_sweep(points, serial, jobs=1)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=80 * 2**20,
             _memory=int(node))
    try:
        run_sweep(points, on_ray, jobs=2, runner=RayExecutor())
    finally:
        ray.shutdown()
    assert on_ray.read_bytes() == serial.read_bytes()
    (sized, none), (limits, needs) = handed
    assert none is None and sized == limits == [node] * len(points)
    assert needs == pytest.approx(planned_needs(points, node))


class Stop(Exception):
    """Ends a sweep after its first row, as a kill would."""


class StopAfterFirst(Recorder):
    def advance(self, done):
        raise Stop


def test_an_interrupted_sweeps_journal_rows_end_in_a_newline_whatever_the_platforms_text_mode(
        points, tmp_path, monkeypatch):
    import builtins

    def windows_open(file, mode="r", *args, **kwargs):  # text mode as on Windows: '\n' written as '\r\n', cp1252
        if "b" not in mode:
            kwargs.setdefault("newline", "\r\n")
            kwargs.setdefault("encoding", "cp1252")
        return builtins.open(file, mode, *args, **kwargs)

    monkeypatch.setattr(sweep_run, "open", windows_open, raising=False)
    out = tmp_path / "sweep.csv"
    with pytest.raises(Stop):
        run_sweep(points[:2], out, progress=StopAfterFirst())
    data = out.read_bytes()
    assert b"\r" not in data and data.count(b"\n") == 2 and data.endswith(b"\n")
    monkeypatch.undo()
    before = out.read_bytes()
    _, kept = run_sweep(points[:2], out)
    assert kept == 1 and out.read_bytes().startswith(before)


def test_a_sweep_onto_the_csv_of_another_scenarios_sweep_over_the_same_fields_is_refused_file_untouched(
        scenario, tmp_path):
    out = tmp_path / "sweep.csv"
    run_sweep(sweep_points(scenario, [parse_axis("cluster.num_nodes=1")]), out)
    other = tmp_path / "short.yaml"  # another scenario, its point at other swept values: it was kept beside ours,
    data = yaml.safe_load(scenario.read_text())  # and the plots drew the two as one series
    data["workload"]["training"]["sequence_length"] = 512
    other.write_text(yaml.safe_dump(data))
    before = out.read_bytes()
    with pytest.raises(ConfigError, match=r"-o .*sweep.csv: the row keyed \w+ \(datacenter.cluster.num_nodes=1\) "
                                          "was simulated from another scenario"):
        run_sweep(sweep_points(other, [parse_axis("cluster.num_nodes=2")]), out)
    assert out.read_bytes() == before


@pytest.mark.parametrize("axes", [
    ["cluster.num_nodes+training.global_batch_size=1:16,2:32"], ["network.scale_out.nic.speed=200Gbps,400Gbps"],
    ["parallelism.sequence_parallel=true,false", "training.micro_batch_size=1,2"],
    ["workload.model.name=small,'a: b'"], ["node.gpu.memory_capacity_gb=80.0,96.5"]])
def test_a_rows_swept_cells_read_back_in_its_own_scenario_give_its_key(scenario, axes):
    """How a sweep tells an earlier row of its own scenario (kept) from one of another (refused): every cell the
    sweep writes reads back, in the scenario, to the point it was written from."""
    points = sweep_points(scenario, [parse_axis(a) for a in axes])
    rows = [{"key": p.key, **p.steps} for p in points]
    assert [p.key for p in points_at(points[-1], rows)] == [p.key for p in points]
