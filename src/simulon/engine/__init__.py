"""The engine: replay of a DAG (per-GPU streams, dependency order, max-min fair flow sharing), the flows'
link terms, and the steady-state estimate of a lone collective."""

from .replay import Timeline, replay

__all__ = ["Timeline", "replay"]
