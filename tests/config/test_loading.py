"""What a scenario's author reads when a value is wrong: the field, the value as written in YAML and what is
expected (config.loading.problem, config.errors.shown), and numbers read as YAML 1.2 writes them."""

from __future__ import annotations

import copy
import math

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from helpers import SEED_SCENARIO, seed_dict
from simulon.config.errors import ConfigError, parse_yaml, shown
from simulon.config.loading import parse_scenario

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
    (("workload", "model", "num_layers"), 32.0, "num_layers: expected a whole number, got 32.0 (write it as 32)"),
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


def test_an_empty_file_is_called_empty():
    with pytest.raises(ConfigError, match="got an empty file"):
        parse_scenario(None, "s.yaml")


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
