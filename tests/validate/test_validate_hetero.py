"""Sailor's heterogeneous runs as scenarios (validate/hetero.py): each stage replica on its plan's GPU type."""

from __future__ import annotations

import csv
import json

import pytest

from helpers import cli
from simulon.validate.hetero import scenario_of, validate_hetero
from simulon.validate.hetero_rows import read_sailor_runs
from simulon.validate.report import read_table, shipped_table

MEMORY = shipped_table("memory")


def runs():
    return {r.locator.rsplit("/", 1)[-1]: r for r in read_sailor_runs(MEMORY)}


def test_each_stage_replica_runs_on_the_gpu_its_plan_names():
    run = runs()["plan_config_N6_D3.json"]
    sc = scenario_of(run)
    per_replica = sc.placement().group.reshape(run.pp, run.dp, -1)
    groups = sc.datacenter.groups
    for s, stage in enumerate(run.stages):
        for d, gpu in enumerate(stage.replicas):
            expected = next(g.gpu.name for g, node in zip(groups, run.groups, strict=True) if node.gpu == gpu)
            assert {groups[g].gpu.name for g in per_replica[s, d].tolist()} == {expected}


def test_a_run_keeps_its_layer_split_and_the_tp_gpus_of_each_node():
    run = runs()["plan_config_N4_D1.json"]
    sc = scenario_of(run)
    assert list(sc.workload.parallelism.layers_per_stage) == [s.transformer_layers for s in run.stages]
    assert sc.datacenter.gpus_per_node == run.tp and sc.datacenter.num_gpus == run.num_gpus


def test_the_runs_pipeline_as_deepspeeds_engine_with_partitioned_sends_and_the_gradient_sync_after_it():
    wl = scenario_of(runs()["plan_config_N2_D1.json"]).workload
    assert wl.framework == "deepspeed" and wl.parallelism.pipeline_send == "partitioned"
    assert not wl.parallelism.overlap_grad_reduce


def test_validate_hetero_compares_every_sailor_row_of_a_table(tmp_path):
    with open(MEMORY, newline="") as f:
        rows = list(csv.DictReader(f))
    kept = [r for r in rows if "/N2/" in r["locator"]] + [r for r in rows if not r["source"].startswith("Sailor")][:2]
    path = tmp_path / "two.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(kept)
    run = cli("validate", "hetero", "--csv", str(path), "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert sorted(r["subset"] for r in report["rows"]) == ["N2_D1", "N2_D2"]
    assert all(r["predicted"] > 0 for r in report["rows"])
    assert len(report["skipped"]) == 2


def test_a_skipped_run_is_numbered_once_by_the_report_not_again_in_its_reason(tmp_path):
    rows = read_table(MEMORY)
    row = next(r for r in rows if "/N2/" in r["locator"])
    bad = {**row, "num_gpus": str(int(row["num_gpus"]) * 2)}
    report = validate_hetero([bad])
    assert [s.reason for s in report.skipped] == [f"num_gpus: {bad['num_gpus']} is not tp*pp*dp = {row['num_gpus']}"]
    path = tmp_path / "one.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        writer.writeheader()
        writer.writerow(bad)
    run = cli("validate", "hetero", "--csv", str(path))
    assert run.returncode != 0
    assert f"1 (row 2): num_gpus: {bad['num_gpus']} is not" in run.stderr and "row 0" not in run.stderr


NOTES = "layers/stage [12, 14] (incl embed+head); iter_s=119.83914; stage->GPU types RTX-3090 | Titan-RTX"


@pytest.mark.parametrize(("changes", "reason"), [
    ({"mem_gib": "3.85 GiB"}, "mem_gib: '3.85 GiB' is not a number"),
    ({"notes": NOTES.replace("119.83914", "1.2.3")}, "notes: iter_s='1.2.3' is not a number"),
    ({"notes": NOTES.replace("RTX-3090 |", "H100 |"), "hardware": "mixed H100x2+Titan-RTXx2"},
     "not simulated: hardware: H100: no node of Sailor's MIT cluster holds it"),
])
def test_a_row_validate_hetero_cannot_read_or_place_is_skipped_with_its_reason_not_a_crash(changes, reason):
    row = next(r for r in read_table(MEMORY) if r["locator"].endswith("plan_config_N2_D1.json"))
    assert NOTES in row["notes"]
    report = validate_hetero([{**row, **changes}])  # a ValueError (float('3.85 GiB'), float('1.2.3')), a KeyError
    assert not report.rows                           # ('h100-sxm': no MIT node template)
    assert report.skipped[0].reason.startswith(reason)


def test_a_table_without_a_column_a_run_needs_is_refused_naming_it(tmp_path):
    row = next(r for r in read_table(MEMORY) if r["locator"].endswith("plan_config_N2_D1.json"))
    path = tmp_path / "mine.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[c for c in row if c not in ("tp", "notes")])
        writer.writeheader()
        writer.writerow({c: v for c, v in row.items() if c not in ("tp", "notes")})
    run = cli("validate", "hetero", "--csv", str(path))  # each run was skipped: tp: expected a positive integer, got ''
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert f"{path}: column(s) tp, notes missing" in run.stderr
