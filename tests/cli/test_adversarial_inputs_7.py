"""Round 7 of bad input found by fuzzing: each ended in an internal error or a silent misreading, and now ends in
exit status 2 and one line naming the file or option and the problem. A HuggingFace config of 10^8 layers (a list
of one entry a layer was built before the 10,000-layer bound was read: gigabytes, then a MemoryError), a list
inside Qwen3-Next's layer_types, a falsy mlp_only_layers, JSON nested deeper than the parser follows or holding a
number of 5,000 digits, and digits that are not ASCII ('²' passes str.isdigit, not int())."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from helpers import SEED_SCENARIO, cli

QWEN3_NEXT = {"model_type": "qwen3_next", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 8,
              "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 4096, "head_dim": 64,
              "linear_num_key_heads": 4, "linear_num_value_heads": 8, "linear_key_head_dim": 32,
              "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
              "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
              "shared_expert_intermediate_size": 128, "rms_norm_eps": 1e-06}
"""A small Qwen3-Next: gated delta net layers, one full-attention layer in four, experts on every layer."""


def refused(done, *pieces: str) -> str:
    assert done.returncode == 2 and "Traceback" not in done.stderr + done.stdout, done.stderr
    line = done.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line, line
    for piece in pieces:
        assert piece in line, (piece, line)
    return line


def from_hf(tmp_path: Path, **changes) -> Path:
    (tmp_path / "config.json").write_text(json.dumps({**QWEN3_NEXT, **changes}))
    scenario = {"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}},
                "workload": {"model": {"from_hf": "config.json"}, "parallelism": {"tp": 1},
                             "training": {"num_gpus": 8, "global_batch_size": 8, "micro_batch_size": 1,
                                          "sequence_length": 512}}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def test_the_small_qwen3_next_config_is_read(tmp_path):
    assert cli("memory", str(from_hf(tmp_path)), cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("changes, says", [
    ({"num_hidden_layers": 10**8}, "key 'num_hidden_layers' 100,000,000 is more than 10,000 layers"),
    ({"num_hidden_layers": 10**8, "decoder_sparse_step": 2}, "key 'num_hidden_layers' 100,000,000 is more than"),
    ({"layer_types": [["linear_attention"], "linear_attention", "linear_attention", "full_attention"]},
     "key 'layer_types' must be a list of 4 of linear_attention, full_attention"),
    ({"mlp_only_layers": 0}, "key 'mlp_only_layers' must be a list of layer indices below 4, got 0"),
    ({"mlp_only_layers": {}}, "key 'mlp_only_layers' must be a list of layer indices below 4, got {}"),
], ids=["layers", "layers with a sparse step", "a list in layer_types", "mlp_only_layers 0", "mlp_only_layers {}"])
def test_a_hugging_face_config_the_model_cannot_be_is_refused_at_once_naming_its_key(tmp_path, changes, says):
    refused(cli("memory", str(from_hf(tmp_path, **changes)), cwd=tmp_path, timeout=60), says)


DEEP = "[" * 100_000 + "]" * 100_000


def test_json_nested_deeper_than_the_parser_follows_is_refused_by_every_reader(tmp_path):
    (tmp_path / "deep.json").write_text(DEEP)
    result = cli("simulate", str(SEED_SCENARIO), "--json")
    (tmp_path / "good.json").write_text(result.stdout)
    says = "deep.json: not JSON simulon reads: nested deeper than the parser follows"
    refused(cli("plot", "deep.json", "--kind", "breakdown", "-o", "o.png", cwd=tmp_path), says)
    refused(cli("diff", "good.json", "deep.json", cwd=tmp_path), says)
    scenario = from_hf(tmp_path)
    (tmp_path / "config.json").write_text(DEEP)
    refused(cli("memory", str(scenario), cwd=tmp_path), "is not JSON simulon reads: nested deeper")
    (tmp_path / "big.json").write_text('{"a": ' + "9" * 5000 + "}")
    refused(cli("plot", "big.json", "--kind", "breakdown", "-o", "o.png", cwd=tmp_path),
            "big.json: not JSON simulon reads: a whole number of 5,000 digits")
    assert not (tmp_path / "o.png").exists()


@pytest.mark.parametrize("args, says", [
    (("search", "s.yaml", "--no-cache", "--replay", "0", "--tp", "²"), "--tp ²: expected a positive whole number"),
    (("search", "s.yaml", "--no-cache", "--replay", "0", "--fix", "pp=²"), "expected a positive whole number"),
    (("search", "s.yaml", "--no-cache", "--replay", "0", "--pp", "9" * 5000), "expected a positive whole number"),
    (("collective", "s.yaml", "--op", "alltoall", "--algorithm", "deepep:²:1:1:1"),
     "is not deepep or deepep:EXPERTS:GROUPS:GROUP_TOPK:TOP_K"),
    (("sweep", "s.yaml", "--set", "parallelism.tp=" + "9" * 5000, "-o", "x.csv"), "a whole number of 5,000 digits"),
], ids=["search --tp", "search --fix", "search --pp digits", "deepep", "sweep"])
def test_digits_that_are_not_ascii_or_too_many_are_refused_naming_the_option(tmp_path, args, says):
    shutil.copy(SEED_SCENARIO, tmp_path / "s.yaml")
    refused(cli(*args, cwd=tmp_path), says)
