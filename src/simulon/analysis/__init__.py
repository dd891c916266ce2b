"""Results of a simulation: iteration time, throughput, MFU and per-GPU breakdowns."""

from .result import GPUBreakdown, SimulationResult, summarize

__all__ = ["GPUBreakdown", "SimulationResult", "summarize"]
