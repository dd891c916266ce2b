"""A platform's NCCL tuner plugin (network.nccl.tuner_config, the CSV rules of NCCL's example tuner plugin): the
first matching rule whose algorithm and protocol NCCL has enabled runs the collective, NCCL's model the rest."""

from __future__ import annotations

import contextlib
import json
import os
import threading

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import cli
from simulon.collective.tuner import CollectivePlan
from simulon.collective.tuner_rules import TunerRule, parse_rule, parse_rules
from simulon.collective.types import CollType
from simulon.config.errors import ConfigError
from simulon.config.loading import files_read, parse_scenario
from simulon.network.topology import Topology
from simulon.pipeline import collective_sweep

AR, AG, RS = CollType.AllReduce, CollType.AllGather, CollType.ReduceScatter
MiB = 2**20


def scenario(rules, nodes: int = 2, template: str = "gcp-a3-mega", base_dir=None):
    # A3 Mega's NCCL_ALGO (Ring,Tree) with every protocol and none of Google's rules: only the test's own apply
    nccl = {"protocols": "Simple,LL,LL128", "tuner_config": [] if rules is None else rules}
    return parse_scenario({"datacenter": {"from": template, "cluster": {"num_nodes": nodes},
                                          "network": {"nccl": nccl}}}, "dc.yaml", base_dir)


def plan(rules, nodes: int = 2, template: str = "gcp-a3-mega", channels: int | None = None) -> CollectivePlan:
    dc = scenario(rules, nodes, template).datacenter
    return CollectivePlan(Topology.from_datacenter(dc), "auto", "auto", channels)


def picked(p: CollectivePlan, ctype: CollType, size: float, ranks: int = 16) -> tuple[str, str, int]:
    choice = p.choose(ctype, range(ranks), size)
    return choice.algorithm, choice.protocol, choice.channels


def test_a_rule_runs_its_algorithm_where_nccls_model_would_take_another():
    # Google's A3 Mega allows Ring and Tree; NCCL's model takes the ring for a large all-reduce over two nodes
    assert picked(plan(None), AR, 64 * MiB)[:2] == ("ring", "ll128")
    ruled = plan(["allreduce,33554432,4294967295,tree,simple,-1,2,16"])
    assert picked(ruled, AR, 64 * MiB)[:2] == ("tree", "simple")
    assert picked(ruled, AR, 16 * MiB) == picked(plan(None), AR, 16 * MiB)  # below min_bytes: NCCL's own
    assert picked(ruled, AR, 2.0**32)[:2] == ("ring", "simple")  # above max_bytes


def test_sizes_match_inclusively_at_both_ends_of_a_rules_range():
    p = plan(["allreduce,1048576,2097152,tree,ll,-1,-1,-1"])
    assert [picked(p, AR, s)[:2] == ("tree", "ll") for s in (MiB - 1, MiB, 2 * MiB, 2 * MiB + 1)] == [
        False, True, True, False]


def test_the_first_rule_that_matches_and_is_enabled_wins():
    # NVLS is not in A3 Mega's NCCL_ALGO: the plugin's cost for it stays ignored and the next rule applies
    p = plan(["allreduce,0,4294967295,nvls,simple,-1,-1,-1",
              "allreduce,0,4294967295,tree,ll128,-1,-1,-1",
              "allreduce,0,4294967295,ring,simple,-1,-1,-1"])
    assert picked(p, AR, 64 * MiB)[:2] == ("tree", "ll128")


def test_a_rule_for_another_node_or_rank_count_leaves_nccls_choice():
    rules = ["allreduce,0,4294967295,tree,simple,-1,4,-1", "allreduce,0,4294967295,tree,simple,-1,-1,32"]
    assert picked(plan(rules), AR, 64 * MiB) == picked(plan(None), AR, 64 * MiB)
    assert picked(plan(rules, nodes=4), AR, 64 * MiB, ranks=32)[:2] == ("tree", "simple")


def test_rules_for_several_pipelined_operations_or_registered_buffers_only_never_apply():
    # simulon's collectives are single operations on unregistered buffers
    rules = ["allreduce,0,4294967295,tree,simple,-1,-1,-1,4", "allreduce,0,4294967295,tree,simple,-1,-1,-1,-1,1"]
    assert picked(plan(rules), AR, 64 * MiB) == picked(plan(None), AR, 64 * MiB)
    single = ["allreduce,0,4294967295,tree,simple,-1,-1,-1,1,0"]
    assert picked(plan(single), AR, 64 * MiB)[:2] == ("tree", "simple")


def test_a_rules_channels_apply_unless_the_scenario_fixes_them():
    rule = ["allgather,0,4294967295,ring,simple,4,-1,-1"]
    assert picked(plan(rule), AG, 64 * MiB) == ("ring", "simple", 4)
    assert picked(plan(rule, channels=12), AG, 64 * MiB) == ("ring", "simple", 12)
    default = plan(["allgather,0,4294967295,ring,simple,-1,-1,-1"])
    assert picked(default, AG, 64 * MiB)[2] == CollectivePlan(default.topology, "ring", "simple").choose(
        AG, range(16), 64 * MiB).channels


@pytest.mark.parametrize("ctype,name", [(AG, "allgather"), (RS, "reducescatter")])
def test_a_gather_or_scatter_is_matched_on_its_whole_buffer_as_nccls_nbytes(ctype, name):
    # NCCL hands the plugin the larger of the send and receive buffers: a 16-rank all-gather of 64 MiB gathered
    # (4 MiB a rank) is 64 MiB to the plugin, as nccl-tests and simulon count its size
    below = plan([f"{name},0,{64 * MiB - 1},tree,simple,-1,-1,-1"])
    at = plan([f"{name},{64 * MiB},{64 * MiB},ring,ll,-1,-1,-1"])
    assert picked(below, ctype, 64 * MiB)[:2] != ("tree", "simple")
    assert picked(at, ctype, 64 * MiB)[:2] == ("ring", "ll")


def test_the_replay_of_a_ruled_choice_is_that_algorithm_and_protocol_run_fixed():
    dc = scenario(["allreduce,0,4294967295,tree,simple,-1,-1,-1"]).datacenter
    sizes = [MiB, 256 * MiB]
    ruled = collective_sweep(dc, AR, range(16), sizes, "auto")
    fixed = collective_sweep(scenario(None).datacenter, AR, range(16), sizes, "tree", protocol="simple")
    assert [(t.algorithm, t.protocol, t.time_us) for t in ruled] == [(t.algorithm, t.protocol, t.time_us)
                                                                    for t in fixed]


def test_a_rule_leaves_a_fixed_algorithm_alone():
    dc = scenario(["allreduce,0,4294967295,tree,simple,-1,-1,-1"]).datacenter
    choice = CollectivePlan(Topology.from_datacenter(dc), "ring", "simple").choose(AR, range(16), 64 * MiB)
    assert choice.algorithm == "ring"


def test_a_configuration_file_is_read_relative_to_the_scenario_and_kept_without_its_comments(tmp_path):
    (tmp_path / "nccl_tuner.conf").write_text(
        "# A3 Mega, two nodes\n\nallreduce,0,65536,tree,ll,8,2,-1\n"
        "allgather, 0, 4294967295, RING, LL128, -1, -1, -1, -1  # spaces and case as people write them\n")
    nccl = scenario("nccl_tuner.conf", base_dir=tmp_path).datacenter.network.nccl
    assert nccl.tuner_config == ("allreduce,0,65536,tree,ll,8,2,-1",
                                 "allgather, 0, 4294967295, RING, LL128, -1, -1, -1, -1")
    assert parse_rules("\n".join(nccl.tuner_config)) == (TunerRule(AR, 0, 65536, "tree", "ll", 8, 2),
                                                         TunerRule(AG, 0, 4294967295, "ring", "ll128"))


@pytest.mark.parametrize("line,problem", [
    ("allreduce,0,100,ring,simple,-1,-1", "has 7 columns, not 8 to 10"),
    ("alltoall,0,100,ring,simple,-1,-1,-1", "collective_type 'alltoall' is none of"),
    ("allreduce,0,100,butterfly,simple,-1,-1,-1", "algorithm 'butterfly' is not one of NCCL's"),
    ("allreduce,0,100,ring,ll256,-1,-1,-1", "protocol 'll256' is none of"),
    ("allreduce,0,1M,ring,simple,-1,-1,-1", "max_bytes '1M' is not an integer"),
    ("allreduce,100,10,ring,simple,-1,-1,-1", "min_bytes 100 and max_bytes 10 give no sizes"),
    ("allreduce,0,100,ring,simple,0,-1,-1", "channels 0 is neither -1"),
    ("allreduce,0,100,ring,simple,-1,-1,-1,-1,2", "regBuff 2 is none of -1, 0, 1"),
])
def test_a_bad_rule_is_refused_naming_the_field_the_line_and_the_column(line, problem):
    with pytest.raises(ConfigError) as refused:
        scenario(["allreduce,0,65536,tree,ll,-1,-1,-1", line])
    assert str(refused.value).startswith("dc.yaml: datacenter.network.nccl.tuner_config: ")
    assert f"line 2 ({line!r}): {problem}" in str(refused.value)


def test_a_missing_configuration_file_is_refused_on_the_command_line_with_status_2(tmp_path):
    path = tmp_path / "dc.yaml"
    path.write_text(yaml.safe_dump({"datacenter": {"from": "gcp-a3-mega", "cluster": {"num_nodes": 2},
                                                   "network": {"nccl": {"tuner_config": "missing.conf"}}}}))
    run = cli("collective", str(path), "--op", "allreduce", "--sizes", "1MiB", "--algorithm", "auto")
    assert run.returncode == 2, run.stderr
    assert "datacenter.network.nccl.tuner_config: cannot read 'missing.conf'" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_configuration_file_that_is_a_named_pipe_or_not_utf8_is_refused_not_read_without_end(tmp_path):
    fifo = tmp_path / "pipe.conf"  # a pipe was read to its end, which may never come (/dev/zero: until killed)
    os.mkfifo(fifo)
    def write() -> None:
        with contextlib.suppress(OSError):  # the reader gone (EPIPE): the refusal read nothing
            fifo.write_text("allreduce,0,65536,tree,ll,8,2,-1\n")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    with pytest.raises(ConfigError, match=r"tuner_config: cannot read 'pipe.conf' \(not a regular file\)"):
        scenario("pipe.conf", base_dir=tmp_path)
    os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # lets the writer's open return where nothing read
    writer.join(10)
    (tmp_path / "latin1.conf").write_bytes("# café\nallreduce,0,65536,tree,ll,8,2,-1\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"tuner_config: 'latin1.conf': not UTF-8 text \(byte 0xe9 at offset 5\)"):
        scenario("latin1.conf", base_dir=tmp_path)


def test_a_configuration_file_is_an_input_that_no_output_may_overwrite(tmp_path):
    (tmp_path / "nccl_tuner.conf").write_text("allreduce,0,65536,tree,ll,8,2,-1\n")
    (tmp_path / "dc.yaml").write_text(yaml.safe_dump({"datacenter": {
        "from": "gcp-a3-mega", "cluster": {"num_nodes": 2}, "network": {"nccl": {"tuner_config": "nccl_tuner.conf"}}}}))
    assert tmp_path / "nccl_tuner.conf" in files_read(tmp_path / "dc.yaml")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="allreducegthrsimpl0123456789-,# ", max_size=60))
def test_any_line_is_a_rule_or_refused_in_words(line):
    try:
        rule = parse_rule(line)
    except ValueError as refused:
        assert str(refused)
        return
    assert rule.min_bytes <= rule.max_bytes


def test_a_multi_node_nvlink_domain_is_one_node_to_the_plugin_as_to_nccl():
    # NCCL counts comm->nNodes by ring graphs: a GB200 NVL72 rack's 18 trays fuse into one node under MNNVL
    p = plan(["allreduce,0,4294967295,ring,ll128,-1,1,72"], nodes=18, template="gb200-nvl72")
    assert picked(p, AR, 64 * MiB, ranks=72)[:2] == ("ring", "ll128")
    assert picked(p, AR, 64 * MiB, ranks=72)[:2] != picked(plan(None, nodes=18, template="gb200-nvl72"), AR,
                                                            64 * MiB, ranks=72)[:2]


def test_the_collective_command_says_which_rule_chose_each_size_and_where_none_did(tmp_path):
    path = tmp_path / "dc.yaml"
    path.write_text(yaml.safe_dump({"datacenter": {"from": "gcp-a3-mega", "cluster": {"num_nodes": 2},
                                                   "network": {"nccl": {"protocols": "Simple,LL,LL128",
                                                                        "tuner_config": [
                                                       "allgather,0,65536,ring,ll,-1,-1,-1",
                                                       "allreduce,33554432,4294967295,tree,simple,-1,2,16"]}}}}))
    run = cli("collective", str(path), "--op", "allreduce", "--sizes", "16MiB,32MiB", "--algorithm", "auto", "--json")
    assert run.returncode == 0, run.stderr
    rows = json.loads(run.stdout)
    assert [(r["algorithm"], r["protocol"], r["tuner_rule"]) for r in rows] == [("ring", "ll128", None),
                                                                               ("tree", "simple", 2)]
    table = cli("collective", str(path), "--op", "allreduce", "--sizes", "32MiB", "--algorithm", "ring").stdout
    assert "none (algorithm fixed)" in table and "No rule" not in table
    missed = cli("collective", str(path), "--op", "allreduce", "--sizes", "16MiB", "--algorithm", "auto").stdout
    assert "No rule of network.nccl.tuner_config applied to these sizes over 16 ranks" in missed
    (tmp_path / "plain.yaml").write_text(yaml.safe_dump({"datacenter": {"from": "dgx-h100",
                                                                        "cluster": {"num_nodes": 2}}}))
    plain = cli("collective", str(tmp_path / "plain.yaml"), "--op", "allreduce", "--sizes", "32MiB", "--json")
    assert "tuner_rule" not in json.loads(plain.stdout)[0]  # a platform without rules reports as before
