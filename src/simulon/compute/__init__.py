"""Kernel time: a measured profile where one exists, else the calibrated analytical model."""

from .populate import kernel_seconds, populate

__all__ = ["kernel_seconds", "populate"]
