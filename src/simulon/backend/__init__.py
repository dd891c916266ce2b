"""Seed-compatible entry points (`AnalyticalBackend`)."""
