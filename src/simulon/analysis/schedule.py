"""The pipeline timeline of an iteration, per stage: what the stage's representative GPU was doing when.

For each pipeline stage, the lowest-numbered simulated GPU of that stage stands for the stage (its tensor-,
context- and data-parallel peers run the same schedule). Its spans are

* compute: consecutive kernels of one micro-batch and one kind (forward, backward = input gradients,
  weight-gradient, recompute, optimizer, gradient-buffer = the step's other kernels: Megatron zeroing the
  gradient buffers and checking and scaling each bucket before its reduction), from the first kernel's start to
  the last one's finish, in the order the replay ran them (engine/replay.py's Timeline), broken where the GPU
  runs no kernel for longer than RESOLUTION of the iteration (waiting, e.g. for the data-parallel all-reduce
  before the optimizer, is drawn as the communication it waits for, not as compute). Megatron-Core runs a
  backward layer by layer, input then weight gradients; a run of weight gradients shorter than RESOLUTION of the
  iteration joins its backward's span (a plot cannot show it apart), a longer one is a span of its own;
* communication, per stream (tp, cp, ep, dp, pp, param; DualPipe's mirror all-reduce on pp, the pipeline traffic
  the breakdown and the findings count it as: kinds.shown_stream): the GPU's part in each collective (from when its
  last member joined to leaving, as analysis/result.py counts it: exposure.collective_parts) and every pipeline
  send it sends or receives, parts that overlap or lie closer than RESOLUTION of the iteration merged into one
  span (a plot cannot show finer: the layers' tensor-parallel collectives of a micro-batch become one span).

A span is [start_ms, end_ms, kind, microbatch] (microbatch -1 for the step's kernels and merged communication of
several micro-batches): what `simulon simulate --json` writes under `schedule` and `simulon plot --kind gantt`
draws, one row per stage as in Narayanan et al. (SC'21), Figures 3-4.
"""

from __future__ import annotations

import numpy as np

from ..dag.nodes import ExecutionDAG, NodeKind
from ..engine.replay import Timeline
from ..workload.kernels import KernelSpec, Phase
from ..workload.program import Stream
from .exposure import collective_parts
from .kinds import shown_stream

COMPUTE_KINDS: dict[Phase | None, str] = {
    Phase.fwd: "forward", Phase.bwd_ig: "backward", Phase.bwd_wg: "weight-gradient", Phase.recompute: "recompute",
    Phase.step: "optimizer", None: "gradient-buffer"}
"""The span kind of each kernel phase; of the step's phase, the optimizer's kernel's, and under None that of the
step's other kernels, Megatron's gradient-buffer work (workload/data_parallel.py: grad_zero, grad_check,
grad_check_scale)."""


def span_kind(kernel: KernelSpec) -> str:
    """The span kind of a kernel: its phase's, the step's kernels other than the optimizer gradient-buffer."""
    if kernel.phase == Phase.step and kernel.name != "optimizer":
        return COMPUTE_KINDS[None]
    return COMPUTE_KINDS[kernel.phase]

COMM_KINDS = {Stream.compute: "communication", Stream.tp_comm: "tp-comm", Stream.pp_comm: "pp-comm",
              Stream.dp_comm: "dp-comm", Stream.ep_comm: "ep-comm", Stream.cp_comm: "cp-comm",
              Stream.param_comm: "param-comm"}
"""The span kind of communication on each stream."""

DIGITS = 4
"""Decimals of a span's milliseconds (0.1 us: finer than any kernel launch)."""

RESOLUTION = 1 / 2000
"""Spans shorter or closer than this fraction of the iteration are merged as the module docstring says (a
2,000-pixel-wide timeline shows nothing finer); it keeps GPT-3 175B's schedule to a few hundred spans per stage."""

Span = tuple[float, float, str, int]


def stage_representatives(dag: ExecutionDAG) -> dict[int, int]:
    """stage -> the lowest simulated GPU running that stage's kernels."""
    compute = np.flatnonzero(dag.kind == NodeKind.compute)
    reps: dict[int, int] = {}
    for gpu, stage in zip(dag.gpu[compute].tolist(), dag.stage[compute].tolist(), strict=True):
        if stage not in reps or gpu < reps[stage]:
            reps[stage] = gpu
    return dict(sorted(reps.items()))


def compute_spans(dag: ExecutionDAG, timeline: Timeline, gpu: int) -> list[Span]:
    """Runs of consecutive kernels of one micro-batch and one kind on `gpu`, in start order, a run broken where
    the GPU ran no kernel for longer than RESOLUTION of the iteration (waiting is not work); a run of weight
    gradients shorter than RESOLUTION of the iteration joins the backward span right before it."""
    nodes = np.flatnonzero((dag.kind == NodeKind.compute) & (dag.gpu == gpu))
    if len(nodes) == 0:
        return []
    nodes = nodes[np.argsort(timeline.start[nodes], kind="stable")]
    phase_of = np.array([int(k.phase) for k in dag.kernel_specs], dtype=np.int64)
    kind_names = [span_kind(k) for k in dag.kernel_specs]
    kinds_seen = list(dict.fromkeys(kind_names))
    kind_of = np.array([kinds_seen.index(name) for name in kind_names], dtype=np.int64)
    phases, kinds, microbatches = phase_of[dag.kernel[nodes]], kind_of[dag.kernel[nodes]], dag.microbatch[nodes]
    starts, finish = timeline.start[nodes], np.maximum.accumulate(timeline.finish[nodes])
    gap = RESOLUTION * timeline.makespan
    idle = np.concatenate([[True], starts[1:] > finish[:-1] + gap])
    breaks = np.flatnonzero((kinds[1:] != kinds[:-1]) | (microbatches[1:] != microbatches[:-1]) | idle[1:]) + 1
    firsts = np.concatenate([[0], breaks]).astype(np.int64)
    lasts = np.concatenate([breaks - 1, [len(nodes) - 1]]).astype(np.int64)
    spans: list[Span] = []
    for first, last in zip(firsts.tolist(), lasts.tolist(), strict=True):
        phase = Phase(int(phases[first]))
        microbatch = -1 if phase == Phase.step else int(microbatches[first])
        start, end = starts[first], finish[last]
        if not idle[first] and joins_backward(spans[-1], phase, microbatch, end - start < gap):
            spans[-1] = span(spans[-1][0] / 1e3, end, "backward", microbatch)
        else:
            spans.append(span(start, end, kinds_seen[int(kinds[first])], microbatch))
    return spans


def joins_backward(previous: Span, phase: Phase, microbatch: int, short: bool) -> bool:
    """Whether a run of `phase` kernels right after the span `previous` is drawn as part of it: input gradients,
    and weight gradients too `short` to show apart, continue their micro-batch's backward."""
    return (previous[2] == "backward" and previous[3] == microbatch
            and (phase == Phase.bwd_ig or (phase == Phase.bwd_wg and short)))


def comm_intervals(dag: ExecutionDAG, timeline: Timeline, gpu: int) -> dict[str, tuple[np.ndarray, ...]]:
    """`gpu`'s communication by kind: (starts, ends in seconds, micro-batches) of its parts in collectives and of
    the pipeline sends it sends or receives."""
    joins, leaves, begins = collective_parts(dag, timeline)
    mine = dag.gpu[joins] == gpu
    joins, leaves, begins = joins[mine], leaves[mine], begins[mine]
    p2p = np.flatnonzero((dag.kind == NodeKind.flow) & (dag.coll < 0) & ((dag.gpu == gpu) | (dag.peer == gpu)))
    streams = np.concatenate([[int(shown_stream(dag.collectives[c])) for c in dag.coll[joins].tolist()],
                              np.full(len(p2p), int(Stream.pp_comm))]).astype(np.int64)
    starts = np.concatenate([begins, timeline.start[p2p]])
    ends = np.concatenate([timeline.finish[leaves], timeline.finish[p2p]])
    microbatches = np.concatenate([[dag.collectives[c].microbatch for c in dag.coll[joins].tolist()],
                                   dag.microbatch[p2p]]).astype(np.int64)
    return {COMM_KINDS[Stream(stream)]: (starts[streams == stream], ends[streams == stream],
                                         microbatches[streams == stream])
            for stream in sorted(set(streams.tolist()))}


def comm_spans(dag: ExecutionDAG, timeline: Timeline, gpu: int) -> list[Span]:
    """`gpu`'s communication spans per kind, those that overlap or lie within RESOLUTION of the iteration merged."""
    gap = RESOLUTION * timeline.makespan
    return sorted(s for kind, parts in comm_intervals(dag, timeline, gpu).items()
                  for s in merged(*parts, kind, gap))


def merged(starts: np.ndarray, ends: np.ndarray, microbatches: np.ndarray, kind: str, gap: float = 0.0) -> list[Span]:
    """Intervals that overlap or lie within `gap` of one another merged into spans of `kind`, each with its
    micro-batch if all agree, else -1."""
    order = np.argsort(starts, kind="stable")
    spans: list[Span] = []
    run_start, run_end, run_mb = None, 0.0, -1
    for s, e, mb in zip(starts[order].tolist(), ends[order].tolist(), microbatches[order].tolist(), strict=True):
        if run_start is not None and s <= run_end + gap:
            run_end, run_mb = max(run_end, e), run_mb if run_mb == mb else -1
            continue
        if run_start is not None:
            spans.append(span(run_start, run_end, kind, run_mb))
        run_start, run_end, run_mb = s, e, mb
    if run_start is not None:
        spans.append(span(run_start, run_end, kind, run_mb))
    return spans


def span(start_s: float, end_s: float, kind: str, microbatch: int) -> Span:
    return (round(float(start_s) * 1e3, DIGITS), round(float(end_s) * 1e3, DIGITS), kind, int(microbatch))


def schedule(dag: ExecutionDAG, timeline: Timeline) -> dict:
    """The per-stage timeline as JSON: {"stages": [{"stage", "gpu", "spans": [[start_ms, end_ms, kind, mb]]}]}."""
    stages = [{"stage": stage, "gpu": gpu,
               "spans": [list(s) for s in sorted(compute_spans(dag, timeline, gpu) + comm_spans(dag, timeline, gpu))]}
              for stage, gpu in stage_representatives(dag).items()]
    return {"iteration_time_ms": round(timeline.makespan * 1e3, DIGITS), "stages": stages}
