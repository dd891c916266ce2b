"""How long the `simulon` command takes to start: fresh processes, interpreter start-up and imports included.

    uv run python benchmarks/bench_startup.py [--repeat 11]

Prints the median wall time of `--repeat` fresh processes for: importing the command line (`simulon.cli.app`),
`simulon --version`, `simulon --help`, and `simulon memory` on the quick-start scenario (the lightest command that
reads a scenario). Run it once before timing so that Python's bytecode cache is written; on a machine that sets
PYTHONDONTWRITEBYTECODE every process compiles the package again and the figures say more about that than about
simulon.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench_memory import median_seconds

ROOT = Path(__file__).resolve().parents[1]


def run(command: list[str]) -> None:
    subprocess.run(command, check=True, capture_output=True, cwd=ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=11)
    args = parser.parse_args()
    simulon = shutil.which("simulon", path=str(Path(sys.executable).parent)) or "simulon"
    commands = {
        "import simulon.cli.app": [sys.executable, "-c", "import simulon.cli.app"],
        "simulon --version": [simulon, "--version"],
        "simulon --help": [simulon, "--help"],
        "simulon memory examples/scenario.yaml": [simulon, "memory", "examples/scenario.yaml"],
    }
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("note: PYTHONDONTWRITEBYTECODE is set: every process compiles the package again")
    for name, command in commands.items():
        run(command)  # warm: bytecode and file caches
        seconds = median_seconds(lambda command=command: run(command), args.repeat)
        print(f"{name:40s} {seconds:.3f} s (median of {args.repeat} fresh processes)")


if __name__ == "__main__":
    main()
