"""Chrome/Perfetto trace: a process per GPU, a track per stream, network flows with arrows, and a counter of
the memory each GPU has allocated over the iteration.

Load the file in https://ui.perfetto.dev or chrome://tracing. Times are microseconds.
"""

from __future__ import annotations

import json

import numpy as np

from ..dag.nodes import ExecutionDAG, NodeKind
from ..engine.replay import Timeline
from ..memory import MemoryReport
from ..memory.runtime import GiB
from ..workload.kernels import Phase
from ..workload.program import Stream

SEND_TRACK, RECV_TRACK = 10, 11


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def trace_events(dag: ExecutionDAG, timeline: Timeline, include_flows: bool = True) -> list[dict]:
    events: list[dict] = []
    start, finish = timeline.start, timeline.finish
    for g in dag.simulated_gpus.tolist():
        copies = int(dag.multiplicity[g])
        label = f"GPU {g}" + (f" (stands for {copies} GPUs)" if copies > 1 else "")
        events.append({"ph": "M", "name": "process_name", "pid": g, "args": {"name": label}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": g, "args": {"sort_index": g}})
        for stream in Stream:
            events.append({"ph": "M", "name": "thread_name", "pid": g, "tid": int(stream),
                           "args": {"name": stream.name}})
        for tid, name in ((SEND_TRACK, "network send"), (RECV_TRACK, "network receive")):
            events.append({"ph": "M", "name": "thread_name", "pid": g, "tid": tid, "args": {"name": name}})

    for n in np.flatnonzero(dag.kind == NodeKind.compute).tolist():
        spec = dag.kernel_specs[dag.kernel[n]]
        events.append({"ph": "X", "name": spec.name, "cat": spec.phase.name, "pid": int(dag.gpu[n]),
                       "tid": int(Stream.compute), "ts": _us(start[n]), "dur": _us(finish[n] - start[n]),
                       "args": {"layer": int(dag.layer[n]), "microbatch": int(dag.microbatch[n]),
                                "phase": spec.phase.name, "gflops": round(spec.flops / 1e9, 3)}})
    markers = np.flatnonzero((dag.kind == NodeKind.marker) & (dag.coll >= 0))  # collective spans
    for begin, end in zip(markers[0::2].tolist(), markers[1::2].tolist(), strict=True):
        coll = dag.collectives[dag.coll[begin]]
        events.append({"ph": "X", "name": f"{coll.label} ({coll.ctype.name})", "cat": "collective",
                       "pid": int(dag.gpu[begin]), "tid": int(coll.stream), "ts": _us(start[begin]),
                       "dur": _us(finish[end] - start[begin]),
                       "args": {"bytes": coll.nbytes, "group": list(coll.group), "layer": coll.layer,
                                "microbatch": coll.microbatch}})
    if include_flows:
        simulated = dag.multiplicity > 0
        for n in np.flatnonzero(dag.kind == NodeKind.flow).tolist():
            src, dst = int(dag.gpu[n]), int(dag.peer[n])
            ts, dur = _us(start[n]), _us(finish[n] - start[n])
            args = {"bytes": float(dag.size[n]), "src": src, "dst": dst}
            name = f"to GPU {dst}" if dst >= 0 else "with its switch"  # an in-network reduction leg
            events.append({"ph": "X", "name": name, "cat": "flow", "pid": src, "tid": SEND_TRACK,
                           "ts": ts, "dur": dur, "args": args})
            if dst >= 0 and simulated[dst]:
                events.append({"ph": "X", "name": f"from GPU {src}", "cat": "flow", "pid": dst,
                               "tid": RECV_TRACK, "ts": ts, "dur": dur, "args": args})
                events.append({"ph": "s", "id": n, "name": "flow", "cat": "flow", "pid": src,
                               "tid": SEND_TRACK, "ts": ts})
                events.append({"ph": "f", "bp": "e", "id": n, "name": "flow", "cat": "flow", "pid": dst,
                               "tid": RECV_TRACK, "ts": ts})
    return events


MEMORY_COUNTER = "allocated memory (GiB)"


def _last_finish(keys: np.ndarray, finish: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys, the latest finish of each)."""
    unique, inverse = np.unique(keys, return_inverse=True)
    latest = np.full(len(unique), -np.inf)
    np.maximum.at(latest, inverse, finish)
    return unique, latest


def memory_counter_events(dag: ExecutionDAG, timeline: Timeline, memory: MemoryReport) -> list[dict]:
    """A counter per simulated GPU: its stage's model states, plus what each layer keeps for a micro-batch from
    the end of the layer's forward to the end of its backward (memory/ gives the bytes; the replay the times).
    Transients inside a kernel are not drawn: the table's allocated peak adds them."""
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
        times, deltas = [0.0], [stage.states]
        for selected, sign in ((mine_phases == Phase.fwd, 1.0),
                               ((mine_phases == Phase.bwd_ig) | (mine_phases == Phase.bwd_wg), -1.0)):
            keys, latest = _last_finish(key[selected], timeline.finish[mine[selected]])
            layers = np.floor_divide(keys, stride)
            kept = np.array([stage.unit_kept.get(int(layer), 0.0) for layer in layers.tolist()])
            times += latest.tolist()
            deltas += (sign * kept).tolist()
        order = np.argsort(np.array(times), kind="stable")
        level = np.cumsum(np.array(deltas)[order])
        for t, value in zip(np.array(times)[order].tolist(), level.tolist(), strict=True):
            events.append({"ph": "C", "name": MEMORY_COUNTER, "pid": g, "ts": _us(t),
                           "args": {"GiB": round(value / GiB, 4)}})
    return events


def chrome_trace_json(dag: ExecutionDAG, timeline: Timeline, include_flows: bool = True,
                      memory: MemoryReport | None = None) -> str:
    events = trace_events(dag, timeline, include_flows)
    if memory is not None:
        events += memory_counter_events(dag, timeline, memory)
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}, separators=(",", ":"))
