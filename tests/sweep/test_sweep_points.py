"""A sweep's points: `--set` axes read as YAML values, paths from the scenario's root or inside one block, the
cartesian product, every point validated by the scenario's own models before anything runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from simulon.config.errors import ConfigError
from simulon.sweep.points import Axis, full_path, parse_axis, sweep_points


def test_values_are_read_as_yaml_scalars():
    assert parse_axis("cluster.num_nodes=1,2,4") == Axis(("datacenter.cluster.num_nodes",), ((1,), (2,), (4,)))
    assert parse_axis("network.scale_out.nic.speed=200Gbps, 400Gbps").values == (("200Gbps",), ("400Gbps",))
    assert parse_axis("parallelism.sequence_parallel=true,false").values == ((True,), (False,))


def test_linked_fields_move_together_as_one_axis():
    axis = parse_axis("cluster.num_nodes+training.global_batch_size=1:16,2:32")
    assert axis.paths == ("datacenter.cluster.num_nodes", "workload.training.global_batch_size")
    assert axis.values == ((1, 16), (2, 32)) and axis.name == "+".join(axis.paths)


def test_a_quoted_value_holding_commas_is_one_step_such_as_a_megatron_layout():
    axis = parse_axis('parallelism.pipeline_layout="Et*3|(tt|)*29,m|L",\'Et*2,tt|t*4L\', Et*16|t*16L')
    assert axis.values == (("Et*3|(tt|)*29,m|L",), ("Et*2,tt|t*4L",), ("Et*16|t*16L",))
    assert parse_axis('parallelism.pipeline_layout=(t,t|)*2L,E').values == (("(t,t|)*2L",), ("E",))
    linked = parse_axis('parallelism.pp+parallelism.pipeline_layout=2:"Et*15,t|t*16L",4:"a:b"')
    assert linked.values == ((2, "Et*15,t|t*16L"), (4, "a:b"))
    assert parse_axis("model.name=it's,x").values == (("it's",), ("x",))  # a quote inside a value quotes nothing


@given(st.lists(st.text(st.sampled_from("Et|,()*2L"), min_size=1, max_size=12), min_size=1, max_size=4, unique=True))
def test_any_double_quoted_values_read_back_as_themselves(values):
    axis = parse_axis("parallelism.pipeline_layout=" + ",".join(f'"{v}"' for v in values))
    assert axis.values == tuple((v,) for v in values)


@given(st.lists(st.text(st.characters(codec="ascii", categories=("L", "N", "P", "S", "Zs")), max_size=12),
                min_size=1, max_size=4, unique=True), st.sampled_from(["double", "single"]))
def test_any_value_quoted_as_yaml_quotes_it_reads_back_as_itself(values, style):
    """A quote inside a quoted value, escaped as YAML escapes it (\\" in double quotes, '' in single ones), ended the
    value there: --set "model.name='Bob''s, v2',x" was cut at its comma and refused as YAML it could not read."""
    quoted = [json.dumps(v) if style == "double" else "'" + v.replace("'", "''") + "'" for v in values]
    assert parse_axis("model.name=" + ",".join(quoted)).values == tuple((v,) for v in values)
    linked = parse_axis("parallelism.tp+model.name=" + ",".join(f"{n}:{q}" for n, q in enumerate(quoted, 1)))
    assert linked.values == tuple((n, v) for n, v in enumerate(values, 1))


def test_a_quoted_layout_is_swept_into_each_points_scenario(scenario):
    points = sweep_points(scenario, [parse_axis('parallelism.pipeline_layout="Et,t|t,tL","Et|tttL"')])
    assert [p.scenario.workload.parallelism.pipeline_layout for p in points] == ["Et,t|t,tL", "Et|tttL"]


@pytest.mark.parametrize(("path", "full"), [
    ("cluster.num_nodes", "datacenter.cluster.num_nodes"),
    ("parallelism.tp", "workload.parallelism.tp"),
    ("algorithm", "collective.algorithm"),
    ("workload.training.micro_batch_size", "workload.training.micro_batch_size"),
    ("nonsense.field", "nonsense.field"),  # left for the validation to name
])
def test_a_path_inside_one_block_is_completed_from_the_scenarios_root(path, full):
    assert full_path(path) == full


@pytest.mark.parametrize(("text", "expected"), [
    ("cluster.num_nodes", "expected PATH=VALUE"),
    ("cluster.num_nodes=", "expected PATH=VALUE"),
    ("=1,2", "expected PATH=VALUE"),
    ("a+b=1:2,3", "'3' has 1 values for 2 fields"),
    ("cluster.num_nodes=1,1", "a value appears twice"),
    ("cluster.num_nodes=[1", "cannot read"),
    ("cluster.num_nodes=1,,2", "expected a number, text or true/false"),
    ("parallelism.layers_per_stage=[15,17],[16,16]",
     "'[15,17]' is a list, and a sweep sets one value a step: sweep its entries by index "
     "(workload.parallelism.layers_per_stage.0=...)"),
    ("model.moe={num_experts: 8},x", "'{num_experts: 8}' is a mapping, and a sweep sets one value a step: sweep its "
                                     "fields (workload.model.moe.FIELD=...)"),
])
def test_a_malformed_set_is_refused_naming_it(text, expected):
    with pytest.raises(ConfigError, match="--set") as exc:
        parse_axis(text)
    assert expected in str(exc.value)


@given(st.lists(st.integers(1, 10**6), min_size=1, max_size=8, unique=True))
def test_any_list_of_whole_numbers_reads_back_as_itself(values):
    assert parse_axis("cluster.num_nodes=" + ",".join(map(str, values))).values == tuple((v,) for v in values)


def test_the_points_are_the_cartesian_product_each_with_its_values_set(scenario):
    axes = [parse_axis("cluster.num_nodes=1,2,4"), parse_axis("network.scale_out.nic.speed=200Gbps,400Gbps")]
    points = sweep_points(scenario, axes)
    assert len(points) == math.prod(len(a.values) for a in axes) == 6
    assert [(p.scenario.datacenter.cluster.num_nodes, p.scenario.datacenter.network.scale_out.nic.speed / 1e9 * 8)
            for p in points] == [(n, s) for n in (1, 2, 4) for s in (200, 400)]
    assert len({p.key for p in points}) == 6
    assert points[0].steps == {"datacenter.cluster.num_nodes": "1", "datacenter.network.scale_out.nic.speed": "200Gbps"}


def test_sweeping_the_recompute_mode_drops_the_bases_settings_of_the_modes_it_replaces(scenario):
    text = scenario.read_text()
    assert "  parallelism:\n" in text
    scenario.write_text(text.replace("  parallelism:\n", "  parallelism:\n    recompute: selective\n"
                                     "    recompute_modules: [mlp]\n", 1))
    points = sweep_points(scenario, [parse_axis("parallelism.recompute=none,selective,full")])
    assert [(p.scenario.workload.parallelism.recompute, p.scenario.workload.parallelism.recompute_modules)
            for p in points] == [("none", None), ("selective", ["mlp"]), ("full", None)]
    # a setting the sweep sets itself is the user's: kept, and refused where it does not apply
    with pytest.raises(ConfigError, match="recompute_num_layers: applies to recompute: full only"):
        sweep_points(scenario, [parse_axis("parallelism.recompute+parallelism.recompute_num_layers=full:1,"
                                           "selective:1")])


def test_a_templates_field_can_be_set_where_the_file_names_the_template(scenario):
    text = scenario.read_text().replace("from: dgx-h100", "from: dgx-h100")
    scenario.write_text(text)
    points = sweep_points(scenario, [parse_axis("node.gpu.memory_capacity_gb=40,80")])
    assert [p.scenario.datacenter.node.gpu.memory_capacity_gb for p in points] == [40, 80]
    assert points[0].scenario.datacenter.node.gpu.name == points[1].scenario.datacenter.node.gpu.name


def test_the_key_is_the_resolved_scenarios_not_the_way_it_was_written(scenario):
    once = sweep_points(scenario, [parse_axis("cluster.num_nodes=1")])[0]
    again = sweep_points(scenario, [parse_axis("datacenter.cluster.num_nodes=1")])[0]
    other = sweep_points(scenario, [parse_axis("cluster.num_nodes=2")])[0]
    assert once.key == again.key != other.key


@pytest.mark.parametrize(("axis", "expected"), [
    ("cluster.num_nodez=1,2", "datacenter.cluster.num_nodez: unknown key"),
    ("cluster.num_nodes=1,two", "datacenter.cluster.num_nodes: expected a whole number, got the text 'two'"),
    ("network.scale_out.nic.speed=fast", "datacenter.network.scale_out.nic.speed"),
    ("parallelism.tp=3", "workload.parallelism: tp*cp*pp = 6 does not divide num_gpus 8"),
])
def test_a_bad_path_or_value_is_refused_with_the_fields_own_message(scenario, axis, expected):
    with pytest.raises(ConfigError) as exc:
        sweep_points(scenario, [parse_axis(axis)])
    assert str(exc.value).startswith(f"{scenario} with ") and expected in str(exc.value)


def test_a_point_that_simulates_the_same_scenario_as_another_is_refused(scenario):
    with pytest.raises(ConfigError, match="simulates the same scenario"):
        sweep_points(scenario, [parse_axis("network.scale_out.nic.speed=400Gbps,50GBps")])


def test_a_field_set_twice_is_refused(scenario):
    with pytest.raises(ConfigError, match=r"datacenter\.cluster\.num_nodes is set by two"):
        sweep_points(scenario, [parse_axis("cluster.num_nodes=1"), parse_axis("datacenter.cluster.num_nodes=2")])


MIXED = Path(__file__).resolve().parents[2] / "examples" / "hetero_h100_a100.yaml"


def test_a_number_in_a_path_steps_into_a_list_such_as_a_node_group(tmp_path):
    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED.read_text())
    points = sweep_points(path, [parse_axis("node_groups.1.node.gpu.memory_capacity_gb=40,80")])
    assert [p.scenario.datacenter.groups[1].gpu.memory_capacity_gb for p in points] == [40, 80]
    assert all(p.scenario.datacenter.groups[0].gpu.memory_capacity_gb == 80 for p in points)


@pytest.mark.parametrize("path", ["node_groups.2.num_nodes", "node_groups.x.num_nodes", "node_groups.-1.num_nodes"])
def test_a_list_position_that_is_not_there_is_refused_naming_the_positions(tmp_path, path):
    scenario = tmp_path / "mixed.yaml"
    scenario.write_text(MIXED.read_text())
    with pytest.raises(ConfigError, match=r"datacenter\.node_groups is a list of 2: expected a position 0 to 1"):
        sweep_points(scenario, [parse_axis(f"{path}=1,2")])


def test_sweeping_the_whole_datacenter_with_the_trained_gpus_fixed_is_refused_naming_the_combined_axis(scenario):
    """`--set datacenter=16x H100,32x H100` names the block itself, not a path inside it: the refusal looked for an
    axis under `datacenter.` only and ended in an internal StopIteration."""
    data = yaml.safe_load(scenario.read_text())
    data["workload"]["training"]["num_gpus"] = 8
    scenario.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as exc:
        sweep_points(scenario, [parse_axis("datacenter=16x H100,32x H100")])
    assert "--set datacenter: changes the datacenter's GPUs (16, 32)" in str(exc.value)
    assert "--set datacenter+workload.training.num_gpus=16x H100:16,32x H100:32" in str(exc.value)


def test_a_refused_point_is_named_by_its_values_as_the_set_and_the_csv_write_them(scenario):
    """A flag was named as Python prints it: '... with workload.parallelism.tp_comm_overlap=True' for the point the
    user wrote as true and the CSV writes as true."""
    with pytest.raises(ConfigError) as exc:
        sweep_points(scenario, [parse_axis("parallelism.tp_comm_overlap=false,true")])
    assert str(exc.value).startswith(f"{scenario} with workload.parallelism.tp_comm_overlap=true: ")


def test_sweeping_fsdp_or_the_overlap_drops_the_bases_bucket_size_where_nothing_reads_it(scenario):
    """A scenario giving grad_bucket_size could not sweep fsdp=none,full_shard (or overlap_grad_reduce=true,false): the
    full_shard point refused the size FSDP does not read, and with it the whole sweep; each point now keeps it only
    where its gradient reduction reads it, as the search and the memory remedies drop it."""
    data = yaml.safe_load(scenario.read_text())
    data["workload"]["training"]["grad_bucket_size"] = 40_000_000
    scenario.write_text(yaml.safe_dump(data))
    for axis in ("parallelism.fsdp=none,full_shard,shard_grad_op", "parallelism.overlap_grad_reduce=true,false"):
        sizes = [p.scenario.workload.training.grad_bucket_size for p in sweep_points(scenario, [parse_axis(axis)])]
        assert sizes == [40_000_000] + [None] * (len(sizes) - 1)
    with pytest.raises(ConfigError, match="grad_bucket_size: has no effect under fsdp full_shard"):  # set by the sweep
        sweep_points(scenario, [parse_axis("parallelism.fsdp+training.grad_bucket_size=none:1000,full_shard:2000")])


def test_sweeping_the_context_parallel_exchange_drops_a2a_p2p_group_sizes_from_the_others(scenario):
    """hierarchical_context_parallel_sizes belongs to a2a+p2p alone: a scenario giving it could not sweep
    context_parallel_comm=p2p,a2a,a2a+p2p (p2p refused the sizes), and one without it not reach a2a+p2p."""
    data = yaml.safe_load(scenario.read_text())
    data["workload"]["parallelism"].update(cp=2, context_parallel_comm="a2a+p2p",
                                           hierarchical_context_parallel_sizes=[2, 1])
    scenario.write_text(yaml.safe_dump(data))
    points = sweep_points(scenario, [parse_axis("parallelism.context_parallel_comm=p2p,a2a,a2a+p2p,all_gather")])
    assert [(p.scenario.workload.parallelism.context_parallel_comm,
             p.scenario.workload.parallelism.hierarchical_context_parallel_sizes) for p in points] == [
        ("p2p", None), ("a2a", None), ("a2a+p2p", (2, 1)), ("all_gather", None)]
    assert [p.scenario.workload.parallelism.cp_a2a for p in points] == [1, 2, 2, 1]


def test_sweeping_the_schedule_drops_the_micro_batch_group_size_where_it_is_not_interleaved(scenario):
    """microbatch_group_size is interleaved 1F1B's alone: a scenario giving it could not sweep
    pipeline_schedule+vpp=1f1b:1,interleaved_1f1b:2,zb_v:2 (1f1b refused it)."""
    data = yaml.safe_load(scenario.read_text())
    data["workload"]["parallelism"].update(vpp=2, microbatch_group_size=4)
    scenario.write_text(yaml.safe_dump(data))
    points = sweep_points(scenario, [parse_axis("parallelism.pipeline_schedule+parallelism.vpp="
                                                "1f1b:1,interleaved_1f1b:2,zb_v:2,zb_h1:1")])
    assert [p.scenario.workload.parallelism.microbatch_group_size for p in points] == [None, 4, None, None]
    assert [p.scenario.workload.parallelism.interleaved for p in points] == [False, True, False, False]


def test_the_refusal_of_a_fixed_gpu_count_names_the_axis_that_changes_the_gpus_not_the_first_datacenter_one(scenario):
    """With a NIC speed swept first, the refusal named it: '--set datacenter.network.scale_out.nic.speed: changes
    the datacenter's GPUs (8, 8)', advising nic.speed+workload.training.num_gpus=200Gbps:8,400Gbps:8."""
    data = yaml.safe_load(scenario.read_text())
    data["workload"]["training"]["num_gpus"] = 8
    scenario.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as exc:
        sweep_points(scenario, [parse_axis("network.scale_out.nic.speed=200Gbps,400Gbps"),
                                parse_axis("cluster.num_nodes=1,2")])
    assert str(exc.value).startswith("--set datacenter.cluster.num_nodes: changes the datacenter's GPUs (8, 16)")
    assert "--set datacenter.cluster.num_nodes+workload.training.num_gpus=1:8,2:16" in str(exc.value)
