"""simulon: simulate one LLM training iteration on an AI cluster without owning the GPUs."""

from importlib.metadata import version

__version__ = version("simulon")  # pyproject.toml's version, as installed: one place to bump it
