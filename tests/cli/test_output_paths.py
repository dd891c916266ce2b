"""Every file a command writes is checked before it starts (export.files.check_writable): a missing folder, a
folder given for a file, a wrong suffix or the command's own input end with exit status 2 and one line naming
the option, and nothing is written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers import ROOT, SEED_SCENARIO, cli

HETERO = ROOT / "examples" / "hetero_plan_h100_a100.yaml"


def refused(*args: str, cwd: Path, expected: str) -> None:
    done = cli(*args, cwd=cwd, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: ") and expected in done.stderr, done.stderr


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    return Path(shutil.copy(SEED_SCENARIO, tmp_path / "seed.yaml"))


@pytest.mark.parametrize("option", ["-o", "--write-best", "--plot"])
def test_a_search_output_in_a_missing_folder_is_refused_before_the_search_and_nothing_is_written(seed, option):
    folder = seed.parent
    outputs = {"-o": "r.csv", "--write-best": "best.yaml", "--plot": "p.png"}
    args = [arg for name, file in outputs.items() for arg in (name, f"missing/{file}" if name == option else file)]
    refused("search", "seed.yaml", "--no-cache", "--top", "2", *args, cwd=folder,
            expected=f"{option} missing/{outputs[option]}: folder 'missing' does not exist")
    assert sorted(p.name for p in folder.iterdir()) == ["seed.yaml"]


def test_a_plan_into_a_missing_folder_is_refused_before_planning(tmp_path):
    refused("plan-hetero", str(HETERO), "-o", "missing/plan.yaml", cwd=tmp_path,
            expected="-o missing/plan.yaml: folder 'missing' does not exist")


def test_a_search_cache_that_is_a_file_is_refused_naming_the_option(seed):
    refused("search", "seed.yaml", "--cache", "seed.yaml", cwd=seed.parent,
            expected="--cache seed.yaml: exists and is not a folder")


@pytest.mark.parametrize(("command", "option"), [("search", "--cache"), ("sweep", "--plots")])
def test_an_output_folder_is_created_but_not_its_missing_parents(seed, command, option):
    extra = ("--set", "workload.training.global_batch_size=4", "-o", "s.csv") if command == "sweep" else ()
    refused(command, "seed.yaml", *extra, option, "missing/out", cwd=seed.parent,
            expected=f"{option} missing/out: folder 'missing' does not exist")
    assert not (seed.parent / "missing").exists()


def test_a_validation_plot_into_a_missing_folder_is_named_by_its_option(tmp_path):
    refused("validate", "collectives", "--plot", "missing/v.png", cwd=tmp_path,
            expected="--plot missing/v.png: folder 'missing' does not exist")


@pytest.mark.parametrize("name", ["t.png", "t", "t.svg.txt"])
def test_a_topology_drawing_is_svg_only(seed, name):
    refused("topology", "seed.yaml", "--draw", name, cwd=seed.parent,
            expected=f"--draw {name}: expected a file name ending in .svg")
    assert not (seed.parent / name).exists()


@pytest.mark.parametrize(("input_name", "args"), [
    ("s.yaml", ("simulate", "s.yaml", "-o", "s.yaml")),
    ("s.html", ("report", "s.html", "-o", "s.html")),
    ("s.yaml", ("search", "s.yaml", "--no-cache", "-o", "s.yaml")),
    ("s.yaml", ("search", "s.yaml", "--no-cache", "--write-best", "s.yaml")),
    ("s.png", ("search", "s.png", "--no-cache", "--plot", "s.png")),
    ("s.yaml", ("sweep", "s.yaml", "--set", "workload.training.global_batch_size=4", "-o", "s.yaml")),
    ("s.yaml", ("plan-hetero", "s.yaml", "-o", "s.yaml")),
    ("s.png", ("plot", "s.png", "--kind", "breakdown", "-o", "s.png")),
    ("s.svg", ("topology", "s.svg", "--draw", "s.svg")),
    ("s.yaml", ("simulate", "s.yaml", "-o", "link.yaml")),
    ("s.png", ("validate", "collectives", "--csv", "s.png", "--plot", "s.png")),
    ("s.svg", ("validate", "profile", "s.svg", "--plot", "s.svg")),
])
def test_an_output_that_is_the_input_file_is_refused_and_the_input_kept(tmp_path, input_name, args):
    scenario = tmp_path / input_name
    shutil.copy(SEED_SCENARIO, scenario)
    (tmp_path / "link.yaml").symlink_to(scenario)
    option = args[-2]
    refused(*args, cwd=tmp_path, expected=f"{option} {args[-1]}: is the input file '{input_name}'")
    assert scenario.read_bytes() == SEED_SCENARIO.read_bytes()


EMPTY_NAMED = [  # (command line before the option, option): every option naming a file or folder to write or read
    (["simulate", "seed.yaml"], "-o"), (["report", "seed.yaml"], "-o"), (["topology", "seed.yaml"], "--draw"),
    (["search", "seed.yaml", "--top", "1"], "-o"), (["search", "seed.yaml", "--top", "1"], "--write-best"),
    (["search", "seed.yaml", "--top", "1"], "--plot"), (["search", "seed.yaml", "--top", "1"], "--cache"),
    (["sweep", "seed.yaml", "--set", "training.micro_batch_size=1"], "-o"),
    (["sweep", "seed.yaml", "--set", "training.micro_batch_size=1", "-o", "s.csv"], "--plots"),
    (["plan-hetero", str(HETERO)], "-o"), (["plot", "r.json", "--kind", "breakdown"], "-o"),
    (["plot", "r.json", "--kind", "busbw", "-o", "p.png"], "--measured"), (["profile", "gpu"], "-o"),
    (["validate", "kernels"], "--csv"), (["validate", "kernels"], "--plot")]


@pytest.mark.parametrize(("args", "option"), EMPTY_NAMED, ids=[f"{a[0]} {o}" for a, o in EMPTY_NAMED])
def test_an_empty_name_is_refused_naming_the_option_and_nothing_is_written_into_the_current_folder(seed, args, option):
    """An empty name (an unset shell variable) is the path '.': `sweep --plots ""` wrote its plots and `search
    --cache ""` its cache into the current folder, and a file option was refused naming '.', not what was given."""
    refused(*args, option, "", cwd=seed.parent, expected="an empty name")
    assert sorted(p.name for p in seed.parent.iterdir()) == ["seed.yaml"]


LONG = "x" * 300  # longer than any file system's NAME_MAX (255): pathlib's is_dir() raised ENAMETOOLONG, exit 1


@pytest.mark.parametrize(("args", "option", "written"), [
    (("simulate", "SEED", "-o"), "-o", f"{LONG}.json"),
    (("report", "SEED", "-o"), "-o", f"{LONG}/r.html"),
    (("sweep", "SEED", "--set", "parallelism.tp=1,2", "-o"), "-o", f"{LONG}.csv"),
    (("sweep", "SEED", "--set", "parallelism.tp=1,2", "-o", "s.csv", "--plots"), "--plots", LONG),
])
def test_an_output_name_too_long_for_any_file_is_refused_as_bad_input_naming_the_option(seed, args, option, written):
    refused(*(str(seed) if a == "SEED" else a for a in args), str(seed.parent / written), cwd=seed.parent,
            expected=f"{option} {seed.parent / written}: cannot write: File name too long")
    assert sorted(p.name for p in seed.parent.iterdir()) == ["seed.yaml"]


def test_a_sweep_plot_whose_name_a_folder_holds_is_refused_before_any_point_runs(seed):
    (seed.parent / "plots" / "steps.png").mkdir(parents=True)
    refused("sweep", "seed.yaml", "--set", "collective.num_channels=2", "-o", "s.csv", "--plots", "plots",
            cwd=seed.parent, expected="--plots plots/steps.png: is a folder; name the plot to write")
    assert not (seed.parent / "s.csv").exists()


def test_a_sweeps_plots_folder_named_as_its_csv_is_refused_before_any_point_runs(seed):
    refused("sweep", "seed.yaml", "--set", "collective.num_channels=2", "-o", "s.csv", "--plots", "./s.csv",
            cwd=seed.parent, expected="--plots s.csv: is the sweep's CSV (-o s.csv); name a folder of its own")
    assert not (seed.parent / "s.csv").exists()


@pytest.mark.parametrize("option", ["-o", "--write-best"])
def test_a_search_cache_named_as_one_of_its_output_files_is_refused_before_the_search(seed, option):
    refused("search", "seed.yaml", "--top", "1", option, "out", "--cache", "out", cwd=seed.parent,
            expected="--cache out: is also a file the search writes")
    assert sorted(p.name for p in seed.parent.iterdir()) == ["seed.yaml"]


@pytest.mark.parametrize(("args", "option"), [(args, option) for args, option in EMPTY_NAMED
                                              if option not in ("--cache", "--plots")])
def test_a_file_option_given_a_folders_name_ending_in_a_slash_is_refused_and_nothing_is_written(seed, args, option):
    """Path drops a trailing '/': `simulate -o results/` wrote the trace to a file named results."""
    refused(*args, option, "results/", cwd=seed.parent, expected="ends in '/', as a folder's name does")
    assert sorted(p.name for p in seed.parent.iterdir()) == ["seed.yaml"]
