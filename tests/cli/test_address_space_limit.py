"""A process run under `ulimit -v` (RLIMIT_AS) fails an allocation past its limit with MemoryError, not the kernel's
out-of-memory killer: the size check counts the address space left (dag.size.address_space_left), so a run too
large for it is refused up front, and one that still runs out says so in one line instead of 'internal error'."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

from helpers import ROOT
from simulon.cli.errors import EXIT_INTERNAL_ERROR, OUT_OF_MEMORY, run_reporting_errors
from simulon.dag.size import VIRTUAL_RESERVE, address_space_left, available_memory

LIMIT = 700 * 2**20
"""An address space the GPT-3 example's whole step (estimated at about 0.6 GB over an import of about 0.2 GB) does
not fit and its sampled step does."""


def limited(*args: str, limit: int = LIMIT) -> subprocess.CompletedProcess:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))

    return subprocess.run([sys.executable, "-c", "from simulon.cli.app import main; main()", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=300, preexec_fn=cap)


def test_without_a_limit_on_the_address_space_nothing_is_counted_for_it():
    if resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY:
        pytest.skip("this test process runs under ulimit -v")
    assert address_space_left() is None


def test_the_address_space_left_is_the_limit_less_what_is_mapped_and_bounds_the_memory_available():
    code = ("import resource\nresource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, resource.RLIM_INFINITY))\n"
            "from simulon.dag.size import address_space_left, available_memory\n"
            "mapped = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
            "left, available = address_space_left(), available_memory()\n"
            "print(left, mapped, available)\n")
    left, mapped, available = map(float, subprocess.run([sys.executable, "-c", code], capture_output=True,
                                                         text=True, check=True).stdout.split())
    assert left == pytest.approx(3 * 2**30 - mapped - VIRTUAL_RESERVE, abs=2**24) and 0 < left < 3 * 2**30
    assert available <= left


def test_a_step_too_large_for_the_address_space_is_refused_up_front_and_sampled_where_it_may_be():
    whole = limited("simulate", "examples/gpt3_175b_1024gpu.yaml", "--micro-batches", "all")
    assert whole.returncode == 2 and whole.stdout == "", whole.stderr
    assert "the run is too large for the memory it may use" in whole.stderr and "MemoryError" not in whole.stderr
    sampled = limited("simulate", "examples/gpt3_175b_1024gpu.yaml", "--json")
    assert sampled.returncode == 0, sampled.stderr
    assert json.loads(sampled.stdout)["micro_batch_sampling"]["simulated"] == [8, 16]


def test_running_out_of_memory_past_the_check_is_one_line_saying_so_not_an_internal_error(capsys):
    def command():
        raise MemoryError("Unable to allocate 8.04 MiB")

    with pytest.raises(SystemExit) as ended:
        run_reporting_errors(command, [])
    err = capsys.readouterr().err
    assert ended.value.code == EXIT_INTERNAL_ERROR and err == f"error: {OUT_OF_MEMORY}\n"
    assert "internal error" not in err and available_memory() is not None
