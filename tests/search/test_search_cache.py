"""The search's disk cache: a search run again reads what it finished, a killed one resumes and loses nothing, and
nothing written under another scenario or another version of the model is read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import yaml

from helpers import ROOT, cli, gpt_scenario
from simulon.search import cache as cache_module
from simulon.search.cache import Cache
from simulon.search.run import Search


def small(**knobs):
    return gpt_scenario(nodes=2, gpus_per_node=4, layers=8, gbs=16, seq=1024, **knobs)


def test_a_search_run_again_reads_its_estimates_and_replays_and_ranks_the_same(tmp_path):
    cache = Cache(tmp_path)
    first = Search(small()).run(top=4, replay=2, workers=1, cache=cache)
    again = Search(small()).run(top=4, replay=2, workers=1, cache=cache)
    assert (first.reused.estimates, first.reused.replays) == (False, 0)
    assert (again.reused.estimates, again.reused.replays) == (True, 2)
    assert again.to_json()["top"] == first.to_json()["top"]
    assert (again.enumerated, again.pruned, again.infeasible) == (first.enumerated, first.pruned, first.infeasible)


def test_a_changed_scenario_or_model_version_reads_nothing_stale(tmp_path, monkeypatch):
    cache = Cache(tmp_path)
    Search(small()).run(top=2, replay=1, workers=1, cache=cache)
    slower = Search(small(nic="50Gbps")).run(top=2, replay=1, workers=1, cache=cache)
    assert (slower.reused.estimates, slower.reused.replays) == (False, 0)
    monkeypatch.setattr(cache_module, "code_fingerprint", lambda: "another model version")
    changed = Search(small()).run(top=2, replay=1, workers=1, cache=cache)
    assert (changed.reused.estimates, changed.reused.replays) == (False, 0)


def test_an_unreadable_entry_counts_as_missing(tmp_path):
    cache = Cache(tmp_path)
    key = cache.key({"anything": 1})
    cache.put("replays", key, {"iteration_time_ms": 1.0})
    assert cache.get("replays", key) == {"iteration_time_ms": 1.0}
    cache.path("replays", key).write_text("{truncated")
    assert cache.get("replays", key) is None and cache.hits["replays"] == 1


def test_a_search_killed_mid_replay_resumes_from_what_it_finished_and_gives_the_same_answer(tmp_path):
    scenario = tmp_path / "small.yaml"
    scenario.write_text(yaml.safe_dump(small().model_dump(mode="json", exclude_none=True)))
    folder = tmp_path / "cache"
    command = ["search", str(scenario), "--replay", "20", "--top", "20", "--workers", "1", "--json"]
    killed = subprocess.Popen([sys.executable, "-c", "from simulon.cli.app import main; main()", *command,
                               "--cache", str(folder)], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    replays = folder / "replays"
    deadline = time.monotonic() + 240
    while killed.poll() is None and time.monotonic() < deadline and len(list(replays.glob("*.json"))) < 2:
        time.sleep(0.002)
    os.killpg(killed.pid, signal.SIGKILL)  # the search and its worker, mid-replay
    killed.wait()
    finished = len(list(replays.glob("*.json")))
    assert killed.returncode == -signal.SIGKILL and 2 <= finished < 20
    resumed = cli(*command, "--cache", str(folder))
    fresh = cli(*command, "--no-cache")
    assert resumed.returncode == 0 and fresh.returncode == 0, resumed.stderr + fresh.stderr
    resumed_json, fresh_json = json.loads(resumed.stdout), json.loads(fresh.stdout)
    assert resumed_json["cached"] == {"estimates": True, "replays": finished}
    assert len(list(replays.glob("*.json"))) == 20
    assert resumed_json["top"] == fresh_json["top"]
