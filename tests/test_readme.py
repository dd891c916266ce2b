"""The README's quick start prints what the README shows."""

from __future__ import annotations

import re

from helpers import ROOT, cli


def quick_start_output() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Quick start"):]
    command = re.search(r"```bash\n(.*?)\n```\n", section, re.S)
    assert "simulon simulate examples/scenario.yaml -o trace.json" in command.group(1)
    return re.match(r"\s*```\n(.*?)\n```", section[command.end():], re.S).group(1).splitlines()


def test_the_quick_start_prints_what_the_readme_shows(tmp_path):
    run = cli("simulate", str(ROOT / "examples/scenario.yaml"), "-o", "trace.json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == quick_start_output()
    assert (tmp_path / "trace.json").stat().st_size > 0
