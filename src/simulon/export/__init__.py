"""Exporters: terminal summary, JSON, Chrome/Perfetto trace."""
