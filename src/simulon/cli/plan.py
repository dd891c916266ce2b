"""`simulon plan-hetero SCENARIO`: place a pipeline's stages on a heterogeneous cluster's node groups and split
its layers by GPU speed, optionally sharing the global batch among data-parallel replicas by speed
(search/hetero.py), against the scenario as written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
import yaml

from ..config.errors import ConfigError, one_line
from ..config.loading import files_read, load_scenario
from ..export.files import check_writable, write_atomic
from .output import print_table
from .paths import path_option, shown_name

if TYPE_CHECKING:  # the planner (search.hetero, the pipeline and the estimator) is imported when the command runs
    from ..search.hetero import Plan, PlanResult


def _per_replica(values: tuple[int, ...]) -> str:
    """Per-replica numbers joined by '/', a repeating pattern written once with its count: 0/1x8."""
    period = next(p for p in range(1, len(values) + 1)
                  if len(values) % p == 0 and values == values[:p] * (len(values) // p))
    repeats = len(values) // period
    return "/".join(map(str, values[:period])) + (f"x{repeats}" if repeats > 1 else "")


def _groups(entry: int | tuple[int, ...]) -> str:
    """A stage's group, or its replicas' groups."""
    return _per_replica(entry) if isinstance(entry, tuple) else str(entry)


def _shares(plan: Plan) -> str:
    return "even" if plan.dp_shares is None else _per_replica(plan.dp_shares)


def _row(plan: Plan) -> tuple[str, ...]:
    from ..analysis.shown import shown_ms

    placement = " ".join(f"{_groups(g)}:{n}" for g, n in zip(plan.stage_groups, plan.layers_per_stage, strict=True))
    return (plan.label, placement, _shares(plan), shown_ms(max(plan.stage_ms)), shown_ms(plan.estimated_ms),
            shown_ms(plan.simulated_ms), "yes" if plan.fits else "NO")


def print_result(result: PlanResult) -> None:
    from ..analysis.shown import shown_ms

    print("node groups: " + "; ".join(f"{i}: {name}" for i, name in enumerate(result.groups)))
    print_table(f"Pipeline placements simulated ({result.considered} solved by estimate)",
                ("plan", "group:layers by stage", "dp shares", "slowest stage ms/mb", "estimated ms", "simulated ms",
                 "fits"),
                [_row(p) for p in result.simulated])
    best = result.best
    shares = "" if best.dp_shares is None else f", dp_shares {list(best.dp_shares)}"
    print(f"best: stage_groups {best.stage_groups_config}, layers_per_stage {list(best.layers_per_stage)}{shares}: "
          f"{shown_ms(best.simulated_ms)} ms per step against {shown_ms(result.baseline.simulated_ms)} ms as written "
          f"({1 + result.gain:.2f}x the throughput)")


def plan_hetero(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML whose datacenter has node_groups")],
    simulate: Annotated[int, typer.Option("--simulate", help="placements simulated in full besides the "
                                          "scenario as written (the best by estimate that fit; 0: the scenario "
                                          "as written alone)")] = 2,
    dp_shares: Annotated[bool, typer.Option("--dp-shares", help="also place each data-parallel replica whole on "
                                            "one group, and where replicas run on different GPUs give each a "
                                            "share of the micro-batches by its speed (training.dp_shares; not "
                                            "with ep > 1 or FSDP)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as one JSON object")] = False,
    output: Annotated[Path | None, path_option("-o", "--output", help="write the best plan as a scenario "
                                               "YAML")] = None,
) -> None:
    """Choose which node group runs each pipeline stage and how many layers each stage holds, so that no stage
    holds the others up, under each GPU's memory (with --dp-shares, also how many micro-batches each data-parallel
    replica runs).

    The best placements by estimate are simulated in full with the scenario as written, and the fastest is the
    plan. It plans pipelines of one stage per rank, 1f1b and zb_h1 (estimated as 1F1B; the full simulation ranks
    the plans), and refuses interleaved, dualpipe, dualpipev and zb_v ones, and clusters where a stage's GPUs
    cannot lie in one node group (after simulating the scenario as written)."""
    if not 0 <= simulate <= 100:
        raise ConfigError(f"--simulate: expected 0 to 100, got {simulate}")
    if output is not None:
        check_writable(output, "-o", "plan's scenario file", inputs=files_read(scenario))
    from ..search.hetero import Planner

    sc = load_scenario(scenario)
    try:
        planner = Planner(sc)
        result = planner.run(simulate, shares=dp_shares)
    except ValueError as exc:
        raise ConfigError(f"{scenario}: {exc}") from None
    if output is not None:
        from ..analysis.shown import shown_ms, shown_number

        data = planner.scenario(result.best).model_dump(mode="json", exclude_none=True)
        note = (f"# simulon plan-hetero {one_line(shown_name(scenario))}: {shown_ms(result.best.simulated_ms)} ms per "
                "step simulated, "
                f"{shown_number(100 * result.gain, '{:+.1f}')}% against the scenario as written\n")
        try:
            write_atomic(output, note + yaml.safe_dump(data, sort_keys=False))
        except OSError as exc:
            raise ConfigError(f"-o {output}: cannot write: {exc.strerror or exc}") from None
    if as_json:
        print(json.dumps(result.to_json()))
    else:
        print_result(result)
