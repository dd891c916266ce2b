"""Out-of-sample errors of the fitted calibrations: refit without one source (or one GPU), predict its rows.

    uv run python benchmarks/leave_one_out.py kernels --by source|gpu [--table ../shared/validation/kernels.csv]
    uv run python benchmarks/leave_one_out.py collectives [--table ../shared/validation/collectives.csv]
                                                          [--rounds 5]
    uv run python benchmarks/leave_one_out.py training [--table ../shared/validation/kernels.csv]

Kernels: the compute model (scripts/fit_compute.py's settings) is refitted on all that script fits (the table's
rows, the shipped GPU profiles' attention kernels, the sustained-GEMM runs) but the held-out source's (or GPU's);
a GPU left without rows of its own is timed with the nearest remaining GPU's parameters, its own peak and HBM
bandwidth scaling them (compute.calibration.Calibrations.nearest; attention by the rate its library's instruction
runs at there, compute.attention). Prints, per held-out group and kernel family, the in-sample MAPE of the same rows
beside the held-out MAPE (of throughput, as `simulon validate kernels`), and over every attention library and every
GEMM number format together.

Collectives: for each source, every GPU and NIC family its rows use is reset to the `default` family's values
(NCCL's latencies, no per-channel limit: what a family without measurements gets) and refitted by
scripts/calibrate_collectives.py's procedure on the other sources' rows of that family; a family no other
source measured keeps the defaults. Prints in-sample and held-out busbw MAPE by source and size class.
`--rounds` cuts the fit's linearise-and-fit rounds (5, as shipped) to save time; the output says how many ran.

Training: no parameter of simulon is fitted to training.csv (the training prediction is the replay of kernels
and collectives calibrated on the two tables above), but a source can be in both: the flash-attention repository
measured the attention kernels of its own training charts, SimuMax the B200 kernels of its B200 runs. For each
source of training.csv (its repository, from source_locator) whose kernels are also in kernels.csv, the compute
model is refitted without them and that source's training rows are predicted again; a row whose kernels nothing
else measured (an attention library only that source timed) is reported as not predictable. A source with no
kernel or collective rows of its own is out of sample already: `simulon validate training` gives its error.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from unittest import mock

from simulon.compute.calibration import Calibrations
from simulon.compute.fit import fit_calibration, predict
from simulon.network.calibration import link_model_for, shipped_table
from simulon.validate.collectives import collective_cases, size_class
from simulon.validate.kernels import family
from simulon.validate.report import read_table
from simulon.validate.report import shipped_table as shipped_validation_table
from simulon.validate.training import Unsupported, compare_row, with_source_layouts

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT.parent / "shared" / "validation"
RESET_KEEP = ("match", "channel_GBps")
"""What a family keeps of its own when reset to the defaults: the GPU names it matches and NCCL's per-channel
bandwidths (not fitted)."""


def script(name: str):
    """One of scripts/*.py as a module: the fits are defined there, with the settings the shipped files used."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mape(errors: list[float]) -> float:
    return statistics.fmean(map(abs, errors)) if errors else float("nan")


# ---- kernels ----

def kernel_errors(path: Path, by: str):
    """(held-out group, family) -> (in-sample, held-out) percentage errors of predicted throughput; and
    (held-out group, family) -> why its rows cannot be predicted without it."""
    fit_compute = script("fit_compute")
    rows = read_table(str(path))
    obs = fit_compute.fit_observations(str(path))  # the table's rows, and the lent GPUs' profiles and loops

    def source(o) -> str:
        return rows[o.index]["source"] if o.index < len(rows) else o.subset

    group = source if by == "source" else (lambda o: o.gpu)
    arch, memo = Calibrations.with_fit({}), {}
    shipped = Calibrations.shipped()
    errors: dict[tuple[str, str], tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    unpredictable: dict[tuple[str, str], str] = {}
    for name in sorted({group(o) for o in obs}):
        held = [o for o in obs if group(o) == name]
        cal = Calibrations.with_fit(fit_calibration([o for o in obs if group(o) != name], arch,
                                                    fit_compute.SETTINGS, memo))
        for o in held:
            try:
                outside = predict([o], cal)[0]
            except ValueError as exc:  # e.g. an attention library no other source measured
                unpredictable[(name, family(o))] = str(exc)
                continue
            key = errors[(name, family(o))]
            key[0].append(100.0 * (o.seconds / predict([o], shipped)[0] - 1.0))
            key[1].append(100.0 * (o.seconds / outside - 1.0))
    return errors, unpredictable


def print_kernels(found, by: str) -> None:
    errors, unpredictable = found
    print(f"{'held-out ' + by + ' / family':72s} {'rows':>5s} {'in-sample':>9s} {'held-out':>9s} {'bias':>6s}")
    for (name, fam), (inside, outside) in sorted(errors.items()):
        print(f"{(name[:60] + ' / ' + fam):72s} {len(outside):5d} {mape(inside):8.1f}% {mape(outside):8.1f}% "
              f"{statistics.fmean(outside):5.1f}%")
    def pooled(label: str, keep) -> None:
        inside = [x for (_, f), (i, _) in errors.items() if keep(f) for x in i]
        outside = [x for (_, f), (_, o) in errors.items() if keep(f) for x in o]
        print(f"{label:72s} {len(outside):5d} {mape(inside):8.1f}% {mape(outside):8.1f}%")

    for fam in sorted({f for _, f in errors}):
        pooled(f"all held-out {fam}", lambda f, fam=fam: f == fam)
    for kind in ("attention", "gemm"):  # every library, every number format
        pooled(f"every held-out {kind}", lambda f, kind=kind: f.split()[0] == kind)
    pooled("every held-out gemm of 1 GFLOP and more", lambda f: f.split()[0] == "gemm" and "<1 GFLOP" not in f)
    for (name, fam), why in sorted(unpredictable.items()):
        print(f"not predictable without {name[:60]} / {fam}: {why}")


# ---- collectives ----

def reset(table: dict, kind: str, family_name: str) -> None:
    """A family back to the defaults (what it would be with no measurement of its own)."""
    entry, default = table[kind][family_name], table[kind]["default"]
    for key, value in default.items():
        if key not in RESET_KEEP:
            entry[key] = copy.deepcopy(value)


def refit(table: dict, cases: list, gpu_families: set[str], nic_families: set[str], calibrate) -> None:
    """Fit these families on the cases, as scripts/calibrate_collectives.py does (GPU families on the
    single-domain cases, then NIC families on the rest)."""
    inside = [c for c in cases if calibrate.single_domain(c)]
    across = [c for c in cases if not calibrate.single_domain(c)]
    for fam in sorted(gpu_families & {link_model_for(c.datacenter(), table).gpu_family for c in inside}):
        mine = [c for c in inside if link_model_for(c.datacenter(), table).gpu_family == fam]
        params = calibrate.gpu_parameters(table, fam, calibrate.shows_latency(mine),
                                          any(c.ctype.name in ("AllToAll", "SendRecv") for c in mine),
                                          calibrate.shows_ring_sizes(mine),
                                          any(c.ctype.name == "SendRecv" for c in mine), calibrate.shows_ll_sends(mine))
        calibrate.fit(table, params, calibrate.Fit(mine), f"  GPU family {fam}")
    for fam in sorted(nic_families & {link_model_for(c.datacenter(), table).nic_family for c in across}):
        mine = [c for c in across if link_model_for(c.datacenter(), table).nic_family == fam]
        calibrate.fit(table, calibrate.nic_parameters(fam), calibrate.Fit(mine), f"  NIC family {fam}")


def collective_errors(path: Path, rounds: int) -> dict[tuple[str, str], tuple[list[float], list[float]]]:
    """(held-out source, size class) -> (in-sample, held-out) percentage errors of predicted busbw."""
    calibrate = script("calibrate_collectives")
    calibrate.OUTER = rounds
    rows = read_table(str(path))
    usable = [r for r in rows if r.get("subset") not in calibrate.NOT_FITTED]
    cases, _ = collective_cases(usable)
    source_of = {i: r["source"] for i, r in enumerate(usable)}
    errors: dict[tuple[str, str], tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for source in sorted(set(source_of.values())):
        held, kept = [], []
        for case in cases:
            mine = [row for row in case.rows if source_of[row[0]] == source]
            others = [row for row in case.rows if source_of[row[0]] != source]
            if mine:
                held.append(copy.copy(case))
                held[-1].rows = mine
            if others:
                kept.append(copy.copy(case))
                kept[-1].rows = others
        table = copy.deepcopy(shipped_table())
        models = [link_model_for(c.datacenter(), table) for c in held]
        gpu_fams = {m.gpu_family for m in models} - {"default"}
        nic_fams = {m.nic_family for m in models} - {"default"} if any(
            not calibrate.single_domain(c) for c in held) else set()
        for fam in gpu_fams:
            reset(table, "gpu_families", fam)
        for fam in nic_fams:
            reset(table, "nic_families", fam)
        print(f"holding out {source[:90]}: refitting GPU {sorted(gpu_fams)} NIC {sorted(nic_fams)}", flush=True)
        refit(table, kept, gpu_fams, nic_fams, calibrate)
        for case in held:
            inside = case.predict()
            outside = case.predict(link_model_for(case.datacenter(), table))
            for (_, _, size, busbw), a, b in zip(case.rows, inside, outside, strict=True):
                pair = errors[(source, size_class(size))]
                pair[0].append(100.0 * (a / busbw - 1.0))
                pair[1].append(100.0 * (b / busbw - 1.0))
    return errors


def print_collectives(errors, rounds: int) -> None:
    print(f"\ncollectives, leave-one-source-out ({rounds} fit rounds per refit)")
    print(f"{'held-out source / size class':80s} {'rows':>5s} {'in-sample':>9s} {'held-out':>9s}")
    for (source, cls), (inside, outside) in sorted(errors.items()):
        print(f"{(source[:68] + ' / ' + cls):80s} {len(outside):5d} {mape(inside):8.1f}% {mape(outside):8.1f}%")
    for cls in sorted({c for _, c in errors}):
        inside = [x for (_, c), (i, _) in errors.items() if c == cls for x in i]
        outside = [x for (_, c), (_, o) in errors.items() if c == cls for x in o]
        print(f"{'all held-out ' + cls:80s} {len(outside):5d} {mape(inside):8.1f}% {mape(outside):8.1f}%")


# ---- training ----

def repository(locator: str) -> str:
    """The repository (or page) a row was read from: 'github NVIDIA/NeMo @abc ...' -> 'NVIDIA/NeMo'."""
    words = locator.removeprefix("github ").split()
    return words[0].removeprefix("https://github.com/") if words else ""


def training_errors(kernels_path: Path) -> tuple[dict[str, tuple[list[float], list[float]]], dict[str, list[str]]]:
    """Held-out source -> (in-sample, held-out) percentage errors of its training rows' iteration time, with the
    compute model refitted without that source's kernel rows; and source -> rows not predictable without them."""
    fit_compute = script("fit_compute")
    kernel_rows = read_table(str(kernels_path))
    fitted = fit_compute.fit_observations(str(kernels_path))
    origin = {row["subset"]: repository(row["source_locator"]) for row in kernel_rows}
    rows = with_source_layouts(read_table(str(shipped_validation_table("training"))))
    arch, memo = Calibrations.with_fit({}), {}
    errors: dict[str, tuple[list[float], list[float]]] = {}
    unpredictable: dict[str, list[str]] = defaultdict(list)
    for source in sorted({repository(r["source_locator"]) for r in rows} & set(origin.values())):
        kept = [o for o in fitted if origin.get(o.subset) != source]
        refit = Calibrations.with_fit(fit_calibration(kept, arch, fit_compute.SETTINGS, memo))
        print(f"holding out {source}: {len(fitted) - len(kept)} kernel rows", flush=True)
        errors[source] = ([], [])
        for index, row in enumerate(rows):
            if repository(row["source_locator"]) != source:
                continue
            try:
                inside = compare_row(index, row)
                # a simulation times kernels with Calibrations.shipped(); the refit stands in for it here only
                with mock.patch.object(Calibrations, "shipped", classmethod(lambda cls, cal=refit: cal)):
                    outside = compare_row(index, row)
            except (Unsupported, ValueError) as exc:
                unpredictable[source].append(f"row {index} ({row['model'][:40]}): {exc}")
                continue
            errors[source][0].append(inside.error_pct)
            errors[source][1].append(outside.error_pct)
    return errors, unpredictable


def print_training(found) -> None:
    errors, unpredictable = found
    print("\ntraining, leave-one-source-out (compute model refitted without the source's kernel rows)")
    print(f"{'held-out source':40s} {'rows':>5s} {'in-sample':>9s} {'held-out':>9s} {'bias':>6s}")
    for source, (inside, outside) in sorted(errors.items()):
        bias = statistics.fmean(outside) if outside else float("nan")
        print(f"{source:40s} {len(outside):5d} {mape(inside):8.1f}% {mape(outside):8.1f}% {bias:5.1f}%")
    for source, why in sorted(unpredictable.items()):
        print(f"not predictable without {source}: {len(why)} rows, e.g. {why[0]}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("kernels", "collectives", "training"))
    parser.add_argument("--by", choices=("source", "gpu"), default="source", help="kernels: what to hold out")
    parser.add_argument("--table", type=Path)
    parser.add_argument("--rounds", type=int, default=5, help="collectives: linearise-and-fit rounds per refit")
    args = parser.parse_args(argv)
    if args.what == "kernels":
        print_kernels(kernel_errors(args.table or TABLES / "kernels.csv", args.by), args.by)
    elif args.what == "training":
        print_training(training_errors(args.table or TABLES / "kernels.csv"))
    else:
        print_collectives(collective_errors(args.table or TABLES / "collectives.csv", args.rounds), args.rounds)


if __name__ == "__main__":
    main(sys.argv[1:])
