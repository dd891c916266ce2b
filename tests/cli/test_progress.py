"""A long run says what it is doing: the pipeline reports its stages and the replay's advance
(simulon.progress), shown as a bar on a terminal and not at all where stderr is a file (cli/progress.py)."""

from __future__ import annotations

import importlib
import io
import itertools

import pytest
from rich.console import Console

from helpers import SEED_SCENARIO, cli, gpt_scenario
from simulon.cli.progress import terminal_progress
from simulon.pipeline import simulate

replay_module = importlib.import_module("simulon.engine.replay")  # the package exports a function of that name


class Recorder:
    def __init__(self):
        self.events: list[tuple[str, object, object]] = []

    def stage(self, description, total=None, unit=""):
        self.events.append(("stage", description, total))

    def advance(self, done):
        self.events.append(("advance", done, None))


@pytest.fixture(scope="module")
def recorded():
    mp = pytest.MonkeyPatch()
    mp.setattr(replay_module, "REPORT_EVERY", 100)
    recorder = Recorder()
    try:
        sim = simulate(gpt_scenario(tp=2, pp=2, gbs=8), progress=recorder)
    finally:
        mp.undo()
    return sim, recorder.events


def test_a_simulation_reports_its_stages_in_order(recorded):
    _, events = recorded
    stages = [description for kind, description, _ in events if kind == "stage"]
    assert stages[0].startswith("tracing") and stages[1].startswith("timing") and stages[2] == "replaying"


def test_the_replay_reports_finished_nodes_rising_to_at_most_the_dags_size(recorded):
    sim, events = recorded
    replaying = next(i for i, (kind, description, _) in enumerate(events) if description == "replaying")
    assert events[replaying][2] == sim.dag.num_nodes
    done = [value for kind, value, _ in events[replaying:] if kind == "advance"]
    assert len(done) >= sim.dag.num_nodes // 100 - 1
    assert done == sorted(done) and done[-1] <= sim.dag.num_nodes
    assert all(b - a >= 100 for a, b in itertools.pairwise(done))


def test_reporting_progress_does_not_change_the_result(recorded):
    sim, _ = recorded
    assert simulate(gpt_scenario(tp=2, pp=2, gbs=8)).result.iteration_time_ms == sim.result.iteration_time_ms


def test_the_bar_is_drawn_on_a_terminal_and_nothing_is_written_elsewhere():
    for terminal in (True, False):
        out = io.StringIO()
        with terminal_progress(Console(file=out, force_terminal=terminal, width=100)) as progress:
            progress.stage("replaying", total=1000)
            progress.advance(500)
        assert ("replaying" in out.getvalue()) == terminal


def test_a_collective_sweep_reports_each_size_done():
    from simulon.collective.types import CollType
    from simulon.pipeline import collective_sweep

    recorder = Recorder()
    dc = gpt_scenario(nodes=2, gpus_per_node=4).datacenter
    rows = collective_sweep(dc, CollType.AllReduce, tuple(range(8)), [2.0**20, 2.0**24, 2.0**26], progress=recorder)
    assert len(rows) == 3
    assert recorder.events[0] == ("stage", "simulating AllReduce over 8 GPUs", 3)
    assert [value for kind, value, _ in recorder.events if kind == "advance"] == [0, 1, 2]


@pytest.mark.parametrize("args", [("collective", "--sizes", "1KiB,1MiB"), ("simulate",)])
def test_json_on_a_terminal_draws_no_bar_on_stderr(monkeypatch, args):
    """collective --json drew its bar on a terminal's stderr (380 bytes of escapes), where every other --json
    command draws none, as the README says."""
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich takes stderr for a terminal
    run = cli(args[0], str(SEED_SCENARIO), *args[1:], "--json")
    assert run.returncode == 0 and run.stderr == ""


def test_the_time_left_is_the_stages_mean_pace_so_far_when_units_finish_together():
    """Two of a sweep's four points, each a minute long on two processes, finish a millisecond apart: a minute is
    left, where rich's own estimate (the units after its first report over the time since it) said one second."""
    now = [0.0]
    with terminal_progress(Console(file=io.StringIO(), force_terminal=True, width=100)) as progress:
        progress.bar.get_time = lambda: now[0]
        progress.stage("simulating 4 of 4 points", total=4, unit="points")
        left = progress.bar.columns[-1]
        task = progress.bar.tasks[0]
        assert str(left.render(task)) == "-:--:--"
        now[0] = 59.999
        progress.advance(1)
        now[0] = 60.0
        progress.advance(2)
        assert str(left.render(task)) == "0:01:00"  # 60 s for 2 points, 2 left
        now[0] = 120.0
        progress.advance(4)
        assert str(left.render(task)) == "0:00:00"
