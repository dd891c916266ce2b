"""An option a command would not read in the combination given is refused, naming it, before anything runs: a Ray
address with the local pool, the pool's size with Ray, a trace's detail with no trace written, a cache folder with
--no-cache (each was accepted and dropped without a word)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers import SEED_SCENARIO, cli


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    return Path(shutil.copy(SEED_SCENARIO, tmp_path / "seed.yaml"))


def refused(*args: str, cwd: Path) -> str:
    done = cli(*args, cwd=cwd, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


@pytest.mark.parametrize("args, named", [
    (("search", "seed.yaml", "--no-cache", "--ray-address", "1.2.3.4:6379"), "--ray-address"),
    (("sweep", "seed.yaml", "--set", "collective.num_channels=1", "-o", "s.csv", "--ray-address", "1.2.3.4:6379"),
     "--ray-address"),
    (("search", "seed.yaml", "--no-cache", "--executor", "ray", "--workers", "2"), "--workers"),
    (("sweep", "seed.yaml", "--set", "collective.num_channels=1", "-o", "s.csv", "--executor", "ray", "--jobs", "2"),
     "--jobs"),
    (("simulate", "seed.yaml", "--trace-detail", "kernels"), "--trace-detail"),
    (("search", "seed.yaml", "--no-cache", "--cache", "c"), "--cache"),
    (("simulate", "seed.yaml", "--json", "-v", "-o", "t.json"), "-v"),
], ids=["search address", "sweep address", "search workers", "sweep jobs", "trace detail", "cache", "verbose json"])
def test_an_option_the_command_would_not_read_is_refused_and_nothing_is_written(seed, args, named):
    assert refused(*args, cwd=seed.parent).startswith(f"error: {named}: ")
    assert sorted(p.name for p in seed.parent.iterdir()) == ["seed.yaml"]


@pytest.mark.parametrize("args", [("report", "seed.yaml", "-o", "r.html"),
                                  ("sweep", "seed.yaml", "--set", "collective.num_channels=1,2", "-o", "s.csv")],
                         ids=["report", "sweep"])
def test_report_and_sweep_refuse_a_run_too_large_for_the_memory_up_front_as_simulate_does(seed, args):
    """Neither took a limit: a step too large ran for minutes into a MemoryError (report) or, a point at a time,
    with every micro-batch replayed where simulate samples (sweep)."""
    line = refused(*args, "--max-memory", "1MB", cwd=seed.parent)
    assert "the run is too large for the memory it may use" in line and " are available" in line
    assert not (seed.parent / "r.html").exists()
