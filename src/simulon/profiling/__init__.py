"""`simulon profile gpu`: time every kernel the tracer emits on the local GPU (torch, optional extra)."""
