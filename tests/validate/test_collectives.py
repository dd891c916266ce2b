"""`simulon validate collectives`: the accuracy the network model holds on shared/validation/collectives.csv,
the report format, row parsing and bad input."""

from __future__ import annotations

import itertools
import json
import statistics
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import RecordingPool, cli
from simulon import executors
from simulon.collective.types import CollType
from simulon.config import DatacenterConfig
from simulon.pipeline import collective_sweep
from simulon.validate.collectives import _forced_algorithm, collective_cases, validate_collectives
from simulon.validate.report import read_table, shipped_table

COLLECTIVES = shipped_table("collectives")
BOUND_PCT = {">=1MiB": 10.0, "<1MiB": 25.0}   # the targets, per hardware family
SHORT_OF_BOUND_PCT = {("H100", ">=1MiB"): 11.1,
                      # XLA's permutes mix three pairings the table does not tell apart (validate.collectives.
                      # permute_group): the ring shift simulated, and exchanges and half-to-half sends up to 1.6x
                      # faster; their spread alone puts a floor of 7.7% and 5.9% under any model (report.floor_by)
                      ("B200/sendrecv", ">=1MiB"): 13.0, ("H100/sendrecv", ">=1MiB"): 10.5}
"""Where the model does not reach the bound, the level it holds (a regression guard, not a target). H100 (11.0%)
misses the bound by a point: two GCP A3 Mega nodes' all-reduce over TCPXO (28.8% on 14 rows: a tuner plugin whose
tables are not public) and XLA's one-node NVLS all-reduces of 8-256 MiB (+8 to +15%: predicted faster once NVLS
is cut into NCCL's chunks, which put the H200 sweep on NCCL 2.27.7 within 2.8%).
The H20 rows, from a system its reporter found underperforming (NVIDIA/nccl#1244: ~343 of ~460 GB/s, busbw falling
from 64 to 128 MiB), are kept out with that reason (validate.collectives.KEPT_OUT)."""
HEADER = ["subset", "hardware", "num_gpus", "nodes", "collective", "msg_bytes", "group_size", "num_groups",
          "algbw_GBps", "busbw_GBps", "time_us", "notes"]



@pytest.fixture(scope="module")
def table() -> list[dict[str, str]]:
    return read_table(COLLECTIVES)


@pytest.fixture(scope="module")
def report(table):
    return validate_collectives(table)


def test_busbw_mape_by_hardware_family_and_size_class(report):
    errors: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in report.rows:
        family, size_class = row.group.split(" ")
        errors[(family, size_class)].append(abs(row.error_pct))
    mape = {key: statistics.fmean(v) for key, v in errors.items()}
    assert {"A100", "B200", "GB200", "H100", "H200", "MI300X"} <= {family for family, _ in mape}
    # every row but one that names no collective simulon models, one on a V100 (no template), 34 spikes and the 10
    # rows of the underperforming H20 system; rows stating a peak without a size count, and a row naming no group
    # is over all its GPUs (its nodes times the system's GPUs a node)
    assert len(report.rows) == 1112
    assert "H20" not in {family for family, _ in mape}
    assert sum("/sendrecv" in row.group for row in report.rows) == 142
    missed = {key: round(v, 1) for key, v in mape.items()
              if v > SHORT_OF_BOUND_PCT.get(key, BOUND_PCT[key[1]])}
    assert not missed, missed


def test_dual_port_hdr_cards_are_predicted_at_what_their_pcie_links_carry(report, table):
    # nccl-tests#175: two A100 nodes of four dual-port HDR 200 Gb/s cards each, 86 GB/s measured, the thread asking
    # why not more; a ConnectX-6 moves 200 Gb/s in all over PCIe 4.0 x16, so the ring peaks near 100 GB/s, not 200
    row = next(r for r in report.rows if "dual-port" in table[r.index]["hardware"])
    assert row.measured == 86.0 and 80.0 < row.predicted <= 100.0  # at most four cards' 4 x 25 GB/s


def test_every_family_stays_above_the_floor_of_rows_the_table_does_not_tell_apart(report):
    floors, mapes = report.floor_by("group"), report.mape_by("group")
    assert all(mapes[group] >= floor for group, floor in floors.items())
    # XLA's permutes list three pairings per size, unnamed: their spread alone costs any model 7.7% and 5.9%
    assert round(floors["B200/sendrecv >=1MiB"], 1) == 7.7 and round(floors["H100/sendrecv >=1MiB"], 1) == 5.9
    assert floors["GB200 >=1MiB"] == 0.0


def test_a_row_stating_a_peak_without_a_size_is_compared_with_the_highest_busbw_of_the_simulated_sweep(report, table):
    from simulon.validate.collectives import PEAK_SIZES

    peaks = [r for r in report.rows if not table[r.index]["msg_bytes"].strip()]
    assert len(peaks) == 8 and all(r.group.endswith(">=1MiB") for r in peaks)
    six_nodes = next(r for r in peaks if table[r.index]["hardware"] == "H100 nodes, 8x CX-7 400Gb RoCE")
    assert table[six_nodes.index]["nodes"] == "6" and not table[six_nodes.index]["group_size"].strip()
    row = next(r for r in peaks if table[r.index]["hardware"] == "8x H100 single node")
    dc = DatacenterConfig.model_validate({"from": "dgx-h100", "cluster": {"num_nodes": 1}})
    sweep = collective_sweep(dc, CollType.AllReduce, tuple(range(8)), PEAK_SIZES, "auto")
    assert row.predicted == max(t.busbw_GBps for t in sweep)
    assert abs(row.error_pct) < 2.0  # NVLS on eight H100s: 476 GB/s stated


def test_the_underperforming_h20_rows_are_kept_out_with_their_sources_reason(report, table):
    kept_out = [s for s in report.skipped if s.reason.startswith("kept out:")]
    assert {table[s.index]["subset"] for s in kept_out} == {"h20_2node_all_reduce"} and len(kept_out) == 10
    assert all("343 GB/s" in s.reason and "460 GB/s is expected" in s.reason for s in kept_out)


def test_predictions_never_read_the_measured_columns(table):
    """Doubling every measured time (and halving busbw and algbw) moves every measured value, not one prediction."""
    rows = [r for r in table if r["subset"] in ("mleng_a100_node_nccl_tests", "mleng_h200_node_all_reduce_bench")]
    changed = [{**r, "time_us": str(2 * float(r["time_us"])) if r["time_us"] else "",
                "busbw_GBps": str(float(r["busbw_GBps"]) / 2) if r["busbw_GBps"] else "",
                "algbw_GBps": str(float(r["algbw_GBps"]) / 2) if r["algbw_GBps"] else ""} for r in rows]
    a, b = validate_collectives(rows), validate_collectives(changed)
    assert [r.predicted for r in a.rows] == [r.predicted for r in b.rows]
    assert [r.measured / 2 for r in a.rows] == pytest.approx([r.measured for r in b.rows])


def test_rows_become_cases_with_their_groups_and_skips_say_why():
    rows = [
        {"subset": "x", "hardware": "GB200 NVL72 (MNNVL, up to 72 GPUs)", "num_gpus": "64", "nodes": "",
         "collective": "all_gather", "msg_bytes": "1048576", "group_size": "16", "num_groups": "4",
         "busbw_GBps": "", "time_us": "32.0", "notes": ""},
        {"subset": "x", "hardware": "8x H100 single node", "num_gpus": "8", "nodes": "1",
         "collective": "all_reduce", "msg_bytes": "", "group_size": "8", "num_groups": "",
         "busbw_GBps": "476", "time_us": "", "notes": ""},
        {"subset": "x", "hardware": "Gaudi 3 node", "num_gpus": "8", "nodes": "1", "collective": "all_reduce",
         "msg_bytes": "1024", "group_size": "8", "num_groups": "", "busbw_GBps": "1", "time_us": "", "notes": ""},
        {"subset": "x", "hardware": "B200 (8-GPU node)", "num_gpus": "", "nodes": "",
         "collective": "collective_permute (p2p ring shift)", "msg_bytes": "1024", "group_size": "",
         "num_groups": "", "busbw_GBps": "", "time_us": "10", "notes": ""},
        {"subset": "x", "hardware": "GB200 NVL72 (MNNVL, up to 72 GPUs)", "num_gpus": "", "nodes": "",
         "collective": "collective_permute (p2p ring shift)", "msg_bytes": "2048", "group_size": "",
         "num_groups": "", "busbw_GBps": "", "time_us": "10", "notes": ""},
    ]
    rows.append({"subset": "x", "hardware": "H100 nodes, 8x CX-7 400Gb RoCE", "num_gpus": "", "nodes": "6",
                 "collective": "alltoall", "msg_bytes": "", "group_size": "", "num_groups": "", "busbw_GBps": "48.5",
                 "time_us": "", "notes": ""})
    cases, skipped = collective_cases(rows)
    case, peak, permute, rack_permute, job = cases
    # a row naming no group but its nodes is over every GPU of them
    assert job.groups == [tuple(range(48))] and job.peaks == [(5, "x", 48.5)]
    # a bus bandwidth with no message size states the collective's peak (compared with the sweep's highest)
    assert peak.peaks == [(1, "x", 476.0)] and peak.rows == []
    # a collective-permute row names no group: a ring shift over one NVLink domain, busbw its algbw
    assert permute.ctype == CollType.SendRecv and permute.groups == [tuple(range(8))]
    assert rack_permute.groups == [tuple(range(72))] and rack_permute.datacenter().num_gpus == 72
    assert permute.rows[0][3] == pytest.approx(1024 / 10e-6 / 1e9)
    assert case.groups == [tuple(range(g * 16, (g + 1) * 16)) for g in range(4)]
    assert case.datacenter().num_gpus == 72 and case.algorithm == "auto"
    (index, _, size, busbw), = case.rows
    assert (index, size) == (0, 2**20) and busbw == pytest.approx(15 / 16 * 2**20 / 32e-6 / 1e9)
    assert [(s.index, s.reason) for s in skipped] == [
        (2, "hardware: 'Gaudi 3 node': Intel Gaudi is not modelled: its matrix engines have no calibration and its "
            "scale-up is on-chip RoCE ports, which simulon's collectives do not model")]


def spread_row(nodes: int, gpus: int = 16, hardware: str = "HGX H100, 8 GPU-NIC pairs per node") -> dict[str, str]:
    return {"subset": f"n{nodes}", "hardware": hardware, "num_gpus": str(gpus), "nodes": str(nodes),
            "collective": "all_reduce", "msg_bytes": str(256 << 20), "group_size": str(gpus), "num_groups": "",
            "busbw_GBps": "300", "time_us": "", "notes": ""}


def test_a_row_whose_gpus_are_spread_over_more_nodes_than_they_fill_runs_that_many_a_node():
    """16 GPUs on 2, 4 and 16 nodes were all simulated on two full nodes (436 GB/s): a ring of 16 GPUs one a node
    crosses a 400 Gb/s NIC at every step."""
    cases, skipped = collective_cases([spread_row(2), spread_row(4), spread_row(16), spread_row(3, gpus=16)])
    assert [(c.datacenter().node.gpus_per_node, c.datacenter().num_gpus) for c in cases] == [(8, 16), (4, 16),
                                                                                             (1, 16)]
    two, four, sixteen = (c.predict()[0] for c in cases)
    nic = cases[2].datacenter().network.scale_out.nic.speed / 1e9
    assert two > four > sixteen and sixteen <= nic
    assert [s.reason for s in skipped] == ["nodes: 16 GPUs over 3 nodes are not the same number on each"]


def sweep(times_us: list[float]) -> list[dict[str, str]]:
    """One all-reduce sweep on one node, doubling from 1 KiB, with these measured times."""
    return [{"subset": "x", "hardware": "8x H100 single node", "num_gpus": "8", "nodes": "1",
             "collective": "all_reduce", "msg_bytes": str(1024 * 2**i), "group_size": "8", "num_groups": "",
             "busbw_GBps": "", "time_us": str(t), "notes": ""} for i, t in enumerate(times_us)]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(1.0, 1e6), min_size=1, max_size=12))
def test_a_sweep_whose_time_never_falls_keeps_every_row(steps):
    cases, skipped = collective_cases(sweep(list(itertools.accumulate(steps))))
    assert not skipped and len(cases[0].rows) == len(steps)


def test_a_reading_over_twice_as_long_as_a_larger_message_is_skipped_as_a_spike():
    cases, skipped = collective_cases(sweep([120.0, 20.0, 45.0, 21.0, 25.0]))
    assert [index for index, *_ in cases[0].rows] == [1, 3, 4]   # 45 us is over 2x the 21 us that follows
    assert [(s.index, s.reason) for s in skipped] == [
        (0, "a spike: over 2x the time of a larger message of its sweep"),
        (2, "a spike: over 2x the time of a larger message of its sweep")]


@pytest.mark.parametrize("notes,algorithm", [
    ("algo=NVLS", "nvls"), ("algo=Ring", "ring"), ("Ring (forced)", "ring"), ("NVLSTree (forced)", "nvls_tree"),
    ("Ring (default, AWS ofi tuner)", "ring"), ("a later comment reports NCCL_ALGO=NVLSTree", "auto"), ("", "auto"),
])
def test_notes_name_the_algorithm_a_row_was_forced_to(notes, algorithm):
    assert _forced_algorithm(notes) == algorithm


def test_json_report_follows_the_design_format(tmp_path):
    path = tmp_path / "c.csv"
    lines = [",".join(HEADER),
             "a,8x A100 (NVLink3/NVSwitch; single node),8,1,all_reduce,1073741824,8,,,229.04,8203.9,",
             "a,8x A100 NVLink,8,1,sendrecv,134217728,8,,,110.81,1211.2,"]
    path.write_text("\n".join(lines) + "\n")
    run = cli("validate", "collectives", "--csv", str(path), "--json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    row, sendrecv = data["rows"]
    assert set(row) == {"index", "subset", "metric", "measured", "predicted", "error_pct"}
    assert row["index"] == 0 and row["metric"] == "busbw_GBps"
    assert row["error_pct"] == pytest.approx(100 * (row["predicted"] - row["measured"]) / row["measured"])
    # nccl-tests' sendrecv: busbw = algbw = bytes / time
    assert sendrecv["index"] == 1 and sendrecv["measured"] == pytest.approx(134217728 / 1211.2e-6 / 1e9)
    assert data["skipped"] == []
    table = cli("validate", "collectives", "--csv", str(path))
    assert "A100 >=1MiB" in table.stdout and "A100/sendrecv >=1MiB" in table.stdout


def test_a_table_of_something_else_is_bad_input(tmp_path):
    path = tmp_path / "k.csv"
    path.write_text("hardware,kernel,M\nB200,gemm,4096\n")
    run = cli("validate", "collectives", "--csv", str(path))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "column(s) collective, msg_bytes, group_size, one of busbw_GBps/algbw_GBps/time_us missing" in run.stderr


def test_the_report_is_the_same_for_any_number_of_jobs_and_a_sweep_over_its_share_runs_later_by_its_need(
        table, monkeypatch):
    """Sweeps run on a pool sharing the memory limit: a limit that holds the largest sweep alone but not beside
    another still simulates it as one job would, after the others, admitted by its need."""
    picked = [row for row in table if row["subset"] in ("a100_sendrecv", "mleng_mi300x", "mleng_h200_4node_efa")]
    cases, _ = collective_cases(picked)
    needs = [case.need() for case in cases]
    limit = min(needs) + max(needs)  # its half between the two
    assert len(cases) >= 3 and min(needs) <= limit / 2 < max(needs)
    serial = validate_collectives(picked, memory_limit=limit)
    pools = []
    monkeypatch.setattr(executors, "ProcessExecutor", lambda jobs, memory=None: pools.append(
        RecordingPool(jobs, memory)) or pools[-1])
    parallel = validate_collectives(picked, memory_limit=limit, jobs=2)
    assert parallel == serial and len(serial.rows) == len(picked)
    assert [pool.needs for pool in pools] == [[None], [[need for need in needs if need > limit / 2]]]
