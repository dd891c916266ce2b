"""The README's quick start prints what the README shows, and CI runs the README's test command.

The quick start is one command, `python3 scripts/bootstrap_uv.py run simulon simulate ...`: the bootstrap gets uv
(tests/test_bootstrap.py) and uv runs `simulon simulate ...`, which is what this test runs, through its entry point.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

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


def test_the_seed_example_without_its_channel_pin_gives_what_the_readme_says(tmp_path):
    said = re.search(r"without that line NCCL's own channel count gives ([\d.]+) ms and MFU ([\d.]+)%",
                     " ".join(section("## Quick start").split()))
    unpinned = tmp_path / "unpinned.yaml"
    unpinned.write_text("".join(line for line in (ROOT / "examples/scenario.yaml").read_text().splitlines(True)
                                if "num_channels" not in line))
    run = cli("simulate", str(unpinned))
    assert run.returncode == 0, run.stderr
    total = re.search(r"Total: ([\d.]+) ms", run.stdout).group(1)
    mfu = re.search(r"MFU ([\d.]+)%", run.stdout).group(1)
    assert (total, mfu) == said.groups()


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)\n```\n", section("## Python API"), re.S)


def test_the_readmes_python_snippets_run_as_written_and_print_the_quick_starts_step():
    blocks = python_blocks()
    assert len(blocks) == 2
    runs = [subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, cwd=ROOT, timeout=300)
            for block in blocks]
    assert all(run.returncode == 0 for run in runs), [run.stderr for run in runs]
    lines = runs[0].stdout.splitlines()
    quick_total = next(line for line in quick_start()[1] if line.startswith("GPUs:")).split("Total: ")[1]
    assert lines[0] == f"Total: {quick_total}"
    assert [line.split(":")[0] for line in lines[1:3]] == ["compute_nodes", "comm_nodes"]
    assert lines[3:] == ["flow 0: 0 → 1, parents=[]", "flow 1: 1 → 2, parents=[]", "flow 2: 2 → 3, parents=[]"]
    assert re.fullmatch(r"[\d.]+ ms\n", runs[1].stdout)


def test_the_commands_synopsis_lists_every_collective_collective_op_takes():
    """It listed allreduce, allgather, reducescatter and alltoall, as required, where --op defaults to allreduce and
    takes sendrecv and permute too."""
    from simulon.collective.types import COLLECTIVE_NAMES

    line = next(line for line in section("## Commands").splitlines() if line.startswith("simulon collective "))
    assert re.search(r"\[--op ([a-z|]+)\]", line).group(1).split("|") == list(COLLECTIVE_NAMES)


def test_the_readmes_way_to_edit_a_scenario_refuses_a_bad_value_with_the_clis_line_and_the_readmes_words(tmp_path):
    """The snippet validated the edited data with ScenarioConfig.model_validate, whose bad value is pydantic's
    ValidationError dump; the README's route is the CLI's check, ConfigError with the line the CLI prints."""
    from simulon.config import ConfigError

    edit = python_blocks()[1]
    assert 'data["collective"]["num_channels"] = 8' in edit
    with pytest.raises(ConfigError) as refused:
        exec(edit.replace('data["collective"]["num_channels"] = 8', 'data["collective"]["num_channels"] = 0'), {})
    pinned = tmp_path / "zero.yaml"
    pinned.write_text((ROOT / "examples/scenario.yaml").read_text().replace("num_channels: 1", "num_channels: 0"))
    run = cli("simulate", str(pinned))
    assert run.returncode == 2
    assert run.stderr.strip() == f"error: {str(refused.value).replace('<scenario>', str(pinned))}"
    said = " ".join(section("## Python API").split())
    assert f"raises `simulon.config.ConfigError` with the CLI's one line, `{refused.value}`" in said


def test_the_readmes_llama3_8b_nvfp4_step_on_one_dgx_b200_is_what_simulate_gives():
    """Number formats: Llama 3 8B data-parallel over one DGX B200, global batch 128 x 8,192, micro-batch 1, cuDNN
    attention. The README said nvfp4 4,673 ms where simulate gives 4,672.4."""
    from simulon.config import parse_scenario
    from simulon.pipeline import simulate

    said = re.search(r"mxfp8 [\d,]+, nvfp4 ([\d,]+) \(", " ".join(section("* **Number formats.**").split()))
    data = {"datacenter": {"from": "dgx-b200", "cluster": {"num_nodes": 1}},
            "workload": {"model": "llama-3-8b", "parallelism": {"tp": 1, "pp": 1},
                         "training": {"global_batch_size": 128, "micro_batch_size": 1, "sequence_length": 8192,
                                      "dtype": "nvfp4", "attention": "cudnn"}}}
    assert f"{simulate(parse_scenario(data)).result.iteration_time_ms:,.0f}" == said.group(1)
