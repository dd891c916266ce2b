"""Collectives decomposed into point-to-point flows with dependencies, per algorithm."""

from .common import CollectiveResult, FlowSet, P2PFlow
from .decompose import ALGORITHMS, decompose_collective, flow_set
from .metrics import bus_bandwidth_factor
from .shape import GroupShape

__all__ = ["ALGORITHMS", "CollectiveResult", "FlowSet", "GroupShape", "P2PFlow", "bus_bandwidth_factor",
           "decompose_collective", "flow_set"]
