"""A steady-state estimate of a lone collective, for collectives too large to replay flow by flow.

Every flow moves at the max-min fair rate it gets while the other flows of its level run with it: its
depth in the dependency graph, so that the legs of one chunk up a tree or a chain, which follow one another,
do not share links, while a pipeline's later legs of early chunks run beside earlier legs of later ones. A chain
of dependent flows takes the sum of their transfer times and latencies (a sender's next flow waits only
for the last byte of its previous one; a Simple ring step's latency less what its later slices' transfer hides,
flows.sliced_handoffs); no link moves more than its capacity. The estimate is the launch
plus the larger of the longest chain and the busiest link's bytes (plus one flow's latency and the local step
its receiver ends with, see LinkModel.local_pass). A ring's
steps repeat, so one step stands for all of them. Routes, rates and chain order do not depend on the
message size, so a size sweep computes them once per flow structure. On a ring over identical links this
is exactly what replay gives; the tests bound the difference elsewhere.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..collective.common import FlowSet
from ..collective.decompose import sliced_steps
from ..collective.nccl import PROTOCOLS
from ..collective.types import GATHER_SCATTER, CollType
from ..dag.nodes import ranges
from ..network.fabric import NO_LINK
from ..network.topology import FROM_SCALE_UP_SWITCH, TO_SCALE_UP_SWITCH, Topology, endpoints
from .fair_share import max_min_rates
from .flows import (
    LinkTerms,
    domain_members,
    link_terms,
    sliced_handoffs,
    staged_parts,
    staging_delay,
    tree_bound,
)
from .footprint import connection_spread

MIN_RATE = 1e-9
"""Wire bytes/s a flow is taken to move at least, so that a flow with no rate takes long rather than
dividing by zero."""


@dataclass(frozen=True)
class _Chain:
    """One flow set's dependencies, grouped in levels so that a flow comes after its parents."""

    periods: int
    levels: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]

    @classmethod
    def of(cls, flows: FlowSet) -> _Chain:
        counts = np.diff(flows.parent_ptr)
        streamed = flows.streamed
        if flows.periods > 1:  # parents are in the period before: one level, repeated
            return cls(flows.periods, [cls._level(flows, np.arange(len(flows)), counts, streamed)])
        depth = np.zeros(len(flows), dtype=np.int64)
        pending = counts.copy()
        by_parent = np.argsort(flows.parent_idx, kind="stable")
        child_of = flows.parent_of[by_parent]
        first = np.searchsorted(flows.parent_idx[by_parent], np.arange(len(flows) + 1))
        frontier = np.flatnonzero(pending == 0)
        level = 0
        while len(frontier):  # Kahn's algorithm, a level at a time
            depth[frontier] = level
            kids = child_of[ranges(first[frontier], first[frontier + 1])]
            np.subtract.at(pending, kids, 1)
            frontier = np.unique(kids[pending[kids] == 0])
            level += 1
        order = np.argsort(depth, kind="stable")
        bounds = np.searchsorted(depth[order], np.arange(level + 1))
        return cls(1, [cls._level(flows, order[bounds[d]:bounds[d + 1]], counts, streamed) for d in range(level)])

    @staticmethod
    def _level(flows: FlowSet, members: np.ndarray, counts: np.ndarray, streamed: np.ndarray) -> tuple:
        """(flows, those with parents, their parents, streamed per parent link, reduceat starts)."""
        with_parents = members[counts[members] > 0]
        links = ranges(flows.parent_ptr[with_parents], flows.parent_ptr[with_parents + 1])
        starts = np.concatenate([[0], np.cumsum(counts[with_parents])[:-1]]).astype(np.int64)
        return members, with_parents, flows.parent_idx[links], streamed[links], starts

    def depth(self, count: int) -> np.ndarray:
        """Each flow's level: the flows of one level are those that run at the same time."""
        depth = np.zeros(count, dtype=np.int64)
        for d, level in enumerate(self.levels):
            depth[level[0]] = d
        return depth

    def last_arrival(self, transfer: np.ndarray, latency: np.ndarray, tail: np.ndarray, handover: np.ndarray
                     ) -> float:
        """When the last flow has arrived and been handled (`tail`: what its receiver does with it then), each
        starting as its parents allow (`handover` after their last byte: their latency, less what a sliced ring
        step hands over early) and taking its transfer time."""

        def begin(done: np.ndarray, level: tuple) -> np.ndarray:
            _, with_parents, parents, streamed, starts = level
            start = np.zeros(len(transfer))
            if len(with_parents):
                ready = done[parents] + np.where(streamed, 0.0, handover[parents])
                start[with_parents] = np.maximum.reduceat(ready, starts)
            return start

        if self.periods > 1:
            done = periodic_finish(lambda d: begin(d, self.levels[0]) + transfer, transfer.copy(), self.periods)
        else:
            done = np.zeros(len(transfer))
            for level in self.levels:
                members = level[0]
                done[members] = begin(done, level)[members] + transfer[members]
        return float((done + latency + tail).max(initial=0.0))


MAX_CYCLICITY = 64
"""The longest cycle periodic_finish looks for in a chain's periods (a ring over 8-GPU nodes repeats every 8)."""
UNIFORM = 1e-12
"""How far apart (relative) the moves of every finish over one cycle may be and still count as one move: rounding
of finishes that grow period by period, far below any time the estimate reports."""
SAMPLE_FLOWS = 64
"""Flows, spread over a period, whose moves are compared before the whole period's are."""


def _uniform(shift: np.ndarray) -> bool:
    """Whether every finish moved by the same time (a chain that has not moved at all counts as uniform too)."""
    return bool(shift.size) and float(np.ptp(shift)) <= UNIFORM * max(float(np.abs(shift).max()), np.finfo(float).tiny)


def periodic_finish(step: Callable[[np.ndarray], np.ndarray], first: np.ndarray, periods: int) -> np.ndarray:
    """`step` applied periods - 1 times to `first` (each flow's finish in the first period): each period's flows
    start at the latest of their parents' finishes in the one before, a max-plus linear map. Once c periods move
    every finish by the same time C (x_k = x_(k-c) + C), every later c do (the map commutes with adding a constant
    to all its inputs), so the rest is taken in whole cycles of C and the remainder stepped (Baccelli et al.,
    Synchronization and Linearity, 1992, ch. 3: the cyclicity theorem). A few flows are compared first, the
    whole period only where they agree. A ring over 1,024 DGX nodes has 16,381 periods: stepped one by one, a
    1 GiB all-reduce took 8 s to estimate."""
    sample = np.linspace(0, len(first) - 1, min(len(first), SAMPLE_FLOWS)).astype(np.int64)
    history = [first]
    done = first
    for k in range(1, periods):
        done = step(done)
        history.append(done)
        for c in range(1, min(MAX_CYCLICITY, k) + 1):
            before = history[-1 - c]
            if _uniform(done[sample] - before[sample]) and _uniform(shift := done - before):
                cycles, rest = divmod(periods - 1 - k, c)
                done = done + cycles * float(shift.mean())
                for _ in range(rest):
                    done = step(done)
                return done
        del history[:-MAX_CYCLICITY - 1]
    return done


@dataclass(frozen=True)
class _Structure:
    """What does not change with the message size: routes, latencies, fair rates, dependency order."""

    latency: np.ndarray
    terms: LinkTerms
    lanes: np.ndarray
    staged: np.ndarray        # parts of a grouped send inside a scale-up domain (see flows.staging_delay)
    local: np.ndarray         # the local step a flow's receiver ends with (see LinkModel.local_pass)
    rate: np.ndarray          # wire bytes/s of every flow
    chains: list[_Chain]
    sets: np.ndarray          # which flow set each flow belongs to
    links: np.ndarray         # [flows, slots]: each flow's links (its connections' above the leaves), NO_LINK padded
    shares: np.ndarray        # [flows, slots]: the share of the flow's bytes each of those links carries


class SteadyState:
    """Steady-state estimates of lone collectives on one topology; a size sweep shares the structure."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self.known: dict[str, _Structure] = {}

    def estimate(self, flows: list[FlowSet], ctype: CollType, algorithm: str, protocol: str) -> float:
        """Seconds from every member joining to the last finishing, for concurrent flow sets of a collective of
        type `ctype` run by `algorithm` under `protocol`."""
        gathers = ctype in GATHER_SCATTER  # all the type changes of the flows' terms (LinkModel.step_latency)
        key = _fingerprint(flows, gathers, algorithm, protocol)
        if key not in self.known:  # a sweep moves on: keep the latest only
            self.known = {key: self._structure(flows, gathers, algorithm, protocol)}
        st, model, topology = self.known[key], self.topology.model, self.topology
        size = np.concatenate([fs.size for fs in flows])
        wire = st.terms.wire(size)
        transfer = wire / np.maximum(st.rate, MIN_RATE)
        latency = st.latency + staging_delay(model, size, st.lanes, st.staged)
        tail = model.local_pass(size, st.lanes, st.local)
        sliced = sliced_steps(algorithm, ctype, protocol)
        lead, overlap = sliced_handoffs(size, st.lanes, np.ones(len(size)), sliced, True, latency)
        handover = latency - np.minimum(lead, overlap * transfer)
        chain = max(c.last_arrival(*(a[st.sets == i] for a in (transfer, latency, tail, handover)))
                    for i, c in enumerate(st.chains))
        periods = np.concatenate([np.full(len(fs), fs.periods) for fs in flows])
        valid = st.links != NO_LINK
        load = np.bincount(st.links[valid], weights=(st.shares * (wire * periods)[:, None])[valid],
                           minlength=topology.num_links)
        used = topology.capacity > 0
        busiest = float((load[used] / topology.capacity[used]).max(initial=0.0)) + \
            float((latency + tail).max(initial=0.0))
        send_receive = any(fs.send_receive for fs in flows)
        return float(model.launch_delay(PROTOCOLS.index(protocol), send_receive)) + max(chain, busiest)

    def _structure(self, flows: list[FlowSet], gathers: bool, algorithm: str, protocol: str) -> _Structure:
        topology = self.topology
        model, p = topology.model, PROTOCOLS.index(protocol)
        gpu, peer = [], []
        for fs in flows:
            g, d = endpoints(fs.src_pos, fs.dst_pos, fs.switch)
            ranks = np.asarray(fs.group, dtype=np.int64)
            gpu.append(ranks[g])
            peer.append(np.where(d >= 0, ranks[np.maximum(d, 0)], d))
        gpu, peer = np.concatenate(gpu), np.concatenate(peer)
        links, latency, scale_out = topology.routes(gpu, peer)
        lanes = np.concatenate([np.full(len(fs), fs.lanes) for fs in flows])
        grouped = np.concatenate([np.full(len(fs), fs.grouped_sends) for fs in flows])
        links, shares = connection_spread(topology, links, gpu, peer, lanes, grouped).dense()
        in_switch = np.isin(peer, (TO_SCALE_UP_SWITCH, FROM_SCALE_UP_SWITCH))
        # the flows a member handles last: a repeated period's (after its last repeat), else those feeding none
        local = np.concatenate([np.where((fs.periods > 1) | ~np.isin(np.arange(len(fs)), fs.parent_idx),
                                         fs.local_pass, "") for fs in flows])
        fan_in = np.concatenate([np.full(len(fs), domain_members(fs.group, topology.domain_gpus).max(initial=1))
                                 for fs in flows])
        bound = np.concatenate([np.full(len(fs), tree_bound(model, algorithm, protocol, fs.group,
                                                            topology.domain_gpus)) for fs in flows])
        terms = link_terms(model, p, lanes, scale_out, in_switch, grouped, fan_in, bound, gathers)
        chains = [_Chain.of(fs) for fs in flows]
        depth = np.concatenate([c.depth(len(fs)) for c, fs in zip(chains, flows, strict=True)])
        rate = np.zeros(len(gpu))
        for d in np.unique(depth):
            here = depth == d
            rate[here] = max_min_rates(links[here], topology.capacity, terms.cap[here], shares[here])
        sets = np.concatenate([np.full(len(fs), i) for i, fs in enumerate(flows)])
        staged = staged_parts(grouped, scale_out, p)
        return _Structure(latency + terms.hop, terms, lanes, staged, local, rate, chains, sets, links, shares)


def _fingerprint(flows: list[FlowSet], gathers: bool, algorithm: str, protocol: str) -> str:
    """A key for everything of the flows but their sizes (`gathers`: of an all-gather or reduce-scatter, whose
    in-switch legs take their own latency)."""
    digest = hashlib.blake2b(f"{gathers} {algorithm} {protocol}".encode(), digest_size=16)
    for fs in flows:
        digest.update(repr((fs.group, fs.switch, fs.lanes, fs.periods, fs.local_pass)).encode())
        for column in (fs.src_pos, fs.dst_pos, fs.step, fs.parent_ptr, fs.parent_idx):
            digest.update(np.ascontiguousarray(column).tobytes())
    return digest.hexdigest()
