"""Simulate a scenario and analyse its step: what the analysis tests look at."""

from __future__ import annotations

from dataclasses import dataclass

from simulon.analysis.analyze import Analysis, analyze
from simulon.config import ScenarioConfig
from simulon.pipeline import Simulation, simulate


@dataclass(frozen=True)
class Analysed:
    sim: Simulation
    analysis: Analysis

    @property
    def step_ms(self) -> float:
        return self.sim.timeline.makespan * 1e3


def analysed(sc: ScenarioConfig, fold_mode: str = "auto") -> Analysed:
    sim = simulate(sc, fold_mode)  # type: ignore[arg-type]
    gpu = sc.datacenter.node.gpu
    return Analysed(sim, analyze(sim.dag, sim.timeline, sim.topology,
                                 gpu.peak_flops(sc.workload.training.dtype), gpu.memory_bandwidth))
