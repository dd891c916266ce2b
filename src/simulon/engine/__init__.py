"""Replay: per-GPU streams, dependency order and max-min fair flow sharing."""

from .replay import Timeline, replay

__all__ = ["Timeline", "replay"]
