"""The SMs' dispatch of a kernel's CTAs (compute/dispatch.py): a launch grid's greedy list scheduling and a persistent
kernel's static round-robin, their closed forms and bounds, and the grid's compiled loop against its Python
reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulon.compute import dispatch
from simulon.compute.attention import critical_blocks, issue_order, l2_section
from simulon.compute.calibration import Calibrations
from simulon.compute.dispatch import Order, greedy_makespan_python, issue_sequence, makespan

works = st.lists(st.floats(0.0, 100.0, allow_nan=False), min_size=1, max_size=40).map(
    lambda w: np.array(sorted(w, reverse=True)))


def test_the_issue_orders_of_a_causal_kernel():
    work = np.array([3.0, 2.0, 1.0])  # heaviest first
    assert issue_sequence(work, 2, Order.static_heaviest_first).tolist() == [3, 3, 2, 2, 1, 1]
    assert issue_sequence(work, 2, Order.light_first).tolist() == [1, 2, 3, 1, 2, 3]
    assert issue_sequence(work, 2, Order.heavy_first).tolist() == [3, 2, 1, 3, 2, 1]
    # longest first, a section of heads at a time: every head of a section gives its heaviest before its next
    assert issue_sequence(work, 2, Order.longest_first).tolist() == [3, 3, 2, 2, 1, 1]
    assert issue_sequence(work, 3, Order.longest_first, section=2).tolist() == [3, 3, 2, 2, 1, 1, 3, 2, 1]
    assert issue_sequence(work, 3, Order.longest_first, section=1).tolist() == [3, 2, 1] * 3


def test_greedy_dispatch_closed_forms():
    work = np.array([4.0, 3.0, 2.0, 1.0])
    # a grid heaviest first on two SMs: 4 and 3 start, 2 follows 3 (ends at 5), 1 follows 4 (ends at 5)
    assert makespan(work, 1, Order.heavy_first, 2) == 5
    # lightest first: 1 and 2 start, 3 follows 1 (ends at 4), 4 follows 2 (ends at 6)
    assert makespan(work, 1, Order.light_first, 2) == 6
    # a static round-robin: the first SM takes 4 and 2, the second 3 and 1
    assert makespan(work, 1, Order.static_heaviest_first, 2) == 6
    # one SM: everything, one after the other
    for order in Order:
        assert makespan(work, 2, order, 1) == 20
    # no more CTAs than SMs: the heaviest sets the time, whatever the order
    for order in Order:
        assert makespan(np.array([5.0, 1.0]), 3, order, 8) == 5


def test_a_static_schedule_gives_its_first_sm_every_rounds_heaviest_tile():
    # 16 heads x 16 causal query tiles of 256 rows (Blackwell's forward) on 148 SMs, heaviest first: the first SM
    # takes tile 0 (64 blocks) and tile 148, the 10th query tile's (4 x 7 = 28 blocks)
    assert critical_blocks(16, 16, 32, True, 0.0, 148, q_tiles=2, order=Order.static_heaviest_first) == 64 + 28
    # 8 heads: 128 tiles, one per SM; the heaviest sets the time in any order
    for order in Order:
        assert critical_blocks(8, 16, 32, True, 0.0, 148, q_tiles=2, order=order) == 64


def test_each_library_issues_in_its_own_order():
    assert issue_order("cudnn", backward=False) == issue_order("cudnn", backward=True) == Order.static_heaviest_first
    assert issue_order("xformers", backward=False) == Order.light_first
    assert issue_order("flash", backward=False) == Order.light_first
    assert issue_order("flash", backward=True) == Order.heavy_first
    blackwell = frozenset({("cudnn", "backward")})
    assert issue_order("cudnn", True, blackwell) == Order.longest_first
    assert issue_order("cudnn", False, blackwell) == Order.static_heaviest_first
    for backward in (False, True):
        assert issue_order("flash", backward, blackwell) == issue_order("flash", backward)


def test_cudnns_blackwell_backward_and_no_other_kernel_issues_longest_first():
    cal = Calibrations.shipped()
    for gpu in ("b200", "b300", "gb200", "gb300"):
        assert cal.longest_first(gpu) == {("cudnn", "backward")}
    for gpu in ("a100-sxm-80gb", "h100-sxm", "h200-sxm", "mi300x"):
        assert cal.longest_first(gpu) == frozenset()


def test_a_longest_first_sections_heads_whose_keys_and_values_fill_50_mib_of_l2():
    # s 4,096 at head dim 128: 2 MiB of 16-bit K and V a head, 25 fit, so sections of 16 (a power of two)
    assert l2_section(128, 4096, 128, 128) == 16
    assert l2_section(8, 4096, 128, 128) == 8  # no more than there are
    assert l2_section(64, 32768, 128, 128) == 2  # 16 MiB a head: 3 fit
    assert l2_section(16, 131072, 128, 128) == 1  # 64 MiB a head: none fits, one at a time


def test_longest_first_takes_a_causal_backward_to_its_heaviest_ctas_where_round_robin_stacks_them():
    # a B200's causal backward at s 4,096 (32 key blocks of 128) over 8 heads: 256 CTAs of 32 down to 1 blocks on 148
    # SMs, 4,224 blocks in all (28.5 an SM); longest first, the 148 heaviest start at once and the rest fill in under
    # the heaviest, 32 blocks; a static round-robin gives its first SM every round's heaviest (32 + 14), a grid in
    # FlashAttention-2's order (heaviest key block of each head first) 47
    section = l2_section(8, 4096, 128, 128)
    assert critical_blocks(8, 32, 32, True, 0.0, 148, order=Order.longest_first, section=section) == 32
    assert critical_blocks(8, 32, 32, True, 0.0, 148, order=Order.static_heaviest_first) == 46
    assert critical_blocks(8, 32, 32, True, 0.0, 148, order=Order.heavy_first) == 47
    # 128 heads (sections of 16): 67,584 blocks, 456.6 an SM; longest first ends within a block of two of it
    blocks = critical_blocks(128, 32, 32, True, 0.0, 148, order=Order.longest_first, section=16)
    assert 128 * 528 / 148 <= blocks <= 128 * 528 / 148 + 2
    assert blocks < critical_blocks(128, 32, 32, True, 0.0, 148, order=Order.static_heaviest_first) - 10


@settings(max_examples=100, deadline=None)
@given(works, st.integers(1, 12), st.integers(1, 40))
def test_longest_first_over_one_section_is_lpt_list_scheduling(work, copies, slots):
    everything = np.sort(np.repeat(work, copies))[::-1]
    lpt = greedy_makespan_python(everything, slots)
    assert makespan(work, copies, Order.longest_first, slots, section=copies) == lpt


@settings(max_examples=200, deadline=None)
@given(works, st.integers(1, 12), st.sampled_from(list(Order)), st.integers(1, 40))
def test_the_compiled_dispatch_matches_the_python_reference_to_the_bit(work, copies, order, slots):
    assert makespan(work, copies, order, slots, compiled=True) == makespan(work, copies, order, slots, compiled=False)


@settings(max_examples=100, deadline=None)
@given(works, st.integers(1, 12), st.integers(1, 40))
def test_the_static_schedule_is_its_first_sms_tiles(work, copies, slots):
    tiles = np.repeat(work, copies)
    per_sm = [tiles[s::slots].sum() for s in range(min(slots, tiles.size))]
    assert makespan(work, copies, Order.static_heaviest_first, slots) == pytest.approx(max(per_sm), rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(works, st.integers(1, 12), st.sampled_from(list(Order)), st.integers(1, 40))
def test_the_busiest_sm_is_within_grahams_bound(work, copies, order, slots):
    total, heaviest = copies * work.sum(), work.max()
    span = makespan(work, copies, order, slots)
    assert span >= max(total / slots, heaviest) * (1 - 1e-12)
    assert span <= total / slots + heaviest * (1 - 1 / slots) + 1e-9 * (1 + total)


@pytest.mark.parametrize("order", list(Order))
@pytest.mark.parametrize("slots", [1, 7, 49, 132])
def test_uniform_ctas_take_whole_rounds_in_any_order(order, slots):
    # 50 CTAs of 3 blocks: ceil(50 / SMs) rounds of 3
    assert makespan(np.full(10, 3.0), 5, order, slots) == 3 * -(-50 // slots)


@settings(max_examples=200, deadline=None)
@given(works, st.integers(1, 60), st.sampled_from(list(Order)), st.integers(1, 40), st.integers(1, 200))
def test_past_its_cta_bound_the_dispatch_extrapolates_within_one_cta_of_every_cta_dispatched(work, copies, order,
                                                                                           slots, bound):
    exact = makespan(work, copies, order, slots)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dispatch, "MAX_CTAS", bound)
        extrapolated = makespan(work, copies, order, slots)
    assert abs(extrapolated - exact) <= work.max() + 1e-9 * (1 + copies * work.sum())
    if work.size * copies <= bound:
        assert extrapolated == exact


def test_an_attention_of_billions_of_ctas_is_timed_without_holding_them():
    # 2^24 tokens of a 2^24-sample micro-batch over 4 heads (a scenario's bounds): 2^43 CTAs, 70 TB one by one
    for order in Order:
        blocks = critical_blocks(2**26, 2**17, 2**17, True, 0.0, 132, order=order)
        per_head = 2**17 * (2**17 + 1) / 2  # the causal triangle's key blocks
        assert blocks == pytest.approx(2**26 * per_head / 132, rel=1e-4)
