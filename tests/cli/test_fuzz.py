"""Fuzzing the `simulon` command end to end: every input ends in exit status 0 with finite JSON, or exit status 2
with one line naming the file, the field and the value, and never in an internal error (exit status 1).

Three sources of cases, over 1,000 in all:

- the scenario schema (over a one-node GPT, a two-node MoE and a two-node hybrid Mamba model): each case sets one
  to three fields, found by walking `ScenarioConfig`'s JSON schema (so a new field is fuzzed without editing this
  file), to a value drawn for its type (counts, numbers, bandwidths, latencies, names, the schema's own choices), to
  a value of another type, or deletes it;
- the `collective` command's options over a valid scenario;
- files that are no scenario: binary, other encodings, empty, huge, deeply nested, devices, folders, links.

The command runs in-process through the same entry point as `simulon` (cli.errors.run_reporting_errors), so its
exit status and stderr are what a user sees.
"""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import SEED_SCENARIO, finite_json, run_simulon
from simulon.config.scenario import ScenarioConfig

SMALL_MODEL = {"name": "fuzz-gpt", "hidden_size": 256, "num_layers": 4, "num_heads": 8, "ffn_hidden_size": 512,
               "vocab_size": 4096}
"""Small enough that every valid case simulates in well under a second."""


def _single_node() -> dict[str, Any]:
    data = yaml.safe_load(SEED_SCENARIO.read_text())
    data["workload"]["model"] = dict(SMALL_MODEL)
    data["workload"]["training"]["sequence_length"] = 512
    return data


def _two_nodes_moe() -> dict[str, Any]:
    return {
        "datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 2}},
        "collective": {"algorithm": "auto"},
        "workload": {
            "framework": "megatron",
            "model": {**SMALL_MODEL, "moe": {"num_experts": 8, "top_k": 2}},
            "parallelism": {"tp": 2, "pp": 2, "ep": 2},
            "training": {"num_gpus": 16, "global_batch_size": 16, "micro_batch_size": 1, "sequence_length": 256},
        },
    }


def _two_nodes_hybrid() -> dict[str, Any]:
    """A hybrid Mamba / attention / MoE model cut into pipeline segments, with context parallelism."""
    base = _two_nodes_moe()
    base["workload"]["model"].update({"hybrid_pattern": "M*|ME", "activation": "squared_relu",
                                      "mamba": {"num_heads": 8, "head_dim": 32, "state_size": 16, "num_groups": 4}})
    base["workload"]["parallelism"].update({"cp": 2, "sequence_parallel": True})
    return base


BASES = [_single_node(), _two_nodes_moe(), _two_nodes_hybrid()]


# --- the schema's fields ----------------------------------------------------------------------------------

def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives a schema node allows, with $refs followed and null left out."""
    if "$ref" in node:
        return _resolve(defs[node["$ref"].rsplit("/", 1)[1]], defs)
    if "anyOf" in node:
        return [alt for option in node["anyOf"] for alt in _resolve(option, defs) if alt.get("type") != "null"]
    return [node]


def _fields(node: dict[str, Any], defs: dict[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple, dict]:
    """Every field path of the schema below `node`, with the schema alternatives it allows (objects descended)."""
    found: dict[tuple, dict] = {}
    for alt in _resolve(node, defs):
        for name, child in alt.get("properties", {}).items():
            path = (*prefix, name)
            found[path] = {"alternatives": _resolve(child, defs)}
            if len(path) < 6:
                found.update(_fields(child, defs, path))
    return found


_SCHEMA = ScenarioConfig.model_json_schema()
FIELDS = _fields(_SCHEMA, _SCHEMA["$defs"])
PATHS = sorted(FIELDS)

COUNTS = [-1, 0, 1, 2, 3, 4, 8, 16, 64, 1000, 10**6, 2**31, 2**63, 10**20]
NUMBERS = [-1.0, 0.0, 1e-300, 0.5, 1.0, 2.0, 100.0, 1e300, math.inf, -math.inf, math.nan]
UNIT_TEXT = ["400Gbps", "900GBps", "0Gbps", "-5Gbps", "1e30TBps", "nan Gbps", "0.5us", "5us", "1e308ms", "-2us",
             "inf us", "64MiB", "1e30B", "80GB", "2.5GHz", "fast", ""]
NAMES = ["H100", "A100", "dgx-h100", "dgx-a100", "llama-2-7b", "rail-optimized-fat-tree", "fat-tree", "ring",
         "tree", "nvls", "pat", "auto", "simple", "ll128", "bf16", "fp8", "nccl", "megatron", "bogus", "x.yaml", ""]


def _values_for(alternatives: list[dict[str, Any]]) -> st.SearchStrategy:
    pools: list[st.SearchStrategy] = []
    for alt in alternatives:
        if "enum" in alt or "const" in alt:
            pools.append(st.sampled_from(alt.get("enum") or [alt["const"]]))
        kind = alt.get("type")
        if kind == "integer":
            pools.append(st.sampled_from(COUNTS))
        elif kind == "number":
            pools += [st.sampled_from(NUMBERS + COUNTS), st.sampled_from(UNIT_TEXT)]
        elif kind == "string":
            pools.append(st.sampled_from(NAMES))
        elif kind == "boolean":
            pools.append(st.booleans())
        elif kind == "object":
            pools.append(st.just({}))
        elif kind == "array":
            pools.append(st.just([]))
    return st.one_of(pools) if pools else st.none()


OTHER_TYPES = st.one_of(st.none(), st.booleans(), st.sampled_from(COUNTS), st.sampled_from(NUMBERS),
                        st.sampled_from(NAMES + UNIT_TEXT), st.just([1, "a"]), st.just({"k": 1}),
                        st.text(max_size=8))


def _set(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        if not isinstance(data.get(key), dict):
            data[key] = {}
        data = data[key]
    data[path[-1]] = value


def _delete(data: dict[str, Any], path: tuple[str, ...]) -> None:
    for key in path[:-1]:
        data = data.get(key)
        if not isinstance(data, dict):
            return
    data.pop(path[-1], None)


@st.composite
def mutated_scenarios(draw) -> tuple[dict[str, Any], list[str]]:
    """(a base scenario with one to three fields changed, the dotted paths changed)."""
    data = copy.deepcopy(draw(st.sampled_from(BASES)))
    changed = []
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        action = draw(st.sampled_from(["typed", "typed", "typed", "other", "delete"]))
        if action == "delete":
            _delete(data, path)
        else:
            values = _values_for(FIELDS[path]["alternatives"]) if action == "typed" else OTHER_TYPES
            _set(data, path, draw(values))
        changed.append(".".join(path))
    return data, changed


# --- running the command ----------------------------------------------------------------------------------

def assert_finite_json_or_one_line(code: int, out: str, err: str, path: Path) -> None:
    """Exit 0 with finite JSON on stdout, or exit 2 with one 'error: FILE: FIELD: ...' line on stderr."""
    assert "Traceback" not in out + err
    assert code in (0, 2), f"exit {code}: {err}"
    if code == 0:
        assert finite_json(out), out
        return
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {path}: "), lines[0]
    field, _, problem = lines[0].removeprefix(f"error: {path}: ").partition(": ")
    assert field and problem, lines[0]


FUZZ = settings(max_examples=700, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@FUZZ
@given(case=mutated_scenarios())
def test_a_scenario_with_any_field_changed_simulates_or_is_refused_in_one_line(tmp_path, case):
    data, _ = case
    path = tmp_path / "fuzz.yaml"
    path.write_text(yaml.safe_dump(data))
    assert_finite_json_or_one_line(*run_simulon("simulate", str(path), "--json"), path)


def test_the_fuzzed_schema_reaches_every_block_of_a_scenario():
    blocks = {path[:2] for path in PATHS}
    for block in [("datacenter", "network"), ("datacenter", "node"), ("workload", "parallelism"),
                  ("workload", "model"), ("workload", "training"), ("collective", "algorithm")]:
        assert block in blocks
    assert len(PATHS) > 80


def test_the_bases_simulate():
    for number, data in enumerate(BASES):
        path = Path(f"/tmp/simulon-fuzz-base-{os.getpid()}-{number}.yaml")
        path.write_text(yaml.safe_dump(data))
        try:
            code, out, err = run_simulon("simulate", str(path), "--json")
        finally:
            path.unlink()
        assert code == 0, err
        assert json.loads(out)["iteration_time_ms"] > 0


# --- the collective command's options --------------------------------------------------------------------

OPTIONS = {
    "--op": st.sampled_from(["allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "", "ALLREDUCE"]),
    "--group": st.sampled_from(["0-7", "0-15", "0,8", "0", "0-0", "7-0", "0-16", "-1", "0,0", "a-b", "0-3,8-11",
                                "1" * 30, "0-" + "9" * 20, "0-1,1", ""]),
    "--sizes": st.sampled_from(["1KiB", "1KiB,64MiB", "0", "-1KiB", "1e30", "1EiB", "nan", "inf", "1.5", "64MiB,",
                                "8", "", "1e3KiB"]),
    "--algorithm": st.sampled_from(["ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat",
                                    "hierarchical", "pxn", "auto", "bogus", ""]),
    "--protocol": st.sampled_from(["simple", "ll", "ll128", "auto", "LL", "x"]),
    "--channels": st.sampled_from(["1", "2", "64", "65", "0", "-1", "1e3", "x", str(10**15)]),
}


@st.composite
def collective_options(draw) -> list[str]:
    args: list[str] = []
    for option in draw(st.lists(st.sampled_from(sorted(OPTIONS)), max_size=4, unique=True)):
        args += [option, draw(OPTIONS[option])]
    return args


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(args=collective_options())
def test_any_collective_options_give_a_finite_table_or_one_line(tmp_path, args):
    path = tmp_path / "dc.yaml"
    path.write_text(yaml.safe_dump({"datacenter": BASES[1]["datacenter"]}))
    code, out, err = run_simulon("collective", str(path), "--json", *args)
    assert "Traceback" not in out + err
    assert code in (0, 2), f"exit {code}: {err}"
    if code == 0:
        assert finite_json(out), out
    else:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), err
        assert any(option in lines[0] for option in OPTIONS) or str(path) in lines[0], lines[0]


# --- files that are no scenario ----------------------------------------------------------------------------

SEED_TEXT = SEED_SCENARIO.read_text()


def _file_cases(tmp: Path) -> dict[str, Path]:
    """Name -> a path on which `simulon simulate` must say, in one line, why it cannot read a scenario."""
    cases: dict[str, Path] = {}

    def write(name: str, content: bytes) -> None:
        cases[name] = tmp / f"{name}.yaml"
        cases[name].write_bytes(content)

    write("empty", b"")
    write("only-a-comment", b"# nothing\n")
    write("binary", bytes(range(256)) * 4)
    write("nul-bytes", b"\0" * 100)
    write("latin-1", SEED_TEXT.replace("my-cluster", "m\u00e9-cluster").encode("latin-1"))
    write("utf-16", SEED_TEXT.encode("utf-16"))
    write("utf-32", SEED_TEXT.encode("utf-32"))
    write("truncated-utf-8", SEED_TEXT.encode() + "\u00e9".encode()[:1])
    write("deep-lists", b"[" * 100_000 + b"]" * 100_000)
    write("deep-maps", b"a: {" * 20_000 + b"}" * 20_000)
    write("huge", b"# " + b"x" * (17 * 2**20) + b"\n")
    write("tabs", SEED_TEXT.replace("  ", "\t").encode())
    write("a-list", b"- 1\n- 2\n")
    write("a-number", b"42\n")
    write("unclosed-quote", b"datacenter: 'abc\n")
    write("yaml-tags", b"datacenter: !!python/object/apply:os.system ['true']\n")
    write("anchors-bomb", b"a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
                          b"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
                          b"datacenter: *d\n")
    write("two-documents", (SEED_TEXT + "---\n" + SEED_TEXT).encode())
    write("duplicate-merge", SEED_TEXT.replace("collective:", "<<: {x: 1}\ncollective:").encode())
    write("bom", b"\xef\xbb\xbf" + b"\xff\xfe" + SEED_TEXT.encode())
    cases["folder"] = tmp / "a-folder"
    cases["folder"].mkdir()
    cases["missing"] = tmp / "missing.yaml"
    cases["dangling-link"] = tmp / "dangling.yaml"
    cases["dangling-link"].symlink_to(tmp / "nowhere.yaml")
    cases["link-loop"] = tmp / "loop.yaml"
    cases["link-loop"].symlink_to(cases["link-loop"])
    cases["dev-zero"] = Path("/dev/zero")
    cases["dev-null"] = Path("/dev/null")
    cases["fifo"] = tmp / "fifo.yaml"
    os.mkfifo(cases["fifo"])
    cases["gpu-from-dev-zero"] = tmp / "gpu-zero.yaml"
    cases["gpu-from-dev-zero"].write_text(SEED_TEXT.replace("name: H100", "from: /dev/zero"))
    cases["gpu-from-folder"] = tmp / "gpu-folder.yaml"
    cases["gpu-from-folder"].write_text(SEED_TEXT.replace("name: H100", f"from: {tmp}/a-folder/"))
    cases["gpu-from-itself"] = tmp / "gpu-itself.yaml"
    cases["gpu-from-itself"].write_text(SEED_TEXT.replace("name: H100", "from: gpu-itself.yaml"))
    return cases


FILE_CASES = sorted([
    "empty", "only-a-comment", "binary", "nul-bytes", "latin-1", "utf-16", "utf-32", "truncated-utf-8",
    "deep-lists", "deep-maps", "huge", "tabs", "a-list", "a-number", "unclosed-quote", "yaml-tags",
    "anchors-bomb", "two-documents", "duplicate-merge", "bom", "folder", "missing", "dangling-link",
    "link-loop", "dev-zero", "dev-null", "fifo", "gpu-from-dev-zero", "gpu-from-folder", "gpu-from-itself"])


@pytest.fixture(scope="module")
def file_cases(tmp_path_factory) -> dict[str, Path]:
    return _file_cases(tmp_path_factory.mktemp("files"))


def test_every_file_case_is_built(file_cases):
    assert sorted(file_cases) == FILE_CASES


@pytest.mark.parametrize("name", FILE_CASES)
@pytest.mark.parametrize("command", ["simulate", "collective"])
def test_a_file_that_is_no_scenario_is_refused_in_one_line(file_cases, name, command):
    path = file_cases[name]
    code, out, err = run_simulon(command, str(path), "--json")
    assert "Traceback" not in out + err
    assert code == 2, f"{name}: exit {code}: {err or out[:200]}"
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {path}"), lines[0]
