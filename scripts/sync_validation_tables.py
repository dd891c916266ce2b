"""Refresh the measurement tables shipped with the package (src/simulon/validate/data/) from the project's
shared/validation/ beside the checkout, and say which changed.

    uv run python scripts/sync_validation_tables.py [--from ../shared/validation]

The shipped copies are what `simulon validate` reads when no --csv is given and what the tests check the
models against; after a refresh, rerun the validators and the fits (scripts/fit_compute.py,
scripts/calibrate_collectives.py) whose data changed.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
from pathlib import Path

from simulon.validate.report import TABLES, shipped_table

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="source", type=Path, default=ROOT.parent / "shared" / "validation")
    args = parser.parse_args()
    target = shipped_table(TABLES[0]).parent
    for name in [f"{table}.csv" for table in TABLES] + ["README.md"]:
        source = args.source / name
        if not source.exists():
            raise SystemExit(f"{source}: missing")
        if (target / name).exists() and filecmp.cmp(source, target / name, shallow=False):
            print(f"{name}: unchanged")
            continue
        shutil.copyfile(source, target / name)
        print(f"{name}: updated")


if __name__ == "__main__":
    main()
