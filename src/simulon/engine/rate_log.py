"""The rate history of the flows on the step's busiest links, as the replay sets it.

A flow's rate changes whenever max-min sharing of its links changes (engine/fair_share.py): a flow that runs
alone, then shares its link with one that starts, halves. The link counters of the trace and the links heat map
(analysis/links.py) add up, on each busiest link, the rates its flows have at each moment, so the replay records
every rate it gives a flow that crosses one of these links (and 0 at the flow's last byte), in the order it
sets them. Each flow held at its mean rate instead counted a flow that had run alone at full rate beside the one
it later shared with: a NIC uplink of examples/moe_96gpu.yaml read 2.2 of its capacity for 5 ms.

Which links: the WATCHED ones that carry the most bytes for their capacity, known before the replay from the
flows' wire bytes and the links each loads (the order of their utilisation over any step, ties by link id).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .footprint import LinkLoads

WATCHED = 5
"""Links whose flows' rates the replay records: the busiest, for the counters and heat map of analysis/links.py."""


@dataclass(frozen=True)
class RateLog:
    """The watched links, busiest first, and every rate the replay gave a flow crossing one: from time[i] on
    (seconds), flow[i] sends at rate[i] wire bytes/s (0 from its last byte on), in the order the replay set them."""

    links: np.ndarray
    time: np.ndarray
    flow: np.ndarray
    rate: np.ndarray

    def link_rate(self, loads: LinkLoads, link: int) -> tuple[np.ndarray, np.ndarray]:
        """The changes of what `link` carries (wire bytes/s, counting how many flows each stands for there): at
        times[i] it changes by changes[i], in the order the replay set the rates."""
        flow_of_slot = np.repeat(np.arange(len(loads.ptr) - 1), np.diff(loads.ptr))
        on_link = loads.link == link
        weight = np.bincount(flow_of_slot[on_link], weights=loads.weight[on_link], minlength=len(loads.ptr) - 1)
        on = weight[self.flow] > 0
        return self.time[on], (self.steps * weight[self.flow])[on]

    @cached_property
    def steps(self) -> np.ndarray:
        """Per entry, how much its flow's rate changes there (from 0 before the flow's first): worked out once for
        every watched link."""
        previous = np.zeros(len(self.rate))
        order = np.argsort(self.flow, kind="stable")
        same = np.append(False, self.flow[order][1:] == self.flow[order][:-1])
        previous[order[same]] = self.rate[order][:-1][same[1:]]
        return self.rate - previous


def carried_bytes(wire: np.ndarray, loads: LinkLoads, num_links: int) -> np.ndarray:
    """Wire bytes each link carries over the step: every flow's (`wire`) on each link it loads, times its weight
    there."""
    per_slot = np.repeat(wire, np.diff(loads.ptr)) * loads.weight
    return np.bincount(loads.link, weights=per_slot, minlength=num_links).astype(np.float64)


def busiest_links(carried: np.ndarray, capacity: np.ndarray, count: int = WATCHED) -> np.ndarray:
    """The `count` links that carry the most bytes for their capacity, busiest first (ties by link id), of those
    that carry any."""
    share = np.divide(carried, capacity, out=np.zeros_like(carried), where=capacity > 0)
    order = np.lexsort((np.arange(len(carried)), -share))[:count]
    return order[carried[order] > 0]


def watched_flows(loads: LinkLoads, links: np.ndarray) -> np.ndarray:
    """Per flow: whether it loads one of `links`."""
    flows = len(loads.ptr) - 1
    crossing = np.repeat(np.arange(flows), np.diff(loads.ptr))[np.isin(loads.link, links)]
    watched = np.zeros(flows, dtype=bool)
    watched[crossing] = True
    return watched
