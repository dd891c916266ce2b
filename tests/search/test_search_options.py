"""`simulon search`'s options checked before the search runs (a value that would leave nothing to search is named
with its option, not reported as "no strategy fits"; a sharding or dimension under a scenario's or another tool's
name is told the search's), and its output the same bytes for the same input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import ROOT, SEED_SCENARIO, cli
from simulon.cli.search import limits_from
from simulon.config.errors import ConfigError
from simulon.config.frameworks import WELL_KNOWN_SHARDINGS, sharding_synonym
from simulon.search.space import SHARDING_SETTINGS

HETERO = ROOT / "examples" / "hetero_plan_h100_a100.yaml"


def bad_search(*args: str, scenario: Path = SEED_SCENARIO) -> str:
    done = cli("search", str(scenario), "--no-cache", *args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert "no strategy fits" not in done.stderr
    return done.stderr


@pytest.mark.parametrize(("args", "expected"), [
    (("--tp", "0"), "--tp 0: expected a positive whole number"),
    (("--tp=-2",), "--tp -2: expected a positive whole number"),
    (("--pp", "1,x"), "--pp x: expected a positive whole number"),
    (("--fix", "micro_batch_size=0"), "--fix micro_batch_size=0: expected a positive whole number"),
    (("--fix", "dtype=banana"), "--fix dtype=banana: unknown number format 'banana' (valid: fp32, tf32, fp16, bf16"),
    (("--fix", "recompute=ful"), "--fix recompute=ful: unknown recomputation 'ful' (valid: none, selective, full)"),
    (("--fix", "sharding=zero3"), "--fix sharding=zero3: unknown sharding 'zero3'"),
    (("--fix", "zero_bubble=yes"), "--fix zero_bubble=yes: expected true or false"),
    (("--fix", "dtype=nvfp4"), "--fix dtype=nvfp4: never tried on this scenario (the search tries dtype bf16, fp8: "
                               "the scenario's training.dtype, and fp8 where the H100"),
    (("--fix", "mbs=16"), "--fix micro_batch_size=16: never tried on this scenario (the search tries "
                          "micro_batch_size 1, 2, 4, 8)"),
    (("--top", "0"), "--top: expected 1 to 1000 strategies to list, got 0"),
    (("--fix", "etp=4"), "--fix etp=4: never tried on this scenario: etp splits the experts, and the model has none"),
])
def test_an_option_value_that_leaves_nothing_to_search_is_named_with_its_option(args, expected):
    assert expected in bad_search(*args)


@pytest.mark.parametrize(("args", "expected"), [
    (("--tp", "4", "--tp", "1"),
     "--tp 1: tp is already restricted by --tp 4; give its values once (a comma list: --tp A,B)"),
    (("--pp", "2", "--pp", "4"), "--pp 4: pp is already restricted by --pp 2"),
    (("--cp", "1", "--cp", "2"), "--cp 2: cp is already restricted by --cp 1"),
    (("--ep", "1", "--ep", "1"), "--ep 1: ep is already restricted by --ep 1"),
    (("--fix", "pp=4,4"), "--fix pp=4,4: a value appears twice"),
    (("--tp", "2,+2"), "--tp 2,+2: a value appears twice"),
    (("--fix", "dtype=bf16,BF16"), "--fix dtype=bf16,BF16: a value appears twice"),
])
def test_a_dimension_option_given_twice_or_a_value_listed_twice_is_refused_naming_it(args, expected):
    """`--tp 4 --tp 1` searched tp 1 alone (167.7 ms, the --tp 4 dropped without a word) and `--fix pp=4,4` was
    taken as pp=4, where a repeated --fix tp= was refused, as sweep's --set refuses a value given twice."""
    assert bad_search(*args).startswith(f"error: {expected}")


@pytest.mark.parametrize("written", ["fp8", "FP8", "fp8-e4m3", "float8_e4m3fn"])
def test_a_fixed_dtype_is_read_as_a_scenario_reads_it(written):
    assert limits_from({}, [f"dtype={written}"]).values["dtype"] == ("fp8",)


def test_a_datacenter_of_several_gpu_types_is_refused_naming_the_file():
    assert bad_search(scenario=HETERO).startswith(f"error: {HETERO}: datacenter.node_groups: the strategy search "
                                                  "works on one GPU type")


def test_the_json_result_is_the_same_bytes_on_every_run_and_carries_no_wall_clock_time():
    runs = [cli("search", str(SEED_SCENARIO), "--no-cache", "--replay", "0", "--top", "3", "--json")
            for _ in range(2)]
    assert all(run.returncode == 0 for run in runs), runs[0].stderr
    assert runs[0].stdout == runs[1].stdout
    assert "seconds" not in json.loads(runs[0].stdout)


def test_the_printed_ranking_keeps_the_search_s_duration_off_standard_output():
    run = cli("search", str(SEED_SCENARIO), "--no-cache", "--replay", "0", "--top", "2")
    assert run.returncode == 0, run.stderr
    assert "strategies enumerated: " in run.stdout and " s:" not in run.stdout
    assert run.stderr.startswith("Search took ")


@pytest.mark.parametrize(("fix", "hint"), [
    ("sharding=full_shard", "(FSDP's FULL_SHARD is sharding=fsdp; valid: ddp, distributed_optimizer, zero2, fsdp)"),
    ("sharding=ZeRO-3", "(ZeRO-3 is sharding=fsdp; valid: "),
    ("sharding=zero1", "(ZeRO-1 is sharding=distributed_optimizer; valid: "),
    ("sharding=shard_grad_op", "(FSDP's SHARD_GRAD_OP is sharding=zero2; valid: "),
    ("sharding=no_shard", "(FSDP's NO_SHARD is sharding=ddp; valid: "),
])
def test_a_fixed_sharding_under_a_well_known_name_is_told_the_search_s_name_for_it(fix, hint):
    with pytest.raises(ConfigError) as info:
        limits_from({}, [fix])
    value = fix.partition("=")[2]
    assert str(info.value).startswith(f"--fix {fix}: unknown sharding {value!r} {hint}"), str(info.value)


@pytest.mark.parametrize(("fix", "hint"), [
    ("zero_stage=3", "(ZeRO-3 is sharding=fsdp)"),
    ("fsdp=full_shard", "(FSDP's FULL_SHARD is sharding=fsdp)"),
    ("distributed_optimizer=true", "(distributed_optimizer=true is sharding=distributed_optimizer)"),
    ("fsdp=yes", "(sharding is --fix sharding=ddp, distributed_optimizer, zero2, fsdp)"),
    ("expert_tensor_parallel=2", "(did you mean etp?)"),
    ("expert-tensor-parallel-size=2", "(did you mean etp?)"),
    ("tensor_model_parallel_size=2", "(did you mean tp?)"),
])
def test_a_fix_under_the_scenario_s_or_megatron_s_name_is_told_the_search_s(fix, hint):
    with pytest.raises(ConfigError) as info:
        limits_from({}, [fix])
    assert str(info.value).startswith("--fix: expected NAME=VALUE with NAME one of tp, pp, ")
    assert str(info.value).endswith(f", got {fix!r} {hint}")


def test_an_unknown_fix_name_nobody_uses_gets_no_hint():
    with pytest.raises(ConfigError) as info:
        limits_from({}, ["bogus=1"])
    assert str(info.value).endswith("got 'bogus=1'")


@pytest.mark.parametrize("written", sorted(WELL_KNOWN_SHARDINGS))
def test_every_sharding_a_fix_hint_suggests_is_accepted_and_sets_what_the_scenario_s_hint_does(written):
    label, settings = sharding_synonym(written)
    try:
        fixed = limits_from({}, [f"sharding={written}"]).values["sharding"][0]
    except ConfigError as exc:
        suggested = re.search(rf"\({re.escape(label)} is sharding=(\w+);", str(exc))
        assert suggested, str(exc)
        fixed = limits_from({}, [f"sharding={suggested[1]}"]).values["sharding"][0]
    assert settings.items() <= SHARDING_SETTINGS[fixed].items()
