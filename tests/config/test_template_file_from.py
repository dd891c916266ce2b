"""A user's template file starts from a shipped template, another file or a description, and what its own `from:`
names wrongly is said naming the file and that name (it was said as if the file itself were an unknown template)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from helpers import cli
from simulon.config.dc import GPUSpec
from simulon.config.errors import ConfigError
from simulon.config.loading import load_scenario


def test_a_file_starting_from_an_unknown_template_is_named_with_that_template(tmp_path):
    gpu = tmp_path / "mine.yaml"
    gpu.write_text("from: no-such-gpu\nname: my-gpu\n")
    with pytest.raises(ValidationError) as caught:
        GPUSpec.model_validate({"from": str(gpu)})
    message = str(caught.value)
    assert f"template file {str(gpu)!r}: from: unknown gpu template 'no-such-gpu'" in message
    assert f"unknown gpu template {str(gpu)!r}" not in message


def test_a_file_may_start_from_a_description_of_a_gpu(tmp_path):
    gpu = tmp_path / "mine.yaml"
    gpu.write_text('from: "NVIDIA H100 80GB SXM5"\nname: my-h100\n')
    loaded = GPUSpec.model_validate({"from": str(gpu)})
    assert (loaded.name, loaded.template) == ("my-h100", "h100-sxm")


def test_a_file_two_deep_names_the_file_whose_from_is_wrong(tmp_path):
    (tmp_path / "inner.yaml").write_text("from: h100-sxmm\n")
    (tmp_path / "outer.yaml").write_text("from: inner.yaml\nname: mine\n")
    with pytest.raises(ValidationError) as caught:
        GPUSpec.model_validate({"from": str(tmp_path / "outer.yaml")})
    assert (f"template file {str(tmp_path / 'outer.yaml')!r}: from: template file {str(tmp_path / 'inner.yaml')!r}: "
            "from: unknown gpu template 'h100-sxmm'; did you mean h100-sxm") in str(caught.value)


def test_the_cli_refuses_it_in_one_line_with_exit_status_2(tmp_path):
    (tmp_path / "mine.yaml").write_text("from: no-such-gpu\n")
    scenario = tmp_path / "sc.yaml"
    scenario.write_text("datacenter:\n  from: dgx-h100\n  node:\n    gpu: {from: mine.yaml}\n")
    run = cli("topology", str(scenario))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.count("\n") == 1 and "from: unknown gpu template 'no-such-gpu'" in run.stderr


@pytest.mark.parametrize("ref", ["hf.json", "./hf.json"])
def test_a_huggingface_config_named_by_from_is_pointed_to_from_hf(tmp_path, ref):
    """`from: hf.json` said 'unknown model template' with close names, `from: ./hf.json` 'architectures: unknown key
    (and 13 more problems)'; neither said from_hf reads such a file."""
    (tmp_path / "hf.json").write_text('{"architectures": ["LlamaForCausalLM"], "model_type": "llama", '
                                      '"hidden_size": 2048, "num_hidden_layers": 16}')
    scenario = tmp_path / "sc.yaml"
    scenario.write_text("datacenter: {from: dgx-h100, cluster: {num_nodes: 1}}\n"
                        f"workload: {{model: {{from: {ref}}}, "
                        "training: {global_batch_size: 8, sequence_length: 512}}\n")
    run = cli("simulate", str(scenario))
    assert run.returncode == 2 and "Traceback" not in run.stderr and run.stderr.count("\n") == 1, run.stderr
    assert f"is a HuggingFace config (its top level holds model_type), not a model file: read it with " \
           f"`from_hf: {ref}`" in run.stderr, run.stderr


@pytest.mark.parametrize(("field", "ref"), [
    ("gpu", "a/" + "x" * 5000),        # a path (it has a slash) no file system holds: ENAMETOOLONG
    ("model", "a/" + "x" * 5000 + ".yaml"),
    ("model", "a/" + "x" * 5000),      # a HuggingFace id's shape: an unknown name
])
def test_a_from_naming_a_path_too_long_for_any_file_is_refused_as_bad_input_naming_the_field(tmp_path, field, ref):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("datacenter:\n  from: dgx-h100\n  cluster: {num_nodes: 1}\n"
                        + (f"  node:\n    gpu: {{from: '{ref}'}}\n" if field == "gpu" else "")
                        + "workload:\n  model: " + (f"{{from: '{ref}'}}" if field == "model" else "llama-3-8b")
                        + "\n  parallelism: {tp: 8}\n"
                        "  training: {global_batch_size: 8, micro_batch_size: 1, sequence_length: 1024}\n")
    run = cli("simulate", str(scenario))
    where = "datacenter.node.gpu" if field == "gpu" else "workload.model"
    assert run.returncode == 2 and run.stderr.startswith(f"error: {scenario}: {where}: "), run.stderr[:300]


@pytest.mark.parametrize("name", ["Mine.YAML", "mine.Yml", "MINE.JSON"])
def test_a_file_beside_the_scenario_is_read_whatever_the_case_of_its_suffix(tmp_path, name):
    (tmp_path / name).write_text('{"from": "h100-sxm", "name": "my-h100"}\n')  # as Windows names files: H100.YAML
    loaded = GPUSpec.model_validate({"from": name}, context={"base_dir": tmp_path})
    assert (loaded.name, loaded.template) == ("my-h100", "h100-sxm")


def test_a_windows_path_with_backslashes_is_refused_saying_to_write_it_with_slashes(tmp_path):
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "mine.yaml").write_text("from: h100-sxm\n")
    with pytest.raises(ValidationError) as caught:
        GPUSpec.model_validate({"from": "templates\\mine.yaml"}, context={"base_dir": tmp_path})
    assert "No such file or directory (a backslash separates no folders here: write the path with '/'" in \
        str(caught.value)


def test_a_file_named_inside_an_included_file_is_read_from_the_including_files_folder(tmp_path):
    """A datacenter file's own `gpu: {from: mine.yaml}`, and a tuner configuration it names, lie beside it, not
    beside the scenario (they were looked for in the scenario's folder)."""
    (tmp_path / "dc").mkdir()
    (tmp_path / "dc" / "mine.yaml").write_text("from: h100-sxm\nname: my-h100\n")
    (tmp_path / "dc" / "tuner.conf").write_text("allreduce,0,65536,tree,ll,8,2,-1\n")
    (tmp_path / "dc" / "cluster.yaml").write_text(
        "cluster: {num_nodes: 1}\nnode: {gpus_per_node: 8, gpu: {from: mine.yaml}}\n"
        "network: {nccl: {tuner_config: tuner.conf}}\n")
    (tmp_path / "s.yaml").write_text("datacenter: {from: dc/cluster.yaml}\n")
    dc = load_scenario(tmp_path / "s.yaml").datacenter
    assert dc.node.gpu.name == "my-h100"
    assert dc.network.nccl.tuner_config == ("allreduce,0,65536,tree,ll,8,2,-1",)
    (tmp_path / "dc" / "cluster.yaml").write_text(  # rules written in the file are rules, not paths
        "cluster: {num_nodes: 1}\nnode: {gpus_per_node: 8, gpu: h100-sxm}\n"
        "network: {nccl: {tuner_config: ['allreduce,0,65536,tree,ll,8,2,-1']}}\n")
    assert load_scenario(tmp_path / "s.yaml").datacenter.network.nccl.tuner_config == (
        "allreduce,0,65536,tree,ll,8,2,-1",)


def test_a_bad_value_in_a_file_an_included_file_names_is_refused_naming_that_file(tmp_path):
    (tmp_path / "dc").mkdir()
    (tmp_path / "dc" / "mine.yaml").write_text("from: h100-sxm\nmemory_capacity_gb: -5\n")
    (tmp_path / "dc" / "cluster.yaml").write_text("cluster: {num_nodes: 1}\nnode: {gpus_per_node: 8, gpu: mine.yaml}\n")
    (tmp_path / "s.yaml").write_text("datacenter: {from: dc/cluster.yaml}\n")
    with pytest.raises(ConfigError) as refused:
        load_scenario(tmp_path / "s.yaml")
    dc = tmp_path / "dc"
    assert str(refused.value).startswith(f"{dc / 'mine.yaml'} (included by {dc / 'cluster.yaml'} at node.gpu, ")
    assert str(refused.value).endswith("memory_capacity_gb: must be positive, got -5 GB")


def test_a_model_file_with_both_from_and_from_hf_is_still_refused_once_its_paths_are_read_from_its_folder(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text('{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 2,'
                                                ' "num_attention_heads": 32, "intermediate_size": 11008}')
    (tmp_path / "m" / "both.yaml").write_text("from: llama-7b\nfrom_hf: config.json\n")
    (tmp_path / "s.yaml").write_text("datacenter: {from: dgx-h100, cluster: {num_nodes: 1}}\n"
                                     "workload: {model: {from: m/both.yaml}, training: {global_batch_size: 8}}\n")
    with pytest.raises(ConfigError, match=r"give one of 'from' .* and 'from_hf' .*, not both"):
        load_scenario(tmp_path / "s.yaml")
