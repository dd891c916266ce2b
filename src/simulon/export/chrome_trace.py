"""Chrome/Perfetto trace: a process per GPU (its type named where the cluster has several), a track per stream,
network flows with arrows, a counter of the memory each GPU has allocated over the iteration, and counters of the
busiest links' load.

Load the file in https://ui.perfetto.dev or chrome://tracing. Times are microseconds, written from whole
nanoseconds: each slice's start and end are rounded to the nanosecond and its duration is their difference, so
slices that follow each other in the simulation touch in the trace instead of overlapping by a rounding step
(Perfetto reads a time as round(value x 1000) ns, and drops a complete slice that overlaps its track's last one
without nesting in it). Slices that run at once on one GPU's stream or network side (collectives of one stream
pipelined together, concurrent flows) go on tracks of their own: "send", "send #2", ...; each slice takes the
first of its kind's tracks that is free by its start, so a GPU gets as many tracks as it has slices running at
once, and no two slices of one track overlap.

How much is drawn is `detail`: "kernels" (compute kernels only), "collectives" (and each GPU's part in each
collective, named with its phase where not a forward, 'moe_dispatch (AllToAll, backward)', and pipeline sends on the
sender's pipeline stream and their receives on the receiver's: one slice per operation, not per flow) or "flows"
(and every network flow, pipeline sends' too, on its sender's send tracks and on its receiver's receive tracks, with
an arrow between them; a receiver that is folded onto a representative, dag/fold.py, shows its receive on its
representative's receive tracks; an in-network reduction's legs, NVLS's or SHARP's, go "to its scale-up switch" (or
scale-out) on the GPU's send tracks and "from its scale-up switch" on its receive tracks). A collective has a flow
per rank, channel and chunk, so "flows" multiplies the large examples' traces: 111 MB with
collectives and 368 MB with every flow for examples/gpt3_175b_1024gpu.yaml, whose writing then peaks at 2.6 GB
of memory; "collectives" is the default. A GPU's part in a collective starts when the group's last member joins
(analysis.exposure.collective_parts, as the breakdown, `--json` and the gantt chart count it): from its own arrival
until then it waits on its peers, drawn as a "waiting for GPU n" slice (category "wait") before the collective's, so
that a 4-byte gradient-norm all-reduce the first stage reaches 54 ms after the last no longer shows as 54 ms of
communication on the last stage.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..analysis.exposure import collective_parts, last_joins
from ..analysis.kinds import shown_stream
from ..analysis.links import LinkSeries
from ..analysis.schedule import COMPUTE_KINDS
from ..config.units import GiB
from ..dag.nodes import PIPELINE_SEND, CollectiveInstance, ExecutionDAG, NodeKind
from ..engine.replay import Timeline
from ..memory import MemoryReport
from ..network.topology import FROM_SCALE_OUT_SWITCH, FROM_SCALE_UP_SWITCH, TO_SCALE_OUT_SWITCH, TO_SCALE_UP_SWITCH
from ..workload.kernels import Phase
from ..workload.program import Stream

DETAILS = ("kernels", "collectives", "flows")
"""What a trace may draw, each level adding to the one before."""
DEFAULT_DETAIL = "collectives"
SEND_TRACK, RECV_TRACK = 10, 11
"""The network tracks of a GPU, after its streams' (Stream values)."""
TRACK_NAMES = {**{int(s): s.name for s in Stream}, SEND_TRACK: "network send", RECV_TRACK: "network receive"}
LANES = 100_000
"""Track ids per kind of track: a slice on the k-th track of kind b has tid b * LANES + k."""
TRACK_KINDS = RECV_TRACK + 1
MEMORY_COUNTER = "allocated memory (GiB)"
SWITCH_NAMES = {TO_SCALE_UP_SWITCH: "scale-up switch", FROM_SCALE_UP_SWITCH: "scale-up switch",
                TO_SCALE_OUT_SWITCH: "scale-out switch", FROM_SCALE_OUT_SWITCH: "scale-out switch"}
"""What an in-network reduction leg's endpoint code (network.topology) names: the switch that reduces."""
FROM_SWITCH = (FROM_SCALE_UP_SWITCH, FROM_SCALE_OUT_SWITCH)
"""The codes of legs out of the reducing switch: the flow's GPU receives them."""


def ns(seconds: np.ndarray | float) -> np.ndarray:
    """Times in whole nanoseconds."""
    return np.rint(np.asarray(seconds, dtype=np.float64) * 1e9).astype(np.int64)


def us(nanoseconds: int) -> float | int:
    """Whole nanoseconds as the trace's microseconds (an integer where exact, for a shorter file)."""
    whole, rest = divmod(nanoseconds, 1000)
    return whole if rest == 0 else nanoseconds / 1000


def lanes(key: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per slice: the track of its key it goes on, the first free by its start (a track is free from its last
    slice's end on); slices of one key in order of start, then end, then index. Uses as many tracks per key as it
    has slices running at once (interval partitioning)."""
    order = np.lexsort((np.arange(len(key)), end, start, key))
    lane = np.zeros(len(key), dtype=np.int64)
    current = None
    free: list[tuple[int, int]] = []  # (end of its last slice, track) of the key's tracks
    count = 0
    for i, k, s, e in zip(order.tolist(), key[order].tolist(), start[order].tolist(), end[order].tolist(),
                          strict=True):
        if k != current:
            current, free, count = k, [], 0
        if free and free[0][0] <= s:
            _, track = heapq.heapreplace(free, (e, free[0][1]))
        else:
            track = count
            count += 1
            heapq.heappush(free, (e, track))
        lane[i] = track
    return lane


@dataclass
class _Slices:
    """Complete events being gathered: per slice its process, kind of track, start and end (ns) and the rest of
    its event; and the arrows from one slice to another (indices into the slices)."""

    pid: list[int]
    track: list[int]
    start: list[np.ndarray]
    end: list[np.ndarray]
    body: list[dict]
    arrows: list[tuple[int, int, int]]  # (id, from slice, to slice)

    def add(self, pid: np.ndarray, track: int | np.ndarray, start: np.ndarray, end: np.ndarray,
            bodies: list[dict]) -> int:
        """Slices with their bodies; returns the index of the first."""
        first = len(self.body)
        self.pid += np.asarray(pid).tolist()
        self.track += np.broadcast_to(np.asarray(track), np.shape(pid)).tolist()
        self.start.append(ns(start))
        self.end.append(ns(end))
        self.body += bodies
        return first

    def events(self) -> tuple[list[dict], set[tuple[int, int]]]:
        """The complete events and arrow events, each slice on its track, and the (pid, tid) tracks used."""
        if not self.body:
            return [], set()
        pid, track = np.array(self.pid, dtype=np.int64), np.array(self.track, dtype=np.int64)
        start, end = np.concatenate(self.start), np.concatenate(self.end)
        tid = track * LANES + lanes(pid * TRACK_KINDS + track, start, end)
        events = []
        for body, p, t, s, e in zip(self.body, pid.tolist(), tid.tolist(), start.tolist(), end.tolist(), strict=True):
            events.append({**body, "ph": "X", "pid": p, "tid": t, "ts": us(s), "dur": us(e - s)})
        for ident, a, b in self.arrows:
            events.append({"ph": "s", "id": ident, "name": "flow", "cat": "flow", "pid": events[a]["pid"],
                           "tid": events[a]["tid"], "ts": events[a]["ts"]})
            events.append({"ph": "f", "bp": "e", "id": ident, "name": "flow", "cat": "flow", "pid": events[b]["pid"],
                           "tid": events[b]["tid"], "ts": events[b]["ts"]})
        return events, set(zip(pid.tolist(), tid.tolist(), strict=True))


def trace_events(dag: ExecutionDAG, timeline: Timeline, detail: str = DEFAULT_DETAIL,
                 rep: np.ndarray | None = None, devices: Mapping[int, str] | None = None) -> list[dict]:
    """The trace's metadata and slices at `detail` (see the module's docstring); `rep[g]`, the GPU that stands for
    GPU g in a folded DAG (default: every GPU for itself), places folded receivers' receives; `devices`, each
    simulated GPU's type by its rank, names it in its process where the cluster has several types."""
    if detail not in DETAILS:
        raise ValueError(f"trace detail {detail!r} is not one of {', '.join(DETAILS)}")
    slices = _Slices([], [], [], [], [], [])
    rep = np.arange(dag.num_gpus) if rep is None else rep
    _kernels(slices, dag, timeline)
    if detail != "kernels":
        _collectives(slices, dag, timeline)
        _pipeline_sends(slices, dag, timeline, rep)
    if detail == "flows":
        _flows(slices, dag, timeline, rep)
    events, used = slices.events()
    return _metadata(dag, used, devices or {}) + events


def _kernels(slices: _Slices, dag: ExecutionDAG, timeline: Timeline) -> None:
    """Compute kernels, each named with its phase's span kind (as the gantt chart's) but a forward's or the step's:
    'attn_qkv (backward)', 'attn_qkv (weight-gradient)', 'attn_qkv (recompute)'."""
    nodes = np.flatnonzero(dag.kind == NodeKind.compute)
    names = [spec.name if spec.phase in (Phase.fwd, Phase.step) else f"{spec.name} ({COMPUTE_KINDS[spec.phase]})"
             for spec in dag.kernel_specs]  # one string a kernel, shared by its slices
    bodies = []
    for n in nodes.tolist():
        spec = dag.kernel_specs[dag.kernel[n]]
        bodies.append({"name": names[dag.kernel[n]], "cat": spec.phase.name,
                       "args": {"layer": int(dag.layer[n]), "microbatch": int(dag.microbatch[n]),
                                "phase": spec.phase.name, "gflops": round(spec.flops / 1e9, 3)}})
    slices.add(dag.gpu[nodes], int(Stream.compute), timeline.start[nodes], timeline.finish[nodes], bodies)


def _collectives(slices: _Slices, dag: ExecutionDAG, timeline: Timeline) -> None:
    """Each GPU's part in each collective on the collective's stream (DualPipe's mirror all-reduce on the pipeline's,
    as the breakdown counts it: analysis.kinds.shown_stream), from when the last member joined, after a
    slice of its wait for that member where it joined before."""
    joins, leaves, begins = collective_parts(dag, timeline)
    joined = timeline.start[joins]
    last = last_joins(dag, joins, joined)[1]
    bodies, streams = [], []
    for begin in joins.tolist():
        coll = dag.collectives[dag.coll[begin]]
        streams.append(int(shown_stream(coll)))
        bodies.append({"name": collective_name(coll), "cat": "collective",
                       "args": {"bytes": coll.nbytes, "group": list(coll.group), "layer": coll.layer,
                                "microbatch": coll.microbatch, "algorithm": coll.algorithm}})
    tracks = np.array(streams, dtype=np.int64)
    waits = np.flatnonzero(ns(begins) > ns(joined))
    slices.add(dag.gpu[joins[waits]], tracks[waits], joined[waits], begins[waits],
               [{"name": f"waiting for GPU {last[i]}", "cat": "wait",
                 "args": {"collective": bodies[i]["name"], "microbatch": bodies[i]["args"]["microbatch"]}}
                for i in waits.tolist()])
    slices.add(dag.gpu[joins], tracks, begins, timeline.finish[leaves], bodies)


def collective_name(coll: CollectiveInstance) -> str:
    """A collective's slice name: its label and type, and its phase's span kind as a kernel's (_kernels) where not a
    forward's or the step's: 'moe_dispatch (AllToAll, backward)', so that the backward's all-to-alls of a layer and
    micro-batch are told from its forward's of the same name (under DualPipe, beside another micro-batch's)."""
    kind = "" if coll.phase in (Phase.fwd, Phase.step) else f", {COMPUTE_KINDS[coll.phase]}"
    return f"{coll.label} ({coll.ctype.name}{kind})"


def _pipeline_sends(slices: _Slices, dag: ExecutionDAG, timeline: Timeline, rep: np.ndarray) -> None:
    """Pipeline sends (flows outside every collective) on their sender's pipeline stream, and their receives on the
    receiver's (or, for a receiver folded away, its representative's)."""
    sends = np.flatnonzero((dag.kind == NodeKind.flow) & (dag.coll < 0))
    src, dst = dag.gpu[sends].astype(np.int64), dag.peer[sends].astype(np.int64)
    sizes = dag.size[sends].tolist()
    bodies = [{"name": f"{PIPELINE_SEND} to GPU {d}", "cat": "flow", "args": {"bytes": float(b), "dst": d}}
              for d, b in zip(dst.tolist(), sizes, strict=True)]
    slices.add(src, int(Stream.pp_comm), timeline.start[sends], timeline.finish[sends], bodies)
    received = np.flatnonzero((dst >= 0) & (dag.multiplicity[rep[np.maximum(dst, 0)]] > 0))
    shown = rep[dst[received]]
    bodies = [{"name": f"pipeline receive from GPU {s}" if r == d else f"pipeline receive of GPU {d} from GPU {s}",
               "cat": "flow", "args": {"bytes": float(sizes[i]), "src": s}}
              for i, s, d, r in zip(received.tolist(), src[received].tolist(), dst[received].tolist(),
                                    shown.tolist(), strict=True)]
    slices.add(shown, int(Stream.pp_comm), timeline.start[sends[received]], timeline.finish[sends[received]],
               bodies)


def _flows(slices: _Slices, dag: ExecutionDAG, timeline: Timeline, rep: np.ndarray) -> None:
    """Every flow on its sender's send tracks, and on its receiver's (or the receiver's representative's) receive
    tracks with an arrow from the send; an in-network reduction's leg out of its switch (NVLS, SHARP), which the
    switch sends, on its receiving GPU's receive tracks only."""
    flows = np.flatnonzero(dag.kind == NodeKind.flow)
    src, dst = dag.gpu[flows].astype(np.int64), dag.peer[flows].astype(np.int64)
    start, finish = timeline.start[flows], timeline.finish[flows]
    from_switch = np.isin(dst, FROM_SWITCH)
    sent = np.flatnonzero(~from_switch)
    sends = []
    for s, d, b in zip(src[sent].tolist(), dst[sent].tolist(), dag.size[flows[sent]].tolist(), strict=True):
        name = f"to GPU {d}" if d >= 0 else f"to its {SWITCH_NAMES[d]}"  # an in-network reduction leg
        sends.append({"name": name, "cat": "flow", "args": {"bytes": float(b), "src": s,
                                                            "dst": d if d >= 0 else SWITCH_NAMES[d]}})
    first_send = slices.add(src[sent], SEND_TRACK, start[sent], finish[sent], sends)
    pulled = np.flatnonzero(from_switch)
    slices.add(src[pulled], RECV_TRACK, start[pulled], finish[pulled],
               [{"name": f"from its {SWITCH_NAMES[d]}", "cat": "flow",
                 "args": {"bytes": float(b), "src": SWITCH_NAMES[d], "dst": g}}
                for g, d, b in zip(src[pulled].tolist(), dst[pulled].tolist(), dag.size[flows[pulled]].tolist(),
                                   strict=True)])
    received = sent[dst[sent] >= 0]
    received = received[dag.multiplicity[rep[dst[received]]] > 0]  # a receiver with a process to show it on
    shown = rep[dst[received]]
    receives = []
    for s, d, r, b in zip(src[received].tolist(), dst[received].tolist(), shown.tolist(),
                          dag.size[flows[received]].tolist(), strict=True):
        name = f"from GPU {s}" if r == d else f"GPU {d} from GPU {s}"  # a folded receiver, on its representative
        receives.append({"name": name, "cat": "flow", "args": {"bytes": float(b), "src": s, "dst": d}})
    first_receive = slices.add(shown, RECV_TRACK, start[received], finish[received], receives)
    position = np.cumsum(~from_switch) - 1  # a sent flow's index among the sends
    slices.arrows += [(int(flows[i]), first_send + int(position[i]), first_receive + k)
                      for k, i in enumerate(received.tolist())]


def _metadata(dag: ExecutionDAG, used: set[tuple[int, int]], devices: Mapping[int, str]) -> list[dict]:
    """Names and order of every simulated GPU's process (with its type, on a cluster of several) and of the tracks
    used (and each stream's first)."""
    events: list[dict] = []
    mixed = len(set(devices.values())) > 1
    for g in dag.simulated_gpus.tolist():
        copies = int(dag.multiplicity[g])
        notes = [devices[g]] if mixed and devices.get(g) else []
        notes += [f"stands for {copies} GPUs"] if copies > 1 else []
        label = f"GPU {g}" + (f" ({', '.join(notes)})" if notes else "")
        events.append({"ph": "M", "name": "process_name", "pid": g, "args": {"name": label}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": g, "args": {"sort_index": g}})
        used |= {(g, int(s) * LANES) for s in Stream}
    for pid, tid in sorted(used):
        track, lane = divmod(tid, LANES)
        name = TRACK_NAMES[track] + (f" #{lane + 1}" if lane else "")
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    return events


def _deferred_keys(keys: np.ndarray, finish: np.ndarray, inputs: dict[int, float],
                   weight: dict[int, float]) -> set[int]:
    """The (layer, micro-batch) keys whose backward is split, given every backward kernel's key and finish: another
    key's backward kernel ends between the key's last input-gradient kernel and its last weight-gradient one (its W
    was deferred past other layers' B or W; a whole backward runs a layer's kernels together)."""
    order = np.argsort(finish, kind="stable")
    ends, owners = finish[order], keys[order]
    split = set()
    for k, last_input in inputs.items():
        last_weight = weight.get(k)
        if last_weight is None or last_weight <= last_input:
            continue
        lo, hi = np.searchsorted(ends, [last_input, last_weight], side="right")
        if np.any(owners[lo:hi] != k):
            split.add(k)
    return split


def _last_finish(keys: np.ndarray, finish: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys, the latest finish of each)."""
    unique, inverse = np.unique(keys, return_inverse=True)
    latest = np.full(len(unique), -np.inf)
    np.maximum.at(latest, inverse, finish)
    return unique, latest


def _first_start(keys: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys, the earliest start of each)."""
    unique, earliest = _last_finish(keys, -start)
    return unique, -earliest


def memory_counter_events(dag: ExecutionDAG, timeline: Timeline, memory: MemoryReport) -> list[dict]:
    """A counter per simulated GPU: its stage's model states, plus what each layer keeps for a micro-batch from
    the start of the layer's forward (what it keeps grows as it runs: the memory model counts a forward's step with
    it, memory.walk) to the end of its backward (memory/ gives the bytes; the replay the times), so that a combined
    step (overlap_moe_expert_parallel_comm), whose forward's layers run between its backward's, peaks one layer above
    what was kept before it, as the table counts it, not at the level before; a
    split backward, ZB-H1's or DualPipe's, holds from its B to its deferred W what the W reads, every GEMM's input and
    output gradient, as the memory model counts it (memory.activations.ActivationModel.deferred). Transients inside a
    kernel are not drawn: the table's allocated peak adds them."""
    compute = np.flatnonzero(dag.kind == NodeKind.compute)
    phases = np.array([spec.phase for spec in dag.kernel_specs], dtype=np.int16)[dag.kernel[compute]]
    stride = int(dag.microbatch[compute].max(initial=0)) + 1
    events: list[dict] = []
    for g in dag.simulated_gpus.tolist():
        on_gpu = dag.gpu[compute] == g
        mine, mine_phases = compute[on_gpu], phases[on_gpu]
        if not len(mine):
            continue
        stage = memory.stages[int(dag.stage[mine[0]])]
        key = dag.layer[mine].astype(np.int64) * stride + dag.microbatch[mine]
        forward = mine_phases == Phase.fwd
        kept_fwd, start_fwd = _first_start(key[forward], timeline.start[mine[forward]])
        inputs, weight = (dict(zip(*(a.tolist() for a in _last_finish(key[mine_phases == phase],
                                                                      timeline.finish[mine[mine_phases == phase]])),
                                   strict=True)) for phase in (Phase.bwd_ig, Phase.bwd_wg))  # key -> last end
        backward = (mine_phases == Phase.bwd_ig) | (mine_phases == Phase.bwd_wg)
        split = _deferred_keys(key[backward], timeline.finish[mine[backward]], inputs, weight)
        times, deltas = [0.0, *start_fwd.tolist()], [stage.states]
        deltas += [stage.unit_kept.get(int(k // stride), 0.0) for k in kept_fwd.tolist()]
        for k in sorted(inputs.keys() | weight.keys()):
            kept = stage.unit_kept.get(int(k // stride), 0.0)
            if k in split:  # B trades what it keeps for what its W reads; W frees that
                held = stage.unit_deferred.get(int(k // stride), 0.0)
                times += [inputs[k], weight[k]]
                deltas += [held - kept, -held]
            else:
                times.append(max(inputs.get(k, -np.inf), weight.get(k, -np.inf)))
                deltas.append(-kept)
        order = np.argsort(np.array(times), kind="stable")
        level = np.cumsum(np.array(deltas)[order])
        for t, value in counter_points(np.array(times)[order], level):
            events.append({"ph": "C", "name": MEMORY_COUNTER, "pid": g, "ts": us(t),
                           "args": {"GiB": round(value / GiB, 4)}})
    return events


def counter_points(times: np.ndarray, values: np.ndarray) -> list[tuple[int, float]]:
    """A counter's (time in whole nanoseconds, value) points from its values from `times` on (seconds, ascending):
    one point a nanosecond, the last value at it (the one that holds from then on), as Perfetto would otherwise draw
    two values at one instant, the first for no time."""
    at = ns(times)
    last = np.append(at[1:] != at[:-1], True)
    return list(zip(at[last].tolist(), np.asarray(values)[last].tolist(), strict=True))


def link_counter_events(series: list[LinkSeries], pid: int) -> list[dict]:
    """A process `pid` named "network" with a counter per link of `series`: its load (share of its capacity)."""
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "network (busiest links)"}},
                          {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}}]
    for link in series:
        for t, value in counter_points(link.times, link.load):
            events.append({"ph": "C", "name": f"{link.name} load", "pid": pid, "ts": us(t),
                           "args": {"share": round(value, 4)}})
    return events


def chrome_trace_json(dag: ExecutionDAG, timeline: Timeline, detail: str = DEFAULT_DETAIL,
                      memory: MemoryReport | None = None, rep: np.ndarray | None = None,
                      links: list[LinkSeries] | None = None, metadata: dict | None = None,
                      devices: Mapping[int, str] | None = None) -> str:
    """The trace as JSON text: trace_events at `detail` (with `devices`), and the memory and link counters and the
    trace's metadata (`otherData`, shown by Perfetto's trace info) where given."""
    events = trace_events(dag, timeline, detail, rep, devices)
    if memory is not None:
        events += memory_counter_events(dag, timeline, memory)
    if links:
        events += link_counter_events(links, dag.num_gpus)
    document = {"traceEvents": events, "displayTimeUnit": "ms"}
    if metadata:
        document["otherData"] = metadata
    return json.dumps(document, separators=(",", ":"))
