"""`simulon sweep` on the command line: killed and started again it loses nothing and writes the same CSV as a
run that was never interrupted; bad input ends with exit status 2 before any run; --json prints the rows and the
scaling study and draws no progress; --plots writes the scaling and breakdown plots."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml
from rich.console import Console

from helpers import ROOT, cli
from simulon.cli.progress import terminal_progress
from simulon.sweep.points import parse_axis, sweep_points
from simulon.sweep.run import run_sweep

SLOWER = {"num_layers": 8, "hidden_size": 2048, "ffn_hidden_size": 8192}
"""A model big enough that a point takes a good part of a second, so the kill lands in the middle of the sweep."""


def test_a_killed_sweep_started_again_loses_nothing_and_writes_what_an_uninterrupted_one_does(scenario, tmp_path):
    data = yaml.safe_load(scenario.read_text())
    data["workload"]["model"].update(SLOWER)
    scenario.write_text(yaml.safe_dump(data))
    sets = ["--set", "cluster.num_nodes=1,2", "--set", "training.global_batch_size=16,32"]
    out = tmp_path / "sweep.csv"
    command = [sys.executable, "-c", "from simulon.cli.app import main; main()", "sweep", str(scenario), *sets,
               "-o", str(out), "--jobs", "1"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not out.exists() or out.read_text().count("\n") < 2):
            time.sleep(0.02)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
    rows_before = out.read_text().count("\n") - 1
    assert 1 <= rows_before < 4, "the kill should land after the first point and before the last"
    done = cli("sweep", str(scenario), *sets, "-o", str(out), "--jobs", "1")
    assert done.returncode == 0, done.stderr
    assert f"4 points ({rows_before} already in {out}, {4 - rows_before} simulated)" in done.stdout
    reference = tmp_path / "reference.csv"
    run_sweep(sweep_points(scenario, [parse_axis(s) for s in sets[1::2]]), reference)
    assert out.read_bytes() == reference.read_bytes()


def test_json_prints_the_rows_and_the_scaling_study_and_plots_are_written(scenario, tmp_path):
    out, plots = tmp_path / "sweep.csv", tmp_path / "plots"
    done = cli("sweep", str(scenario), "--set", "cluster.num_nodes+training.global_batch_size=1:16,2:32", "-o",
               str(out), "--jobs", "1", "--json", "--plots", str(plots))
    assert done.returncode == 0 and done.stderr == ""
    result = json.loads(done.stdout)
    assert [int(r["num_gpus"]) for r in result["rows"]] == [8, 16] and result["kept"] == 0
    (series,) = result["scaling"]
    assert series["kind"] == "weak" and series["gpus"] == [8, 16] and series["efficiency"][0] == 1.0
    assert sorted(p.name for p in plots.iterdir()) == ["scaling.png", "steps.png"]


def test_plots_draw_this_sweeps_points_not_the_rows_an_earlier_sweep_left_in_the_csv(scenario, tmp_path):
    out, plots = tmp_path / "sweep.csv", tmp_path / "plots"
    axis = "cluster.num_nodes+training.global_batch_size"
    run_sweep(sweep_points(scenario, [parse_axis(f"{axis}=1:16,2:32")]), out)  # an earlier sweep's scaling rows
    done = cli("sweep", str(scenario), "--set", f"{axis}=4:64", "-o", str(out), "--jobs", "1", "--plots", str(plots))
    assert done.returncode == 0, done.stderr
    assert out.read_text().count("\n") == 4, "the CSV keeps the earlier rows"
    assert "scaling over" not in done.stdout and f"Plots written to {plots}: steps.png\n" in done.stdout
    assert sorted(p.name for p in plots.iterdir()) == ["steps.png"]


ASCII_LOCALE = {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
"""A locale whose encoding is ASCII, Python's UTF-8 mode and locale coercion off: arguments' other bytes reach the
program as surrogate escapes, and standard output cannot encode them."""


def test_a_non_ascii_set_value_under_an_ascii_locale_is_read_as_typed_and_printed_escaped(scenario, tmp_path):
    out = tmp_path / "sweep.csv"
    command = [sys.executable, "-c", "from simulon.cli.app import main; main()", "sweep", str(scenario), "--set",
               "workload.model.name=café".encode(), "--set", "cluster.num_nodes+training.global_batch_size=1:16,2:32",
               "-o", str(out), "--jobs", "1"]
    done = subprocess.run(command, capture_output=True, cwd=ROOT, env={**os.environ, **ASCII_LOCALE}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert b"name=caf\\xe9: weak scaling over 8-16 GPUs" in done.stdout
    assert [line.split(",")[1] for line in out.read_text(encoding="utf-8").splitlines()[1:]] == ["café", "café"]
    command[6] = b"workload.model.name=caf\xe9"  # Latin-1, not UTF-8: refused, naming the option
    done = subprocess.run(command, capture_output=True, cwd=ROOT, env={**os.environ, **ASCII_LOCALE}, timeout=300)
    assert done.returncode == 2 and b"--set workload.model.name=caf" in done.stderr
    assert b"not UTF-8 text (byte 0xe9 at offset 23)" in done.stderr


def test_a_bad_set_exits_2_naming_it_before_anything_runs_or_is_written(scenario, tmp_path):
    out = tmp_path / "sweep.csv"
    done = cli("sweep", str(scenario), "--set", "cluster.num_nodes=1,2", "--set", "cluster.nodes=4", "-o", str(out))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "datacenter.cluster.nodes: unknown key" in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()


def test_bad_options_exit_2_with_one_line(scenario, tmp_path):
    for args, expected in ((("--jobs", "0"), "--jobs: expected a positive number"),
                           (("--expand", "some"), "--expand: expected auto, full or symmetric"),
                           (("-o", str(tmp_path / "no" / "x.csv")), "does not exist")):
        options = ["-o", str(tmp_path / "s.csv"), *args] if args[0] != "-o" else list(args)
        done = cli("sweep", str(scenario), "--set", "cluster.num_nodes=1", *options)
        assert done.returncode == 2 and expected in done.stderr, done.stderr


def test_the_progress_bar_is_drawn_on_a_terminal_unless_quiet():
    for quiet in (False, True):
        out = io.StringIO()
        with terminal_progress(Console(file=out, force_terminal=True, width=100), quiet=quiet) as progress:
            progress.stage("simulating 4 of 4 points", total=4, unit="points")
            progress.advance(2)
        assert ("simulating" in out.getvalue()) != quiet


def test_json_gives_numbers_as_numbers_flags_as_booleans_and_the_key_and_combined_steps_as_text(scenario, tmp_path):
    out = tmp_path / "sweep.csv"
    done = cli("sweep", str(scenario), "--set", "cluster.num_nodes+training.global_batch_size=1:16",
               "--set", "parallelism.sequence_parallel=true", "-o", str(out), "--jobs", "1", "--json")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["rows"]
    assert row["num_gpus"] == 8 and isinstance(row["step_ms"], float) and row["step_ms"] > 0
    assert row["fits"] is True and row["workload.parallelism.sequence_parallel"] is True
    assert row["datacenter.cluster.num_nodes+workload.training.global_batch_size"] == "1:16"
    assert isinstance(row["key"], str) and len(row["key"]) == 16
    assert "1:16" in out.read_text() and ",true\n" in out.read_text()  # the CSV as before


def test_a_sweep_of_the_datacenters_size_with_the_trained_gpus_fixed_is_refused_naming_the_combined_axis(
        scenario, tmp_path):
    data = yaml.safe_load(scenario.read_text())
    data["workload"]["training"]["num_gpus"] = 8
    scenario.write_text(yaml.safe_dump(data))
    out = tmp_path / "sweep.csv"
    done = cli("sweep", str(scenario), "--set", "cluster.num_nodes=1,2,4", "-o", str(out))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "workload.training.num_gpus: 8 fixes the GPUs" in done.stderr
    assert "--set datacenter.cluster.num_nodes+workload.training.num_gpus=1:8,2:16,4:32" in done.stderr
    assert not out.exists()


def test_a_sweep_of_one_point_says_one_point(scenario, tmp_path):
    """One value swept is one point: it printed '1 points (0 already in ..., 1 simulated)'."""
    out = tmp_path / "sweep.csv"
    done = cli("sweep", str(scenario), "--set", "parallelism.tp=2", "-o", str(out), "--jobs", "1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"1 point (0 already in {out}, 1 simulated); written to {out}\n")


@pytest.mark.parametrize(("options", "limit"), [((), None), (("--max-memory", "none"), None),
                                                (("--max-memory", "1GB"), 1e9)])
def test_on_ray_a_points_limit_is_its_tasks_not_what_this_machine_has_available(scenario, tmp_path, monkeypatch,
                                                                                 options, limit):
    """`sweep --executor ray` planned each point within what the machine running the command has available, which
    says nothing of the Ray nodes the points run on; without --max-memory (or with none) each is now planned within
    what a task may take on the cluster (sweep.run.simulated: the largest node's memory)."""
    pytest.importorskip("ray", reason="Ray is not installed (the optional extra: uv sync --extra ray)")
    from typer.testing import CliRunner

    from simulon.cli.app import app
    from simulon.sweep import run as sweep_run

    given = []
    monkeypatch.setattr(sweep_run, "run_sweep", lambda *args: given.append(args[-1]) or ([], 0))
    result = CliRunner().invoke(app, ["sweep", str(scenario), "--set", "parallelism.pp=1,2", "-o",
                                      str(tmp_path / "s.csv"), "--executor", "ray", "--json", *options])
    assert result.exit_code == 0, result.output
    assert given == [limit]
