"""Bad input to the `simulon` command: exit status 2 and one plain line on stderr, never a traceback.

The CLI is run through its real entry point (`simulon.cli.app:main`, which turns ConfigError
into exit status 2) in a subprocess; the hypothesis part calls `parse_scenario` in-process.
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import re
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import SEED_SCENARIO, cli
from simulon.config.loading import ConfigError, parse_scenario
from simulon.config.scenario import ScenarioConfig
from simulon.validate.report import shipped_table

SEED_PATH = SEED_SCENARIO
SEED = yaml.safe_load(SEED_PATH.read_text())
DC_ONLY = {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 2}}}   # 16 GPUs


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return cli(*args, cwd=cwd, timeout=120)


def assert_bad_input(proc: subprocess.CompletedProcess, *expected: str) -> str:
    """Exit 2, nothing on stdout, exactly one 'error: ' line on stderr holding every expected piece."""
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith("error: "), line
    for piece in expected:
        assert piece in line, (piece, line)
    return line


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "dc.yaml").write_text(yaml.safe_dump(DC_ONLY))
    (tmp_path / "seed.yaml").write_text(SEED_PATH.read_text())
    return tmp_path


# --- unreadable scenario files -----------------------------------------------------------------------

@pytest.mark.parametrize("command", ["simulate", "collective"])
def test_missing_file(workdir, command):
    proc = run_cli(command, "missing.yaml", cwd=workdir)
    assert_bad_input(proc, "error: missing.yaml: cannot read", "No such file")


def test_directory_instead_of_file(workdir):
    (workdir / "folder").mkdir()
    proc = run_cli("simulate", "folder", cwd=workdir)
    assert_bad_input(proc, "error: folder: cannot read", "directory")


@pytest.mark.parametrize(("scenario", "expected"), [
    ("/dev/zero", "error: /dev/zero: cannot read: not a regular file"),
    ("dev_zero_gpu.yaml", "datacenter.node.gpu: cannot read template file '/dev/zero': not a regular file"),
    ("deep.yaml", "error: deep.yaml: (YAML): nested deeper than the parser follows"),
    ("huge.yaml", "huge.yaml: cannot read: 16,777,217 bytes, more than a scenario or template holds"),
])
def test_files_no_scenario_could_be_are_refused_before_they_are_read_whole(workdir, scenario, expected):
    (workdir / "dev_zero_gpu.yaml").write_text(yaml.safe_dump(
        {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}, "node": {"gpu": {"from": "/dev/zero"}}}}))
    (workdir / "deep.yaml").write_text("datacenter: " + "[" * 100_000 + "]" * 100_000)
    (workdir / "huge.yaml").write_text("#" * (16 * 2**20 + 1))
    proc = run_cli("collective", scenario, cwd=workdir)
    assert_bad_input(proc, expected)


def test_invalid_yaml_names_the_line(workdir):
    (workdir / "tab.yaml").write_text("datacenter:\n  cluster:\n\tnum_nodes: 1\n")
    proc = run_cli("simulate", "tab.yaml", cwd=workdir)
    assert_bad_input(proc, "error: tab.yaml: (YAML) at line 3, column 1")


def test_invalid_yaml_mapping_value(workdir):
    (workdir / "colon.yaml").write_text("datacenter:\n  cluster: {num_nodes: 1}\n  node: gpus: 4\n")
    proc = run_cli("collective", "colon.yaml", cwd=workdir)
    assert_bad_input(proc, "error: colon.yaml: (YAML) at line 3", "mapping values are not allowed")


def test_not_utf8(workdir):
    (workdir / "binary.yaml").write_bytes(b"\x81\xfe\x00\x81datacenter")
    proc = run_cli("simulate", "binary.yaml", cwd=workdir)
    assert_bad_input(proc, "error: binary.yaml: not UTF-8 text (byte 0x81 at offset 0)")


@pytest.mark.parametrize(("encoding", "name"), [("utf-16", "UTF-16"), ("utf-32", "UTF-32")])
def test_a_utf16_or_utf32_file_is_named_by_its_byte_order_mark(workdir, encoding, name):
    (workdir / "wide.yaml").write_bytes(SEED_PATH.read_text().encode(encoding))
    proc = run_cli("simulate", "wide.yaml", cwd=workdir)
    assert_bad_input(proc, f"error: wide.yaml: {name} text, not UTF-8", "save it as UTF-8")


def test_a_latin1_file_is_told_where_it_is_not_utf8_and_what_to_do(workdir):
    (workdir / "latin1.yaml").write_bytes("datacenter:\n  datacenter: {name: café}\n".encode("latin-1"))
    proc = run_cli("collective", "latin1.yaml", cwd=workdir)
    assert_bad_input(proc, "error: latin1.yaml: not UTF-8 text (byte 0xe9 at offset 36); save it as UTF-8")


def test_yaml_list_at_top_level(workdir):
    (workdir / "list.yaml").write_text("- datacenter\n- workload\n")
    proc = run_cli("simulate", "list.yaml", cwd=workdir)
    assert_bad_input(proc, "error: list.yaml: (top level): expected a mapping", "got a list")


def test_empty_file(workdir):
    (workdir / "empty.yaml").write_text("# nothing here\n")
    proc = run_cli("collective", "empty.yaml", cwd=workdir)
    assert_bad_input(proc, "error: empty.yaml: (top level): expected a mapping")


# --- valid YAML, bad scenario ------------------------------------------------------------------------

def test_simulate_needs_a_workload(workdir):
    proc = run_cli("simulate", "dc.yaml", cwd=workdir)
    assert_bad_input(proc, "error: dc.yaml: workload: required", "simulon collective")


def test_inconsistent_parallelism(workdir):
    data = copy.deepcopy(SEED)
    data["workload"]["parallelism"]["dp"] = 2
    (workdir / "bad.yaml").write_text(yaml.safe_dump(data))
    proc = run_cli("simulate", "bad.yaml", cwd=workdir)
    assert_bad_input(proc, "error: bad.yaml: workload.parallelism: tp*cp*pp*dp = 2*1*2*2 = 8")


def test_unknown_key(workdir):
    (workdir / "extra.yaml").write_text(yaml.safe_dump({**DC_ONLY, "colective": {"algorithm": "ring"}}))
    proc = run_cli("collective", "extra.yaml", cwd=workdir)
    assert_bad_input(proc, "error: extra.yaml: colective: unknown key")


def test_algorithm_not_built_in_scenario(workdir):
    (workdir / "warp.yaml").write_text(yaml.safe_dump({**DC_ONLY, "collective": {"algorithm": "warp"}}))
    proc = run_cli("collective", "warp.yaml", cwd=workdir)
    assert_bad_input(proc, "error: warp.yaml: collective.algorithm: ", "'warp'")


def test_a_training_run_whose_collectives_the_fixed_algorithm_cannot_run_is_refused(workdir):
    data = copy.deepcopy(SEED)
    data["collective"]["algorithm"] = "pat"   # the seed's tensor parallelism all-reduces
    (workdir / "fixed.yaml").write_text(yaml.safe_dump(data))
    proc = run_cli("simulate", "fixed.yaml", cwd=workdir)
    assert_bad_input(proc, "error: fixed.yaml: collective.algorithm: ", "AllReduce has no pat decomposition")


MESH = {"datacenter": {"from": "mi300x-platform", "cluster": {"num_nodes": 2}}}   # xGMI mesh, no NVSwitch


@pytest.mark.parametrize(("algorithm", "missing"), [
    ("nvls", "an NVSwitch that reduces"), ("nvls_tree", "an NVSwitch that reduces"),
    ("collnet_direct", "network.scale_out.switch.in_network_reduction")])
def test_an_in_switch_algorithm_without_a_reducing_switch_is_refused(workdir, algorithm, missing):
    mesh = copy.deepcopy(MESH)
    mesh["datacenter"]["network"] = {"scale_out": {"switch": {"name": "plain", "in_network_reduction": False}}}
    (workdir / "mesh.yaml").write_text(yaml.safe_dump({**mesh, "collective": {"algorithm": algorithm}}))
    proc = run_cli("collective", "mesh.yaml", cwd=workdir)
    assert_bad_input(proc, "error: mesh.yaml: collective.algorithm: ", missing)
    (workdir / "plain.yaml").write_text(yaml.safe_dump(mesh))
    proc = run_cli("collective", "plain.yaml", "--algorithm", algorithm, "--sizes", "1MiB", cwd=workdir)
    assert_bad_input(proc, "error: --algorithm: ", missing)


# --- bad command-line values -------------------------------------------------------------------------

@pytest.mark.parametrize(("group", "expected"), [
    ("0-99", "rank 99 is outside the datacenter's 16 GPUs"),
    ("0-" + "9" * 30, "rank " + "9" * 30 + " is outside"),
    ("16", "rank 16 is outside"),
    ("-1,0", "cannot read"),
    ("a-b", "cannot read 'a-b'"),
    ("5-2", "cannot read '5-2'"),
    ("0,x", "cannot read 'x'"),
    ("0,1,1", "rank 1 appears twice in '0,1,1'"),
    ("0-3,2", "rank 2 appears twice in '0-3,2'"),
    ("3", "at least two ranks"),
])
def test_bad_group(workdir, group, expected):
    proc = run_cli("collective", "dc.yaml", "--group", group, "--sizes", "1MiB", cwd=workdir)
    assert_bad_input(proc, "error: --group: ", expected)


@pytest.mark.parametrize(("sizes", "expected"), [
    ("12XB", "cannot read '12XB' as a size"),
    ("-1", "cannot read '-1'"),
    ("0", "'0': must be positive"),
    ("1MiB,,2MiB", "cannot read ''"),
])
def test_bad_sizes(workdir, sizes, expected):
    proc = run_cli("collective", "dc.yaml", "--sizes", sizes, cwd=workdir)
    assert_bad_input(proc, "error: --sizes: ", expected)


def test_bad_op(workdir):
    proc = run_cli("collective", "dc.yaml", "--op", "broadcast", cwd=workdir)
    assert_bad_input(proc, "error: --op: ", "'broadcast'", "allreduce")


def test_bad_algorithm_option(workdir):
    proc = run_cli("collective", "dc.yaml", "--algorithm", "warp", "--sizes", "1MiB", cwd=workdir)
    assert_bad_input(proc, "error: --algorithm: ", "'warp'")


def test_protocol_and_algorithm_options_are_read_in_any_case_as_the_scenario_reads_them(workdir):
    proc = run_cli("collective", "dc.yaml", "--protocol", "LL", "--algorithm", "Ring", "--sizes", "1MiB", "--json",
                   cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert (row["protocol"], row["algorithm"]) == ("ll", "ring")


@pytest.mark.parametrize("op", ["allgather", "reducescatter"])
def test_pat_over_several_gpus_per_node_is_refused_as_nccl_restricts_it_to_one(workdir, op):
    proc = run_cli("collective", "dc.yaml", "--op", op, "--algorithm", "pat", "--sizes", "1MiB", cwd=workdir)
    assert_bad_input(proc, "error: --algorithm: ", "pat", "one GPU per node")


@pytest.mark.parametrize(("op", "algorithm"), [("alltoall", "nvls"), ("sendrecv", "collnet_direct"),
                                                ("permute", "tree")])
def test_an_algorithm_asked_for_a_point_to_point_op_that_nccl_algo_does_not_steer_is_refused(workdir, op, algorithm):
    proc = run_cli("collective", "dc.yaml", "--op", op, "--algorithm", algorithm, "--sizes", "1MiB", cwd=workdir)
    assert_bad_input(proc, "error: --algorithm: ", "NCCL_ALGO does not steer", f"not {algorithm}", "p2p")


def test_an_nvls_protocol_other_than_simple_is_refused(workdir):
    proc = run_cli("collective", "dc.yaml", "--algorithm", "nvls", "--protocol", "ll", "--group", "0-7",
                   "--sizes", "1KiB", cwd=workdir)
    assert_bad_input(proc, "error: --protocol: ", "nvls runs the simple protocol only, not ll")


def test_the_table_names_the_algorithm_that_ran(workdir):
    proc = run_cli("collective", "dc.yaml", "--op", "permute", "--sizes", "1MiB", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "algorithm p2p" in proc.stdout.splitlines()[0]


def test_pat_over_one_gpu_per_node_runs(workdir):
    proc = run_cli("collective", "dc.yaml", "--op", "allgather", "--algorithm", "pat", "--group", "0,8",
                   "--sizes", "1MiB", "--json", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)) == 1


def test_bad_channels(workdir):
    proc = run_cli("collective", "dc.yaml", "--channels", "0", "--sizes", "1MiB", cwd=workdir)
    assert_bad_input(proc, "error: --channels: ", "at least 1")


def test_bad_expand(workdir):
    proc = run_cli("simulate", "seed.yaml", "--expand", "half", cwd=workdir)
    assert_bad_input(proc, "error: --expand: ", "'half'")


# --- output files ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def missing_folder_run(tmp_path_factory):
    """One `simulate -o no/such/folder/trace.json` run (the simulation runs before the write)."""
    cwd = tmp_path_factory.mktemp("missing_out")
    (cwd / "seed.yaml").write_text(SEED_PATH.read_text())
    return cwd, run_cli("simulate", "seed.yaml", "-o", "no/such/folder/trace.json", cwd=cwd)


def test_output_into_missing_folder_fails_cleanly(missing_folder_run):
    cwd, proc = missing_folder_run
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr + proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in cwd.rglob("*")) == ["seed.yaml"]   # nothing written, no folder made


def test_output_into_missing_folder_is_bad_input(missing_folder_run):
    _, proc = missing_folder_run
    assert_bad_input(proc, "no/such/folder")


def test_a_trace_path_that_is_a_folder_is_refused_before_anything_is_simulated(workdir):
    (workdir / "traces").mkdir()
    proc = run_cli("simulate", "seed.yaml", "-o", "traces", cwd=workdir)
    assert_bad_input(proc, "-o traces: is a folder")
    assert list((workdir / "traces").iterdir()) == []


def test_sigterm_unwinds_the_command_so_that_half_written_files_are_removed(tmp_path):
    """What a batch scheduler sends: the command stops with 128 + SIGTERM after its cleanup has run (the
    atomic writer removes its temporary copy in the same way as on any exception)."""
    code = ("import os, signal, sys, time\n"
            "from pathlib import Path\n"
            "from simulon.cli.errors import run_reporting_errors\n"
            "def command():\n"
            "    try:\n"
            "        os.kill(os.getpid(), signal.SIGTERM)\n"
            "        time.sleep(30)\n"
            "    finally:\n"
            "        Path(sys.argv[1]).write_text('unwound')\n"
            "run_reporting_errors(command)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "marker")], capture_output=True, text=True,
                          timeout=20)
    assert proc.returncode == 128 + signal.SIGTERM
    assert (tmp_path / "marker").read_text() == "unwound"


def test_a_profile_sweep_with_no_valid_model_is_refused_and_writes_nothing(workdir):
    proc = cli("profile", "gpu", "-o", "h100.yaml", "--activation", "bogus", "--device", "cpu", cwd=workdir)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no point of the sweep describes a model" in proc.stderr and "model.activation" in proc.stderr
    assert "wrote" not in proc.stdout and not (workdir / "h100.yaml").exists()


def test_validating_a_table_of_another_kind_is_refused_not_reported_as_nan(workdir):
    proc = run_cli("validate", "kernels", "--csv", str(shipped_table("training")), cwd=workdir)
    assert_bad_input(proc, "training.csv: no row could be compared")


@pytest.mark.parametrize("validator", ["memory", "hetero", "kernels"])
@pytest.mark.parametrize("text", ["", "source,model,mbs,mem_gib\n"])
def test_an_empty_or_header_only_table_is_refused_as_having_no_rows(workdir, validator, text):
    (workdir / "mine.csv").write_text(text)
    proc = run_cli("validate", validator, "--csv", "mine.csv", cwd=workdir)  # was: no row could be compared
    assert_bad_input(proc, "mine.csv: no rows: the table is empty or holds only its header")  # (0 skipped); is this..


def test_a_table_none_of_whose_rows_compare_is_refused_with_every_reason_and_its_rows(workdir):
    header = "source,model,hardware,framework,num_gpus,tp,mbs,seq_len,mem_gib,mem_kind"
    (workdir / "mine.csv").write_text(f"{header}\nour lab,Llama3-8B,H100,,8,1,1,4096,30,allocated\n"
                                      "our lab,Llama3-8B,Foo 9000,NeMo,8,1,1,4096,30,allocated\n"
                                      "our lab,Llama3-8B,H100,,8,1,1,4096,30,allocated\n")
    proc = run_cli("validate", "memory", "--csv", "mine.csv", cwd=workdir)
    assert_bad_input(proc, "mine.csv: no row could be compared (3 skipped: 2 (rows 2, 4): source 'our lab' has no "
                     "known set-up", "1 (row 3): hardware: 'Foo 9000' names no shipped GPU")


@pytest.fixture(scope="module")
def trace_run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("trace_out")
    (cwd / "seed.yaml").write_text(SEED_PATH.read_text())
    (cwd / "trace.json").write_text("stale content that must be replaced")
    return cwd, run_cli("simulate", "seed.yaml", "-o", "trace.json", "--json", cwd=cwd)


def test_output_is_written_atomically(trace_run):
    cwd, proc = trace_run
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    summary = json.loads(proc.stdout)
    assert summary["num_gpus"] == 4
    assert summary["iteration_time_ms"] > 0
    trace = json.loads((cwd / "trace.json").read_text())
    assert isinstance(trace["traceEvents"], list) and trace["traceEvents"]
    assert list(cwd.glob(".trace.json.*.tmp")) == []
    assert sorted(p.name for p in cwd.iterdir()) == ["seed.yaml", "trace.json"]


def test_output_file_mode_follows_umask(trace_run):
    cwd, _ = trace_run
    umask = os.umask(0)
    os.umask(umask)
    if umask & 0o044 == 0o044:
        pytest.skip("this umask hides group/other read access anyway")
    assert stat.S_IMODE((cwd / "trace.json").stat().st_mode) == 0o666 & ~umask


# --- garbage in, ConfigError out (in-process) -------------------------------------------------------

# Text without line breaks, control characters or '/' (a '/' would make `from:` read files).
safe_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp"),
                                  exclude_characters="/"), max_size=12)
KNOWN_KEYS = ["datacenter", "workload", "collective", "cluster", "num_nodes", "node", "gpu", "gpus_per_node",
              "network", "scale_up", "scale_out", "nic", "switch", "from", "name", "model", "parallelism",
              "training", "tp", "pp", "dp", "ep", "cp", "moe", "speed", "latency", "port_speed", "algorithm"]
keys = st.sampled_from(KNOWN_KEYS) | safe_text | st.integers(-3, 3)
leaves = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | safe_text
          | st.sampled_from(["H100", "dgx-h100", "llama-7b", "400Gbps", "5us", "64MiB", "ring", "tree", "fp8",
                             "x.yaml"])
          | st.binary(max_size=4) | st.dates())
garbage = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(keys, inner, max_size=4), max_leaves=25)


def _paths(node, prefix=()):
    """Every (container path, key) pair in a nested dict/list."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield (*prefix, i)
            yield from _paths(value, (*prefix, i))


def _get(node, path):
    for key in path:
        node = node[key]
    return node


def _other_type(value):
    """A random value whose type differs from value's."""
    pool = [leaves, st.lists(leaves, max_size=3), st.dictionaries(keys, leaves, max_size=3)]
    return st.one_of(pool).filter(lambda v: type(v) is not type(value))


@st.composite
def mutated_seed(draw):
    data = copy.deepcopy(SEED)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(data))
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if not paths:
            action = "add"
        if action == "replace":
            path = draw(st.sampled_from(paths))
            parent = _get(data, path[:-1])
            parent[path[-1]] = draw(_other_type(parent[path[-1]]))
        elif action == "delete":
            dict_paths = [p for p in paths if isinstance(_get(data, p[:-1]), dict)]
            if dict_paths:
                path = draw(st.sampled_from(dict_paths))
                del _get(data, path[:-1])[path[-1]]
        else:
            dicts = [()] + [p for p in paths if isinstance(_get(data, p), dict)]
            target = _get(data, draw(st.sampled_from(dicts)))
            target[draw(keys)] = draw(garbage)
    return data


def _check_parse(data):
    try:
        result = parse_scenario(data, "gen.yaml")
    except ConfigError as exc:
        message = str(exc)
        assert message.startswith("gen.yaml: "), message
        assert len(message.splitlines()) == 1, message
        assert len(message) > len("gen.yaml: ")
    else:
        assert isinstance(result, ScenarioConfig)


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(data=garbage | st.dictionaries(st.just("datacenter") | keys, garbage, max_size=3))
def test_garbage_gives_config_error_or_scenario(data):
    _check_parse(data)


@FUZZ
@given(data=mutated_seed())
def test_mutated_seed_gives_config_error_or_scenario(data):
    _check_parse(data)


def test_unmutated_seed_parses():
    assert isinstance(parse_scenario(copy.deepcopy(SEED), "gen.yaml"), ScenarioConfig)


@pytest.mark.parametrize("data", [
    {**SEED, "datacenter": {**SEED["datacenter"], "datacenter": {"name": "x", "when": datetime.date(2024, 1, 1)}}},
    {**SEED, 7: "int key"},
    {**SEED, None: "null key"},
    [SEED],
    "datacenter",
    None,
])
def test_odd_yaml_values(data):
    with pytest.raises(ConfigError) as info:
        parse_scenario(data, "gen.yaml")
    assert str(info.value).startswith("gen.yaml: ")
    assert len(str(info.value).splitlines()) == 1


@pytest.mark.parametrize("case", ["key", "gpu name"])
def test_line_breaks_in_user_strings_stay_on_one_line(case):
    data = copy.deepcopy(SEED)
    if case == "key":
        data["workload"]["parallelism"]["bad\nkey"] = 1
    else:
        data["datacenter"]["node"]["gpu"] = {"name": "My\nGPU", "memory_capacity_gb": 10,
                                             "memory_bandwidth": "1TBps", "peak_tflops": {"bf16": 100}}
        data["workload"]["training"]["dtype"] = "fp8"
    with pytest.raises(ConfigError) as info:
        parse_scenario(data, "gen.yaml")
    assert len(str(info.value).splitlines()) == 1, str(info.value)


@pytest.mark.parametrize(("args", "expected"), [
    (["collective", "dc.yaml", "--channels", "1e3"], ["'--channels': expected a whole number, got '1e3'",
                                                      "see 'simulon collective --help'"]),
    (["collective", "dc.yaml", "--channels=x"], ["'--channels'", "got 'x'"]),
    (["collective", "dc.yaml", "--bogus"], ["No such option: --bogus", "see 'simulon collective --help'"]),
    (["simulate"], ["Missing argument 'scenario'", "see 'simulon simulate --help'"]),
    (["frob"], ["No such command 'frob'", "see 'simulon --help'"]),
])
def test_a_command_line_usage_error_is_one_line_naming_the_option_and_value(workdir, args, expected):
    assert_bad_input(run_cli(*args, cwd=workdir), *expected)


def test_an_unknown_replay_engine_in_the_environment_is_bad_input(workdir):
    proc = subprocess.run([sys.executable, "-c", "from simulon.cli.app import main; main()", "simulate", "seed.yaml"],
                          capture_output=True, text=True, cwd=workdir, timeout=120,
                          env={**os.environ, "SIMULON_REPLAY": "fast"})
    assert_bad_input(proc, "error: environment variable SIMULON_REPLAY: expected one of auto, compiled, python, "
                           "got 'fast'")


SMALL_MODEL_ON_A_NODE = {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}},
                         "workload": {"framework": "megatron", "model": "llama-3.2-1b",
                                      "training": {"global_batch_size": 8, "sequence_length": 2048}}}
"""A scenario the search finds strategies for on its 8 GPUs (16 layers, global batch 8)."""


@pytest.fixture
def small_search(tmp_path: Path) -> Path:
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(SMALL_MODEL_ON_A_NODE))
    return tmp_path


def test_a_search_fixed_to_a_pipeline_size_the_gpus_do_not_divide_names_the_option_and_the_rule(small_search):
    proc = run_cli("search", "s.yaml", "--no-cache", "--fix", "pp=3", cwd=small_search)
    assert_bad_input(proc, "error: s.yaml: no strategy fits on 8 GPUs (", " left out by the options, ",
                     "): --fix pp=3 alone leaves none: every strategy with it breaks divisibility: tp x pp x cp must "
                     "divide the GPUs")


def test_a_search_on_a_gpu_count_every_strategy_breaks_a_rule_on_names_the_rules_that_pruned_the_most(small_search):
    line = assert_bad_input(run_cli("search", "s.yaml", "--no-cache", "--gpus", "7", cwd=small_search),
                            "error: s.yaml: no strategy fits on 7 GPUs (",
                            "): the rules pruned every strategy, most by divisibility: ")
    named = re.findall(r"(divisibility|dominance): [^;]*? \(([\d,]+)\)(?:;|$)", line.partition("most by ")[2])
    counts = [int(count.replace(",", "")) for _, count in named]
    assert len(counts) == 3 and counts == sorted(counts, reverse=True), line
