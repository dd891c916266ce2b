"""The Python API the README documents (pipeline.simulate, time_collective, collective_sweep, collective.decompose)
refuses the inputs the CLI refuses, with the CLI's words (ValueError), instead of a wrong number or an internal
error; the CLI's own messages stay as they were, and good calls give the numbers they gave."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import SEED_SCENARIO, cli, gpt_scenario
from simulon.backend.analytical import AnalyticalBackend
from simulon.collective import decompose_collective
from simulon.collective.decompose import flow_set
from simulon.collective.types import CollType
from simulon.config import ScenarioConfig, load_scenario
from simulon.dag.size import TooLarge
from simulon.pipeline import FOLD_MODES, collective_sweep, simulate, step_size, time_collective
from simulon.sampling import check_mode, chosen_counts, parse_mode


@pytest.fixture(scope="module")
def seed():
    return load_scenario(SEED_SCENARIO)


@pytest.fixture(scope="module")
def dc(seed):
    assert seed.datacenter.num_gpus == 4  # the numbers in the messages below
    return seed.datacenter


def sampled_scenario():
    """A GPT on 8 GPUs, pp 2, eight micro-batches per replica: (2, 4) samples it."""
    return gpt_scenario(nodes=2, gpus_per_node=4, pp=2, layers=8, gbs=4 * 8)


# --- simulate(micro_batches=..., fold_mode=..., memory_limit=...) -----------------------------------------------

@pytest.mark.parametrize("pair", [(4, 2), (3, 3), (0, 0), (0, 2), (-1, 3)])
def test_simulate_refuses_a_count_pair_outside_one_to_m1_below_m2(seed, pair):
    with pytest.raises(ValueError, match=rf"'{pair[0]},{pair[1]}': the counts must satisfy 1 <= M1 < M2"):
        simulate(seed, micro_batches=pair)


@pytest.mark.parametrize("mode", ["bogus", "ALL", (1, 2, 3), (True, 3), (1.5, 3), 5, None])
def test_simulate_refuses_a_mode_that_is_neither_a_name_nor_two_counts(seed, mode):
    with pytest.raises(ValueError, match="expected all, auto, sample or two counts M1,M2, got"):
        simulate(seed, micro_batches=mode)


@settings(max_examples=40, deadline=None)
@given(m1=st.integers(-5, 50), m2=st.integers(-5, 50))
def test_any_pair_but_one_to_m1_below_m2_is_refused_naming_both_counts(m1, m2):
    if 1 <= m1 < m2:
        assert check_mode((m1, m2)) == (m1, m2)
        assert parse_mode(f"{m1},{m2}") == (m1, m2)
        return
    for refuse in (lambda: check_mode((m1, m2)), lambda: parse_mode(f"{m1},{m2}")):
        with pytest.raises(ValueError, match=rf"'{m1},{m2}': the counts must satisfy 1 <= M1 < M2"):
            refuse()


def test_chosen_counts_reads_the_mode_through_the_same_check(seed):
    with pytest.raises(ValueError, match="'3,3': the counts must satisfy"):
        chosen_counts(seed, (3, 3))
    with pytest.raises(ValueError, match="got 'bogus'"):
        chosen_counts(seed, "bogus")


def test_simulate_with_a_good_pair_samples_the_step():
    sc = sampled_scenario()
    result = simulate(sc, micro_batches=(2, 4)).result
    assert result.sampling is not None and result.sampling.simulated == (2, 4)
    assert result.sampling.micro_batches == 8
    assert math.isfinite(result.iteration_time_ms) and result.iteration_time_ms > 0
    assert simulate(sc, micro_batches=[2, 4]).result.iteration_time_ms == result.iteration_time_ms


def test_simulate_refuses_an_unknown_fold_mode_listing_the_valid_ones(seed):
    assert FOLD_MODES == ("auto", "full", "symmetric")
    for call in (lambda: simulate(seed, fold_mode="bogus"), lambda: step_size(seed, fold_mode="bogus")):
        with pytest.raises(ValueError, match="fold_mode: expected auto, full or symmetric, got 'bogus'"):
            call()


@pytest.mark.parametrize("limit, shown", [(-1, "-1 B"), (-0.5, "-0.5 B"), (float("nan"), "nan B")])
def test_simulate_refuses_a_limit_that_is_not_positive(seed, limit, shown):
    with pytest.raises(ValueError, match=f"memory_limit: must be positive, got {shown}"):
        simulate(seed, memory_limit=limit)


def test_no_memory_left_refuses_the_run_up_front_saying_what_it_needs(seed):
    """0 bytes is what a full machine has (dag.size.available_memory), not bad input."""
    with pytest.raises(TooLarge, match=r"need about .*, and 0\.0 KB are available"):
        simulate(seed, memory_limit=0)


def test_simulate_refuses_a_limit_that_is_not_a_number(seed):
    with pytest.raises(ValueError, match="memory_limit: expected a number of bytes or None, got '8GB'"):
        simulate(seed, memory_limit="8GB")


def test_the_cli_keeps_its_messages_for_the_same_inputs(tmp_path):
    proc = cli("simulate", str(SEED_SCENARIO), "--micro-batches", "4,2")
    assert proc.returncode != 0
    assert "--micro-batches: '4,2': the counts must satisfy 1 <= M1 < M2" in proc.stderr
    proc = cli("simulate", str(SEED_SCENARIO), "--expand", "half")
    assert proc.returncode != 0
    assert "--expand: expected auto, full or symmetric, got 'half'" in proc.stderr
    proc = cli("simulate", str(SEED_SCENARIO), "--max-memory", "0")
    assert proc.returncode != 0
    assert "--max-memory: must be positive, got 0 B" in proc.stderr


# --- collective_sweep / time_collective ------------------------------------------------------------------------

@pytest.mark.parametrize("group, message", [
    ((0, 0, 1), r"rank 0 appears twice in the group \(0, 0, 1\)"),
    ((0, 1, 2, 9), r"rank 9 is outside the datacenter's 4 GPUs \(0-3\)"),
    ((-1, 0), r"rank -1 is outside the datacenter's 4 GPUs \(0-3\)"),
    ((), "a collective needs at least two ranks"),
    ((2,), "a collective needs at least two ranks"),
    ((0, 1.5), "rank 1.5 is not a whole number"),
])
def test_a_bad_group_is_refused_as_the_cli_refuses_it(dc, group, message):
    with pytest.raises(ValueError, match=message):
        time_collective(dc, CollType.AllReduce, group, 1 << 20)
    with pytest.raises(ValueError, match=message):
        collective_sweep(dc, CollType.AllReduce, (0, 1), [1 << 20], others=[group])


@pytest.mark.parametrize("size", [float("nan"), float("inf"), -float("inf"), 0, -1, -0.5, "1MiB", True])
def test_a_size_that_is_not_a_positive_finite_number_is_refused(dc, size):
    with pytest.raises(ValueError, match=r"size .* is not a positive finite number of bytes"):
        collective_sweep(dc, CollType.AllReduce, (0, 1), [1 << 20, size])


def test_a_size_beyond_an_exabyte_is_refused(dc):
    with pytest.raises(ValueError, match=r"size 1e\+19: .*an exabyte"):
        time_collective(dc, CollType.AllReduce, (0, 1), 1e19)


def refusal(call) -> str | None:
    """The words of the ValueError `call()` raises, or None where it runs."""
    try:
        call()
    except ValueError as exc:
        return str(exc)
    return None


@settings(max_examples=30, deadline=None)
@given(size=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0, -1, True, 1e30, 2e18]),
                      st.integers(-10, 1 << 20)))
def test_decompose_collective_refuses_the_sizes_time_collective_refuses_in_the_same_words(size):
    dc = load_scenario(SEED_SCENARIO).datacenter
    by_time = refusal(lambda: time_collective(dc, CollType.AllReduce, (0, 1), size))
    by_decompose = refusal(lambda: decompose_collective("AllReduce", [0, 1], size))
    assert by_decompose == by_time


@pytest.mark.parametrize("size, words", [(1e30, "size 1e+30: 1e+30 B is more than 1e+18 B (an exabyte)"),
                                         (0, "size 0 is not a positive finite number of bytes")])
def test_decompose_collective_refuses_a_size_of_nothing_or_beyond_an_exabyte(size, words):
    with pytest.raises(ValueError) as refused:
        decompose_collective("AllReduce", [0, 1, 2, 3], size)
    assert str(refused.value) == words


@pytest.mark.parametrize("channels, problem", [
    (65, "65 is more than 64 channels, NCCL's maximum"), (1000, "1000 is more than 64 channels, NCCL's maximum"),
    (0, "must be at least 1, got 0"), (2.5, "expected a whole number of channels, got 2.5"),
    (True, "expected a whole number of channels, got True"),
])
def test_a_channel_count_nccl_cannot_run_is_refused_in_the_clis_words(dc, channels, problem):
    """65 and 1,000 channels were simulated (and decomposed: 1,000 channels of a 4-rank ring, 24,000 flows) where the
    CLI's --channels and the scenario's collective.num_channels refuse them; 2.5 ended in an internal TypeError."""
    with pytest.raises(ValueError, match=re.escape(f"num_channels: {problem}")):
        time_collective(dc, CollType.AllReduce, (0, 1, 2, 3), 1 << 20, channels=channels)
    with pytest.raises(ValueError, match=re.escape(f"num_channels: {problem}")):
        decompose_collective("AllReduce", [0, 1, 2, 3], 1 << 20, num_channels=channels)
    if isinstance(channels, int) and not isinstance(channels, bool):
        proc = cli("collective", str(SEED_SCENARIO), "--channels", str(channels), "--sizes", "1MiB")
        assert (proc.returncode, proc.stderr.strip()) == (2, f"error: --channels: {problem}")


def test_nccls_most_channels_still_run(dc):
    assert time_collective(dc, CollType.AllReduce, (0, 1, 2, 3), 1 << 20, channels=64).channels == 64
    assert len(decompose_collective("AllReduce", [0, 1], 1024, num_channels=64)[0].flows) == 64 * 2 * 2


def test_the_op_may_be_a_name_and_an_unknown_one_is_refused(dc):
    by_type = time_collective(dc, CollType.AllReduce, (0, 1, 2, 3), 1 << 20)
    for name in ("allreduce", "AllReduce", "all_reduce", "all-reduce"):
        assert time_collective(dc, name, (0, 1, 2, 3), 1 << 20) == by_type
    with pytest.raises(ValueError, match=r"expected one of allreduce, .*, got 'broadcast'"):
        time_collective(dc, "broadcast", (0, 1), 1 << 20)


@pytest.mark.parametrize("name", ["allreduce", "AllReduce", "all_reduce", "all-reduce", "ALL REDUCE"])
def test_decompose_collective_reads_a_collectives_name_as_time_collective_does(name):
    by_type = decompose_collective(CollType.AllReduce, [0, 1, 2, 3], 1 << 20)[0]
    assert decompose_collective(name, [0, 1, 2, 3], 1 << 20)[0] == by_type


def test_decompose_collective_takes_permute_for_the_ring_shift_and_refuses_an_unknown_name_in_the_same_words(dc):
    assert decompose_collective("permute", [0, 1], 1024)[0] == decompose_collective("SendRecv", [0, 1], 1024)[0]
    with pytest.raises(ValueError) as by_decompose:
        decompose_collective("broadcast", [0, 1], 1 << 20)
    with pytest.raises(ValueError) as by_time:
        time_collective(dc, "broadcast", (0, 1), 1 << 20)
    assert str(by_decompose.value) == str(by_time.value)


def test_a_good_call_gives_the_sweeps_row(dc):
    sizes = [1024.0, float(1 << 20), float(1 << 26)]
    rows = collective_sweep(dc, CollType.AllReduce, (0, 1, 2, 3), sizes)
    for size, row in zip(sizes, rows, strict=True):
        one = time_collective(dc, CollType.AllReduce, [0, 1, 2, 3], size)
        assert one == row and one.size_bytes == size and one.time_us > 0
    assert time_collective(dc, CollType.AllReduce, (0, 1), 1 << 20).time_us == pytest.approx(24.83548630147462)


@pytest.mark.parametrize("group, expected", [
    ("0,0,1", "rank 0 appears twice in '0,0,1'"),
    ("0-9", "rank 9 is outside the datacenter's 4 GPUs (0-3)"),
    ("2", "a collective needs at least two ranks"),
])
def test_the_cli_group_messages_are_unchanged(group, expected):
    proc = cli("collective", str(SEED_SCENARIO), "--group", group, "--sizes", "1MiB")
    assert proc.returncode != 0
    assert f"--group: {expected}" in proc.stderr


def test_the_cli_op_message_is_unchanged():
    proc = cli("collective", str(SEED_SCENARIO), "--op", "broadcast", "--sizes", "1MiB")
    assert proc.returncode != 0
    assert "--op: expected one of allreduce, allgather, reducescatter, alltoall, sendrecv, permute, got " \
           "'broadcast'" in proc.stderr


# --- a path, data or a whole scenario where the entry point takes something else ---------------------------------

@pytest.mark.parametrize("given, got", [(str(SEED_SCENARIO), "got str: read the file"),
                                        (SEED_SCENARIO, "got PosixPath: read the file"),
                                        ({"datacenter": {}}, "got dict: validate the data")])
def test_simulate_given_a_path_or_data_names_sc_and_how_to_make_a_scenario(given, got):
    with pytest.raises(TypeError, match=rf"^sc: expected a ScenarioConfig, {got}"):
        simulate(given)


def test_the_backend_given_a_path_names_its_scenario_parameter():
    with pytest.raises(TypeError, match=r"^scenario: expected a ScenarioConfig, got str: read the file with "
                                        r"simulon\.config\.load_scenario\(path\)$"):
        AnalyticalBackend().simulate(str(SEED_SCENARIO))


def test_simulating_a_scenario_without_a_workload_names_the_parameter():
    bare = ScenarioConfig.model_validate({"datacenter": {"from": "dgx-h100", "cluster": {"num_nodes": 1}}})
    with pytest.raises(ValueError, match=r"^sc: the scenario has no workload block to simulate$"):
        simulate(bare)
    with pytest.raises(ValueError, match=r"^scenario: the scenario has no workload block to simulate$"):
        AnalyticalBackend().simulate(bare)


def test_a_collective_sweep_given_the_scenario_asks_for_its_datacenter(seed):
    with pytest.raises(TypeError, match=r"^dc: expected a DatacenterConfig, got ScenarioConfig: pass its "
                                        r"datacenter \(dc=sc\.datacenter\)$"):
        collective_sweep(seed, "allreduce", [0, 1, 2, 3], [1 << 20])
    with pytest.raises(TypeError, match=r"^dc: expected a DatacenterConfig, got str"):
        time_collective(str(SEED_SCENARIO), "allreduce", [0, 1], 1 << 20)


# --- collective.decompose -------------------------------------------------------------------------------------

@pytest.mark.parametrize("group", [[], [3]])
def test_decompose_collective_refuses_fewer_than_two_ranks(group):
    with pytest.raises(ValueError, match=re.escape(f"group_ranks {group}: a collective needs at least two ranks")):
        decompose_collective(collective_type="AllReduce", group_ranks=group, data_size=1 << 20, num_channels=2,
                             algorithm="ring")


def test_flow_set_refuses_an_empty_group():
    with pytest.raises(ValueError, match="group_ranks is empty: a collective needs at least two ranks"):
        flow_set("AllReduce", [], 1 << 20, 2)


@pytest.mark.parametrize("algorithm", ["ring", "tree", "nvls"])
def test_an_all_to_all_asked_to_run_as_a_collective_algorithm_is_refused_as_the_cli_refuses_it(dc, algorithm):
    says = (f"^algorithm: AllToAll is NCCL's point-to-point send/receive, which NCCL_ALGO does not steer: it runs "
            f"as p2p, pxn, deepep or auto, not {algorithm}$")
    with pytest.raises(ValueError, match=says):
        collective_sweep(dc, "alltoall", [0, 1, 2, 3], [1 << 20], algorithm=algorithm)
    with pytest.raises(ValueError, match=says):
        decompose_collective("AllToAll", [0, 1, 2, 3], 1 << 20, 1, algorithm)
    proc = cli("collective", str(SEED_SCENARIO), "--op", "alltoall", "--sizes", "1MiB", "--algorithm", algorithm)
    assert proc.returncode == 2 and proc.stderr.strip() == f"error: --{says[1:-1]}"


def test_an_all_to_all_given_no_algorithm_runs_and_names_p2p(dc):
    (row,) = collective_sweep(dc, "alltoall", [0, 1, 2, 3], [1 << 20])
    assert row.algorithm == "p2p" and row == collective_sweep(dc, "alltoall", [0, 1, 2, 3], [1 << 20], "p2p")[0]
    # 41.08 us until d3a5bc8, when each part's last FIFO step came to be copied out at the receiver's local copy rate
    # (LinkModel.staging_bandwidth: Hopper's ring copy 32.7 GB/s a channel) rather than the p2p channel's 35.6
    assert row.time_us == pytest.approx(41.24, abs=0.005)
    assert decompose_collective("AllToAll", [0, 1, 2, 3], 1 << 20)[0].algorithm == "p2p"


@pytest.mark.parametrize("start", [-5, -1, 1.5, "0", True])
def test_decompose_collective_refuses_a_flow_id_start_that_is_not_a_whole_number_from_0(start):
    says = f"flow_id_start: a flow id is a whole number from 0, got {start!r}"
    with pytest.raises(ValueError, match=f"^{re.escape(says)}$"):
        decompose_collective("AllReduce", [0, 1], 1024, 1, "ring", flow_id_start=start)


def test_decompose_collective_still_decomposes_a_good_group():
    result, next_id = decompose_collective(collective_type="AllReduce", group_ranks=[0, 1, 2, 3],
                                           data_size=1 << 20, num_channels=2, algorithm="ring")
    assert result.group_ranks == [0, 1, 2, 3] and len(result.flows) == next_id > 0
