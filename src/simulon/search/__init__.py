"""Strategy search: the fastest strategy that fits (space.py enumerates and prunes, estimate.py ranks,
run.py checks memory and replays the best)."""
