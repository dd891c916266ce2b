"""AnalyticalBackend: the seed's Python API over the simulation pipeline."""

from __future__ import annotations

from ..analysis.result import SimulationResult
from ..config.scenario import ScenarioConfig, scenario_argument
from ..dag.fold import FoldMode
from ..dag.nodes import ExecutionDAG
from ..pipeline import simulate


class AnalyticalBackend:
    """Builds the DAG, injects kernel timings and replays it with the flow-level network model."""

    def __init__(self, fold: FoldMode = "auto"):
        self.fold = fold

    def simulate(self, scenario: ScenarioConfig) -> tuple[ExecutionDAG, SimulationResult]:
        """The DAG and result of one iteration of `scenario`, a ScenarioConfig with a workload block
        (config.scenario.scenario_argument: TypeError, ValueError naming `scenario`)."""
        sim = simulate(scenario_argument(scenario, "scenario", need_workload=True), self.fold)
        return sim.dag, sim.result
