"""Per-GPU memory of a training step: model states, activations in flight, transients and the runtime
(model.py assembles them per pipeline stage; states.py, activations.py and runtime.py hold the terms)."""

from .model import MemoryModel, MemoryReport, StageMemory, estimate_memory, scenario_channels

__all__ = ["MemoryModel", "MemoryReport", "StageMemory", "estimate_memory", "scenario_channels"]
