"""Compare predictions with published measurement tables: the ones shipped in data/ (training runs, collectives,
kernels, memory; data/README.md names their sources) or a user's own in the same format."""
