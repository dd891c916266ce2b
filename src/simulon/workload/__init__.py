"""GPU-agnostic workload: model math, rank layout, pipeline schedules and framework tracers."""
