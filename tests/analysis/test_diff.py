"""`simulon diff A.json B.json`: the headline numbers and the terms that moved, in groups that add up to the step
(so the moves add up to the step's move); bad files end in one line and exit status 2."""

from __future__ import annotations

import json
import math
import re

import pytest
from analysed import analysed
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import SEED_SCENARIO, cli, seed_dict
from simulon.analysis.diff import diff, read_result
from simulon.config.errors import ConfigError
from simulon.config.loading import load_scenario
from simulon.config.scenario import ScenarioConfig


def result_json(run) -> dict:
    """What `simulate --json` prints for a run."""
    return json.loads(json.dumps({**run.sim.result.to_dict(), "memory": run.sim.memory.to_json(),
                                  "analysis": run.analysis.to_dict()}))


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """The quick start on one NCCL channel (A) and on NCCL's own channel count (B), as files."""
    folder = tmp_path_factory.mktemp("results")
    data = seed_dict()
    del data["collective"]["num_channels"]
    paths = []
    for name, sc in (("a.json", load_scenario(SEED_SCENARIO)), ("b.json", ScenarioConfig.model_validate(data))):
        (folder / name).write_text(json.dumps(result_json(analysed(sc))))
        paths.append(folder / name)
    return paths


def test_each_group_of_terms_moves_by_what_the_step_moved(results):
    a, b = results
    compared = diff(read_result(a), read_result(b), a, b)
    step = compared.headline[0]
    assert step.name == "step time (ms)" and step.delta < -200  # more channels: TP all-reduces no longer crawl
    assert set(compared.why) == {"breakdown (mean GPU)", "critical path by kind", "critical path by term",
                                 "per GPU (mean)"}
    for changes in compared.why.values():
        assert sum(c.delta for c in changes) == pytest.approx(step.delta, rel=1e-6)
        assert [abs(c.delta) for c in changes] == sorted((abs(c.delta) for c in changes), reverse=True)
    assert compared.why["critical path by kind"][0].name == "TP"  # what moved most, and why the step moved
    assert compared.why["per GPU (mean)"][0].name == "exposed TP"


def test_the_command_prints_what_moved_and_the_same_output_for_the_same_files(results):
    a, b = results
    first = cli("diff", str(a), str(b))
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    step = json.loads(a.read_text())["iteration_time_ms"]  # the seed example's step
    assert lines[1].startswith(f"step time (ms): {step:.1f} -> ")
    assert any(line.startswith("critical path by kind: TP -") for line in lines)
    as_json = cli("diff", str(a), str(b), "--json")
    assert as_json.returncode == 0
    assert json.loads(as_json.stdout)["headline"][0]["a"] == pytest.approx(step, abs=1e-3)
    assert cli("diff", str(a), str(b)).stdout == first.stdout


def test_a_result_without_analysis_is_compared_on_its_breakdown(results, tmp_path):
    a, b = results
    old = json.loads(a.read_text())
    del old["analysis"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    compared = diff(old, read_result(b), tmp_path / "old.json", b)
    assert list(compared.why) == ["breakdown (mean GPU)"]


@pytest.mark.parametrize(("text", "message"), [
    ("not json", "not a JSON file"),
    ("[1, 2]", "expected a JSON object"),
    ('{"iteration_time_ms": 1}', "tokens_per_s: missing"),
])
def test_a_bad_file_ends_in_one_line_naming_it_and_exit_status_2(results, tmp_path, text, message):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    run = cli("diff", str(results[0]), str(bad))
    assert run.returncode == 2
    assert run.stderr.startswith(f"error: {bad}: ") and message in run.stderr
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr


@pytest.mark.parametrize(("keys", "value", "message"), [
    (("iteration_time_ms",), -5, "iteration_time_ms: expected a number of 0 or more (at most 1e+150), got -5"),
    (("iteration_time_ms",), 1e308, "iteration_time_ms: expected a number of 0 or more (at most 1e+150), got 1e+308"),
    (("iteration_time_ms",), 0, "iteration_time_ms: expected a step time above 0, got 0"),
    (("breakdown", "compute_ms"), -1.0, "breakdown.compute_ms: expected a number of 0 or more (at most 1e+150), "
                                        "got -1.0"),
    (("breakdown", "compute_ms"), 1e200, "breakdown.compute_ms: expected a number of 0 or more (at most 1e+150), "
                                         "got 1e+200"),
    (("analysis",), 5, "analysis: expected an object, got 5"),
    (("analysis", "per_gpu"), 5, "analysis.per_gpu: expected a list, got 5"),
    (("analysis", "critical_path", "by_term_ms"), [], "analysis.critical_path.by_term_ms: expected an object"),
])
def test_an_impossible_number_or_a_part_of_another_shape_is_refused_not_diffed(results, tmp_path, keys, value,
                                                                                message):
    """A negative step time was diffed as -100.9%, one of 1e308 ms as +inf% (`Infinity` in --json), and an exposure
    entry of another shape counted as zeros."""
    data = json.loads(results[1].read_text())
    node = data
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=f"^{re.escape(str(bad))}: " + re.escape(message)):
        diff(read_result(results[0]), read_result(bad), results[0], bad)


def test_a_per_gpu_exposure_of_another_shape_is_refused_not_read_as_zeros(results, tmp_path):
    data = json.loads(results[1].read_text())
    data["analysis"]["per_gpu"][0]["exposed_ms"] = 5
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"analysis.per_gpu\[0\].exposed_ms: expected an object, got 5"):
        diff(read_result(results[0]), read_result(bad), results[0], bad)


@pytest.mark.parametrize(("data", "message"), [
    (b"\xff\xfe{\x00}\x00", "UTF-16 text, not UTF-8 (it starts with a UTF-16 byte-order mark); save it as UTF-8"),
    (b'{"caf\xe9": 1}', "not UTF-8 text (byte 0xe9 at offset 5); save it as UTF-8"),
])
def test_a_file_that_is_not_utf8_is_named_as_such_as_every_other_input_is(results, tmp_path, data, message):
    """diff printed Python's codec error ("'utf-8' codec can't decode byte 0xff in position 0: invalid start byte")
    where every other input says what the file is and what to do (config.errors.not_utf8)."""
    bad = tmp_path / "bad.json"
    bad.write_bytes(data)
    run = cli("diff", str(results[0]), str(bad))
    assert run.returncode == 2 and run.stderr == f"error: {bad}: {message}\n"


def test_a_missing_file_is_named_with_exit_status_2(results, tmp_path):
    run = cli("diff", str(tmp_path / "missing.json"), str(results[1]))
    missing = tmp_path / "missing.json"
    assert run.returncode == 2 and run.stderr == f"error: {missing}: cannot read: No such file or directory\n"


@pytest.mark.parametrize(("command", "written_by"), [
    (("search", str(SEED_SCENARIO), "--replay", "1", "--json"), "simulon search --json"),
    (("memory", str(SEED_SCENARIO), "--json"), "simulon memory --json"),
    (("topology", str(SEED_SCENARIO), "--json"), "simulon topology --json"),
])
def test_another_commands_json_is_named_as_its_output_not_as_a_damaged_simulation(results, tmp_path, command,
                                                                                  written_by):
    """A search's result was refused as `iteration_time_ms: missing (is this simulon simulate --json output?)`."""
    other = tmp_path / "other.json"
    other.write_text(cli(*command).stdout)
    run = cli("diff", str(results[0]), str(other))
    assert run.returncode == 2 and run.stderr == (
        f"error: {other}: the output of `{written_by}`, not a simulation's: diff compares two results of "
        "`simulon simulate --json` (simulate each scenario to compare, with --json)\n")


def mutations(value):
    """A JSON value, or something in its place."""
    return st.one_of(st.just(value), st.none(), st.text(max_size=3), st.booleans(), st.floats(allow_nan=True),
                     st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                          max_size=2))


@settings(max_examples=150)
@given(data=st.data())
def test_a_damaged_result_is_compared_or_refused_with_a_message_naming_its_field(results, tmp_path_factory, data):
    good = json.loads(results[0].read_text())
    damaged = json.loads(json.dumps(good))
    node, keys = damaged, []
    while isinstance(node, dict) and node:  # walk down to a random field, then replace or drop it
        key = data.draw(st.sampled_from(sorted(node)))
        keys.append(key)
        if not isinstance(node[key], dict) or data.draw(st.booleans()):
            if data.draw(st.booleans()):
                del node[key]
            else:
                node[key] = data.draw(mutations(node[key]))
            break
        node = node[key]
    path = tmp_path_factory.mktemp("damaged") / "b.json"
    path.write_text(json.dumps(damaged))
    try:
        compared = diff(good, read_result(path), results[0], path)
    except ConfigError as exc:
        assert str(exc).startswith(f"{path}: ") and "\n" not in str(exc)
        return
    assert all(math.isfinite(c.delta) for changes in compared.why.values() for c in changes)


@given(a=st.floats(-1e-9, 1e-9), b=st.floats(0, 1e3))
def test_a_change_from_a_baseline_of_rounding_noise_has_no_percentage(a, b):
    """A critical path's 8.9e-12 ms of compute slowdown made a change of 3.4e13 %."""
    from simulon.analysis.diff import Change

    assert Change("term", a, b).percent is None
    assert Change("term", 2.0, 3.0).percent == pytest.approx(50.0)


def test_a_change_too_small_for_one_decimal_is_printed_with_its_sign_and_figures_not_as_minus_zero(results, tmp_path):
    """A step 0.04% shorter read "(-0.2 ms, -0.0%)"."""
    a, _ = results
    data = json.loads(a.read_text())
    data["iteration_time_ms"] *= 1 - 4e-4
    data["mfu"] *= 1 + 2e-4
    (tmp_path / "faster.json").write_text(json.dumps(data))
    out = cli("diff", str(a), str(tmp_path / "faster.json"))
    assert out.returncode == 0, out.stderr
    step, = (line for line in out.stdout.splitlines() if line.startswith("step time (ms)"))
    assert step.endswith(", -0.04%)"), step
    mfu, = (line for line in out.stdout.splitlines() if line.startswith("MFU"))
    assert re.search(r"\(\+0\.0\d+ points\)$", mfu), mfu


def test_a_move_within_the_rounding_of_its_sums_is_printed_as_none(results, tmp_path):
    """A step extrapolated from two replays against the same step replayed whole read "6,071.3 -> 6,071.3 (+1.26e-09,
    +0.0000000000207%)" and "MFU: 23.4% -> 23.4% (-0.00000000000484 points)"; the same file diffed with itself reads
    (+0.0, +0.0%)."""
    a, _ = results
    data = json.loads(a.read_text())
    for key in ("iteration_time_ms", "tokens_per_s", "mfu"):
        data[key] *= 1 + 2e-13
    (tmp_path / "same.json").write_text(json.dumps(data))
    out, itself = cli("diff", str(a), str(tmp_path / "same.json")), cli("diff", str(a), str(a))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1:] == itself.stdout.splitlines()[1:]
    assert "(+0.0, +0.0%)" in out.stdout and "(+0.0 points)" in out.stdout
