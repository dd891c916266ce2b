"""Discrete-event replay of an ExecutionDAG over the network.

Kernels and markers take their populated durations. Flows are fluid: they share every link they cross
max-min fairly (progressive filling, Bertsekas and Gallager's Data Networks 6.5.2, see fair_share.py;
weighted by how many flows a folded flow stands for, each flow at most at its own rate limit), and rates
are recomputed only when a flow starts or ends, and only for the flows connected to it through shared
links. A flow starts its launch delay after it is ready and is delivered one path latency after its last
byte leaves, less what a Simple ring step hands over early, its later slices' transfer overlapping its latency
(flows.sliced_handoffs); a sender's next flow that waits for it may start as soon as that last byte has left.

The event loop has two forms with the same steps in the same order: `_run` below, in Python, the reference,
and compiled.py's, the same loop compiled by numba. They give every node the same start and finish time to the
bit (tests/engine/test_compiled.py), so which runs is a matter of speed: `replay(engine=...)`, else the
environment variable SIMULON_REPLAY, picks "compiled", "python" or "auto" (the default: compiled for a DAG of
COMPILED_FROM_NODES nodes or more, or one collective of COMPILED_FROM_FLOWS_AT_ONCE flows starting together,
where it pays for importing numba and loading the compiled loop; Python below). Where numba cannot be imported,
compiled runs the Python loop.
"""

from __future__ import annotations

import heapq
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..config.errors import ConfigError
from ..dag.fold import Fold
from ..dag.nodes import NO_NODE, ExecutionDAG, NodeKind
from ..network.topology import Topology
from ..progress import REPORT_EVERY
from .fair_share import FlowNetwork
from .flows import FlowProperties, flow_properties
from .footprint import LinkLoads, flow_loads
from .rate_log import RateLog, busiest_links, carried_bytes, watched_flows
from .replay_input import (
    MAX_HELD_SHARE,
    NO_FLOW,
    NOT_CHANGED,
    NOT_FINISHED,
    SAME_TIME,
    Event,
    NodeArrays,
    node_arrays,
    retimed,
)

ENGINES = ("auto", "compiled", "python")
"""The forms of the event loop `replay` may be told to run: numba's (compiled.py), the Python reference, or
the one that is faster for the DAG's size."""
ENGINE_VARIABLE = "SIMULON_REPLAY"
"""The environment variable that picks the event loop where `replay` is not told."""
COMPILED_FROM_NODES = 200_000
"""DAG nodes from which "auto" runs the compiled loop: the Python loop replays 80k to 300k nodes a second, and a
process takes 1 to 2 s to import numba and load the cached compiled loop (benchmarks/bench_replay.py)."""

COMPILED_FROM_FLOWS_AT_ONCE = 600
"""Flows of one collective that start together (no parent flow: a ring's first step, the first sends of
an all-to-all's ranks) from which "auto" runs the compiled loop on a DAG of any size. Each flow that ends reshares
the links of every flow still connected to it, so the Python loop's time grows with the square of the flows under
way: `uv run python benchmarks/bench_replay_concurrency.py` (one collective on 32 DGX B200 nodes, medians of 3
fresh processes, numba's import and load included) gave, Python against compiled, an all-to-all of 32 ranks (512
at once) 0.26 against 0.60 s, of 40 (640) 0.49 against 0.44 s, of 48 (768) 1.8 against 0.5 s, of 128 (2,048) 24
against 1.5 s; a ring all-gather of 64 (512) 0.98 against 0.81 s. The bound lies between the 512 and 640 measured
(a choice, not a fit); strategy search times every expert-parallel all-to-all it weighs alone, in its estimator."""


@dataclass(frozen=True)
class Timeline:
    """When every node started and finished (seconds). Flows: first byte sent, delivered."""

    start: np.ndarray
    finish: np.ndarray
    flows: FlowProperties    # the flows as replayed (engine.flows.flow_properties), kept for the analysis
    loads: LinkLoads         # the links each flow loaded, and how heavily (engine.footprint.flow_loads)
    rates: RateLog           # the rates of the flows on the busiest links (engine.rate_log)

    @property
    def links(self) -> np.ndarray:
        """[flows, hops] link ids of each flow (NO_LINK padded), in dag flow order."""
        return self.flows.links

    @property
    def flow_nodes(self) -> np.ndarray:
        """The node id of each flow."""
        return self.flows.nodes

    @property
    def makespan(self) -> float:
        return float(self.finish.max()) if len(self.finish) else 0.0


@dataclass(frozen=True)
class _Nodes:
    """Per node, what the Python event loop reads (plain lists: the loop reads them one item at a time)."""

    successors: list[int]            # CSR targets (see replay_input.csr)
    successor_ptr: list[int]
    next_sends: dict[int, list[int]]  # flow node -> the sender's next flows (pipelined chunks)
    pending: list[int]               # dependencies not yet met: predecessors, and a streamed flow's previous one
    flow_of: list[int]               # flow index, or NO_FLOW
    duration: list[float]
    span: list[int]                  # see replay_input.channel_spans
    sm_bound: list[bool]             # see replay_input.sm_bound
    gpu: list[int]
    retimed: list[bool]              # SM-bound and not pipelined with a collective (replay_input.pipelined)


def _nodes(arrays: NodeArrays) -> _Nodes:
    """The node arrays as the lists and dict the Python loop reads."""
    ptr = arrays.next_send_ptr
    next_sends = {int(a): arrays.next_sends[ptr[a]:ptr[a + 1]].tolist() for a in np.flatnonzero(np.diff(ptr))}
    return _Nodes(arrays.successors.tolist(), arrays.successor_ptr.tolist(), next_sends, arrays.pending.tolist(),
                  arrays.flow_of.tolist(), arrays.duration.tolist(), arrays.span.tolist(), arrays.sm_bound.tolist(),
                  arrays.gpu.tolist(), retimed(arrays).tolist())



def replay(dag: ExecutionDAG, topology: Topology, fold: Fold, sm_count: int | np.ndarray = 0, window_s: float = 0.0,
           advance: Callable[[int], None] | None = None, engine: str | None = None) -> Timeline:
    """Run the DAG to completion; return every node's start and finish time.

    With the GPU's `sm_count`, a GEMM or attention kernel runs on the SMs the collectives running on its GPU leave:
    NCCL's kernel holds one SM per channel for the whole collective, so while `held` SMs are taken the kernel runs
    at (sm_count - held) / sm_count of its speed, re-timed each time a collective joins or leaves its GPU (what it
    has left is stretched by the new factor over the old), whichever of nodes ready at one instant starts first. A
    kernel pipelined with the collective it starts with (replay_input.pipelined) keeps its stretch at the start
    for its whole time. 0 leaves every kernel its measured time. On GPUs of several types `sm_count` is per rank
    (see per_rank_sms).

    Flows that start or finish within `window_s` of the first change since the last rate computation share the
    next one (0: one per distinct time); a flow starting inside the window waits for it. The window runs from that
    first change, not from the latest: measured from each event, a run of events under `window_s` apart put the
    computation off for as long as it lasted (up to 300 us in a 1 us window on 128 H800, a new flow sending
    nothing and a finished one's bandwidth left idle meanwhile), more the more GPUs were simulated.

    `advance(done)` is told every progress.REPORT_EVERY finished nodes how many are finished.

    `engine`: "compiled" (numba, compiled.py), "python" (the reference loop below) or "auto" (compiled from
    COMPILED_FROM_NODES nodes); None takes the SIMULON_REPLAY environment variable, else auto. Both loops give
    the same times to the bit; compiled falls back to python where numba cannot be imported."""
    if dag.duration is None:
        raise ValueError("the DAG has no kernel durations: populate it first")
    props = flow_properties(dag, topology, fold)
    loop = _event_loop(_engine(engine), dag)
    nodes, sm_count = per_rank_sms(dag, node_arrays(dag, props.nodes, int(np.max(sm_count, initial=0))), sm_count)
    loads = flow_loads(dag, topology, fold, props)
    busiest = busiest_links(carried_bytes(props.wire, loads, topology.num_links), topology.capacity)
    start, finish, log = loop(nodes, props, topology.capacity, loads, dag.num_gpus, sm_count, window_s,
                              advance or _unreported, REPORT_EVERY, watched_flows(loads, busiest))
    stuck = int(np.count_nonzero(finish == NOT_FINISHED))
    if stuck:
        n = dag.num_nodes
        raise RuntimeError(f"replay stalled with {stuck} of {n} nodes unfinished (a dependency cycle in the DAG)")
    return Timeline(start, finish, props, loads, RateLog(busiest, *log))


def per_rank_sms(dag: ExecutionDAG, nodes: NodeArrays, sm_count: int | np.ndarray) -> tuple[NodeArrays, int]:
    """The node arrays and the one SM count the event loops take, for one SM count or one per rank.

    Ranks of different SM counts s_g share one count S, a multiple of every s_g, with each channel a
    collective holds on rank g counted as S / s_g: S / (S - min(held * S / s_g, share * S)) is
    s_g / (s_g - min(held, share * s_g)), the rank's own slowdown, and spans stay whole numbers."""
    counts = np.asarray(sm_count, dtype=np.int64)
    if counts.ndim == 0 or len(np.unique(counts)) <= 1:
        return nodes, int(counts.max(initial=0)) if counts.ndim else int(counts)
    common = math.lcm(*np.unique(counts).tolist())
    scale = common // counts[dag.gpu]
    return replace(nodes, span=nodes.span * scale), common


def _engine(engine: str | None) -> str:
    """The event loop asked for: `engine`, else the environment's, else auto."""
    chosen = engine if engine is not None else os.environ.get(ENGINE_VARIABLE, "").strip().lower() or "auto"
    if chosen not in ENGINES:
        if engine is None:  # the user's environment: bad input, told as such
            raise ConfigError(f"environment variable {ENGINE_VARIABLE}: expected one of {', '.join(ENGINES)}, "
                              f"got {chosen!r}")
        raise ValueError(f"engine {chosen!r} is not one of {', '.join(ENGINES)}")
    return chosen


def flows_at_once(dag: ExecutionDAG) -> int:
    """The most flows of one collective that start together: those without a parent flow."""
    roots = (dag.kind == NodeKind.flow) & (dag.parent == NO_NODE) & (dag.coll >= 0)
    return int(np.bincount(dag.coll[roots]).max()) if roots.any() else 0


def _event_loop(engine: str, dag: ExecutionDAG):
    """The event loop to run for `dag`: compiled.event_loop, unless the Python one is asked for, auto finds the
    DAG too small and its collectives too narrow (COMPILED_FROM_NODES, COMPILED_FROM_FLOWS_AT_ONCE), or numba
    cannot be imported."""
    if engine == "python" or (engine == "auto" and dag.num_nodes < COMPILED_FROM_NODES
                              and flows_at_once(dag) < COMPILED_FROM_FLOWS_AT_ONCE):
        return event_loop
    try:
        from .compiled import event_loop as compiled_loop
    except Exception:  # no numba, or one that refuses the compiled module's options: the Python loop
        return event_loop
    return compiled_loop


def event_loop(nodes: NodeArrays, props: FlowProperties, capacity: np.ndarray, loads: LinkLoads, num_gpus: int,
               sm_count: int, window_s: float, advance: Callable[[int], None], report_every: int,
               watched: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The Python event loop over the DAG's `nodes` and flows `props` loading links of `capacity` (bytes/s) as
    `loads` says: every node's start and finish time (NOT_FINISHED where a cycle stalled it), and the rates the
    `watched` flows were given (times, flows, rates: rate_log.RateLog's). `advance(done)` is told every
    `report_every` finished nodes how many are finished."""
    links, weights = loads.rows()
    net = FlowNetwork(links, capacity, weights, props.cap, watched.tolist())
    start, finish = _run(_nodes(nodes), props, net, num_gpus, sm_count, window_s, advance, report_every)
    time, flow, rate = zip(*net.log, strict=True) if net.log else ((), (), ())
    log = (np.asarray(time, dtype=np.float64), np.asarray(flow, dtype=np.int64), np.asarray(rate, dtype=np.float64))
    return np.asarray(start, dtype=np.float64), np.asarray(finish, dtype=np.float64), log


def stretch(held: int, sm_count: int) -> float:
    """How much longer an SM-bound kernel runs while collectives hold `held` of its GPU's `sm_count` SMs (at most
    MAX_HELD_SHARE of them): sm_count / (sm_count - held), 1 where none are held."""
    return sm_count / (sm_count - min(held, MAX_HELD_SHARE * sm_count)) if held else 1.0


def _unreported(done: int) -> None:
    pass


def _run(nodes: _Nodes, props: FlowProperties, net: FlowNetwork, num_gpus: int, sm_count: int,
         window_s: float, advance: Callable[[int], None], report_every: int) -> tuple[list[float], list[float]]:
    """The event loop: start every ready node, reshare the links once nothing more happens now, take the next
    event; each node that completes (and each flow whose last byte leaves) releases the nodes waiting on it.
    Returns every node's start and finish time (NOT_FINISHED where a cycle stalled it)."""
    succ, succ_ptr, next_send, pending = nodes.successors, nodes.successor_ptr, nodes.next_sends, nodes.pending
    flow_of, duration, span, sm_bound, gpu_of = nodes.flow_of, nodes.duration, nodes.span, nodes.sm_bound, nodes.gpu
    retimed = nodes.retimed
    sizes, latency, delay, flow_node = props.wire.tolist(), props.latency.tolist(), props.delay.tolist(), \
        props.nodes.tolist()
    lead, overlap = props.handoffs()
    lead, overlap = lead.tolist(), overlap.tolist()
    node_done, last_byte, launched = Event.NODE_DONE, Event.LAST_BYTE, Event.LAUNCHED
    held = [0] * num_gpus  # SMs the collectives running on each GPU hold
    running: list[dict[int, None]] = [{} for _ in range(num_gpus)]  # SM-bound kernels under way, in start order
    due = [0.0] * len(flow_of)  # when each of them is to finish at its GPU's present stretch
    version_of = [0] * len(flow_of)  # a kernel's finish queued before its latest re-timing is stale
    n = len(flow_of)
    start = [0.0] * n
    finish = [NOT_FINISHED] * n
    events: list[tuple[float, int, int, int, int]] = []
    push, pop = heapq.heappush, heapq.heappop
    seq = 0
    now = 0.0
    changed = NOT_CHANGED  # when the links last reshared first changed again
    done, report_at = 0, report_every  # finished nodes, and when next to report them
    ready = np.flatnonzero(np.asarray(pending) == 0).tolist()  # nodes whose dependencies are all met
    while True:
        if ready:  # start a ready node
            node = ready.pop()
            start[node] = now
            f = flow_of[node]
            if f != NO_FLOW:
                if delay[f] > 0:
                    seq += 1
                    push(events, (now + delay[f], seq, launched, f, 0))
                else:
                    net.add(f, sizes[f], now)
                continue
            if duration[node] > 0:
                seq += 1
                busy = duration[node]
                if sm_bound[node] and held[gpu_of[node]]:
                    busy *= stretch(held[gpu_of[node]], sm_count)
                if retimed[node]:
                    due[node] = now + busy
                    running[gpu_of[node]][node] = None
                push(events, (now + busy, seq, node_done, node, 0))
                continue
            gpu = gpu_of[node]  # markers complete on the spot
            if span[node] and running[gpu]:  # the kernels under way there go on at the new share of the SMs
                old, new = stretch(held[gpu], sm_count), stretch(held[gpu] + span[node], sm_count)
                if new != old:
                    for kernel in running[gpu]:
                        due[kernel] = now + (due[kernel] - now) / old * new
                        version_of[kernel] += 1
                        seq += 1
                        push(events, (due[kernel], seq, node_done, kernel, version_of[kernel]))
            held[gpu] += span[node]
            finish[node] = now
            done += 1
            released = succ[succ_ptr[node]:succ_ptr[node + 1]]
        else:
            if net.dirty:  # reshare once nothing more happens now, nor within the window from the first change
                changed = now if changed == NOT_CHANGED else changed
                if not events or events[0][0] > max(now + SAME_TIME * max(now, 1.0), changed + window_s):
                    changed = NOT_CHANGED
                    for finish_time, f, version in net.reshare(now):
                        seq += 1
                        push(events, (finish_time, seq, last_byte, f, version))
            if not events:
                break
            now, _, kind, item, version = pop(events)
            if kind == last_byte:
                if net.version[item] != version or item not in net.rate:
                    continue  # superseded by a later rate change
                net.remove(item, now)
                seq += 1
                node = flow_node[item]
                push(events, (now + (latency[item] - min(lead[item], overlap[item] * (now - start[node]))), seq,
                              node_done, node, 0))
                released = next_send[node] if next_send and node in next_send else ()
            elif kind == launched:
                start[flow_node[item]] = now
                net.add(item, sizes[item], now)
                continue
            else:
                if version != version_of[item]:
                    continue  # re-timed since: a collective joined or left its GPU
                running[gpu_of[item]].pop(item, None)
                finish[item] = now
                released = succ[succ_ptr[item]:succ_ptr[item + 1]]
                done += 1
                if done >= report_at:
                    advance(done)
                    report_at = done + report_every
        for s in released:  # the nodes waiting on this one
            pending[s] -= 1
            if pending[s] == 0:
                ready.append(s)
    return start, finish
