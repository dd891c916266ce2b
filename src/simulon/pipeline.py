"""The one-way pipeline: scenario -> programs -> DAG -> durations -> replay -> result."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .analysis.result import SimulationResult, summarize
from .collective.metrics import bus_bandwidth_factor
from .compute.populate import populate
from .config.dc import DatacenterConfig
from .config.scenario import ScenarioConfig
from .dag.builder import DAGBuilder, collective_dag
from .dag.fold import Fold, FoldMode, choose_fold
from .dag.nodes import ExecutionDAG
from .engine.replay import Timeline, replay
from .network.topology import Topology
from .workload.megatron import MegatronTracer
from .workload.program import CollType


@dataclass(frozen=True)
class Simulation:
    dag: ExecutionDAG
    timeline: Timeline
    result: SimulationResult
    topology: Topology
    fold: Fold


def build_dag(sc: ScenarioConfig, fold_mode: FoldMode = "auto") -> tuple[ExecutionDAG, Topology, Fold]:
    """The GPU-agnostic DAG of one iteration, and the network and fold it is meant for."""
    if sc.workload is None:
        raise ValueError("the scenario has no workload block to simulate")
    dc, wl = sc.datacenter, sc.workload
    num_gpus = wl.training.num_gpus or dc.num_gpus
    tracer = MegatronTracer(wl, num_gpus)
    fold = choose_fold(tracer.layout, dc.node.gpus_per_node, dc.node.gpus_per_nic, fold_mode)
    dag = DAGBuilder(tracer.stage_programs(), tracer.layout, fold, sc.collective.algorithm,
                     sc.collective.num_channels).build()
    return dag, Topology.from_datacenter(dc, num_gpus), fold


def simulate(sc: ScenarioConfig, fold_mode: FoldMode = "auto") -> Simulation:
    dag, topology, fold = build_dag(sc, fold_mode)
    gpu, train = sc.datacenter.node.gpu, sc.workload.training
    populate(dag, gpu, train.dtype)
    timeline = replay(dag, topology, fold)
    tokens = train.global_batch_size * train.sequence_length
    result = summarize(dag, timeline, tokens, gpu.peak_flops(train.dtype))
    return Simulation(dag, timeline, result, topology, fold)


@dataclass(frozen=True)
class CollectiveTiming:
    """One collective of one size, reported the nccl-tests way."""

    size_bytes: float
    time_us: float
    algbw_GBps: float
    busbw_GBps: float


def time_collective(dc: DatacenterConfig, ctype: CollType, group: tuple[int, ...], size: float,
                    algorithm: str = "ring", channels: int = 1) -> CollectiveTiming:
    """Simulate one collective alone on the datacenter, from every member joining to the last finishing."""
    topology = Topology.from_datacenter(dc)
    dag = collective_dag(ctype, group, size, dc.num_gpus, algorithm, channels)
    dag.duration = np.zeros(dag.num_nodes)  # a lone collective has no kernels
    seconds = replay(dag, topology, Fold.identity(dc.num_gpus)).makespan
    algbw = size / seconds / 1e9 if seconds > 0 else 0.0
    return CollectiveTiming(size, seconds * 1e6, algbw, algbw * bus_bandwidth_factor(ctype, len(group)))
