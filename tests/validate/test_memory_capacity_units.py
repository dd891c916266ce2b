"""A GPU's memory_capacity_gb is read as GiB everywhere (config.dc.GPUSpec.memory_bytes): the memory check, the
search and the training validator's plain-data-parallel check agree on what fits."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import SEED_SCENARIO
from simulon.config import load_scenario
from simulon.config.dc import GPUSpec
from simulon.config.units import GiB
from simulon.memory import estimate_memory
from simulon.validate.report import read_table, shipped_table
from simulon.validate.training import Unsupported, scenario_from_row


@given(st.floats(min_value=1.0, max_value=4096.0, allow_nan=False))
def test_memory_bytes_reads_the_stated_size_as_gib(size):
    gpu = GPUSpec.model_validate({"from": "h100-sxm", "memory_capacity_gb": size})
    assert gpu.memory_bytes == size * GiB


def test_an_h100_80gb_has_80_gib():
    assert GPUSpec.model_validate({"from": "h100-sxm"}).memory_bytes == 80 * 2**30


def test_the_memory_check_holds_a_stage_against_memory_bytes():
    sc = load_scenario(SEED_SCENARIO)
    report = estimate_memory(sc)
    assert report.capacity == sc.datacenter.node.gpu.memory_bytes


def _plain_data_parallel_row(hidden: int) -> dict[str, str]:
    """A row on eight A100 40GB that states no parallel layout: plain data parallelism, so the model (32 layers of
    `hidden`, GPT-2's vocabulary) must fit one GPU's 40 GiB at 16 bytes a parameter."""
    row = dict.fromkeys(read_table(shipped_table("training"))[0], "")
    row.update(subset="user", hardware="8x A100 SXM4 40GB", num_gpus="8", nodes="1", model="GPT custom",
               layers="32", hidden=str(hidden), heads="32", vocab="50257", seq_len="2048", gbs="64",
               framework="Megatron-Core r0.8.0", iter_time_s="1.0")
    return row


def test_a_model_that_fits_40_gib_but_not_40e9_bytes_runs_plain_data_parallel():
    # 32 x 12 x 2,560^2 + 50,257 x 2,560 = 2.65e9 parameters: 42.3e9 bytes at 16 a parameter, over 40e9 and under
    # 40 GiB (42.9e9): the memory check would let it fit, so the validator must not refuse it as too large
    sc = scenario_from_row(_plain_data_parallel_row(2560))
    par = sc.workload.parallelism
    assert (par.tp, par.pp, par.cp, sc.workload.training.num_gpus) == (1, 1, 1, 8)


def test_a_model_over_40_gib_is_refused_for_plain_data_parallelism():
    with pytest.raises(Unsupported, match="does not fit one"):
        scenario_from_row(_plain_data_parallel_row(2688))  # 2.91e9 parameters: 46.6e9 bytes
