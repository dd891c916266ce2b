"""`simulon diff` of a result that replayed only some of its micro-batches: the groups it compares still add up to
the step's change, and those read off the partial replay's analysis are left out, saying why."""

from __future__ import annotations

import json

import pytest
import yaml

from helpers import SEED_SCENARIO, cli, seed_dict
from simulon.analysis.diff import ANALYSIS_GROUPS, diff, read_result


@pytest.fixture(scope="module")
def whole_and_sampled(tmp_path_factory):
    """The quick start, and the same on 16 micro-batches of which 2 and 4 are replayed and the step extrapolated."""
    folder = tmp_path_factory.mktemp("sampled")
    data = seed_dict()
    data["workload"]["training"]["global_batch_size"] = 16
    data["workload"]["parallelism"]["num_microbatches"] = 16
    (folder / "s16.yaml").write_text(yaml.safe_dump(data))
    paths = []
    for name, args in (("whole.json", (str(SEED_SCENARIO),)),
                       ("sampled.json", (str(folder / "s16.yaml"), "--micro-batches", "sample"))):
        done = cli("simulate", *args, "--json")
        assert done.returncode == 0, done.stderr
        (folder / name).write_text(done.stdout)
        paths.append(folder / name)
    assert json.loads(paths[1].read_text())["micro_batch_sampling"]["extrapolated"] is True
    return paths


def test_every_group_compared_adds_up_to_the_step_change_of_a_sampled_result(whole_and_sampled):
    a, b = whole_and_sampled
    compared = diff(read_result(a), read_result(b), a, b)
    step = compared.headline[0]
    assert step.delta > 500  # 16 micro-batches against 4
    assert compared.why
    for changes in compared.why.values():
        assert sum(c.delta for c in changes) == pytest.approx(step.delta, rel=1e-6)


def test_the_partial_replays_groups_are_left_out_naming_the_replay(whole_and_sampled):
    a, b = whole_and_sampled
    compared = diff(read_result(a), read_result(b), a, b)
    assert set(compared.left_out) == set(ANALYSIS_GROUPS) and not set(compared.why) & set(ANALYSIS_GROUPS)
    assert all("replayed 4 of its step's 16 micro-batches" in why for why in compared.left_out.values())
    assert compared.to_dict()["left_out"] == compared.left_out
    assert "left_out" not in diff(read_result(a), read_result(a), a, a).to_dict()


def test_the_printed_diff_says_which_groups_it_left_out_and_why(whole_and_sampled):
    a, b = whole_and_sampled
    done = cli("diff", str(a), str(b))
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if ": left out: " in line]
    assert [line.split(":")[0] for line in lines] == list(ANALYSIS_GROUPS)
    assert all("replayed 4 of its step's 16 micro-batches" in line for line in lines)
    assert not any(line.startswith(f"{group}: unchanged") for group in ANALYSIS_GROUPS for line in
                   done.stdout.splitlines())
