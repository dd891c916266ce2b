"""Max-min fair sharing of links among flows, by progressive filling (Bertsekas and Gallager, Data Networks,
2nd ed. 1992, section 6.5.2): raise every flow's rate together; when a link fills up, the flows crossing it
keep the rate they have, and the others go on sharing what is left. A flow also stops at its own rate limit.

Two forms of the same sharing live here. `FlowNetwork` is the incremental one the replay drives: flows come
and go, and only the flows connected to a change through shared links are reshared; a flow weighs on a link
as many flows as a folded flow stands for. `max_min_rates` is the vectorised one of the steady-state
estimate: one set of flows all active at once. The tests hold the two to the same rates. compiled.py holds a
third, FlowNetwork's own steps over arrays, for the replay at compiled speed.

FlowNetwork visits flows and links in the order they came (insertion-ordered dicts, not sets, whose order
is CPython's hash layout): the order in which flows are reshared sets the order of their finish events, and
so which of two simultaneous events is handled first; compiled.py follows the same order.
"""

from __future__ import annotations

import numpy as np

from ..network.fabric import NO_LINK

SAME_SHARE = 1e-9
"""Relative tolerance under which a link's fair share, or a flow's rate limit, is the lowest one: every link
and flow within it freezes in the same filling step, so rounding does not split one bottleneck into two."""
EMPTY_LOAD = 1e-12
"""A link whose unfrozen flows weigh this little or less has none: freezing flows leaves rounding residue."""
SAME_RATE = 1e-12
"""A recomputed rate this close (relative) to the old one is the old one: its finish event stands."""
_INF = float("inf")


def link_rows(links: np.ndarray) -> list[list[int]]:
    """Each flow's links without the NO_LINK padding (padding sits at the end of a row)."""
    counts = (links != NO_LINK).sum(axis=1)
    rows = links.tolist()
    if (counts == links.shape[1]).all():
        return rows
    return [row[:k] for row, k in zip(rows, counts.tolist(), strict=True)]


class FlowNetwork:
    """Active flows, how much each has left to send, their rates, and the max-min fair share over the links
    they cross, kept up to date as flows come and go.

    `links`: each flow's link ids; `capacity`: bytes/s per link; `weights`: each flow's weight on each of its links
    (how many flows it stands for there); `cap`: each flow's own rate limit (inf: none). A flow's `version`
    counts its rate changes, so that a finish event computed under an older rate can be told apart. The rates
    given to the `watched` flows (none if None) are logged, (time, flow, rate), in the order they are set
    (engine/rate_log.py).
    """

    def __init__(self, links: list[list[int]], capacity: np.ndarray, weights: list[list[float]], cap: np.ndarray,
                 watched: list[bool] | None = None):
        self.links = links
        self.watched = watched or [False] * len(links)
        self.log: list[tuple[float, int, float]] = []
        self.weight = weights
        self.capacity = capacity.tolist()
        self.cap = cap.tolist()
        self.limited = bool(np.isfinite(cap).any())
        self.on_link: list[dict[int, None]] = [{} for _ in range(len(capacity))]  # ordered sets
        self.remaining: dict[int, float] = {}
        self.rate: dict[int, float] = {}
        self.since: dict[int, float] = {}
        self.version: dict[int, int] = {}
        self.dirty: dict[int, None] = {}

    def add(self, f: int, size: float, now: float) -> None:
        """Flow `f` starts sending `size` bytes; its links need resharing."""
        self.remaining[f] = size
        self.rate[f] = 0.0
        self.since[f] = now
        self.version[f] = self.version.get(f, 0) + 1
        for link in self.links[f]:
            self.on_link[link][f] = None
            self.dirty[link] = None

    def remove(self, f: int, now: float) -> None:
        """Flow `f` has sent its last byte (at `now`); its links need resharing."""
        if self.watched[f]:
            self.log.append((now, f, 0.0))
        for link in self.links[f]:
            self.on_link[link].pop(f, None)
            self.dirty[link] = None
        del self.remaining[f], self.rate[f], self.since[f]

    def reshare(self, now: float) -> list[tuple[float, int, int]]:
        """Recompute rates of every flow connected to a changed link; return their new finish events
        (time, flow, version)."""
        flows = self._connected()
        flow_links = self.links
        remaining, rate, since = self.remaining, self.rate, self.since
        before = [rate[f] for f in flows]
        for f in flows:  # bring progress up to now at the old rate
            remaining[f] = max(remaining[f] - rate[f] * (now - since[f]), 0.0)
            since[f] = now
        if len(flows) == 1:  # the common case: a flow alone on its links
            f = flows[0]
            share = min(self.capacity[link] / w for link, w in zip(flow_links[f], self.weight[f], strict=True))
            rate[f] = min(share, self.cap[f]) if self.limited else share
        else:
            self._progressive_filling(flows)
        events = []
        for f, old in zip(flows, before, strict=True):
            if old > 0 and abs(rate[f] - old) <= SAME_RATE * old:
                rate[f] = old  # its finish event still holds: most of a big component keeps its share
                continue
            self.version[f] += 1
            finish = now + remaining[f] / rate[f] if rate[f] > 0 else _INF
            events.append((finish, f, self.version[f]))
            if self.watched[f]:
                self.log.append((now, f, rate[f]))
        return events

    def _connected(self) -> list[int]:
        """The flows connected to a changed link through links they share, in the order they are found; no
        link is changed any more."""
        on_link, flow_links = self.on_link, self.links
        stack = [link for link in self.dirty if on_link[link]]
        seen_links = set(self.dirty)
        self.dirty = {}
        flows: list[int] = []
        seen_flows: set[int] = set()
        while stack:
            for f in on_link[stack.pop()]:
                if f not in seen_flows:
                    seen_flows.add(f)
                    flows.append(f)
                    for link in flow_links[f]:
                        if link not in seen_links:
                            seen_links.add(link)
                            stack.append(link)
        return flows

    def _freeze(self, frozen, rate: float | None, cap: dict[int, float], load: dict[int, float]) -> None:
        """Fix the rate of `frozen` flows (at `rate`, or each at its own limit) and take it off their links."""
        for f in frozen:
            r = self.cap[f] if rate is None else rate
            self.rate[f] = r
            for link, w in zip(self.links[f], self.weight[f], strict=True):
                cap[link] -= r * w
                load[link] -= w

    def _progressive_filling(self, flows: list[int]) -> None:
        """Max-min fair rates: raise all rates together; freeze the flows of each link that fills up, and
        each flow that reaches its own limit."""
        cap: dict[int, float] = {}
        load: dict[int, float] = {}
        for f in flows:
            for link, w in zip(self.links[f], self.weight[f], strict=True):
                cap[link] = self.capacity[link]
                load[link] = load.get(link, 0.0) + w
        unfrozen = dict.fromkeys(flows)  # an ordered set: flows freeze in the order they were found
        while unfrozen:
            share = min((cap[link] / load[link] for link in load if load[link] > EMPTY_LOAD), default=_INF)
            if self.limited:
                lowest = min(self.cap[f] for f in unfrozen)
                if lowest <= share:
                    limited = [f for f in unfrozen if self.cap[f] <= lowest * (1 + SAME_SHARE)]
                    self._freeze(limited, None, cap, load)
                    for f in limited:
                        del unfrozen[f]
                    continue
            bottlenecks = [link for link in load
                           if load[link] > EMPTY_LOAD and cap[link] / load[link] <= share * (1 + SAME_SHARE)]
            frozen = dict.fromkeys(f for link in bottlenecks for f in self.on_link[link] if f in unfrozen)
            self._freeze(frozen, share, cap, load)
            for link in bottlenecks:
                load[link] = 0.0
            for f in frozen:
                del unfrozen[f]


def max_min_rates(links: np.ndarray, capacity: np.ndarray, cap: np.ndarray,
                  weight: np.ndarray | None = None) -> np.ndarray:
    """Max-min fair rates of flows all active at once (progressive filling, vectorised over flows).

    `links`: [flows, hops] link ids, NO_LINK padded; `cap`: each flow's own limit; `weight`: [flows, hops], how
    much of a flow's rate each of its links carries per unit (None: all of it, on every link)."""
    rates = np.zeros(len(links))
    active = np.ones(len(links), dtype=bool)
    room = capacity.astype(float)
    valid = links != NO_LINK
    safe = np.where(valid, links, 0)
    per_slot = np.ones(links.shape) if weight is None else np.asarray(weight, dtype=float)
    while active.any():
        crossed = safe[active][valid[active]]
        load = np.bincount(crossed, per_slot[active][valid[active]], minlength=len(capacity)).astype(float)
        share = np.divide(room, load, out=np.full(len(capacity), np.inf), where=load > 0)
        flow_share = np.where(valid, share[safe], np.inf).min(axis=1)
        level = min(float(flow_share[active].min()), float(cap[active].min()))
        done = active & ((flow_share <= level * (1 + SAME_SHARE)) | (cap <= level * (1 + SAME_SHARE)))
        rates[done] = level
        np.subtract.at(room, safe[done][valid[done]], level * per_slot[done][valid[done]])
        active &= ~done
    return rates
