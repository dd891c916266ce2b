"""Plausible ranges: every number of a scenario has bounds generously above every real system and model, and a
value outside them is bad input (ConfigError in-process, exit 2 from the CLI) naming the field and the value
given, where it used to give NaN results, allocate tebibytes or be silently accepted."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import ROOT, cli, seed_dict
from simulon.cli.app import parse_sizes
from simulon.collective.nccl import MAX_CHANNELS
from simulon.config.common import MAX_GPUS, MAX_LAYERS, MAX_MICROBATCHES, MAX_SEQUENCE, MAX_VOCAB
from simulon.config.loading import ConfigError, load_scenario, parse_scenario
from simulon.config.units import MAX_BANDWIDTH, MAX_LATENCY, MAX_MEMORY_GB, MIN_BANDWIDTH


def with_value(path: str, value: object) -> dict:
    """The seed scenario with the field at dotted `path` set to `value`."""
    data = seed_dict()
    *parents, leaf = path.split(".")
    block = data
    for key in parents:
        block = block[key]
    block[leaf] = value
    return data


def refusal(path: str, value: object) -> str:
    with pytest.raises(ConfigError) as info:
        parse_scenario(with_value(path, value), "seed.yaml")
    return str(info.value)


# --- the issue's examples ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "value", "shown"), [
    ("datacenter.network.scale_out.nic.latency", 1e308, "1e+308 s is more than 1 s"),
    ("collective.num_channels", 10**15, "1000000000000000 is more than 64 channels, NCCL's maximum"),
    ("workload.model.num_layers", 10**15, "1000000000000000 is more than 10,000 layers"),
    ("workload.training.sequence_length", 10**15, "1000000000000000 is more than 16,777,216 tokens"),
])
def test_absurd_values_of_the_issue_are_refused_naming_field_and_value(path, value, shown):
    assert refusal(path, value) == f"seed.yaml: {path}: {shown}"


def test_a_latency_of_1e308_is_refused_by_the_cli_instead_of_giving_nan(tmp_path: Path):
    scenario = tmp_path / "huge.yaml"
    scenario.write_text(yaml.safe_dump(with_value("datacenter.network.scale_out.nic.latency", 1e308)))
    proc = cli("simulate", str(scenario), cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"error: {scenario}: datacenter.network.scale_out.nic.latency: 1e+308 s is more than 1 s"]


@pytest.mark.parametrize(("option", "value", "expected"), [
    ("--sizes", "1e30", "error: --sizes: '1e30': 1e+30 B is more than 1e+18 B (an exabyte)"),
    ("--channels", str(10**15), "error: --channels: 1000000000000000 is more than 64 channels"),
])
def test_collective_options_respect_the_same_bounds(tmp_path: Path, option, value, expected):
    proc = cli("collective", str(ROOT / "examples" / "scenario.yaml"), option, value, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines()[0].startswith(expected), proc.stderr


def test_a_cluster_of_more_gpus_than_the_bound_is_refused_at_its_node_count():
    nodes = MAX_GPUS // 4 + 1
    assert refusal("datacenter.cluster.num_nodes", nodes).endswith(
        f"datacenter.cluster.num_nodes: {nodes} nodes x 4 GPUs = {nodes * 4} is more than 1,000,000 GPUs")


@pytest.mark.parametrize(("path", "value", "expected"), [
    ("collective.num_channels", 0, "must be at least 1, got 0"),
    ("workload.model.num_layers", -2, "must be at least 1, got -2"),
    ("datacenter.network.scale_out.nic.speed", 0, "must be positive, got 0 B/s"),
    ("datacenter.node.gpu.memory_bandwidth", 1e-300, "must be at least 1e+06 B/s, got 1e-300 B/s"),
    ("datacenter.node.gpu.memory_capacity_gb", float("nan"), "must be positive, got nan GB"),
    ("datacenter.network.scale_out.nic.latency", float("inf"), "must be a finite number"),
])
def test_values_below_a_range_are_refused_with_the_value(path, value, expected):
    assert expected in refusal(path, value)


# --- the bounds as a property -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Bound:
    """A field of the seed scenario free of consistency checks within [low, high] (or (low, high] when
    `positive`), its integer values a multiple of `step` (the seed's pp = 2 splits its layers)."""

    path: str
    low: float
    high: float
    integer: bool = True
    positive: bool = False
    step: int = 1

    def inside(self) -> st.SearchStrategy:
        if self.integer:
            return st.integers(-(-int(self.low) // self.step), int(self.high) // self.step).map(lambda k: k * self.step)
        return st.floats(self.low, self.high, exclude_min=self.positive)

    def outside(self) -> st.SearchStrategy:
        if self.integer:
            return st.integers(int(self.high) + 1, 10**30) | st.integers(-(10**6), int(self.low) - 1)
        below = st.floats(-1e308, self.low, exclude_max=not self.positive)
        return st.floats(self.high, 1e308, exclude_min=True) | below


BOUNDS = [
    Bound("datacenter.network.scale_out.nic.latency", 0.0, MAX_LATENCY, integer=False),
    Bound("datacenter.network.scale_up.switch.latency", 0.0, MAX_LATENCY, integer=False),
    Bound("datacenter.network.scale_out.nic.speed", MIN_BANDWIDTH, MAX_BANDWIDTH, integer=False),
    Bound("datacenter.network.scale_up.switch.port_speed", MIN_BANDWIDTH, MAX_BANDWIDTH, integer=False),
    Bound("datacenter.node.gpu.memory_bandwidth", MIN_BANDWIDTH, MAX_BANDWIDTH, integer=False),
    Bound("datacenter.node.gpu.memory_capacity_gb", 0.0, MAX_MEMORY_GB, integer=False, positive=True),
    Bound("datacenter.cluster.num_nodes", 1, MAX_GPUS // 4),
    Bound("collective.num_channels", 1, MAX_CHANNELS),
    Bound("workload.model.num_layers", 1, MAX_LAYERS, step=2),
    Bound("workload.model.vocab_size", 1, MAX_VOCAB),
    Bound("workload.training.sequence_length", 1, MAX_SEQUENCE),
]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(BOUNDS).flatmap(lambda b: st.tuples(st.just(b), b.inside())))
def test_every_value_inside_its_bounds_still_parses(bound_value):
    bound, value = bound_value
    parse_scenario(with_value(bound.path, value), "seed.yaml")


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(BOUNDS).flatmap(lambda b: st.tuples(st.just(b), b.outside())))
def test_every_value_outside_its_bounds_is_refused_naming_the_field(bound_value):
    bound, value = bound_value
    assert refusal(bound.path, value).startswith(f"seed.yaml: {bound.path}: ")


# --- what ships stays inside ------------------------------------------------------------------------------------

@pytest.mark.parametrize("example", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_example_is_inside_the_bounds(example: Path):
    load_scenario(example)


def test_a_batch_of_more_micro_batches_than_the_bound_is_refused_at_the_global_batch():
    data = with_value("workload.training.global_batch_size", 2 * MAX_MICROBATCHES)
    del data["workload"]["parallelism"]["num_microbatches"]
    with pytest.raises(ConfigError) as info:
        parse_scenario(data, "seed.yaml")
    assert str(info.value) == (f"seed.yaml: workload.training.global_batch_size: {2 * MAX_MICROBATCHES} makes "
                               f"{2 * MAX_MICROBATCHES} micro-batches of micro_batch_size*dp = 1, more than "
                               f"{MAX_MICROBATCHES:,} micro-batches")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 2**40), min_size=1, max_size=6, unique=True), st.data())
def test_collective_sizes_are_each_given_once(sizes, data):
    """A sweep's values are refused when repeated; --sizes ran a repeated size twice, printing its row twice."""
    assert parse_sizes(",".join(map(str, sizes))) == [float(s) for s in sizes]
    again = data.draw(st.sampled_from(sizes))
    texts = [str(s) for s in sizes] + [f"{again / 1024}KiB"]
    with pytest.raises(ConfigError) as refused:
        parse_sizes(",".join(texts))
    assert str(refused.value) == (f"--sizes: '{again / 1024}KiB' is {again:,} B again (as '{again}'); give each "
                                  "size once")
