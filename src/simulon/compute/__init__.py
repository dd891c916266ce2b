"""Kernel time: measured profile lookup, else the roofline with fitted efficiencies."""

from .populate import kernel_seconds, populate

__all__ = ["kernel_seconds", "populate"]
