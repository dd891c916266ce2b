"""More model chunks (pp*vpp virtual stages) than layers: refused where simulon's automatic split would leave a
chunk with nothing to run, as Megatron-LM refuses (its interleaved schedule needs num_layers divisible by pp*vpp);
an explicit split keeps its deliberate empty stages."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from helpers import cli, seed_dict
from simulon.config import ConfigError, MegatronWorkload, ParallelismSpec
from simulon.config.loading import parse_scenario
from simulon.config.pipeline_layout import virtual_stage_layers


def scenario(layers: int, pp: int = 4, vpp: int = 4, **parallelism) -> dict:
    """The seed scenario on pp*4 H100s (tp 1, dp 4) with a `layers`-layer model, pp stages of vpp chunks."""
    data = seed_dict()
    data["datacenter"]["cluster"]["num_nodes"] = pp
    work = data["workload"]
    work["model"]["num_layers"] = layers
    work["parallelism"] = {"tp": 1, "pp": pp, **({"vpp": vpp} if vpp else {}), **parallelism}
    work["training"].update(num_gpus=4 * pp, global_batch_size=16 * pp, micro_batch_size=1)
    return data


def workload(layers: int, pp: int, vpp: int) -> MegatronWorkload:
    return MegatronWorkload.model_validate({
        "model": {"name": "tiny", "num_layers": layers, "hidden_size": 256, "num_heads": 4, "ffn_hidden_size": 1024,
                  "vocab_size": 1024},
        "parallelism": {"pp": pp, "vpp": vpp},
        "training": {"global_batch_size": 64, "micro_batch_size": 1, "sequence_length": 128},
    })


def test_4_layers_on_pp4_vpp4_are_refused_naming_vpp_and_the_numbers():
    with pytest.raises(ConfigError) as error:
        parse_scenario(scenario(4))
    message = str(error.value)
    assert "workload.parallelism.vpp: pp*vpp = 4*4 = 16 model chunks for the model's 4 layers leave 10 of them " \
           "with no layer to run" in message
    assert "vpp = 1 at most fits them" in message


def test_16_layers_on_pp4_vpp4_are_accepted_one_layer_a_chunk():
    sc = parse_scenario(scenario(16))
    assert sc.workload.parallelism.vpp == 4
    assert virtual_stage_layers(sc.workload.parallelism, 16) == (1,) * 16


def test_too_many_stages_even_without_chunks_name_pp():
    with pytest.raises(ConfigError, match=re.escape("workload.parallelism.pp: pp*vpp = 8*1 = 8 model chunks for "
                                                    "the model's 4 layers leave 2 of them")) as error:
        parse_scenario(scenario(4, pp=8, vpp=1))
    assert "pp = 6 at most fits them" in str(error.value)


@pytest.mark.parametrize("parallelism", [
    {"pipeline_layout": "E|t|t|t|t|" + "|" * 10 + "L"},  # Megatron takes a layout's empty stages as given
    {"layers_per_stage": [1, 1, 1, 1] + [0] * 12},
])
def test_an_explicit_split_keeps_its_empty_stages(parallelism):
    vpp = None if "pipeline_layout" in parallelism else 4
    sc = parse_scenario(scenario(4, vpp=vpp, **parallelism))
    assert sc.workload.parallelism.vpp == 4
    assert sum(virtual_stage_layers(sc.workload.parallelism, 4)) == 4


def test_the_embedding_and_the_loss_give_their_chunks_something_to_run():
    # 2 layers on 4 virtual stages split [0, 1, 1, 0]: Megatron's split with both accounting flags (E|t|t|L)
    assert virtual_stage_layers(workload(2, 2, 2).parallelism, 2) == (0, 1, 1, 0)


@settings(max_examples=150, deadline=None)
@given(layers=st.integers(1, 40), pp=st.integers(2, 16), vpp=st.integers(1, 6))
def test_accepted_iff_the_automatic_split_gives_every_chunk_a_layer_the_embedding_or_the_loss(layers, pp, vpp):
    split = virtual_stage_layers(ParallelismSpec.model_validate({"pp": pp, "vpp": vpp}), layers)
    fills = all(count or v in (0, len(split) - 1) for v, count in enumerate(split))
    try:
        workload(layers, pp, vpp)
    except ValidationError as error:
        assert not fills
        refused = error.errors()[0]["ctx"]["error"]
        assert refused.field == ("parallelism.vpp" if layers + 2 >= pp else "parallelism.pp")
        idle = sum(1 for v, count in enumerate(split) if not count and 0 < v < len(split) - 1)
        assert f"{pp}*{vpp} = {pp * vpp} model chunks for the model's {layers} layers leave {idle} of them" in \
            refused.message
    else:
        assert fills
    if layers % (pp * vpp) == 0:
        assert fills  # Megatron's even split always fits


def test_the_cli_refuses_it_with_exit_status_2_and_one_message(tmp_path):
    import yaml

    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(scenario(4), sort_keys=False))
    run = cli("simulate", str(path))
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "workload.parallelism.vpp" in lines[0] and "leave 10 of them" in lines[0]
