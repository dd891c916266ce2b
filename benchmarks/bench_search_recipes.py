"""Are NVIDIA's published recipes where the search would put them? For every NeMo / DGX Cloud row of the training
table (/work/shared/validation/training.csv, shipped as validate's training table): the recipe must fit by the
memory model, and its estimate must rank within the best 10% of the feasible strategies the search finds for the
same model, GPU count, batch, sequence and precision (search/agreement.py check_recipes); a proxy of fewer layers
(DGX Cloud's small-scale Grok-1 and Llama 3.1 405B rows), among those that would also fit the full model.

    uv run python benchmarks/bench_search_recipes.py [--cache DIR] [--limit N]

Prints one line per recipe (fits, rank among the feasible strategies, share) and the totals; exits 1 if any
recipe fails the check.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from simulon.search.agreement import TOP_SHARE, check_recipes, recipe_rows
from simulon.search.cache import Cache
from simulon.validate.report import read_table, shipped_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path(".simulon-cache"))
    parser.add_argument("--limit", type=int, default=None, help="check only the first N recipe rows")
    args = parser.parse_args()
    started = time.perf_counter()
    rows = read_table(shipped_table("training"))
    indices = recipe_rows(rows)[:args.limit]
    checks, skipped = check_recipes(rows, indices, Cache(args.cache))
    for c in checks:
        proxy = (f"  (proxy: among the {c.feasible:,d} that fit the full model; {c.open_rank:,d} of "
                 f"{c.open_feasible:,d}, {100 * c.open_share:.1f}%, among all that fit the proxy)") if c.proxy else ""
        print(f"row {c.row:4d} {'ok  ' if c.passes else 'FAIL'} fits={c.fits!s:5} rank {c.rank:6,d} of "
              f"{c.feasible:7,d} ({100 * c.share:5.1f}%)  {c.name}{proxy}")
    passed = sum(c.passes for c in checks)
    proxies = [c for c in checks if c.proxy]
    print(f"{len(indices)} recipe rows: {len(checks)} checked, {sum(skipped.values())} not expressible "
          f"({dict(skipped)}); {passed} fit and rank in the top {100 * TOP_SHARE:.0f}%, "
          f"{sum(not c.fits for c in checks)} do not fit; {sum(c.fits and not c.passes for c in checks)} rank "
          f"below; of the {len(proxies)} proxies, {sum(c.open_share <= TOP_SHARE for c in proxies)} rank in the top "
          f"{100 * TOP_SHARE:.0f}% even among all strategies that fit the proxy; {time.perf_counter() - started:.0f} s")
    sys.exit(0 if passed == len(checks) else 1)


if __name__ == "__main__":
    main()
