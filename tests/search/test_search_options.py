"""`simulon search`'s options checked before the search runs (a value that would leave nothing to search is named
with its option, not reported as "no strategy fits"), and its output the same bytes for the same input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import ROOT, SEED_SCENARIO, cli
from simulon.cli.search import limits_from

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
])
def test_an_option_value_that_leaves_nothing_to_search_is_named_with_its_option(args, expected):
    assert expected in bad_search(*args)


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
