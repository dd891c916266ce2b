"""`simulon validate {kernels,collectives,training} --csv FILE [--json]`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from ..config.errors import ConfigError
from .output import print_table

app = typer.Typer(no_args_is_help=True, help="Compare predictions with published measurement tables.")

CsvOption = Annotated[Path, typer.Option("--csv", help="measurement table in the format of shared/validation")]
JsonOption = Annotated[bool, typer.Option("--json", help="print the report as one JSON object")]


def report(csv_path: Path, as_json: bool, validator: Callable, group_title: str) -> None:
    """Run a validator over a table and print its report (a table, or JSON)."""
    from ..validate.report import read_table

    try:
        rows = read_table(csv_path)
    except OSError as exc:
        raise ConfigError(f"{csv_path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{csv_path}: not a text file") from None
    result = validator(rows)
    if as_json:
        print(json.dumps(result.to_dict()))
        return
    print_table(f"{len(result.rows)} rows compared, {len(result.skipped)} skipped: MAPE "
                f"{result.mape_pct:.1f}%", ("subset", "MAPE %", "rows"),
                [(name, f"{value:.1f}", str(sum(r.subset == name for r in result.rows)))
                 for name, value in result.mape_by("subset").items()])
    print_table(f"MAPE by {group_title}", (group_title, "MAPE %", "rows"),
                [(name, f"{value:.1f}", str(sum(r.group == name for r in result.rows)))
                 for name, value in result.mape_by("group").items()])
    reasons: dict[str, int] = {}
    for skipped in result.skipped:
        reasons[skipped.reason] = reasons.get(skipped.reason, 0) + 1
    for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"skipped {count}: {reason}")


@app.command()
def training(csv: CsvOption, as_json: JsonOption = False) -> None:
    """Predict each published training run's iteration time and compare."""
    from ..validate.training import validate_training

    report(csv, as_json, validate_training, "system")


@app.command()
def kernels(csv: CsvOption, as_json: JsonOption = False) -> None:
    """Kernel throughput (GEMM, grouped GEMM, attention) against the calibrated compute model."""
    from ..validate.kernels import validate_kernels

    report(csv, as_json, lambda rows: validate_kernels(rows, source=str(csv)), "GPU / family")


@app.command()
def collectives(csv: CsvOption, as_json: JsonOption = False) -> None:
    """Simulate each published collective measurement (nccl-tests style) and compare bus bandwidth."""
    from ..validate.collectives import validate_collectives

    report(csv, as_json, validate_collectives, "hardware family and size")
