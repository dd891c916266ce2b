"""Why a replayed step took its time: the critical path, the per-GPU exposure by kind, the links' utilisation
and the bottleneck findings, from the DAG, its replay and the network it ran on (see critical_path.py,
exposure.py, links.py and findings.py for what each models)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..config.dc import Group, Placement
from ..dag.nodes import ExecutionDAG, NodeKind
from ..engine.replay import Timeline
from ..network.topology import Topology
from ..workload.kernels import KernelClass
from .critical_path import CriticalPath, critical_path, path_summary
from .exposure import GPUExposure, Ridge, exposure, memory_bound_nodes
from .findings import UNKNOWN, Finding, Settings, findings
from .links import LinkSeries, LinkUse, link_series, link_use, links_summary, load_over_time


@dataclass(frozen=True)
class Analysis:
    path: CriticalPath
    path_summary: dict
    per_gpu: list[GPUExposure]
    link_use: LinkUse
    links: dict
    findings: list[Finding]
    ridge_flops_per_byte: Ridge   # one for every GPU, or per GPU where they differ
    busiest: list[LinkSeries]   # the busiest links' load over the step (links.link_series)

    def to_dict(self) -> dict:
        """The analysis as JSON-ready values (`simulate --json`'s `analysis`)."""
        return {"critical_path": self.path_summary, "ridge_flops_per_byte": self.ridge_json(),
                "per_gpu": [row.to_dict() for row in self.per_gpu], "links": self.links,
                "findings": [f.to_dict() for f in self.findings]}

    def ridge_json(self) -> float | dict[str, float]:
        """The ridge point: one number, or where the GPUs differ, by simulated GPU ("16": 206.1)."""
        ridge = self.ridge_flops_per_byte
        if not np.ndim(ridge):
            return float(ridge)
        return {str(row.gpu): float(np.asarray(ridge)[row.gpu]) for row in self.per_gpu}


def attention_ms(dag: ExecutionDAG, timeline: Timeline) -> dict[int, float]:
    """Milliseconds each simulated GPU spends in attention kernels (as replayed, slowdowns included)."""
    # per kernel spec, and a last False for the nodes that run none (their kernel index is -1)
    attention = np.array([k.kclass == KernelClass.attention for k in dag.kernel_specs] + [False])
    nodes = np.flatnonzero((dag.kind == NodeKind.compute) & attention[dag.kernel])
    spent = np.bincount(dag.gpu[nodes], weights=timeline.finish[nodes] - timeline.start[nodes],
                        minlength=dag.num_gpus)
    return {int(g): float(spent[g]) * 1e3 for g in dag.simulated_gpus.tolist()}


def memory_bound_kernels(dag: ExecutionDAG, timeline: Timeline, ridge_flops_per_byte: Ridge,
                         wide_ridge: Ridge | None = None) -> dict[int, list[tuple[str, float]]]:
    """Per simulated GPU, its memory-bound kernels (exposure.memory_bound_nodes, on its own GPU's ridge) by name with
    the milliseconds they ran (as replayed, forward and backward together), longest first: what the memory-bound
    finding names."""
    names = sorted({k.name for k in dag.kernel_specs})
    index = {name: i for i, name in enumerate(names)}
    # per kernel spec its name's index, and a last -1 for the nodes that run none (their kernel index is -1)
    name_of = np.array([index[k.name] for k in dag.kernel_specs] + [-1], dtype=np.int64)
    compute = np.flatnonzero((dag.kind == NodeKind.compute) & (dag.kernel >= 0))
    nodes = compute[memory_bound_nodes(dag, compute, ridge_flops_per_byte, wide_ridge)]
    spent = np.bincount(dag.gpu[nodes].astype(np.int64) * len(names) + name_of[dag.kernel[nodes]],
                        weights=timeline.finish[nodes] - timeline.start[nodes],
                        minlength=dag.num_gpus * len(names)).reshape(dag.num_gpus, len(names))
    return {int(g): sorted(((names[i], float(spent[g, i]) * 1e3) for i in np.flatnonzero(spent[g])),
                           key=lambda item: (-item[1], item[0])) for g in dag.simulated_gpus.tolist()}


def per_gpu_values(placement: Placement, value: Callable[[Group], float]) -> float | np.ndarray:
    """value(group) as one number where every rank's is the same, else per rank (an array indexed by GPU: rank r
    runs on GPU r): what analyze takes of a cluster of several GPU models."""
    by_group = {g: float(value(placement.groups[g])) for g in placement.used}  # a group no rank uses: not asked
    if len(set(by_group.values())) == 1:
        return next(iter(by_group.values()))
    table = np.zeros(len(placement.groups))
    table[list(by_group)] = list(by_group.values())
    return table[placement.group]


def analyze(dag: ExecutionDAG, timeline: Timeline, topology: Topology, peak_flops: float | np.ndarray,
            hbm_bandwidth: float | np.ndarray, settings: Settings = UNKNOWN,
            sixteen_bit_peak_flops: float | np.ndarray | None = None) -> Analysis:
    """The analysis of a replayed step on GPUs of `peak_flops` (FLOP/s in the step's dtype) and `hbm_bandwidth`
    (bytes/s), each one number for every GPU or per GPU (per_gpu_values), each kernel held to its own GPU's ridge
    point: the flows' properties and link loads are the replay's own (Timeline.flows, Timeline.loads);
    `settings` (what the scenario already does: findings.Settings.of) steer the advice; `sixteen_bit_peak_flops`,
    in a narrow-format run, the peak its 16-bit kernels run at (exposure.memory_bound)."""
    props = timeline.flows
    path = critical_path(dag, timeline, props, topology.capacity)
    summary = path_summary(dag, path)
    ridge = peak_flops / hbm_bandwidth
    wide = None if sixteen_bit_peak_flops is None else sixteen_bit_peak_flops / hbm_bandwidth
    per_gpu = exposure(dag, timeline, ridge, wide)
    loads = timeline.loads
    use = link_use(topology, props, loads, timeline.makespan)
    series = link_series(topology, loads, timeline.rates)
    links = {**links_summary(topology, use, timeline.rates.links, dag.multiplicity),
             "over_time": load_over_time(series, timeline.makespan)}
    attention = attention_ms(dag, timeline) if settings.warp_mma_attention else None
    found = findings(per_gpu, summary, links, timeline.makespan * 1e3, settings, attention,
                     memory_bound_kernels(dag, timeline, ridge, wide))
    return Analysis(path, summary, per_gpu, use, links, found, ridge, series)
