"""Megatron-Core trains MoE layers over tp > 1 only with sequence parallelism (MoELayer.forward raises otherwise):
such a run left unset gets it, one setting it off is refused naming the field, DeepSpeed's MoE keeps what it is
given, and the search enumerates no such strategy."""

from __future__ import annotations

import json

import pytest
import yaml

from helpers import cli, gpt_scenario
from simulon.config.errors import ConfigError
from simulon.config.loading import parse_scenario
from simulon.search.space import RULES, Space

MOE = {"num_experts": 4, "top_k": 2}


def test_an_moe_model_at_tp_above_1_under_megatron_runs_with_sequence_parallelism_when_left_unset():
    assert gpt_scenario(tp=2, moe=MOE).workload.parallelism.sequence_parallel is True


@pytest.mark.parametrize("knobs", [{"tp": 1, "moe": MOE}, {"tp": 2}])
def test_a_dense_model_or_tp_1_keeps_sequence_parallelism_off_by_default(knobs):
    assert gpt_scenario(**knobs).workload.parallelism.sequence_parallel is False


def switched_off() -> dict:
    data = gpt_scenario(tp=2, moe=MOE).as_data()
    data["workload"]["parallelism"]["sequence_parallel"] = False
    return json.loads(json.dumps(data, default=str))


def test_an_moe_model_at_tp_above_1_with_sequence_parallelism_off_is_refused_naming_the_field():
    with pytest.raises(ConfigError) as exc:
        parse_scenario(switched_off(), "moe.yaml")
    assert "workload.parallelism.sequence_parallel" in str(exc.value) and "MoELayer" in str(exc.value)


def test_deepspeeds_moe_at_tp_above_1_keeps_sequence_parallelism_as_given():
    data = switched_off()
    data["workload"]["framework"] = "deepspeed"
    assert parse_scenario(data, "moe.yaml").workload.parallelism.sequence_parallel is False


def test_the_cli_refuses_it_with_one_line_and_exit_status_2(tmp_path):
    path = tmp_path / "moe.yaml"
    path.write_text(yaml.safe_dump(switched_off()))
    result = cli("simulate", str(path))
    assert result.returncode == 2
    assert "workload.parallelism.sequence_parallel" in result.stderr and "Traceback" not in result.stderr


def test_the_search_enumerates_no_moe_strategy_at_tp_above_1_without_sequence_parallelism():
    sc = gpt_scenario(nodes=2, gpus_per_node=4, layers=8, gbs=16, seq=1024, moe=MOE)
    space = Space(sc.workload, 8, 4, fp8=False)
    kept = list(space.strategies())
    assert any(s.tp > 1 for s in kept)
    assert all(s.sequence_parallel for s in kept if s.tp > 1)
    assert space.pruned[RULES[-1]] > 0
