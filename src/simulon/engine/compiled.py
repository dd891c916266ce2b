"""The replay's event loop compiled by numba: replay.py's `_run` and fair_share.py's `FlowNetwork`, step for step,
over flat arrays.

What is modelled is replay.py's: nodes start once their dependencies are met, kernels take their (SM-stretched)
durations, flows share their links max-min fairly (progressive filling, recomputed for the flows connected to a
change once nothing more happens now, nor within the reshare window of its first change) and are delivered one
latency after their last byte (less what a Simple ring step hands over early, flows.sliced_handoffs). The arrays
stand for the Python objects:

- the event queue is a binary heap of (time, sequence, kind, item, version) entries ordered by (time,
  sequence), the same total order as Python's heapq of tuples, so that events pop in the same order;
- a link's active flows, a dict used as an ordered set in FlowNetwork, are a doubly linked list of the link's
  slots (one per flow and hop, in the flows' CSR of links) in the order they joined;
- the changed links, a dict too, are a list and a flag per link.

Every floating-point operation is the Python one, in the same order, with Python's min and max (the first of
equal values), so that each node's start and finish time is the same to the bit (tests/engine/test_compiled.py).

The loop runs until progress is due (every REPORT_EVERY finished nodes), returns to Python to report it, and
goes on; it also returns when the event heap may have to grow, for Python to give it more room. numba caches
the compiled loop next to this file (cache=True): the first replay on a machine compiles it (10 to 20 s on two
cores), later processes load it (about 0.6 s, after about 1 s to import numba; replay.COMPILED_FROM_NODES
keeps small DAGs on the Python loop). numba's cache is keyed on this file alone, so the tolerances of other
modules are passed in (Settings) rather than compiled in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numba import njit

from ..dag.nodes import ranges
from .fair_share import EMPTY_LOAD, SAME_RATE, SAME_SHARE
from .flows import FlowProperties
from .footprint import LinkLoads
from .replay_input import MAX_HELD_SHARE, NO_FLOW, NOT_CHANGED, NOT_FINISHED, SAME_TIME, Event, NodeArrays, retimed

NODE_DONE, LAST_BYTE, LAUNCHED = int(Event.NODE_DONE), int(Event.LAST_BYTE), int(Event.LAUNCHED)
NONE = -1
"""No slot: the end of a link's list of flows."""
FINISHED, REPORT, GROW = 0, 1, 2
"""Why the compiled loop returned: no event is left; progress is due; the event heap or the rate log may run out
of room."""
SEQ, HEAP, DIRTY, READY, DONE, REPORT_AT, LOGGED, RUNNING = range(8)
"""The loop's counters: events pushed, events in the heap, changed links, ready nodes, finished nodes, the
finished count at which progress is next reported, rates logged, and SM-bound kernels under way (a marker re-times
at most those: one event each)."""
HEAP_ROOM = 1 << 16
"""Entries the event heap starts with beyond two per flow; it doubles when it may not hold one more step. The rate
log starts with as many beyond two per watched flow, and doubles alike."""
_INF = np.inf
ENTRY = {"cache": True, "_nrt": False}
"""How the loop is compiled: cached next to this file; without reference counting of arrays (every array comes
from Python and outlives the call; counted, passing the state between the helpers took 3/4 of the time)."""
INLINED = {**ENTRY, "inline": "always"}
"""The loop's helpers: inlined into it (in numba's IR), so that one function is compiled and cached."""


class Graph(NamedTuple):
    """What the loop reads and never changes: the nodes, the flows and their links."""

    successors: np.ndarray
    successor_ptr: np.ndarray
    next_sends: np.ndarray
    next_send_ptr: np.ndarray
    flow_of: np.ndarray
    duration: np.ndarray
    span: np.ndarray
    sm_bound: np.ndarray
    gpu: np.ndarray
    retimed: np.ndarray    # per node: SM-bound and re-timed as collectives join and leave (replay.retimed)
    wire: np.ndarray       # per flow: bytes on the wire
    latency: np.ndarray    # seconds from last byte to delivery
    lead: np.ndarray       # seconds of it a sliced ring step may hand over early (flows.sliced_handoffs)
    overlap: np.ndarray    # per second of the flow's transfer, up to lead
    delay: np.ndarray      # launch delay
    flow_node: np.ndarray  # node of each flow
    cap: np.ndarray        # own rate limit
    link_ptr: np.ndarray   # CSR of each flow's links: its slots are link_ptr[f]:link_ptr[f + 1]
    link: np.ndarray       # per slot: the link
    weight: np.ndarray     # per slot: how many flows the flow stands for on that link
    slot_flow: np.ndarray  # per slot: the flow
    first: np.ndarray      # per slot: the flow's first slot on that link (a route crossing a link twice joins once)
    capacity: np.ndarray   # per link: bytes/s
    watched: np.ndarray    # per flow: its rates are logged (rate_log.py)


class Network(NamedTuple):
    """FlowNetwork's state (per flow and per link), and scratch room for resharing."""

    remaining: np.ndarray
    rate: np.ndarray
    since: np.ndarray
    version: np.ndarray
    active: np.ndarray     # per flow: sending (FlowNetwork: in `rate`)
    member: np.ndarray     # per slot: in its link's list
    next_slot: np.ndarray  # per slot: the next slot of its link's list
    prev_slot: np.ndarray
    head: np.ndarray       # per link: its list's first slot, or NONE
    tail: np.ndarray
    dirty: np.ndarray      # the changed links in the order they changed
    is_dirty: np.ndarray
    flows: np.ndarray      # scratch: the flows being reshared, in the order found
    before: np.ndarray     # their rates before
    seen_flow: np.ndarray
    seen_link: np.ndarray
    stack: np.ndarray
    touched: np.ndarray    # the links seen while searching, to clear
    order: np.ndarray      # the reshared flows' links in the order first crossed
    in_order: np.ndarray
    room: np.ndarray       # per link: capacity left to the unfrozen flows
    load: np.ndarray       # per link: weight of its unfrozen flows
    unfrozen: np.ndarray
    frozen: np.ndarray
    is_frozen: np.ndarray
    bottleneck: np.ndarray


class Settings(NamedTuple):
    """What the run is told, and the loop's tolerances: passed in, not compiled in, since numba's cache knows
    only this file and would keep the values of other modules' constants it was compiled with."""

    sm_count: int
    window_s: float
    limited: bool         # some flow has a rate limit of its own
    report_every: int
    same_time: float      # replay_input.SAME_TIME
    not_changed: float    # replay_input.NOT_CHANGED
    max_held_share: float  # replay_input.MAX_HELD_SHARE
    same_share: float     # fair_share.SAME_SHARE
    empty_load: float     # fair_share.EMPTY_LOAD
    same_rate: float      # fair_share.SAME_RATE
    watched: int          # flows whose rates are logged: the most one step may log, less the one that ends


class Loop(NamedTuple):
    """The event loop's state between two calls."""

    start: np.ndarray
    finish: np.ndarray
    pending: np.ndarray
    held: np.ndarray
    due: np.ndarray         # per node: when an SM-bound kernel under way is to finish at its GPU's present stretch
    version: np.ndarray     # per node: a kernel's finish queued before its latest re-timing is stale
    running: np.ndarray     # per node: an SM-bound kernel under way, in its GPU's list (replay.py's dict of them)
    run_next: np.ndarray    # per node: the next kernel in its GPU's list of those under way, in start order
    run_prev: np.ndarray
    run_head: np.ndarray    # per GPU: its list's first kernel, or NONE
    run_tail: np.ndarray
    ready: np.ndarray       # a stack of nodes
    heap_time: np.ndarray
    heap_entry: np.ndarray  # [entries, 4]: sequence, kind, item, version
    counters: np.ndarray    # see SEQ ... LOGGED
    clock: np.ndarray       # [now, when the links first changed since the last reshare (NOT_CHANGED: not)]
    log_time: np.ndarray    # the watched flows' rates as set: from log_time[i] on, log_flow[i] sends at log_rate[i]
    log_flow: np.ndarray
    log_rate: np.ndarray


def event_loop(nodes: NodeArrays, props: FlowProperties, capacity: np.ndarray, loads: LinkLoads, num_gpus: int,
               sm_count: int, window_s: float, advance: Callable[[int], None], report_every: int,
               watched: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """replay.event_loop compiled: the same arguments, the same start and finish times and rate log."""
    graph = _graph(nodes, props, capacity, loads, watched)
    net = _network(len(props.nodes), len(capacity), len(graph.link))
    watching = int(np.count_nonzero(watched))
    loop = _loop(nodes, num_gpus, len(props.nodes), report_every, watching)
    settings = Settings(int(sm_count), float(window_s), bool(np.isfinite(props.cap).any()), int(report_every),
                        SAME_TIME, NOT_CHANGED, MAX_HELD_SHARE, SAME_SHARE, EMPTY_LOAD, SAME_RATE, watching)
    while True:
        status = _advance(graph, net, loop, settings)
        if status == REPORT:
            advance(int(loop.counters[DONE]))
        elif status == GROW:
            loop = _grown(loop, watching)
        else:
            logged = int(loop.counters[LOGGED])
            return loop.start, loop.finish, (loop.log_time[:logged].copy(), loop.log_flow[:logged].copy(),
                                             loop.log_rate[:logged].copy())


def _i64(values) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int64)


def _f64(values) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float64)


def first_slots(loads: LinkLoads) -> np.ndarray:
    """Per slot: whether it is its flow's first on its link (a flow loading a link twice joins its list once).
    A route has a handful of slots, so each slot is compared with the ones before it in its flow, one distance
    at a time, rather than sorting millions of slots by (flow, link)."""
    counts = np.diff(loads.ptr)
    position = ranges(np.zeros_like(counts), counts)  # the slot's place in its flow
    first = np.ones(len(loads.link), dtype=bool)
    for back in range(1, int(counts.max(initial=1))):
        later = np.flatnonzero(position >= back)
        first[later[loads.link[later] == loads.link[later - back]]] = False
    return first


def _graph(nodes: NodeArrays, props: FlowProperties, capacity: np.ndarray, loads: LinkLoads,
           watched: np.ndarray) -> Graph:
    """The loop's read-only arrays; each flow's links in CSR form with their weights."""
    counts = np.diff(loads.ptr)
    lead, overlap = props.handoffs()
    return Graph(_i64(nodes.successors), _i64(nodes.successor_ptr), _i64(nodes.next_sends),
                 _i64(nodes.next_send_ptr), _i64(nodes.flow_of), _f64(nodes.duration), _i64(nodes.span),
                 np.ascontiguousarray(nodes.sm_bound, dtype=np.bool_), _i64(nodes.gpu),
                 np.ascontiguousarray(retimed(nodes), dtype=np.bool_), _f64(props.wire),
                 _f64(props.latency), _f64(lead), _f64(overlap), _f64(props.delay), _i64(props.nodes), _f64(props.cap),
                 _i64(loads.ptr), _i64(loads.link), _f64(loads.weight), _i64(np.repeat(np.arange(len(counts)), counts)),
                 np.ascontiguousarray(first_slots(loads)), _f64(capacity),
                 np.ascontiguousarray(watched, dtype=np.bool_))


def _network(num_flows: int, num_links: int, num_slots: int) -> Network:
    """An empty network: no flow active, no link changed, every list empty."""
    def per_flow(dtype):
        return np.zeros(num_flows, dtype=dtype)

    def per_link(dtype):
        return np.zeros(num_links, dtype=dtype)

    def nowhere(count):
        return np.full(count, NONE, dtype=np.int64)

    return Network(
        remaining=per_flow(np.float64), rate=per_flow(np.float64), since=per_flow(np.float64),
        version=per_flow(np.int64), active=per_flow(np.bool_), member=np.zeros(num_slots, dtype=np.bool_),
        next_slot=nowhere(num_slots), prev_slot=nowhere(num_slots), head=nowhere(num_links), tail=nowhere(num_links),
        dirty=per_link(np.int64), is_dirty=per_link(np.bool_), flows=per_flow(np.int64), before=per_flow(np.float64),
        seen_flow=per_flow(np.bool_), seen_link=per_link(np.bool_), stack=per_link(np.int64),
        touched=per_link(np.int64), order=per_link(np.int64), in_order=per_link(np.bool_),
        room=per_link(np.float64), load=per_link(np.float64), unfrozen=per_flow(np.bool_), frozen=per_flow(np.int64),
        is_frozen=per_flow(np.bool_), bottleneck=per_link(np.int64))


def _loop(nodes: NodeArrays, num_gpus: int, num_flows: int, report_every: int, watched: int) -> Loop:
    """The loop before its first event: every node without dependencies ready, the highest id on top (the
    Python loop's list of them, popped from its end); nothing logged of the `watched` flows' rates."""
    n = len(nodes.pending)
    ready = np.zeros(n, dtype=np.int64)
    roots = np.flatnonzero(nodes.pending == 0)
    ready[:len(roots)] = roots
    room = HEAP_ROOM + 2 * num_flows
    counters = np.zeros(8, dtype=np.int64)
    counters[READY], counters[REPORT_AT] = len(roots), report_every
    logs = HEAP_ROOM + 2 * watched
    return Loop(np.zeros(n), np.full(n, NOT_FINISHED), _i64(nodes.pending).copy(), np.zeros(num_gpus, np.int64),
                np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.bool_), np.full(n, NONE, np.int64),
                np.full(n, NONE, np.int64), np.full(num_gpus, NONE, np.int64), np.full(num_gpus, NONE, np.int64),
                ready, np.zeros(room), np.zeros((room, 4), dtype=np.int64), counters, np.array([0.0, NOT_CHANGED]),
                np.zeros(logs),
                np.zeros(logs, dtype=np.int64), np.zeros(logs))


def _grown(loop: Loop, watched: int) -> Loop:
    """The loop with twice the room in its event heap, or its rate log, whichever may not hold one more step (the
    same test as _advance's)."""
    if loop.counters[LOGGED] + watched + 1 > len(loop.log_time):
        return loop._replace(log_time=_doubled(loop.log_time, int(loop.counters[LOGGED])),
                             log_flow=_doubled(loop.log_flow, int(loop.counters[LOGGED])),
                             log_rate=_doubled(loop.log_rate, int(loop.counters[LOGGED])))
    size = int(loop.counters[HEAP])
    return loop._replace(heap_time=_doubled(loop.heap_time, size), heap_entry=_doubled(loop.heap_entry, size))


def _doubled(array: np.ndarray, used: int) -> np.ndarray:
    """`array` with twice the room along its first axis, its first `used` entries kept."""
    grown = np.zeros((2 * len(array), *array.shape[1:]), dtype=array.dtype)
    grown[:used] = array[:used]
    return grown


@njit(**INLINED)
def _py_min(a, b):
    """Python's min(a, b): a unless b is smaller."""
    return b if b < a else a


@njit(**INLINED)
def _py_max(a, b):
    """Python's max(a, b): a unless b is larger."""
    return b if b > a else a


@njit(**INLINED)
def _earlier(time_a, seq_a, time_b, seq_b):
    """Whether event a comes before event b: Python's order of (time, sequence, ...) tuples."""
    return time_a < time_b or (time_a == time_b and seq_a < seq_b)


@njit(**INLINED)
def _move(heap_time, heap_entry, source, target):
    """Copy the heap's entry at `source` to `target`."""
    heap_time[target] = heap_time[source]
    for k in range(4):
        heap_entry[target, k] = heap_entry[source, k]


@njit(**INLINED)
def _push(loop, time, kind, item, version):
    """Queue an event with the next sequence number."""
    counters, heap_time, heap_entry = loop.counters, loop.heap_time, loop.heap_entry
    counters[SEQ] += 1
    seq = counters[SEQ]
    i = counters[HEAP]
    counters[HEAP] += 1
    while i > 0:
        parent = (i - 1) >> 1
        if not _earlier(time, seq, heap_time[parent], heap_entry[parent, 0]):
            break
        _move(heap_time, heap_entry, parent, i)
        i = parent
    heap_time[i] = time
    heap_entry[i, 0], heap_entry[i, 1], heap_entry[i, 2], heap_entry[i, 3] = seq, kind, item, version


@njit(**INLINED)
def _pop(loop):
    """Take the earliest event: (time, kind, item, version)."""
    counters, heap_time, heap_entry = loop.counters, loop.heap_time, loop.heap_entry
    time, kind, item, version = heap_time[0], heap_entry[0, 1], heap_entry[0, 2], heap_entry[0, 3]
    counters[HEAP] -= 1
    size = counters[HEAP]
    last_time, last_seq = heap_time[size], heap_entry[size, 0]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and _earlier(heap_time[child + 1], heap_entry[child + 1, 0], heap_time[child],
                                         heap_entry[child, 0]):
            child += 1
        if not _earlier(heap_time[child], heap_entry[child, 0], last_time, last_seq):
            break
        _move(heap_time, heap_entry, child, i)
        i = child
    _move(heap_time, heap_entry, size, i)
    return time, kind, item, version


@njit(**INLINED)
def _mark_dirty(net, counters, link):
    """Note that `link` changed (once until the next reshare, in the order of change)."""
    if not net.is_dirty[link]:
        net.is_dirty[link] = True
        net.dirty[counters[DIRTY]] = link
        counters[DIRTY] += 1


@njit(**INLINED)
def _add(g, net, counters, f, size, now):
    """FlowNetwork.add: flow `f` starts sending `size` bytes; it joins the end of its links' lists."""
    net.remaining[f] = size
    net.rate[f] = 0.0
    net.since[f] = now
    net.version[f] += 1
    net.active[f] = True
    for slot in range(g.link_ptr[f], g.link_ptr[f + 1]):
        link = g.link[slot]
        if g.first[slot] and not net.member[slot]:
            net.member[slot] = True
            net.next_slot[slot] = NONE
            net.prev_slot[slot] = net.tail[link]
            if net.tail[link] == NONE:
                net.head[link] = slot
            else:
                net.next_slot[net.tail[link]] = slot
            net.tail[link] = slot
        _mark_dirty(net, counters, link)


@njit(**INLINED)
def _remove(g, net, counters, f):
    """FlowNetwork.remove: flow `f` has sent its last byte; it leaves its links' lists."""
    for slot in range(g.link_ptr[f], g.link_ptr[f + 1]):
        link = g.link[slot]
        if net.member[slot]:
            net.member[slot] = False
            before, after = net.prev_slot[slot], net.next_slot[slot]
            if before == NONE:
                net.head[link] = after
            else:
                net.next_slot[before] = after
            if after == NONE:
                net.tail[link] = before
            else:
                net.prev_slot[after] = before
        _mark_dirty(net, counters, link)
    net.active[f] = False


@njit(**INLINED)
def _connected(g, net, counters):
    """FlowNetwork._connected: the flows connected to a changed link, in the order found, into net.flows;
    returns how many. No link is changed any more."""
    top = 0
    touched = 0
    for i in range(counters[DIRTY]):
        link = net.dirty[i]
        net.is_dirty[link] = False
        net.seen_link[link] = True
        net.touched[touched] = link
        touched += 1
        if net.head[link] != NONE:
            net.stack[top] = link
            top += 1
    counters[DIRTY] = 0
    found = 0
    while top > 0:
        top -= 1
        slot = net.head[net.stack[top]]
        while slot != NONE:
            f = g.slot_flow[slot]
            if not net.seen_flow[f]:
                net.seen_flow[f] = True
                net.flows[found] = f
                found += 1
                for hop in range(g.link_ptr[f], g.link_ptr[f + 1]):
                    link = g.link[hop]
                    if not net.seen_link[link]:
                        net.seen_link[link] = True
                        net.touched[touched] = link
                        touched += 1
                        net.stack[top] = link
                        top += 1
            slot = net.next_slot[slot]
    for i in range(touched):
        net.seen_link[net.touched[i]] = False
    for i in range(found):
        net.seen_flow[net.flows[i]] = False
    return found


@njit(**INLINED)
def _alone(g, f):
    """The rate of a flow alone on its links: its tightest link's share (before its own limit)."""
    share = 0.0
    for slot in range(g.link_ptr[f], g.link_ptr[f + 1]):
        value = g.capacity[g.link[slot]] / g.weight[slot]
        share = value if slot == g.link_ptr[f] else _py_min(share, value)
    return share


@njit(**INLINED)
def _freeze(g, net, count, rate, at_cap):
    """FlowNetwork._freeze: fix the rate of the first `count` of net.frozen (at `rate`, or each at its own limit)
    and take it off their links."""
    for k in range(count):
        f = net.frozen[k]
        r = g.cap[f] if at_cap else rate
        net.rate[f] = r
        for slot in range(g.link_ptr[f], g.link_ptr[f + 1]):
            link = g.link[slot]
            net.room[link] -= r * g.weight[slot]
            net.load[link] -= g.weight[slot]
    for k in range(count):
        net.unfrozen[net.frozen[k]] = False


@njit(**INLINED)
def _links_of(g, net, count):
    """The links of the first `count` of net.flows, in the order first crossed, with their capacity and the
    weight of the flows on them; returns how many."""
    links = 0
    for i in range(count):
        f = net.flows[i]
        net.unfrozen[f] = True
        for slot in range(g.link_ptr[f], g.link_ptr[f + 1]):
            link = g.link[slot]
            net.room[link] = g.capacity[link]
            if net.in_order[link]:
                net.load[link] = net.load[link] + g.weight[slot]
            else:
                net.in_order[link] = True
                net.order[links] = link
                links += 1
                net.load[link] = 0.0 + g.weight[slot]
    return links


@njit(**INLINED)
def _fair_share(net, links, s):
    """The lowest share of capacity left per unit of weight over the links still loaded (inf: none is), and how
    many links are still loaded: those no unfrozen flow loads any more leave net.order, the others keeping their
    order (a link's load only falls while filling, so it would be passed over from now on; FlowNetwork passes
    over it each round, which on a fabric of thousands of links and as many rounds was most of the work)."""
    share = _INF
    found = False
    kept = 0
    for j in range(links):
        link = net.order[j]
        if net.load[link] > s.empty_load:
            value = net.room[link] / net.load[link]
            share = value if not found else _py_min(share, value)
            found = True
            net.order[kept] = link
            kept += 1
        else:
            net.in_order[link] = False
    return share, kept


@njit(**INLINED)
def _freeze_limited(g, net, count, share, s):
    """Freeze the unfrozen flows at their own limit if the lowest limit is under the fair `share`; returns how
    many froze."""
    lowest = 0.0
    found = False
    for i in range(count):
        f = net.flows[i]
        if net.unfrozen[f]:
            lowest = g.cap[f] if not found else _py_min(lowest, g.cap[f])
            found = True
    if not lowest <= share:
        return 0
    frozen = 0
    for i in range(count):
        f = net.flows[i]
        if net.unfrozen[f] and g.cap[f] <= lowest * (1 + s.same_share):
            net.frozen[frozen] = f
            frozen += 1
    _freeze(g, net, frozen, 0.0, True)
    return frozen


@njit(**INLINED)
def _freeze_bottlenecks(g, net, links, share, s):
    """Freeze the unfrozen flows of every link whose share is the fair `share`, at that share; their links
    are full. Returns how many flows froze."""
    bottlenecks = 0
    for j in range(links):
        link = net.order[j]
        if net.load[link] > s.empty_load and net.room[link] / net.load[link] <= share * (1 + s.same_share):
            net.bottleneck[bottlenecks] = link
            bottlenecks += 1
    frozen = 0
    for j in range(bottlenecks):
        slot = net.head[net.bottleneck[j]]
        while slot != NONE:
            f = g.slot_flow[slot]
            if net.unfrozen[f] and not net.is_frozen[f]:
                net.is_frozen[f] = True
                net.frozen[frozen] = f
                frozen += 1
            slot = net.next_slot[slot]
    for k in range(frozen):
        net.is_frozen[net.frozen[k]] = False
    _freeze(g, net, frozen, share, False)
    for j in range(bottlenecks):
        net.load[net.bottleneck[j]] = 0.0
    return frozen


@njit(**INLINED)
def _progressive_filling(g, net, count, s):
    """FlowNetwork._progressive_filling over the first `count` of net.flows."""
    links = _links_of(g, net, count)
    unfrozen = count
    while unfrozen > 0:
        share, links = _fair_share(net, links, s)
        if s.limited:
            frozen = _freeze_limited(g, net, count, share, s)
            if frozen:
                unfrozen -= frozen
                continue
        frozen = _freeze_bottlenecks(g, net, links, share, s)
        if frozen == 0:
            raise RuntimeError("progressive filling found no bottleneck")  # where FlowNetwork would loop forever
        unfrozen -= frozen
    for j in range(links):
        net.in_order[net.order[j]] = False


@njit(**INLINED)
def _reshare(g, net, loop, now, s):
    """FlowNetwork.reshare, its finish events queued: new rates for every flow connected to a changed link."""
    count = _connected(g, net, loop.counters)
    for i in range(count):  # bring progress up to now at the old rate
        f = net.flows[i]
        net.before[i] = net.rate[f]
        net.remaining[f] = _py_max(net.remaining[f] - net.rate[f] * (now - net.since[f]), 0.0)
        net.since[f] = now
    if count == 1:
        f = net.flows[0]
        share = _alone(g, f)
        net.rate[f] = _py_min(share, g.cap[f]) if s.limited else share
    else:
        _progressive_filling(g, net, count, s)
    for i in range(count):
        f = net.flows[i]
        old, rate = net.before[i], net.rate[f]
        if old > 0 and abs(rate - old) <= s.same_rate * old:
            net.rate[f] = old
            continue
        net.version[f] += 1
        finish = now + net.remaining[f] / rate if rate > 0 else _INF
        _push(loop, finish, LAST_BYTE, f, net.version[f])
        if g.watched[f]:
            _log(loop, now, f, rate)


@njit(**INLINED)
def _log(loop, now, f, rate):
    """FlowNetwork's log: flow `f` sends at `rate` from `now` on."""
    i = loop.counters[LOGGED]
    loop.log_time[i], loop.log_flow[i], loop.log_rate[i] = now, f, rate
    loop.counters[LOGGED] += 1


@njit(**INLINED)
def _release(loop, targets, begin, end):
    """One dependency of each of targets[begin:end] is met; those with none left are ready."""
    pending, ready, counters = loop.pending, loop.ready, loop.counters
    for i in range(begin, end):
        s = targets[i]
        pending[s] -= 1
        if pending[s] == 0:
            ready[counters[READY]] = s
            counters[READY] += 1


@njit(**INLINED)
def _start(g, net, loop, node, now, s):
    """Start a ready node: a flow launches or starts sending, a kernel's completion is queued, a marker
    completes on the spot (and releases its successors)."""
    loop.start[node] = now
    f = g.flow_of[node]
    if f != NO_FLOW:
        if g.delay[f] > 0:
            _push(loop, now + g.delay[f], LAUNCHED, f, 0)
        else:
            _add(g, net, loop.counters, f, g.wire[f], now)
        return
    gpu = g.gpu[node]
    if g.duration[node] > 0:
        busy = g.duration[node]
        if g.sm_bound[node] and loop.held[gpu] != 0:
            busy *= _stretch(loop.held[gpu], s)
        if g.retimed[node]:
            loop.due[node] = now + busy
            _join(loop, gpu, node)
        _push(loop, now + busy, NODE_DONE, node, 0)
        return
    if g.span[node] != 0 and loop.run_head[gpu] != NONE:  # the kernels under way go on at the new share of the SMs
        old, new = _stretch(loop.held[gpu], s), _stretch(loop.held[gpu] + g.span[node], s)
        if new != old:
            kernel = loop.run_head[gpu]
            while kernel != NONE:
                loop.due[kernel] = now + (loop.due[kernel] - now) / old * new
                loop.version[kernel] += 1
                _push(loop, loop.due[kernel], NODE_DONE, kernel, loop.version[kernel])
                kernel = loop.run_next[kernel]
    loop.held[gpu] += g.span[node]
    loop.finish[node] = now
    loop.counters[DONE] += 1
    _release(loop, g.successors, g.successor_ptr[node], g.successor_ptr[node + 1])


@njit(**INLINED)
def _stretch(held, s):
    """replay.stretch: how much longer an SM-bound kernel runs while collectives hold `held` SMs of its GPU."""
    if held == 0:
        return 1.0
    return s.sm_count / (s.sm_count - _py_min(float(held), s.max_held_share * s.sm_count))


@njit(**INLINED)
def _join(loop, gpu, node):
    """Kernel `node` joins the end of its GPU's list of SM-bound kernels under way."""
    loop.running[node] = True
    loop.run_prev[node], loop.run_next[node] = loop.run_tail[gpu], NONE
    if loop.run_tail[gpu] == NONE:
        loop.run_head[gpu] = node
    else:
        loop.run_next[loop.run_tail[gpu]] = node
    loop.run_tail[gpu] = node
    loop.counters[RUNNING] += 1


@njit(**INLINED)
def _leave(loop, gpu, node):
    """Kernel `node` leaves its GPU's list of SM-bound kernels under way."""
    loop.running[node] = False
    before, after = loop.run_prev[node], loop.run_next[node]
    if before == NONE:
        loop.run_head[gpu] = after
    else:
        loop.run_next[before] = after
    if after == NONE:
        loop.run_tail[gpu] = before
    else:
        loop.run_prev[after] = before
    loop.counters[RUNNING] -= 1


@njit(**ENTRY)
def _advance(g, net, loop, s):
    """replay.py's `_run` from where it was left until progress is due (REPORT), the event heap may be too
    small for one more step (GROW), or no event is left (FINISHED)."""
    counters = loop.counters
    num_flows = len(g.wire)
    while True:
        now = loop.clock[0]
        if counters[HEAP] + num_flows + counters[RUNNING] + 2 > len(loop.heap_time) or \
                counters[LOGGED] + s.watched + 1 > len(loop.log_time):
            return GROW
        if counters[READY] > 0:
            counters[READY] -= 1
            _start(g, net, loop, loop.ready[counters[READY]], now, s)
            continue
        if counters[DIRTY] > 0:
            changed = now if loop.clock[1] == s.not_changed else loop.clock[1]
            loop.clock[1] = changed
            if counters[HEAP] == 0 or \
                    loop.heap_time[0] > _py_max(now + s.same_time * _py_max(now, 1.0), changed + s.window_s):
                loop.clock[1] = s.not_changed
                _reshare(g, net, loop, now, s)
        if counters[HEAP] == 0:
            return FINISHED
        now, kind, item, version = _pop(loop)
        loop.clock[0] = now
        if kind == LAST_BYTE:
            if net.version[item] != version or not net.active[item]:
                continue  # superseded by a later rate change
            if g.watched[item]:
                _log(loop, now, item, 0.0)
            _remove(g, net, counters, item)
            node = g.flow_node[item]
            hidden = _py_min(g.lead[item], g.overlap[item] * (now - loop.start[node]))
            _push(loop, now + (g.latency[item] - hidden), NODE_DONE, node, 0)
            _release(loop, g.next_sends, g.next_send_ptr[node], g.next_send_ptr[node + 1])
        elif kind == LAUNCHED:
            loop.start[g.flow_node[item]] = now
            _add(g, net, counters, item, g.wire[item], now)
        else:
            if version != loop.version[item]:
                continue  # re-timed since: a collective joined or left its GPU
            if loop.running[item]:
                _leave(loop, g.gpu[item], item)
            loop.finish[item] = now
            _release(loop, g.successors, g.successor_ptr[item], g.successor_ptr[item + 1])
            counters[DONE] += 1
            if counters[DONE] >= counters[REPORT_AT]:
                counters[REPORT_AT] = counters[DONE] + s.report_every
                return REPORT
