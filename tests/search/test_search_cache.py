"""The search's disk cache: a search run again reads what it finished, a killed one resumes and loses nothing, and
nothing written under another scenario or another version of the model is read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from helpers import ROOT, cli, gpt_scenario
from simulon.search import cache as cache_module
from simulon.search.cache import Cache
from simulon.search.run import Phase, Search, replay_from_json


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


@pytest.mark.parametrize("text", ["{}", "[]", '{"iteration_time_ms": "abc"}', '{"iteration_time_ms": NaN}',
                                  '{"iteration_time_ms": Infinity}', '{"iteration_time_ms": 0}',
                                  '{"iteration_time_ms": -3.5}', '{"iteration_time_ms": true}', "1"])
def test_a_replay_entry_of_the_wrong_shape_or_without_a_finite_positive_time_counts_as_missing(tmp_path, text):
    cache = Cache(tmp_path)
    key = cache.key({"anything": 1})
    cache.put("replays", key, {"iteration_time_ms": 912.5})
    assert cache.get("replays", key, replay_from_json) == 912.5
    cache.path("replays", key).write_text(text)
    assert cache.get("replays", key, replay_from_json) is None and cache.hits["replays"] == 1


def damaged_phases(good: dict) -> list:
    """Entries of the estimates' kind that JSON reads but that are not the shape Phase.to_json writes."""
    row = good["candidates"][0]
    return [{}, [1], 1, {**good, "closest": [1]}, {**good, "enumerated": "many"}, {**good, "pruned": [1]},
            {**good, "candidates": [row[:-1]]}, {**good, "candidates": [[float("nan"), *row[1:]]]},
            {**good, "candidates": [[-1.0, *row[1:]]]}, {**good, "candidates": [[*row[:-3], "x", *row[-2:]]]},
            {**good, "candidates": [1]}]


def test_an_estimates_entry_of_the_wrong_shape_counts_as_missing(tmp_path):
    good = Search(small()).estimated().to_json()
    cache = Cache(tmp_path)
    key = cache.key({"anything": 1})
    cache.put("estimates", key, good)
    assert cache.get("estimates", key, Phase.from_json).candidates == Phase.from_json(good).candidates
    for damaged in damaged_phases(good):
        cache.path("estimates", key).write_text(json.dumps(damaged))
        assert cache.get("estimates", key, Phase.from_json) is None, damaged
    assert cache.hits["estimates"] == 1


def test_a_search_whose_cache_entries_were_overwritten_with_other_json_runs_them_again_and_answers_the_same(
        tmp_path):
    scenario = tmp_path / "small.yaml"
    scenario.write_text(yaml.safe_dump(small().model_dump(mode="json", exclude_none=True)))
    command = ["search", str(scenario), "--replay", "2", "--top", "3", "--workers", "1", "--json",
               "--cache", str(tmp_path / "cache")]
    first = cli(*command)
    entries = sorted((tmp_path / "cache").rglob("*.json"))
    for entry, text in zip(entries, ["{}", '{"iteration_time_ms": "abc"}', "[1]"], strict=False):
        entry.write_text(text)
    again = cli(*command)
    assert first.returncode == 0 and again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["top"] == json.loads(first.stdout)["top"]
