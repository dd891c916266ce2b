"""No output overwrites a file the scenario reads: the scenario, a template file its `from:` names, a HuggingFace
config its model is built from. Each is refused before any work, exit 2, the file untouched."""

from __future__ import annotations

import json

import pytest

from helpers import cli

HF_CONFIG = {"model_type": "llama", "hidden_act": "silu", "hidden_size": 512, "intermediate_size": 1536,
             "num_attention_heads": 8, "num_key_value_heads": 8, "num_hidden_layers": 2, "vocab_size": 32000}
GPU = "from: h100-sxm\nname: my-h100\n"
SCENARIO = """\
datacenter:
  cluster: {num_nodes: 1}
  node: {gpus_per_node: 2, gpu: {from: gpu.yaml}}
  network: {scale_up: {switch: {port_speed: 450GBps}}, scale_out: {nic: {speed: 400Gbps}}}
workload:
  framework: megatron
  model: {from_hf: config.json}
  training: {num_gpus: 2, global_batch_size: 2, sequence_length: 512}
"""


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(HF_CONFIG))
    (tmp_path / "gpu.yaml").write_text(GPU)
    (tmp_path / "s.yaml").write_text(SCENARIO)
    return tmp_path


CASES = [(command, read) for command in (("simulate", "-o"), ("search", "--write-best"))
         for read in ("config.json", "gpu.yaml")] + [(("report", "-o"), "config.json"),
                                                     (("topology", "--draw"), "config.json")]


@pytest.mark.parametrize(("command", "read"), CASES)
def test_an_output_naming_a_file_the_scenario_reads_is_refused_and_the_file_kept(folder, command, read):
    before = (folder / read).read_bytes()
    name, option = command
    target = folder / read
    if name in ("report", "topology"):  # outputs of a fixed suffix: a HuggingFace config under that suffix
        target = target.rename(target.with_suffix(".html" if name == "report" else ".svg"))
        before = target.read_bytes()
        text = (folder / "s.yaml").read_text().replace(read, target.name)
        (folder / "s.yaml").write_text(text)
    run = cli(name, str(folder / "s.yaml"), option, str(target), cwd=folder)
    assert run.returncode == 2, run.stderr
    assert f"is the input file {str(target)!r}" in run.stderr
    assert "Traceback" not in run.stderr
    assert target.read_bytes() == before


def test_a_sweeps_csv_naming_a_file_a_point_reads_is_refused(folder):
    (folder / "config.csv").write_text(json.dumps(HF_CONFIG))
    (folder / "s.yaml").write_text(SCENARIO.replace("config.json", "config.csv"))
    run = cli("sweep", str(folder / "s.yaml"), "--set", "training.global_batch_size=2,4", "-o",
              str(folder / "config.csv"), cwd=folder)
    assert run.returncode == 2, run.stderr
    assert "is the input file" in run.stderr and "Traceback" not in run.stderr
    assert json.loads((folder / "config.csv").read_text()) == HF_CONFIG
