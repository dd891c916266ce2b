"""What a scenario's author reads when a value is wrong: the field, the value as written in YAML and what is
expected (config.loading.problem, config.errors.shown), the settings a sharding or key under another tool's name
is here, the template file that wrote a value where a `from:` included it, and numbers read as YAML 1.2 writes
them."""

from __future__ import annotations

import copy
import math
import re

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from helpers import SEED_SCENARIO, merge, seed_dict
from simulon.config.common import alphanumeric
from simulon.config.errors import ConfigError, parse_yaml, shown
from simulon.config.frameworks import WELL_KNOWN_SHARDINGS, sharding_synonym
from simulon.config.loading import (
    SHARDING_KEYS,
    WELL_KNOWN_KEYS,
    block_keys,
    key_homes,
    key_synonym,
    load_scenario,
    parse_scenario,
)

SEED = seed_dict()


def message_for(path: tuple[str, ...], value) -> str:
    data = copy.deepcopy(SEED)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ConfigError) as info:
        parse_scenario(data, "s.yaml")
    return str(info.value)


@pytest.mark.parametrize(("text", "value"), [
    ("8e1", 80.0), ("1e9", 1e9), ("1.5E-3", 0.0015), ("-2e+2", -200.0), ("1_000e3", 1e6), ("1.0e+9", 1e9),
])
def test_scientific_notation_reads_as_a_number_as_yaml_1_2_writes_it(text, value):
    assert parse_yaml(f"x: {text}") == {"x": value}


@pytest.mark.parametrize("text", ["e5", "1e", "400Gbps", "5us", "1e9x", "1e3e3"])
def test_text_that_only_starts_like_a_number_stays_text(text):
    assert isinstance(parse_yaml(f"x: {text}")["x"], str)


def test_shipped_loader_is_left_as_pyyaml_defines_it():
    assert yaml.safe_load("x: 8e1") == {"x": "8e1"}


@pytest.mark.parametrize(("path", "value", "expected"), [
    (("workload", "model", "num_layers"), "abc", "num_layers: expected a whole number, got the text 'abc'"),
    (("workload", "model", "num_layers"), 3.5, "num_layers: expected a whole number, got 3.5"),
    (("workload", "model", "num_layers"), 32.0, "num_layers: expected a whole number, got 32.0 (YAML reads it as a "
     "decimal; a whole number is written in digits only, without a point or an exponent: 32)"),
    (("workload", "model", "num_layers"), "8e1", "got the text '8e1' (write the number without quotes)"),
    (("workload", "model", "num_layers"), None, "num_layers: expected a whole number, got nothing (null)"),
    (("workload", "model", "num_layers"), True, "num_layers: expected a whole number, got true"),
    (("workload", "model", "num_layers"), [1, 2], "got a list [1, 2]"),
    (("datacenter", "cluster"), None, "datacenter.cluster: expected a mapping of fields, got nothing (null)"),
    (("datacenter", "node", "gpu"), 5, "datacenter.node.gpu: expected a mapping of fields, got 5"),
    (("datacenter", "node", "gpu", "memory_capacity_gb"), "lots", "expected a number, got the text 'lots'"),
    (("collective", "algorithm"), 5, "collective.algorithm: expected text, got 5"),
    (("workload", "parallelism", "pipeline_schedule"), "zz",
     "expected '1f1b', 'interleaved_1f1b', 'zb_h1', 'zb_v', 'dualpipe' or 'dualpipev', got the text 'zz'"),
    (("datacenter", "network", "scale_out", "nic", "speed"), None,
     "nic.speed: expected a bandwidth like '400Gbps', got nothing (null)"),
])
def test_a_wrong_value_is_named_with_what_was_expected(path, value, expected):
    message = message_for(path, value)
    assert message.startswith("s.yaml: " + ".".join(path[:-1])), message
    assert expected in message, message
    for internal in ("instance of", "NoneType", "Input should be", "Spec"):
        assert internal not in message, message


@given(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(), st.lists(st.integers()),
                 st.dictionaries(st.text(), st.integers())))
def test_a_shown_value_is_one_short_line(value):
    text = shown(value)
    assert len(text) <= 80
    assert "\n" not in text.replace("\\n", "")


@pytest.mark.parametrize(("value", "expected"), [
    (None, "nothing (null)"), (True, "true"), (False, "false"), ("x", "the text 'x'"), (3, "3"),
    (math.inf, "inf"), ({"a": 1, "b": 2}, "a mapping {a: ..., b: ...}"), ([1], "a list [1]"),
])
def test_values_are_shown_as_yaml_writes_them(value, expected):
    assert shown(value) == expected


@pytest.mark.parametrize("text", ["", "\n  \n", "# a comment only\n"])
def test_an_empty_file_is_called_empty(tmp_path, text):
    empty = tmp_path / "s.yaml"
    empty.write_text(text)
    with pytest.raises(ConfigError) as refused:
        load_scenario(empty)
    expected = f"{empty}: (top level): expected a mapping with a 'datacenter' block, got an empty file"
    assert str(refused.value) == expected


def test_none_passed_by_python_is_called_nothing_not_an_empty_file():
    with pytest.raises(ConfigError) as refused:
        parse_scenario(None, "<scenario>")
    assert str(refused.value) == ("<scenario>: (top level): expected a mapping with a 'datacenter' block, "
                                  "got nothing (null)")


@pytest.mark.parametrize(("path", "value", "suggested"), [
    (("workload", "model"), "llama", "did you mean llama-2-7b or llama-3-8b or llama-2-13b?"),
    (("datacenter", "node", "gpu"), {"from": "H1OO"}, "did you mean h100-sxm?"),
])
def test_an_unknown_template_name_suggests_the_closest_shipped_ones(path, value, suggested):
    message = message_for(path, value)
    assert suggested in message and "(shipped: " in message, message


def test_a_gpu_named_like_no_template_and_missing_custom_fields_is_called_a_typo_not_a_missing_field():
    message = message_for(("datacenter", "node", "gpu"), {"name": "H1OO", "memory_capacity_gb": 80.0})
    assert "datacenter.node.gpu: unknown gpu template 'H1OO'; did you mean h100-sxm?" in message, message
    assert "a custom gpu needs memory_bandwidth, peak_tflops" in message, message
    assert "required field is missing" not in message


def test_a_custom_gpu_given_whole_under_a_new_name_still_loads():
    gpu = {"name": "my-accelerator", "memory_capacity_gb": 96.0, "memory_bandwidth": "4TBps",
           "peak_tflops": {"bf16": 1000.0, "fp8": 2000.0}}
    data = copy.deepcopy(SEED)
    data["datacenter"]["node"]["gpu"] = gpu
    assert parse_scenario(data, "s.yaml").datacenter.node.gpu.name == "my-accelerator"


def test_a_key_given_twice_in_one_mapping_is_refused_naming_the_key_and_both_lines():
    with pytest.raises(yaml.YAMLError) as info:
        parse_yaml("parallelism:\n  tp: 4\n  pp: 1\n  tp: 2\n")
    assert "duplicate key 'tp' (first at line 2)" in str(info.value)
    assert info.value.problem_mark.line + 1 == 4


def test_a_merged_mapping_s_keys_may_still_be_overridden():
    assert parse_yaml("base: &b {tp: 4}\nrun:\n  <<: *b\n  tp: 2\n")["run"] == {"tp": 2}


def test_a_duplicate_key_in_a_scenario_file_is_one_located_message(tmp_path):
    from simulon.config.loading import load_scenario

    path = tmp_path / "dup.yaml"
    path.write_text(SEED_SCENARIO.read_text().replace("    tp: 2\n", "    tp: 4\n    tp: 2\n", 1))
    with pytest.raises(ConfigError, match=r"dup.yaml: \(YAML\) at line \d+, column 5: duplicate key 'tp'"):
        load_scenario(path)


@pytest.mark.parametrize("field", ["protocol", "algorithm"])
def test_collective_names_are_read_in_any_case_as_nccl_s_lists_are(field):
    data = copy.deepcopy(SEED)
    data["collective"][field] = {"protocol": "LL", "algorithm": "Ring"}[field]
    assert getattr(parse_scenario(data, "s.yaml").collective, field) == {"protocol": "ll", "algorithm": "ring"}[field]


# --- well-known names: ZeRO stages, FSDP strategies, Megatron-LM's flags ------------------------------

def _parallelism_message(key: str, value) -> str:
    data = copy.deepcopy(SEED)
    data["workload"]["parallelism"][key] = value
    with pytest.raises(ConfigError) as info:
        parse_scenario(data, "s.yaml")
    return str(info.value)


@pytest.mark.parametrize(("key", "value", "hint"), [
    ("fsdp", "zero2", "(ZeRO-2 is fsdp: shard_grad_op)"),
    ("fsdp", "ZeRO-3", "(ZeRO-3 is fsdp: full_shard)"),
    ("fsdp", "zero1", "(ZeRO-1 is fsdp: none and distributed_optimizer: true)"),
    ("fsdp", "ddp", "(DDP is fsdp: none and distributed_optimizer: false)"),
    ("distributed_optimizer", "zero3", "(ZeRO-3 is fsdp: full_shard)"),
])
def test_a_sharding_field_given_a_well_known_name_is_told_the_settings_that_are_it(key, value, hint):
    message = _parallelism_message(key, value)
    assert message.startswith(f"s.yaml: workload.parallelism.{key}: expected "), message
    assert message.endswith(f"got the text {value!r} {hint}"), message


@pytest.mark.parametrize(("key", "value", "hint"), [
    ("sharding", "full_shard", "(sharding is set by fsdp and distributed_optimizer; FSDP's FULL_SHARD is fsdp: "
                               "full_shard)"),
    ("zero_stage", 3, "(sharding is set by fsdp and distributed_optimizer; ZeRO-3 is fsdp: full_shard)"),
    ("sharding_strategy", "SHARD_GRAD_OP", "(sharding is set by fsdp and distributed_optimizer; FSDP's "
                                           "SHARD_GRAD_OP is fsdp: shard_grad_op)"),
    ("sharding", "banana", "(sharding is set by fsdp: none, full_shard or shard_grad_op and distributed_optimizer: "
                           "true or false)"),
])
def test_a_sharding_under_another_tool_s_key_names_the_keys_that_set_it(key, value, hint):
    assert _parallelism_message(key, value) == f"s.yaml: workload.parallelism.{key}: unknown key {hint}"


@pytest.mark.parametrize(("key", "meant"), [
    ("etp", "expert_tensor_parallel"), ("expert-tensor-parallel-size", "expert_tensor_parallel"),
    ("--expert-tensor-parallel-size", "expert_tensor_parallel"), ("tensor_model_parallel_size", "tp"),
    ("pipeline-model-parallel-size", "pp"), ("use_distributed_optimizer", "distributed_optimizer"),
])
def test_a_parallelism_key_under_megatron_s_flag_name_suggests_the_key_it_is_here(key, meant):
    assert _parallelism_message(key, 2) == f"s.yaml: workload.parallelism.{key}: unknown key (did you mean {meant!r}?)"


@st.composite
def spelled(draw, name: str) -> str:
    """`name` as people write it: any case, words joined by '-', '_' or nothing."""
    joined = re.sub(r"[-_]", draw(st.sampled_from(["-", "_", ""])), name)
    return "".join(c.upper() if draw(st.booleans()) else c.lower() for c in joined)


@given(st.sampled_from(sorted(WELL_KNOWN_SHARDINGS)).flatmap(spelled))
def test_every_setting_a_sharding_hint_suggests_is_accepted_by_the_schema_and_is_that_sharding(written):
    message = _parallelism_message("sharding", written)
    label, settings = sharding_synonym(written)
    suggested = message.rpartition(f"{label} is ")[2].removesuffix(")")
    applied = {key: yaml.safe_load(value) for key, value in re.findall(r"(\w+): (\w+)", suggested)}
    assert applied == settings, message
    data = copy.deepcopy(SEED)
    data["workload"]["parallelism"].update(applied)
    parallelism = parse_scenario(data, "s.yaml").workload.parallelism
    assert {key: getattr(parallelism, key) for key in applied} == applied


MOE_SEED = merge(SEED, {"workload": {"model": {"moe": {"num_experts": 8, "top_k": 2,
                                                         "expert_ffn_hidden_size": 11008}}}})
"""The seed scenario with a mixture of experts, so that each block a well-known key's target lives in is there."""


def _message_in(block: str, key: str, value) -> str:
    """The message for MOE_SEED with `key: value` written in `block` (a dotted path)."""
    data = copy.deepcopy(MOE_SEED)
    node = data
    for part in block.split("."):
        node = node[part]
    node[key] = value
    with pytest.raises(ConfigError) as info:
        parse_scenario(data, "s.yaml")
    return str(info.value)


def _home(key: str) -> str:
    """The block a key lives in (the shallowest, for a key two blocks hold: workload.model's num_heads, not
    its mamba block's)."""
    return min(key_homes()[key], key=lambda path: path.count("."))


@given(st.sampled_from(sorted(WELL_KNOWN_KEYS)).flatmap(spelled))
def test_every_key_a_key_hint_suggests_is_a_key_of_the_block_it_is_written_in(written):
    meant = key_synonym(written)
    block = _home(meant[0])
    assert set(meant) <= set(block_keys(block))
    hint = f"(did you mean {meant[0]!r}?)" if len(meant) == 1 else f"(sharding is set by {meant[0]}"
    message = _message_in(block, written, 2)
    assert message.startswith(f"s.yaml: {block}.{written}: unknown key {hint}"), message


@given(st.sampled_from(sorted(k for k, keys in WELL_KNOWN_KEYS.items() if keys != SHARDING_KEYS)).flatmap(spelled))
def test_a_key_under_another_tool_s_name_in_the_wrong_block_is_told_the_key_and_where_it_belongs(written):
    meant = key_synonym(written)[0]
    block = "workload.parallelism" if _home(meant) != "workload.parallelism" else "workload.training"
    message = _message_in(block, written, 2)
    assert f"unknown key (did you mean {meant!r}? it belongs in {_home(meant)}" in message, message


def test_no_well_known_name_is_itself_a_key_of_a_scenario():
    keys = {alphanumeric(key) for key in key_homes()}
    assert [name for name in WELL_KNOWN_KEYS if alphanumeric(name) in keys] == []


@pytest.mark.parametrize(("block", "key", "meant"), [
    ("workload.training", "precision", "dtype"), ("workload.training", "gradient_accumulation_steps", None),
    ("workload.model", "num_hidden_layers", "num_layers"), ("workload.model", "intermediate_size", "ffn_hidden_size"),
    ("workload.model.moe", "num_experts_per_tok", "top_k"), ("workload.training", "mbs", "micro_batch_size"),
])
def test_a_training_loop_s_or_a_huggingface_config_s_name_of_a_key_suggests_the_key(block, key, meant):
    message = _message_in(block, key, 2)
    if meant is None:  # a micro-batch count is workload.parallelism's
        assert message.endswith("unknown key (did you mean 'num_microbatches'? it belongs in workload.parallelism)")
    else:
        assert message == f"s.yaml: {block}.{key}: unknown key (did you mean {meant!r}?)"


def test_a_node_count_written_on_the_datacenter_is_told_the_cluster_block_holds_it():
    message = _message_in("datacenter", "nodes", 2)
    assert message == ("s.yaml: datacenter.nodes: unknown key (did you mean 'num_nodes'? it belongs in "
                       "datacenter.cluster or datacenter.node_groups)")


# --- values from included template files are named in those files ------------------------------------

def _write(path, data) -> str:
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _gpu_scenario_error(folder, gpu) -> str:
    """The message for the seed scenario, written in `folder`, with `gpu` as its GPU block."""
    data = copy.deepcopy(SEED)
    data["datacenter"]["node"]["gpu"] = gpu
    with pytest.raises(ConfigError) as info:
        load_scenario(_write(folder / "tr.yaml", data))
    return str(info.value)


def test_a_wrong_value_in_an_included_template_file_is_named_in_that_file(tmp_path):
    gpu = _write(tmp_path / "mygpu_bad.yaml", {"from": "h100-sxm", "memory_capacity_gb": "lots"})
    assert _gpu_scenario_error(tmp_path, {"from": "mygpu_bad.yaml"}) == (
        f"{gpu} (included by {tmp_path / 'tr.yaml'} at datacenter.node.gpu): memory_capacity_gb: expected a number, "
        "got the text 'lots'")


def test_an_unknown_key_in_an_included_file_comes_before_the_fields_it_leaves_missing(tmp_path):
    gpu = _write(tmp_path / "mygpu.yaml", {"name": "x", "bogus_key": 1})
    assert _gpu_scenario_error(tmp_path, {"from": "mygpu.yaml"}) == (
        f"{gpu} (included by {tmp_path / 'tr.yaml'} at datacenter.node.gpu): bogus_key: unknown key "
        "(and 3 more problems)")


def test_a_field_no_file_sets_is_missing_from_the_scenario_s_block(tmp_path):
    _write(tmp_path / "partial.yaml", {"name": "x", "memory_capacity_gb": 80})
    assert _gpu_scenario_error(tmp_path, {"from": "partial.yaml"}).startswith(
        f"{tmp_path / 'tr.yaml'}: datacenter.node.gpu.memory_bandwidth: required field is missing")


def test_a_template_file_included_by_a_datacenter_file_is_named_with_where_each_includes_the_next(tmp_path):
    gpu = _write(tmp_path / "gpu.yaml", {"from": "h100-sxm", "tdp_w": "hot"})
    dc = _write(tmp_path / "dc.yaml", {"from": "dgx-h100", "node": {"gpu": {"from": "gpu.yaml"}}})
    data = {**copy.deepcopy(SEED), "datacenter": {"from": "dc.yaml", "cluster": {"num_nodes": 1}}}
    with pytest.raises(ConfigError) as info:
        load_scenario(_write(tmp_path / "s.yaml", data))
    assert str(info.value) == (f"{gpu} (included by {dc} at node.gpu, included by {tmp_path / 's.yaml'} at "
                               "datacenter): tdp_w: expected a number, got the text 'hot'")


GPU_FIELDS = {"memory_capacity_gb": ("memory_capacity_gb",), "tdp_w": ("tdp_w",),
              "memory_bandwidth": ("memory_bandwidth",), "peak_tflops.bf16": ("peak_tflops", "bf16")}
WRITERS = ("scenario", "mid.yaml", "base.yaml")
"""Who may write a GPU field, highest first: the scenario's block, the file it starts from, the file that one starts
from (which starts from a shipped template)."""


def _nested(path: tuple[str, ...], value) -> dict:
    return {path[0]: _nested(path[1:], value) if len(path) > 1 else value}


@given(st.sampled_from(sorted(GPU_FIELDS)), st.sets(st.sampled_from(WRITERS), min_size=1), st.booleans())
def test_a_wrong_value_is_named_where_the_highest_file_that_writes_it_does(tmp_path_factory, field, writers,
                                                                           shorthand):
    folder = tmp_path_factory.mktemp("included")
    blocks = {writer: _nested(GPU_FIELDS[field], "lots") if writer in writers else {} for writer in WRITERS}
    base = _write(folder / "base.yaml", {"from": "h100-sxm", **blocks["base.yaml"]})
    mid = _write(folder / "mid.yaml", {"from": "base.yaml", **blocks["mid.yaml"]})
    scenario = str(folder / "tr.yaml")
    gpu = "mid.yaml" if shorthand and not blocks["scenario"] else {"from": "mid.yaml", **blocks["scenario"]}
    message = _gpu_scenario_error(folder, gpu)
    expected = {"scenario": f"{scenario}: datacenter.node.gpu.{field}: ",
                "mid.yaml": f"{mid} (included by {scenario} at datacenter.node.gpu): {field}: ",
                "base.yaml": f"{base} (included by {mid}, included by {scenario} at datacenter.node.gpu): {field}: "}
    assert message.startswith(expected[next(w for w in WRITERS if w in writers)]), message


@pytest.mark.parametrize(("text", "value"), [
    ("2:1", "2:1"), ("1:20.5", "1:20.5"), ("010", 10), ("0o10", 8), ("0x1f", 31), ("0b11", "0b11"), ("yes", "yes"),
    ("off", "off"), ("True", True), ("1_000", 1000), (".inf", float("inf")),
])
def test_booleans_and_numbers_are_read_as_yaml_1_2_writes_them(text, value):
    """YAML 1.1 read `2:1` as the base-60 number 121 (an oversubscription as vendors write it became 121:1) and
    `010` as octal eight."""
    assert parse_yaml(f"x: {text}") == {"x": value}


@given(st.dates(), st.booleans())
def test_a_date_or_an_equals_sign_is_text_as_in_yaml_1_2_and_a_model_may_be_named_so(day, with_time):
    """YAML 1.1's timestamp made `2024-01-01` a Python date, so that `model: {name: 2024-01-01}` was refused as
    'expected text, got datetime.date(2024, 1, 1)'; its value key `=` had no constructor ('could not determine a
    constructor for the tag'). YAML 1.2's core schema reads both as text."""
    text = f"{day.isoformat()} 10:00:00" if with_time else day.isoformat()
    assert parse_yaml(f"x: {text}\ny: =") == {"x": text, "y": "="}
    data = seed_dict()
    data["workload"]["model"]["name"] = parse_yaml(f"name: {text}")["name"]
    assert parse_scenario(data, "s.yaml").workload.model.name == text


@pytest.mark.parametrize(("key", "shown_as"), [("1", "1"), ("true", "true"), ("~", "nothing (null)"), ("1.5", "1.5")])
def test_a_key_that_is_no_text_is_refused_naming_its_block_in_plain_words(key, shown_as):
    """A number, yes/no or null as a key was 'workload.parallelism[1]: Keys should be strings' (pydantic's words, the
    key shown as a list index; `true` as [1] too, `~` as '.None')."""
    data = seed_dict()
    data["workload"]["parallelism"].update(parse_yaml(f"{key}: 2"))
    with pytest.raises(ConfigError) as refused:
        parse_scenario(data, "s.yaml")
    assert str(refused.value) == (
        f"s.yaml: workload.parallelism: expected keys of text (field names), got the key {shown_as}")


def test_an_unquoted_ratio_is_an_oversubscription_and_a_number_too_long_to_be_a_count_is_refused():
    topology = parse_scenario({"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 4}, "network": {
        "scale_out": {"topology": parse_yaml("{from: spine-leaf, oversubscription: 2:1}")}}}}, "s.yaml")
    assert topology.datacenter.network.scale_out.topology.oversubscription == 2.0
    with pytest.raises(yaml.YAMLError, match="a whole number of 5,000 digits"):
        parse_yaml("x: " + "9" * 5000)


@pytest.mark.parametrize("text", ["datacenter:\n\tcluster: {num_nodes: 1}\n",
                                  "datacenter:\n  cluster:\n    num_nodes:\t1\n"])
def test_a_tab_in_yaml_is_refused_saying_to_use_spaces(tmp_path, text):
    (tmp_path / "tab.yaml").write_text(text)
    with pytest.raises(ConfigError, match=r"found character '\\t' that cannot start any token \(a tab: indent with "
                                          r"spaces, and put a space, not a tab, after a key's colon\)"):
        load_scenario(tmp_path / "tab.yaml")
