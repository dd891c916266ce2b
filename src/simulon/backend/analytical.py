"""AnalyticalBackend: the seed's Python API over the simulation pipeline."""

from __future__ import annotations

from ..analysis.result import SimulationResult
from ..config.scenario import ScenarioConfig
from ..dag.fold import FoldMode
from ..dag.nodes import ExecutionDAG
from ..pipeline import simulate


class AnalyticalBackend:
    """Builds the DAG, injects kernel timings and replays it with the flow-level network model."""

    def __init__(self, fold: FoldMode = "auto"):
        self.fold = fold

    def simulate(self, scenario: ScenarioConfig) -> tuple[ExecutionDAG, SimulationResult]:
        sim = simulate(scenario, self.fold)
        return sim.dag, sim.result
