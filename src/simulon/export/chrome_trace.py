"""Chrome/Perfetto trace: a process per GPU, a track per stream, network flows with arrows.

Load the file in https://ui.perfetto.dev or chrome://tracing. Times are microseconds.
"""

from __future__ import annotations

import json

import numpy as np

from ..dag.nodes import ExecutionDAG, NodeKind
from ..engine.replay import Timeline
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


def chrome_trace_json(dag: ExecutionDAG, timeline: Timeline, include_flows: bool = True) -> str:
    return json.dumps({"traceEvents": trace_events(dag, timeline, include_flows), "displayTimeUnit": "ms"},
                      separators=(",", ":"))
