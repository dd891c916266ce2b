"""The README's quick start prints what the README shows, and CI runs the README's test command.

The quick start is one command, `python3 scripts/bootstrap_uv.py run simulon simulate ...`: the bootstrap gets uv
(tests/test_bootstrap.py) and uv runs `simulon simulate ...`, which is what this test runs, through its entry point.
"""

from __future__ import annotations

import re

from helpers import ROOT, cli

BOOTSTRAP = "python3 scripts/bootstrap_uv.py run "


def section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    return text[text.index(title):]


def bash_block(text: str) -> re.Match:
    return re.search(r"```bash\n(.*?)\n```\n", text, re.S)


def quick_start() -> tuple[str, list[str]]:
    """The quick start's command and the output the README shows for it."""
    text = section("## Quick start")
    command = bash_block(text)
    output = re.match(r".*?```\n(.*?)\n```", text[command.end():], re.S)
    return command.group(1), output.group(1).splitlines()


def test_the_quick_start_is_one_command_that_bootstraps_uv_and_simulates_the_seed_scenario():
    command, _ = quick_start()
    assert command == BOOTSTRAP + "simulon simulate examples/scenario.yaml -o trace.json"
    assert (ROOT / "scripts/bootstrap_uv.py").is_file()


def test_the_quick_start_prints_what_the_readme_shows(tmp_path):
    run = cli("simulate", str(ROOT / "examples/scenario.yaml"), "-o", "trace.json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == quick_start()[1]
    assert (tmp_path / "trace.json").stat().st_size > 0


def test_ci_runs_the_readmes_test_commands_through_the_bootstrap():
    commands = bash_block(section("Run the tests")).group(1).splitlines()
    assert commands and all(c.startswith(BOOTSTRAP + "--locked ") for c in commands)
    ci = (ROOT / ".ci/run").read_text().splitlines()
    assert [line for line in ci if line.startswith("python3 ")] == commands
