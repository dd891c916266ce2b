"""Rows nccl-tests measured with one thread driving several GPUs (-g N) time the slower of the collective and the
thread issuing it on its N GPUs (validate.collectives.issue_time): one A100 node's sweep with -g 8 takes 44 us at
32 KiB and 2.5 us more for each channel NCCL adds, to a flat 101 us from 1 to 4 MiB."""

from __future__ import annotations

import statistics

import pytest

from simulon.collective.metrics import bus_bandwidth_factor
from simulon.pipeline import collective_sweep
from simulon.validate.collectives import collective_cases, issue_time, thread_gpus
from simulon.validate.report import read_table, shipped_table

SWEEP = "mleng_a100_node_nccl_tests"   # ./build/all_reduce_perf -b 32k -e 16G -f 2 -g 8 -n 50


@pytest.fixture(scope="module")
def rows() -> list[dict[str, str]]:
    return [r for r in read_table(shipped_table("collectives")) if r["subset"] == SWEEP]


@pytest.mark.parametrize("text,gpus", [
    ("./build/all_reduce_perf -b 32k -e 16G -f 2 -g 8 -n 50 (float)", 8), ("-b 8 -e 8G -f 2 -g 1; avg busbw", 1),
    ("single node -g 8, up to 4G: 232.54 GB/s", 8), ("sendrecv_perf -b 128M -e 1G -f 2 -g8 on 8x A100", 8),
    ("algo=Ring", None), ("", None), ("Hopper sm_90 -gpu 8", None), ("NCCL_ALGO=x-g 8", None),
])
def test_a_rows_source_and_notes_give_the_gpus_one_thread_drives(text, gpus):
    assert thread_gpus(text) == gpus


def test_a_thread_issues_a_collective_gpu_after_gpu_each_a_launch_and_a_part_per_channel():
    table = {"nccl_tests_thread": {"issue_us": 5.0, "channel_issue_us": 0.25}}
    assert issue_time(8, 24, table) == pytest.approx(8 * (5.0 + 0.25 * 24) * 1e-6)
    assert issue_time(1, 1, table) == pytest.approx(5.25e-6)


def test_a_sweep_driven_from_one_thread_is_timed_at_the_pace_the_thread_issues_it(rows):
    (case,), _ = collective_cases(rows)
    assert case.thread_gpus == 8
    sizes = case.row_sizes()
    timings = collective_sweep(case.datacenter(), case.ctype, case.groups[0], sizes, case.algorithm)
    factor = bus_bandwidth_factor(case.ctype, 8)
    for timing, busbw in zip(timings, case.predict(), strict=True):
        seconds = max(timing.time_us * 1e-6, issue_time(8, timing.channels))
        assert busbw == pytest.approx(factor * timing.size_bytes / seconds / 1e9)
    # the rows up to 1 MiB run on 1 to 24 channels, NCCL adding one for every 32 KiB (its ring LL threshold):
    # simulated alone each GPU's kernel takes about the same time, the thread's pace grows with the channels
    error = {size: busbw / measured - 1 for (_, _, size, measured), busbw in zip(case.rows, case.predict(),
                                                                                 strict=True)}
    # at 512 KiB and 1 MiB (16 and 24 channels) the thread is slower than the collective: +27.7% and +48.9% when
    # each GPU had a thread of its own
    assert abs(error[2**19]) < 0.05 and abs(error[2**20]) < 0.05
    # with Ampere's LL latencies fitted under the thread's pace, the rows up to 1 MiB hold 6.2% (25.5% when each GPU
    # had a thread, 13.1% under the seconds Ampere's LL had before its fit saw the thread)
    assert statistics.fmean(abs(e) for size, e in error.items() if size <= 2**20) < 0.08


def test_a_thread_driving_one_gpu_leaves_the_collective_its_time(rows):
    alone = [{**r, "notes": r["notes"].replace("-g 8", "-g 1")} for r in rows]
    unstated = [{**r, "notes": ""} for r in rows]
    (one,), _ = collective_cases(alone)
    (none,), _ = collective_cases(unstated)
    assert (one.thread_gpus, none.thread_gpus) == (1, None)
    assert one.predict() == none.predict()
