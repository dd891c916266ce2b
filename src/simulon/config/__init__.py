"""Validated configuration: scenario = datacenter + workload + collective, with templates resolved."""

from .common import DType, FieldError
from .dc import DatacenterConfig, GPUSpec, KernelRun, NICSpec, SwitchSpec
from .errors import ConfigError
from .loading import load_scenario, parse_scenario
from .scenario import CollectiveConfig, ScenarioConfig
from .workload import MegatronWorkload, ModelSpec, MoESpec, ParallelismSpec, TrainingSpec

__all__ = [
    "CollectiveConfig",
    "ConfigError",
    "DType",
    "DatacenterConfig",
    "FieldError",
    "GPUSpec",
    "KernelRun",
    "MegatronWorkload",
    "MoESpec",
    "ModelSpec",
    "NICSpec",
    "ParallelismSpec",
    "ScenarioConfig",
    "SwitchSpec",
    "TrainingSpec",
    "load_scenario",
    "parse_scenario",
]
