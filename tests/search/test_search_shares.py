"""A search's space dealt to its workers (search.space.Space.shares): every (tp, pp, vpp) block in exactly one share,
the shares of about equal work, and the strategies of all shares those of the whole space, counted alike."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import gpt_scenario
from simulon.search.run import Search


def search() -> Search:
    return Search(gpt_scenario(nodes=4, gpus_per_node=8, layers=16, hidden=2048, heads=16, gbs=64, seq=2048,
                               moe={"num_experts": 8, "top_k": 2}))


SEARCH = search()
LOADS = SEARCH.space.work()


@settings(max_examples=20, deadline=None)
@given(parts=st.integers(1, 40))
def test_every_block_lies_in_exactly_one_share_and_no_share_holds_a_block_more_than_the_mean_allows(parts):
    """Graham's bound for dealing the largest first: no share holds more work than the mean share and one block."""
    shares = SEARCH.space.shares(parts)
    assert len(shares) == parts
    assert sorted(p for share in shares for p in share) == list(range(len(LOADS)))
    held = [sum(LOADS[p] for p in share) for share in shares]
    assert max(held) <= sum(LOADS) / parts + max(LOADS)
    assert shares == SEARCH.space.shares(parts)  # every caller deals the same


def test_the_shares_are_more_even_than_every_nth_block_was():
    """Six parts of the space, as two workers get them: dealt every sixth block (as before Space.shares), the
    fullest held 1.25 times the mean work here (DeepSeek-V3's search: 2.7 times the mean of strategies, three parts
    none); dealt by work, at most 1.1 times, and none empty."""
    mean = sum(LOADS) / 6
    every_nth = [sum(load for position, load in enumerate(LOADS) if position % 6 == part) for part in range(6)]
    held = [sum(LOADS[p] for p in share) for share in SEARCH.space.shares(6)]
    assert max(every_nth) > 1.2 * mean
    assert max(held) <= 1.1 * mean and min(held) > 0


def test_the_shares_strategies_are_the_whole_spaces_and_are_counted_alike():
    whole = search().space
    everything = list(whole.strategies())
    dealt, enumerated, pruned = [], 0, Counter()
    for share in whole.shares(5):
        space = search().space
        dealt += list(space.strategies(share))
        enumerated, pruned = enumerated + space.enumerated, pruned + space.pruned
    assert sorted(dealt) == sorted(everything)
    assert (enumerated, pruned) == (whole.enumerated, whole.pruned)
