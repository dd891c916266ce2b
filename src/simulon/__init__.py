"""simulon: simulate one LLM training iteration on an AI cluster without owning the GPUs."""

__version__ = "0.1.0"
