"""Fit the compute model (src/simulon/compute/data/calibration.yaml) to a kernels table.

    uv run python scripts/fit_compute.py ../shared/validation/kernels.csv

Reads every row `simulon validate kernels` can use (less the HELD_OUT ones), the sustained-GEMM runs measured on
lent GPUs (src/simulon/compute/data/sustained_gemm.yaml) and the GPU profiles measured on lent GPUs
(src/simulon/compute/data/profiles/: their attention kernels fit its library, cuDNN's on the H100; their GEMMs' loops
and the sustained runs fit the GPU's clock, how far and how fast it falls under the power limit), fits GEMM
parameters per GPU and dtype and attention
parameters per GPU, library and dtype (src/simulon/compute/fit.py says how), writes the file atomically and prints the
in-sample MAPE by GPU and kernel family. Deterministic: the same table gives the same file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from simulon.compute.calibration import AttentionParams, AttentionPhase, Calibrations, GemmParams
from simulon.compute.fit import FitSettings, fit_calibration
from simulon.config.common import DType
from simulon.config.dc import GPUSpec
from simulon.config.templates import template_stem
from simulon.export.files import write_atomic
from simulon.validate import profile
from simulon.validate.kernels import observations, validate_kernels
from simulon.validate.report import read_table

OUT = Path(__file__).resolve().parents[1] / "src/simulon/compute/data/calibration.yaml"
SETTINGS = FitSettings(
    min_rows=20,  # a GPU/dtype with fewer GEMM rows (a best-shape row or two) fits its efficiency only
    # starting points: typical values for a Hopper GPU; the fit moves every free parameter from there
    gemm_start=GemmParams(efficiency=0.85, overhead_us=5.0, k_overhead=50.0, ramp_k=100.0, tile_intensity=40.0,
                          memory_efficiency=0.8, sustained_clock=0.9, throttle_ms=1.0, group_overhead_us=2.0),
    attention_start=AttentionParams(fwd=AttentionPhase(efficiency=0.6, block_overhead=2.0, softmax_dims=32.0),
                                    bwd=AttentionPhase(efficiency=0.5, block_overhead=2.0, softmax_dims=32.0),
                                    overhead_us=5.0),
    step=0.5, iterations=2000, tolerance=1e-7, restarts=3,
)
HEADER = """\
# Compute-model parameters fitted by scripts/fit_compute.py to shared/validation/kernels.csv, and the sustained clock
# of a GPU with a sustained-GEMM run to compute/data/sustained_gemm.yaml.
# Regenerate with:
#   uv run python scripts/fit_compute.py ../shared/validation/kernels.csv
# gemm: per GPU template and dtype (GemmParams in src/simulon/compute/calibration.py); `rows` is how many
# plain-GEMM rows it was fitted on; below the fit's min_rows only `efficiency` is fitted, on the shape
# parameters of the fully fitted GPU named in `shape_from` (a best-shape row read against that GPU's best shape
# where one benchmark measured both and their tiles issue one instruction: compute/fit.py same_benchmark).
# attention: per GPU, library and 16-bit dtype (AttentionParams); `lent`: the fit the library's stand-ins run
# (compute/fit.py LENT_WITHOUT_TRAFFIC).
# sm_count: the SM count the parameters were fitted with.
"""


LENDING_CHECK = ("the single best-shape row checks what the GPU borrows from the nearest fitted one (a "
                 "leave-one-GPU-out case, which tests/validate/test_kernels.py holds to its bound)")
HELD_OUT: dict[tuple[str, DType, str], str] = {
    ("gh200-144gb", DType.bf16, "mamf_finder_best_shape"): LENDING_CHECK,
    ("gh200-144gb", DType.fp8, "mamf_finder_best_shape"): LENDING_CHECK,
    ("mi355x", DType.bf16, "mamf_finder_best_shape"): LENDING_CHECK,
}
"""(GPU, dtype, subset) of rows validated but not fitted, and why. XLA's Hopper FP8 rows are fitted: once held out
(read as the time of the operand transpose and the GEMM together, they pull a free fit off the chip: a main loop at
16.9x the dense FP8 peak, 11% MAPE), they are read as what the table reports, the median kernel duration of the two
(simulon.validate.kernels.MEDIAN_KERNEL_TIMED)."""


def fit_observations(path: str) -> list:
    """Every observation the fit takes: the table's rows (less HELD_OUT), the sustained-GEMM runs, and the attention
    kernels and GEMMs of the shipped GPU profiles."""
    fitted = [o for o in observations(read_table(path)) if (o.gpu, o.dtype, o.subset) not in HELD_OUT]
    fitted += profile.sustained_observations()
    for profiled in sorted(profile.SHIPPED_PROFILES.glob("*.yaml")):  # their attention library, the GPU's clock
        gpu = GPUSpec.model_validate({"from": str(profiled)})
        template = template_stem("gpu", gpu.name) or gpu.name
        fitted += profile.profile_observations(gpu, template)
    return fitted


def main(path: str) -> None:
    rows = read_table(path)
    fitted = fit_observations(path)
    doc = fit_calibration(fitted, Calibrations.with_fit({}), SETTINGS)
    write_atomic(OUT, HEADER + yaml.safe_dump(doc, sort_keys=False))
    print(f"wrote {OUT}")
    report = validate_kernels(rows)
    for name, value in report.mape_by("group").items():
        print(f"{name:40s} MAPE {value:6.1f}%  ({sum(r.group == name for r in report.rows)} rows)")


def table_argument(description: str) -> str:
    """The kernels table a script of the compute fit is given on its command line (`--help` prints the usage under
    `description`; a table that is not a file ends the script with exit status 2, naming it)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("table", nargs="?", type=Path, default=Path("../shared/validation/kernels.csv"),
                        help="the kernels table (default: ../shared/validation/kernels.csv)")
    args = parser.parse_args()
    if not args.table.is_file():
        parser.error(f"{args.table}: no such file")
    return str(args.table)


if __name__ == "__main__":
    main(table_argument(__doc__.splitlines()[0]))
